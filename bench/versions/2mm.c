/* 2mm in versions (issue 19, VMAD Table 3): tmp = alpha*A*B, then D = tmp*C + beta*D, on n x n
 * doubles; each product is a nest in versions, rows outermost, every element's k-updates in
 * ascending k, so every version computes the same bits. A plain compiler runs version 0
 * (PolyBench's i-k-j order). Usage: 2mm [n]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* X = alpha*P*Q + beta*X (beta 0: X is overwritten), in versions. */
static void product(int n, double alpha, double beta, double *restrict X, const double *restrict P,
                    const double *restrict Q) {
#pragma kage versions(ikj, ijk, tiled32, tiled64, i2_unrolled)
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) X[i * n + j] = beta == 0 ? 0 : X[i * n + j] * beta;
      for (int k = 0; k < n; k++) {
        double a = alpha * P[i * n + k];
        for (int j = 0; j < n; j++) X[i * n + j] += a * Q[k * n + j];
      }
    }
    break;
  case 1:
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double x = beta == 0 ? 0 : X[i * n + j] * beta;
        for (int k = 0; k < n; k++) x += alpha * P[i * n + k] * Q[k * n + j];
        X[i * n + j] = x;
      }
    break;
  case 2:
    for (int ii = 0; ii < n; ii += 32) {
      for (int i = ii; i < MIN(ii + 32, n); i++)
        for (int j = 0; j < n; j++) X[i * n + j] = beta == 0 ? 0 : X[i * n + j] * beta;
      for (int kk = 0; kk < n; kk += 32)
        for (int i = ii; i < MIN(ii + 32, n); i++)
          for (int k = kk; k < MIN(kk + 32, n); k++) {
            double a = alpha * P[i * n + k];
            for (int j = 0; j < n; j++) X[i * n + j] += a * Q[k * n + j];
          }
    }
    break;
  case 3:
    for (int ii = 0; ii < n; ii += 64) {
      for (int i = ii; i < MIN(ii + 64, n); i++)
        for (int j = 0; j < n; j++) X[i * n + j] = beta == 0 ? 0 : X[i * n + j] * beta;
      for (int kk = 0; kk < n; kk += 64)
        for (int jj = 0; jj < n; jj += 512)
          for (int i = ii; i < MIN(ii + 64, n); i++)
            for (int k = kk; k < MIN(kk + 64, n); k++) {
              double a = alpha * P[i * n + k];
              for (int j = jj; j < MIN(jj + 512, n); j++) X[i * n + j] += a * Q[k * n + j];
            }
    }
    break;
  case 4:
    for (int i = 0; i < n; i += 2) {
      int rows = MIN(2, n - i);
      for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++)
          X[(i + r) * n + j] = beta == 0 ? 0 : X[(i + r) * n + j] * beta;
      for (int k = 0; k < n; k++)
        for (int r = 0; r < rows; r++) {
          double a = alpha * P[(i + r) * n + k];
          for (int j = 0; j < n; j++) X[(i + r) * n + j] += a * Q[k * n + j];
        }
    }
    break;
  }
}

static void init(double *x, int n, int seed) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) x[i * n + j] = (double)((i * (j + seed) + seed) % n) / n;
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
  int n = argc > 1 ? atoi(argv[1]) : 1100;
  double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n), *D = malloc(sizeof(double) * n * n);
  double *tmp = malloc(sizeof(double) * n * n);
  init(A, n, 1); init(B, n, 2); init(C, n, 3); init(D, n, 4);
  product(n, 1.5, 0, tmp, A, B);
  product(n, 1.0, 1.2, D, tmp, C);
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += D[i];
  printf("2mm n=%d checksum=%.10e bits=%016llx\n", n, sum, bits(D, (long)n * n));
  free(A); free(B); free(C); free(D); free(tmp);
  return 0;
}
