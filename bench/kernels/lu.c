/* lu (PolyBench/C style): in-place LU decomposition without pivoting of an n x n matrix
 * made diagonally dominant so it is well conditioned. Usage: lu [n]. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  double *A = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i * n + j] = (double)((i * j + 1) % n) / n + (i == j ? n : 0);
  /* Right-looking Doolittle: the k-j inner loop streams a row, as PolyBench's loop order. */
  #pragma kage profile
  for (int k = 0; k < n; k++) {
    for (int i = k + 1; i < n; i++) {
      double l = A[i * n + k] / A[k * n + k];
      A[i * n + k] = l;
      for (int j = k + 1; j < n; j++) A[i * n + j] -= l * A[k * n + j];
    }
  }
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("lu n=%d checksum=%.10e\n", n, sum);
  free(A);
  return 0;
}
