/* gemm in versions (issue 19, VMAD Table 3): C = alpha*A*B + beta*C on n x n doubles, the
 * outermost loop over rows of C in every version. Each element receives its k-updates in
 * ascending k with the same expression in every version, so every version computes the same
 * bits. A plain compiler runs version 0 (PolyBench's i-k-j order).
 * Usage: gemm [n]. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static void gemm(int n, double alpha, double beta, double *restrict C, const double *restrict A,
                 const double *restrict B) {
#pragma kage versions(ikj, ijk, tiled32, tiled64, tiled128_jblocks, i2_unrolled)
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) C[i * n + j] *= beta;
      for (int k = 0; k < n; k++) {
        double a = alpha * A[i * n + k];
        for (int j = 0; j < n; j++) C[i * n + j] += a * B[k * n + j];
      }
    }
    break;
  case 1: /* dot products: B read down its columns */
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double c = C[i * n + j] * beta;
        for (int k = 0; k < n; k++) c += alpha * A[i * n + k] * B[k * n + j];
        C[i * n + j] = c;
      }
    break;
  case 2:
    for (int ii = 0; ii < n; ii += 32) {
      for (int i = ii; i < MIN(ii + 32, n); i++)
        for (int j = 0; j < n; j++) C[i * n + j] *= beta;
      for (int kk = 0; kk < n; kk += 32)
        for (int i = ii; i < MIN(ii + 32, n); i++)
          for (int k = kk; k < MIN(kk + 32, n); k++) {
            double a = alpha * A[i * n + k];
            for (int j = 0; j < n; j++) C[i * n + j] += a * B[k * n + j];
          }
    }
    break;
  case 3:
    for (int ii = 0; ii < n; ii += 64) {
      for (int i = ii; i < MIN(ii + 64, n); i++)
        for (int j = 0; j < n; j++) C[i * n + j] *= beta;
      for (int kk = 0; kk < n; kk += 64)
        for (int i = ii; i < MIN(ii + 64, n); i++)
          for (int k = kk; k < MIN(kk + 64, n); k++) {
            double a = alpha * A[i * n + k];
            for (int j = 0; j < n; j++) C[i * n + j] += a * B[k * n + j];
          }
    }
    break;
  case 4: /* tiles of 128 rows, 128 k and 256 columns: the B block stays in cache */
    for (int ii = 0; ii < n; ii += 128) {
      for (int i = ii; i < MIN(ii + 128, n); i++)
        for (int j = 0; j < n; j++) C[i * n + j] *= beta;
      for (int kk = 0; kk < n; kk += 128)
        for (int jj = 0; jj < n; jj += 256)
          for (int i = ii; i < MIN(ii + 128, n); i++)
            for (int k = kk; k < MIN(kk + 128, n); k++) {
              double a = alpha * A[i * n + k];
              for (int j = jj; j < MIN(jj + 256, n); j++) C[i * n + j] += a * B[k * n + j];
            }
    }
    break;
  case 5: /* two rows at a time: each row of B serves both */
    for (int i = 0; i < n; i += 2) {
      int rows = MIN(2, n - i);
      for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) C[(i + r) * n + j] *= beta;
      for (int k = 0; k < n; k++) {
        double a0 = alpha * A[i * n + k];
        if (rows == 2) {
          double a1 = alpha * A[(i + 1) * n + k];
          for (int j = 0; j < n; j++) {
            C[i * n + j] += a0 * B[k * n + j];
            C[(i + 1) * n + j] += a1 * B[k * n + j];
          }
        } else {
          for (int j = 0; j < n; j++) C[i * n + j] += a0 * B[k * n + j];
        }
      }
    }
    break;
  }
}

/* The bits of every element, hashed (FNV-1a): versions must agree bit for bit. */
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
  double *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i * n + j] = (double)((i * j + 1) % n) / n;
      B[i * n + j] = (double)((i * (j + 1) + 2) % n) / n;
      C[i * n + j] = (double)((i * (j + 2) + 3) % n) / n;
    }
  gemm(n, 1.5, 1.2, C, A, B);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += C[i];
  printf("gemm n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(C, (long)n * n));
  free(A); free(B); free(C);
  return 0;
}
