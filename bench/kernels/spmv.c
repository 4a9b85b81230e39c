/* Sparse matrix-vector product in CSR form: y = A x, repeated, for a matrix of n rows with
 * 16 nonzeros each in random columns. The inner loop reads the column index and the value
 * in order and x through the index: `y[i] += val[k] * x[col[k]]`. Usage: spmv [n].
 * Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define PER_ROW 16
#define REPEATS 20

static uint64_t next(uint64_t *state) { /* xorshift64 */
  uint64_t x = *state;
  x ^= x << 13; x ^= x >> 7; x ^= x << 17;
  return *state = x;
}

static void spmv(long n, const long *row, const int *col, const double *val, const double *x,
                 double *y) {
  for (long i = 0; i < n; i++) {
    double s = 0;
    for (long k = row[i]; k < row[i + 1]; k++)
      s += val[k] * x[col[k]];
    y[i] = s;
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 600000;
  long nnz = n * PER_ROW;
  long *row = malloc((n + 1) * sizeof *row);
  int *col = malloc(nnz * sizeof *col);
  double *val = malloc(nnz * sizeof *val);
  double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  uint64_t state = 88172645463325252ull;
  for (long i = 0; i <= n; i++) row[i] = i * PER_ROW;
  for (long k = 0; k < nnz; k++) {
    col[k] = (int)(next(&state) % (uint64_t)n);
    val[k] = (double)(next(&state) % 1000) / 1000.0;
  }
  for (long i = 0; i < n; i++) x[i] = 1.0 / (double)(i + 1);
  double checksum = 0;
  for (int r = 0; r < REPEATS; r++) {
    spmv(n, row, col, val, x, y);
    for (long i = 0; i < n; i++) { checksum += y[i]; x[i] = y[i] * 0.5 + x[i] * 0.5; }
  }
  printf("spmv n=%ld checksum=%.6e\n", n, checksum);
  free(row); free(col); free(val); free(x); free(y);
  return 0;
}
