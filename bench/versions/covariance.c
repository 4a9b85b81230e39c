/* covariance in versions (issue 19, VMAD Table 3): the covariance matrix of m variables over
 * n observations, its upper triangle computed row by row (the outermost loop in every
 * version) and mirrored. Each element's sum takes its k-products in ascending k, so every
 * version computes the same bits. A plain compiler runs version 0, PolyBench's dot products
 * down the columns of data. Usage: covariance [m]. Prints a checksum and a hash of the bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define TILE 16

static void covariance(int m, int n, double *restrict cov, const double *restrict data) {
  double *rows = malloc(sizeof(double) * TILE * m);
#pragma kage versions(dots, row_sums, row_sums_kblocks, two_rows, tiled16)
  switch (0) {
  case 0:
    for (int i = 0; i < m; i++)
      for (int j = i; j < m; j++) {
        double c = 0;
        for (int k = 0; k < n; k++) c += data[k * m + i] * data[k * m + j];
        c /= n - 1;
        cov[i * m + j] = c;
        cov[j * m + i] = c;
      }
    break;
  case 1: /* a row of sums at a time: data read along its rows */
    for (int i = 0; i < m; i++) {
      double *row = rows;
      for (int j = i; j < m; j++) row[j] = 0;
      for (int k = 0; k < n; k++) {
        double a = data[k * m + i];
        for (int j = i; j < m; j++) row[j] += a * data[k * m + j];
      }
      for (int j = i; j < m; j++) {
        double c = row[j] / (n - 1);
        cov[i * m + j] = c;
        cov[j * m + i] = c;
      }
    }
    break;
  case 2: /* as 1, the columns in blocks of 256 */
    for (int i = 0; i < m; i++) {
      double *row = rows;
      for (int jj = i; jj < m; jj += 256) {
        for (int j = jj; j < MIN(jj + 256, m); j++) row[j] = 0;
        for (int k = 0; k < n; k++) {
          double a = data[k * m + i];
          for (int j = jj; j < MIN(jj + 256, m); j++) row[j] += a * data[k * m + j];
        }
      }
      for (int j = i; j < m; j++) {
        double c = row[j] / (n - 1);
        cov[i * m + j] = c;
        cov[j * m + i] = c;
      }
    }
    break;
  case 3: /* two rows of sums per pass over data */
    for (int i = 0; i < m; i += 2) {
      int count = MIN(2, m - i);
      for (int r = 0; r < count; r++)
        for (int j = i + r; j < m; j++) rows[r * m + j] = 0;
      for (int k = 0; k < n; k++)
        for (int r = 0; r < count; r++) {
          double a = data[k * m + i + r];
          for (int j = i + r; j < m; j++) rows[r * m + j] += a * data[k * m + j];
        }
      for (int r = 0; r < count; r++)
        for (int j = i + r; j < m; j++) {
          double c = rows[r * m + j] / (n - 1);
          cov[(i + r) * m + j] = c;
          cov[j * m + i + r] = c;
        }
    }
    break;
  case 4: /* sixteen rows of sums per pass over data */
    for (int ii = 0; ii < m; ii += TILE) {
      int count = MIN(TILE, m - ii);
      for (int r = 0; r < count; r++)
        for (int j = ii + r; j < m; j++) rows[r * m + j] = 0;
      for (int k = 0; k < n; k++)
        for (int r = 0; r < count; r++) {
          double a = data[k * m + ii + r];
          for (int j = ii + r; j < m; j++) rows[r * m + j] += a * data[k * m + j];
        }
      for (int r = 0; r < count; r++)
        for (int j = ii + r; j < m; j++) {
          double c = rows[r * m + j] / (n - 1);
          cov[(ii + r) * m + j] = c;
          cov[j * m + ii + r] = c;
        }
    }
    break;
  }
  free(rows);
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
  int m = argc > 1 ? atoi(argv[1]) : 1400;
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
  covariance(m, n, cov, data);
  double sum = 0;
  for (int i = 0; i < m * m; i++) sum += cov[i];
  printf("covariance m=%d checksum=%.10e bits=%016llx\n", m, sum, bits(cov, (long)m * m));
  free(data); free(cov); free(mean);
  return 0;
}
