/* seidel-2d in versions (issue 19, VMAD Table 3): tsteps in-place Gauss-Seidel sweeps of a
 * 9-point stencil on an n x n grid, time steps outermost in every version. The fused
 * versions run F time steps in one pass down the rows (row i at step t, then row i - 1 at
 * step t + 1, ...: a skewed wavefront that reads every value at the time the original
 * does), so every version computes the same bits. A plain compiler runs version 0.
 * Usage: seidel-2d [n [tsteps]]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static inline void row(int n, double *restrict A, int i) {
  for (int j = 1; j < n - 1; j++)
    A[i * n + j] = (A[(i - 1) * n + j - 1] + A[(i - 1) * n + j] + A[(i - 1) * n + j + 1] +
                    A[i * n + j - 1] + A[i * n + j] + A[i * n + j + 1] + A[(i + 1) * n + j - 1] +
                    A[(i + 1) * n + j] + A[(i + 1) * n + j + 1]) / 9.0;
}

/* `steps` time steps (at most 8) in one skewed pass. */
static inline void fused(int n, double *restrict A, int steps) {
  for (int s = 1; s < n - 1 + steps - 1; s++)
    for (int f = 0; f < steps; f++) {
      int i = s - f;
      if (i >= 1 && i < n - 1) row(n, A, i);
    }
}

static void seidel(int n, int tsteps, double *restrict A) {
#pragma kage versions(sweeps, fused2, fused4, fused8)
  switch (0) {
  case 0:
    for (int t = 0; t < tsteps; t++)
      for (int i = 1; i < n - 1; i++) row(n, A, i);
    break;
  case 1:
    for (int t = 0; t < tsteps; t += 2) fused(n, A, MIN(2, tsteps - t));
    break;
  case 2:
    for (int t = 0; t < tsteps; t += 4) fused(n, A, MIN(4, tsteps - t));
    break;
  case 3:
    for (int t = 0; t < tsteps; t += 8) fused(n, A, MIN(8, tsteps - t));
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
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int tsteps = argc > 2 ? atoi(argv[2]) : 500;
  double *A = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i * n + j] = ((double)i * (j + 2) + 2) / n;
  seidel(n, tsteps, A);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("seidel-2d n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(A, (long)n * n));
  free(A);
  return 0;
}
