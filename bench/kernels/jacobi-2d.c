/* jacobi-2d (PolyBench/C style): a 5-point stencil on an n x n grid, alternating between
 * two arrays for t steps. Usage: jacobi-2d [n] (t is fixed at 100). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  int steps = 100;
  double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      A[i * n + j] = ((double)i * (j + 2) + 2) / n;
      B[i * n + j] = ((double)i * (j + 3) + 3) / n;
    }
  #pragma kage profile
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        B[i * n + j] = 0.2 * (A[i * n + j] + A[i * n + j - 1] + A[i * n + j + 1] +
                              A[(i + 1) * n + j] + A[(i - 1) * n + j]);
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i * n + j] = 0.2 * (B[i * n + j] + B[i * n + j - 1] + B[i * n + j + 1] +
                              B[(i + 1) * n + j] + B[(i - 1) * n + j]);
  }
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("jacobi-2d n=%d checksum=%.10e\n", n, sum);
  free(A); free(B);
  return 0;
}
