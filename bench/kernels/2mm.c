/* 2mm (PolyBench/C style): D = alpha*A*B*C + beta*D, two chained matrix products on
 * n x n doubles. Usage: 2mm [n]. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

static void init(double *M, int n, int seed) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) M[i * n + j] = (double)((i * (j + seed) + seed) % n) / n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1300;
  double alpha = 1.5, beta = 1.2;
  double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
  double *C = malloc(sizeof(double) * n * n), *D = malloc(sizeof(double) * n * n);
  double *tmp = malloc(sizeof(double) * n * n);
  init(A, n, 1); init(B, n, 2); init(C, n, 3); init(D, n, 4);
  /* tmp = alpha*A*B */
  #pragma kage profile
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) tmp[i * n + j] = 0;
    for (int k = 0; k < n; k++) {
      double a = alpha * A[i * n + k];
      for (int j = 0; j < n; j++) tmp[i * n + j] += a * B[k * n + j];
    }
  }
  /* D = tmp*C + beta*D */
  #pragma kage profile
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) D[i * n + j] *= beta;
    for (int k = 0; k < n; k++) {
      double t = tmp[i * n + k];
      for (int j = 0; j < n; j++) D[i * n + j] += t * C[k * n + j];
    }
  }
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += D[i];
  printf("2mm n=%d checksum=%.10e\n", n, sum);
  free(A); free(B); free(C); free(D); free(tmp);
  return 0;
}
