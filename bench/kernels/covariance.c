/* covariance (PolyBench/C style): the m x m covariance matrix of n samples of m variables.
 * Usage: covariance [m] (n = m). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int m = argc > 1 ? atoi(argv[1]) : 1200;
  int n = m;
  double *data = malloc(sizeof(double) * n * m);
  double *cov = malloc(sizeof(double) * m * m);
  double *mean = malloc(sizeof(double) * m);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) data[i * m + j] = (double)(i * j % 97) / m;
  for (int j = 0; j < m; j++) {
    mean[j] = 0;
    for (int i = 0; i < n; i++) mean[j] += data[i * m + j];
    mean[j] /= n;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) data[i * m + j] -= mean[j];
  /* Upper triangle, then mirrored: the column walk over data is the strided access pattern
   * that makes this kernel interesting for a working-set tool. */
  #pragma kage profile
  for (int i = 0; i < m; i++)
    for (int j = i; j < m; j++) {
      double c = 0;
      for (int k = 0; k < n; k++) c += data[k * m + i] * data[k * m + j];
      c /= n - 1;
      cov[i * m + j] = c;
      cov[j * m + i] = c;
    }
  double sum = 0;
  for (int i = 0; i < m * m; i++) sum += cov[i];
  printf("covariance m=%d checksum=%.10e\n", m, sum);
  free(data); free(cov); free(mean);
  return 0;
}
