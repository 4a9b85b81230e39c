/* lu in versions (issue 19, VMAD Table 3): in-place LU decomposition without pivoting of a
 * diagonally dominant n x n matrix, the elimination step k outermost in every version. Each
 * element is updated once per step with the same expression, so every version computes the
 * same bits. A plain compiler runs version 0 (PolyBench's k-i-j order).
 * Usage: lu [n]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static void lu(int n, double *restrict A) {
#pragma kage versions(kij, kji, jblocks256, jblocks64, two_rows)
  switch (0) {
  case 0:
    for (int k = 0; k < n; k++)
      for (int i = k + 1; i < n; i++) {
        double l = A[i * n + k] / A[k * n + k];
        A[i * n + k] = l;
        for (int j = k + 1; j < n; j++) A[i * n + j] -= l * A[k * n + j];
      }
    break;
  case 1: /* the multipliers first, then the update column by column */
    for (int k = 0; k < n; k++) {
      for (int i = k + 1; i < n; i++) A[i * n + k] = A[i * n + k] / A[k * n + k];
      for (int j = k + 1; j < n; j++)
        for (int i = k + 1; i < n; i++) A[i * n + j] -= A[i * n + k] * A[k * n + j];
    }
    break;
  case 2: /* the update in blocks of 256 columns */
    for (int k = 0; k < n; k++) {
      for (int i = k + 1; i < n; i++) A[i * n + k] = A[i * n + k] / A[k * n + k];
      for (int jj = k + 1; jj < n; jj += 256)
        for (int i = k + 1; i < n; i++) {
          double l = A[i * n + k];
          for (int j = jj; j < MIN(jj + 256, n); j++) A[i * n + j] -= l * A[k * n + j];
        }
    }
    break;
  case 3:
    for (int k = 0; k < n; k++) {
      for (int i = k + 1; i < n; i++) A[i * n + k] = A[i * n + k] / A[k * n + k];
      for (int jj = k + 1; jj < n; jj += 64)
        for (int i = k + 1; i < n; i++) {
          double l = A[i * n + k];
          for (int j = jj; j < MIN(jj + 64, n); j++) A[i * n + j] -= l * A[k * n + j];
        }
    }
    break;
  case 4: /* two rows per pass over the pivot row */
    for (int k = 0; k < n; k++) {
      for (int i = k + 1; i < n; i++) A[i * n + k] = A[i * n + k] / A[k * n + k];
      int i = k + 1;
      for (; i + 1 < n; i += 2) {
        double l0 = A[i * n + k], l1 = A[(i + 1) * n + k];
        for (int j = k + 1; j < n; j++) {
          double p = A[k * n + j];
          A[i * n + j] -= l0 * p;
          A[(i + 1) * n + j] -= l1 * p;
        }
      }
      for (; i < n; i++) {
        double l = A[i * n + k];
        for (int j = k + 1; j < n; j++) A[i * n + j] -= l * A[k * n + j];
      }
    }
    break;
  }
}

static unsigned long long bits(const double *x, long count) {
  unsigned long long h = 1469598103934665603ull;
  for (long i = 0; i < count; i++) {
    unsigned long long b;
    memcpy(&b, &x[i], sizeof b);
    h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1600;
  double *A = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i * n + j] = (double)((i * j + 1) % n) / n + (i == j ? n : 0);
  lu(n, A);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("lu n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(A, (long)n * n));
  free(A);
  return 0;
}
