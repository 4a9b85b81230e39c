/* jacobi-2d in versions (issue 19, VMAD Table 3): tsteps Jacobi sweeps of a 5-point stencil
 * on an n x n grid (A to B, then B to A), the time step outermost in every version. Every
 * point is computed from the same values with the same expression, so every version
 * computes the same bits. A plain compiler runs version 0, PolyBench's two row sweeps.
 * The default size is PolyBench's LARGE time steps on a smaller grid.
 * Usage: jacobi-2d [n [tsteps]]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT(X, i, j) X[(i) * n + (j)]
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static void jacobi(int n, int tsteps, double *restrict A, double *restrict B) {
#pragma kage versions(rows, tiled, fused_rows, fused_columns)
  switch (0) {
  case 0:
    for (int t = 0; t < tsteps; t++) {
      for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
          AT(B, i, j) = 0.2 * (AT(A, i, j) + AT(A, i, j - 1) + AT(A, i, j + 1) + AT(A, i + 1, j) + AT(A, i - 1, j));
      for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
          AT(A, i, j) = 0.2 * (AT(B, i, j) + AT(B, i, j - 1) + AT(B, i, j + 1) + AT(B, i + 1, j) + AT(B, i - 1, j));
    }
    break;
  case 1: /* each sweep in tiles of 32 rows by 512 columns */
    for (int t = 0; t < tsteps; t++) {
      for (int ii = 1; ii < n - 1; ii += 32)
        for (int jj = 1; jj < n - 1; jj += 512)
          for (int i = ii; i < MIN(ii + 32, n - 1); i++)
            for (int j = jj; j < MIN(jj + 512, n - 1); j++)
              AT(B, i, j) = 0.2 * (AT(A, i, j) + AT(A, i, j - 1) + AT(A, i, j + 1) + AT(A, i + 1, j) + AT(A, i - 1, j));
      for (int ii = 1; ii < n - 1; ii += 32)
        for (int jj = 1; jj < n - 1; jj += 512)
          for (int i = ii; i < MIN(ii + 32, n - 1); i++)
            for (int j = jj; j < MIN(jj + 512, n - 1); j++)
              AT(A, i, j) = 0.2 * (AT(B, i, j) + AT(B, i, j - 1) + AT(B, i, j + 1) + AT(B, i + 1, j) + AT(B, i - 1, j));
    }
    break;
  case 2: /* both sweeps in one pass: row i of B, then row i - 1 of A, which needs it */
    for (int t = 0; t < tsteps; t++) {
      for (int i = 1; i < n; i++) {
        if (i < n - 1)
          for (int j = 1; j < n - 1; j++)
            AT(B, i, j) = 0.2 * (AT(A, i, j) + AT(A, i, j - 1) + AT(A, i, j + 1) + AT(A, i + 1, j) + AT(A, i - 1, j));
        if (i >= 2)
          for (int j = 1; j < n - 1; j++)
            AT(A, i - 1, j) = 0.2 * (AT(B, i - 1, j) + AT(B, i - 1, j - 1) + AT(B, i - 1, j + 1) + AT(B, i, j) + AT(B, i - 2, j));
      }
    }
    break;
  case 3: /* both sweeps in one pass, by columns */
    for (int t = 0; t < tsteps; t++) {
      for (int j = 1; j < n; j++) {
        if (j < n - 1)
          for (int i = 1; i < n - 1; i++)
            AT(B, i, j) = 0.2 * (AT(A, i, j) + AT(A, i, j - 1) + AT(A, i, j + 1) + AT(A, i + 1, j) + AT(A, i - 1, j));
        if (j >= 2)
          for (int i = 1; i < n - 1; i++)
            AT(A, i, j - 1) = 0.2 * (AT(B, i, j - 1) + AT(B, i, j - 2) + AT(B, i, j) + AT(B, i + 1, j - 1) + AT(B, i - 1, j - 1));
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
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int tsteps = argc > 2 ? atoi(argv[2]) : 500;
  double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      AT(A, i, j) = ((double)i * (j + 2) + 2) / n;
      AT(B, i, j) = ((double)i * (j + 3) + 3) / n;
    }
  jacobi(n, tsteps, A, B);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("jacobi-2d n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(A, (long)n * n));
  free(A); free(B);
  return 0;
}
