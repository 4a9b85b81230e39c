/* matmul in versions (issue 19, VMAD Table 3): C = A*B on n x n doubles, C zeroed first, the
 * outermost loop over rows of C in every version; every element receives its k-products in
 * ascending k, so every version computes the same bits. A plain compiler runs version 0, the
 * textbook i-j-k dot products. Usage: matmul [n]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static void matmul(int n, double *restrict C, const double *restrict A, const double *restrict B) {
#pragma kage versions(ijk, ikj, tiled16, tiled64, i4_unrolled)
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double c = 0;
        for (int k = 0; k < n; k++) c += A[i * n + k] * B[k * n + j];
        C[i * n + j] = c;
      }
    break;
  case 1:
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) C[i * n + j] = 0;
      for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) C[i * n + j] += A[i * n + k] * B[k * n + j];
    }
    break;
  case 2:
    for (int ii = 0; ii < n; ii += 16) {
      for (int i = ii; i < MIN(ii + 16, n); i++)
        for (int j = 0; j < n; j++) C[i * n + j] = 0;
      for (int kk = 0; kk < n; kk += 64)
        for (int i = ii; i < MIN(ii + 16, n); i++)
          for (int k = kk; k < MIN(kk + 64, n); k++)
            for (int j = 0; j < n; j++) C[i * n + j] += A[i * n + k] * B[k * n + j];
    }
    break;
  case 3:
    for (int ii = 0; ii < n; ii += 64) {
      for (int i = ii; i < MIN(ii + 64, n); i++)
        for (int j = 0; j < n; j++) C[i * n + j] = 0;
      for (int kk = 0; kk < n; kk += 64)
        for (int jj = 0; jj < n; jj += 512)
          for (int i = ii; i < MIN(ii + 64, n); i++)
            for (int k = kk; k < MIN(kk + 64, n); k++)
              for (int j = jj; j < MIN(jj + 512, n); j++) C[i * n + j] += A[i * n + k] * B[k * n + j];
    }
    break;
  case 4: /* four rows of C at a time over one row of B */
    for (int i = 0; i < n; i += 4) {
      int rows = MIN(4, n - i);
      for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) C[(i + r) * n + j] = 0;
      for (int k = 0; k < n; k++)
        for (int r = 0; r < rows; r++) {
          double a = A[(i + r) * n + k];
          for (int j = 0; j < n; j++) C[(i + r) * n + j] += a * B[k * n + j];
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
  int n = argc > 1 ? atoi(argv[1]) : 1200;
  double *A = malloc(sizeof(double) * n * n);
  double *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i * n + j] = (double)((i * j + 1) % n) / n;
      B[i * n + j] = (double)((i * (j + 1) + 2) % n) / n;
    }
  matmul(n, C, A, B);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += C[i];
  printf("matmul n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(C, (long)n * n));
  free(A); free(B); free(C);
  return 0;
}
