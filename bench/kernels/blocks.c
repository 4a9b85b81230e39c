/* Block-tridiagonal line solves with 5x5 blocks, in the style of the NAS BT solver: per grid
 * line, a forward elimination whose every step calls tiny functions (a 5x5 matrix-vector
 * product, a 5x5 matrix product, a 5x5 solve) made of loops of 5 iterations, then a back
 * substitution. Many small calls and short loops: region events dominate instrumentation.
 * Usage: blocks [lines]. Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define B 5
#define N 64 /* points per line */

typedef double block[B][B];

/* r -= a * x */
static void matvec_sub(const block a, const double *x, double *r) {
  for (int i = 0; i < B; i++) {
    double s = 0;
    for (int j = 0; j < B; j++) s += a[i][j] * x[j];
    r[i] -= s;
  }
}

/* c -= a * b */
static void matmul_sub(const block a, const block b, block c) {
  for (int i = 0; i < B; i++)
    for (int j = 0; j < B; j++) {
      double s = 0;
      for (int k = 0; k < B; k++) s += a[i][k] * b[k][j];
      c[i][j] -= s;
    }
}

/* Solves lhs * x = [c | r] in place by Gauss-Jordan elimination: c becomes lhs^-1 c, r
 * becomes lhs^-1 r. The blocks are diagonally dominant: no pivoting. */
static void binvcrhs(block lhs, block c, double *r) {
  for (int p = 0; p < B; p++) {
    double inv = 1.0 / lhs[p][p];
    for (int j = 0; j < B; j++) { lhs[p][j] *= inv; c[p][j] *= inv; }
    r[p] *= inv;
    for (int i = 0; i < B; i++) {
      if (i == p) continue;
      double f = lhs[i][p];
      for (int j = 0; j < B; j++) { lhs[i][j] -= f * lhs[p][j]; c[i][j] -= f * c[p][j]; }
      r[i] -= f * r[p];
    }
  }
}

/* Solves lhs * x = r in place. */
static void binvrhs(block lhs, double *r) {
  block unused = {{0}};
  binvcrhs(lhs, unused, r);
}

static unsigned long long seed = 88172645463325252ull;
static double next(void) {
  seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
  return (double)(seed % 1000) / 1000.0;
}

static block la[N], lb[N], lc[N];
static double rhs[N][B];

static void fill_line(void) {
  for (int n = 0; n < N; n++) {
    for (int i = 0; i < B; i++) {
      for (int j = 0; j < B; j++) {
        la[n][i][j] = 0.1 * next();
        lc[n][i][j] = 0.1 * next();
        lb[n][i][j] = (i == j ? 4.0 : 0.0) + 0.1 * next();
      }
      rhs[n][i] = next();
    }
  }
}

static double solve_line(void) {
  binvcrhs(lb[0], lc[0], rhs[0]);
  for (int n = 1; n < N; n++) {
    matvec_sub(la[n], rhs[n - 1], rhs[n]);
    matmul_sub(la[n], lc[n - 1], lb[n]);
    if (n < N - 1) binvcrhs(lb[n], lc[n], rhs[n]);
    else binvrhs(lb[n], rhs[n]);
  }
  for (int n = N - 2; n >= 0; n--)
    for (int i = 0; i < B; i++)
      for (int j = 0; j < B; j++) rhs[n][i] -= lc[n][i][j] * rhs[n + 1][j];
  double sum = 0;
  for (int n = 0; n < N; n++)
    for (int i = 0; i < B; i++) sum += rhs[n][i];
  return sum;
}

int main(int argc, char **argv) {
  long lines = argc > 1 ? atol(argv[1]) : 20000;
  double checksum = 0;
  for (long l = 0; l < lines; l++) {
    fill_line();
    checksum += solve_line();
  }
  printf("blocks lines=%ld checksum=%.6f\n", lines, checksum);
  return 0;
}
