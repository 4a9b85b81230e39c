/* seidel-2d (PolyBench/C style): an in-place 9-point Gauss-Seidel sweep on an n x n grid,
 * t times. The in-place update carries a dependence the compiler cannot vectorise away.
 * Usage: seidel-2d [n] (t is fixed at 20). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  int steps = 20;
  double *A = malloc(sizeof(double) * n * n);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) A[i * n + j] = ((double)i * (j + 2) + 2) / n;
  #pragma kage profile
  for (int t = 0; t < steps; t++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i * n + j] = (A[(i - 1) * n + j - 1] + A[(i - 1) * n + j] + A[(i - 1) * n + j + 1] +
                        A[i * n + j - 1] + A[i * n + j] + A[i * n + j + 1] +
                        A[(i + 1) * n + j - 1] + A[(i + 1) * n + j] + A[(i + 1) * n + j + 1]) /
                       9.0;
  double sum = 0;
  for (int i = 0; i < n * n; i++) sum += A[i];
  printf("seidel-2d n=%d checksum=%.10e\n", n, sum);
  free(A);
  return 0;
}
