/* gemm (PolyBench/C style): C = alpha*A*B + beta*C on n x n doubles.
 * Usage: gemm [n]. Prints a checksum so native and instrumented runs can be compared. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1600;
  double alpha = 1.5, beta = 1.2;
  double *A = malloc(sizeof(double) * n * n);
  double *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i * n + j] = (double)((i * j + 1) % n) / n;
      B[i * n + j] = (double)((i * (j + 1) + 2) % n) / n;
      C[i * n + j] = (double)((i * (j + 2) + 3) % n) / n;
    }
  /* i-k-j order, as PolyBench writes it: the inner loop streams rows of B and C. */
  #pragma kage profile
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) C[i * n + j] *= beta;
    for (int k = 0; k < n; k++) {
      double a = alpha * A[i * n + k];
      for (int j = 0; j < n; j++) C[i * n + j] += a * B[k * n + j];
    }
  }
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += C[i];
  printf("gemm n=%d checksum=%.10e\n", n, sum);
  free(A); free(B); free(C);
  return 0;
}
