/* Versioned nests (KAGE_TOOL=select): every version of every nest must compute what the
 * original computes, and every outermost iteration must run exactly once, whatever the
 * chunks and versions. Each nest counts how often each outermost iteration ran (`seen`) and
 * prints a checksum; a plain compiler runs version 0 only, and the output must not change.
 * Argument 1: the size of `scaled`'s work (its 10x slower version is the constructed case). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 96
static double A[N][N], B[N][N], C[N][N];
static int seen[4096];

static void clear_seen(int n) {
  for (int i = 0; i < n; i++) seen[i] = 0;
}

static void check_seen(const char *name, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++) bad += seen[i] != 1;
  printf("%s: %s\n", name, bad ? "some iterations ran twice or never" : "each iteration once");
}

static double checksum(void) {
  double s = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) s += C[i][j] * (i + 1) - j;
  return s;
}

/* Interchanged and tiled (tiles that do not divide n: the last is partial). */
static void matmul(int n) {
#pragma kage versions(ijk, ikj, tiled8, tiled32)
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) {
      seen[i]++;
      for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) C[i][j] += A[i][k] * B[k][j];
    }
    break;
  case 1:
    for (int i = 0; i < n; i++) {
      seen[i]++;
      for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) C[i][j] += A[i][k] * B[k][j];
    }
    break;
  case 2:
    for (int ii = 0; ii < n; ii += 8)
      for (int i = ii; i < (ii + 8 < n ? ii + 8 : n); i++) {
        seen[i]++;
        for (int k = 0; k < n; k++)
          for (int j = 0; j < n; j++) C[i][j] += A[i][k] * B[k][j];
      }
    break;
  case 3:
    for (int ii = 0; ii < n; ii += 32)
      for (int kk = 0; kk < n; kk += 32)
        for (int i = ii; i < (ii + 32 < n ? ii + 32 : n); i++) {
          if (kk == 0) seen[i]++;
          for (int k = kk; k < (kk + 32 < n ? kk + 32 : n); k++)
            for (int j = 0; j < n; j++) C[i][j] += A[i][k] * B[k][j];
        }
    break;
  }
}

/* Counting down, with an inclusive bound and a 64-bit iterator. */
static void prefix(long n, double *out, const double *in) {
#pragma kage versions(down, down_by_two)
  switch (0) {
  case 0:
    for (long i = n - 1; i >= 0; i--) {
      seen[i]++;
      double s = 0;
      for (long j = 0; j <= i; j++) s += in[j];
      out[i] = s;
    }
    break;
  case 1:
    for (long i = n - 1; i >= 0; i -= 2) {
      for (long r = i; r > i - 2 && r >= 0; r--) {
        seen[r]++;
        double s = 0;
        for (long j = 0; j <= r; j++) s += in[j];
        out[r] = s;
      }
    }
    break;
  }
}

/* Unsigned iterator, `<=` bound, a while loop; an early `break` in every version. */
static unsigned find_above(unsigned last, const double *v, double limit) {
  unsigned found = last + 1;
#pragma kage versions
  switch (0) {
  case 0:
    for (unsigned i = 0; i <= last; i++) {
      if (v[i] > limit) {
        found = i;
        break;
      }
    }
    break;
  case 1: {
    unsigned i = 0;
    while (i <= last) {
      if (v[i] > limit) {
        found = i;
        break;
      }
      i += 1;
    }
    break;
  }
  }
  return found;
}

/* The constructed case: the same result in each version, version 2 the cheapest by far. */
static double spin(double x, int reps) {
  volatile double y = x;
  for (int r = 0; r < reps; r++) y = y * 1.0000001 + 1e-9;
  (void)y;
  return x;
}

static double scaled(int n, int work) {
  static double out[4096];
#pragma kage versions(slow10, slow3, fast, slow10_tiled)
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) {
      seen[i]++;
      out[i] = spin(i * 0.5, 10 * work);
    }
    break;
  case 1:
    for (int i = 0; i < n; i++) {
      seen[i]++;
      out[i] = spin(i * 0.5, 3 * work);
    }
    break;
  case 2:
    for (int i = 0; i < n; i++) {
      seen[i]++;
      out[i] = spin(i * 0.5, work);
    }
    break;
  case 3:
    for (int ii = 0; ii < n; ii += 4)
      for (int i = ii; i < ii + 4 && i < n; i++) {
        seen[i]++;
        out[i] = spin(i * 0.5, 10 * work);
      }
    break;
  }
  double s = 0;
  for (int i = 0; i < n; i++) s += out[i];
  return s;
}

int main(int argc, char **argv) {
  int work = argc > 1 ? atoi(argv[1]) : 200;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      A[i][j] = (i * 7 + j) % 13 - 6;
      B[i][j] = (i + 3 * j) % 11 - 5;
    }
  /* Entries of several sizes, twice each. */
  int sizes[] = {N, 17, N, 17, 5, 61};
  for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    clear_seen(sizes[s]);
    matmul(sizes[s]);
    check_seen("matmul", sizes[s]);
  }
  printf("matmul %.1f\n", checksum());

  static double in[3000], out[3000];
  for (int i = 0; i < 3000; i++) in[i] = (i % 17) * 0.25;
  for (int r = 0; r < 3; r++) {
    clear_seen(3000);
    prefix(3000 - r, out, in);
    check_seen("prefix", 3000 - r);
  }
  double p = 0;
  for (int i = 0; i < 3000; i++) p += out[i] * (i % 5);
  printf("prefix %.2f\n", p);

  unsigned hits = 0;
  for (int r = 0; r < 200; r++) hits += find_above(2999, in, 3.5 + (r % 3) * 0.1);
  printf("find_above %u\n", hits);

  for (int r = 0; r < 4; r++) {
    clear_seen(4000);
    double s = scaled(4000, work);
    check_seen("scaled", 4000);
    printf("scaled %.1f\n", s);
  }
  return 0;
}
