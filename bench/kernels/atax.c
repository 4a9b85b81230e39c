/* atax (PolyBench/C style): y = A^T (A x) for an n x n matrix, repeated `reps` times with
 * x updated from y so no repetition is dead. Usage: atax [n] (reps fixed at 30). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4000;
  int reps = 30;
  double *A = malloc(sizeof(double) * n * n);
  double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n);
  double *tmp = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    x[i] = 1.0 + (double)i / n;
    for (int j = 0; j < n; j++) A[i * n + j] = (double)((i + j) % n) / (5.0 * n);
  }
  #pragma kage profile
  for (int r = 0; r < reps; r++) {
    for (int j = 0; j < n; j++) y[j] = 0;
    for (int i = 0; i < n; i++) {
      double t = 0;
      for (int j = 0; j < n; j++) t += A[i * n + j] * x[j];
      tmp[i] = t;
      for (int j = 0; j < n; j++) y[j] += A[i * n + j] * t;
    }
    /* Normalise into x for the next repetition. */
    double norm = 0;
    for (int j = 0; j < n; j++) norm += y[j] > 0 ? y[j] : -y[j];
    for (int j = 0; j < n; j++) x[j] = y[j] / norm * n;
  }
  double sum = 0;
  for (int j = 0; j < n; j++) sum += y[j] + tmp[j];
  printf("atax n=%d checksum=%.10e\n", n, sum);
  free(A); free(x); free(y); free(tmp);
  return 0;
}
