/* Loops that a footprint build (KAGE_TOOL=footprint) reports per chunk of iterations
 * instead of access by access (crates/kage-pass/src/hoist): elements with gaps between
 * them, a column walk, a downward loop, an overlapping stencil, a vectorised loop with its
 * remainder, loops longer than a chunk, a loop entered again and again. Each function runs
 * one loop over global arrays (each aligned to 4096), so its footprint and its loop's are
 * the ranges in its comment; crates/kage/tests/e2e_footprint.rs checks them exactly in a
 * footprint build and in a build for every tool, and that the footprint build hoisted
 * these loops. */
#include "../common.h"
#include <string.h>

struct rec {
  long a, b, c;
};
static struct rec recs[200] __attribute__((aligned(4096))); /* 24 bytes each */
static double mat[64][64] __attribute__((aligned(4096)));   /* rows of 512 bytes */
static int ints[3000] __attribute__((aligned(4096)));
static double in[1000] __attribute__((aligned(4096)));
static double out[1000] __attribute__((aligned(4096)));
static float fa[4999] __attribute__((aligned(4096)));
static float fb[4999] __attribute__((aligned(4096)));

/* Reads recs[i].b, i < n: 8 bytes at 24 i + 8 each (16-byte gaps). */
NOINLINE long fields(int n) {
  long s = 0;
  PLAIN_LOOP for (int i = 0; i < n; i++) s += recs[i].b;
  return s;
}

/* Reads mat[i][j], i < 64: 8 bytes at 512 i + 8 j each. */
NOINLINE double column(int j) {
  double s = 0;
  PLAIN_LOOP for (int i = 0; i < 64; i++) s += mat[i][j];
  return s;
}

/* Increments ints[n - 1] down to ints[0]: bytes [0, 4 n). */
NOINLINE void down(int n) {
  PLAIN_LOOP for (int i = n - 1; i != -1; i--) ints[i] += 1;
}

/* out[i] = in[i - 1] + in[i] + in[i + 1], 0 < i < n - 1: in [0, 8 n), out [8, 8 (n - 1)). */
NOINLINE void stencil(int n) {
  PLAIN_LOOP for (int i = 1; i < n - 1; i++) out[i] = in[i - 1] + in[i] + in[i + 1];
}

/* fa[i] += 2 fb[i], i < n, vectorised with a scalar remainder: fa, fb [0, 4 n). */
NOINLINE void axpy(int n) {
  for (int i = 0; i < n; i++) fa[i] += 2 * fb[i];
}

int main(int argc, char **argv) {
  (void)argv;
  int k = argc; /* 1: sizes and contents the compiler cannot see */
  memset(recs, k, sizeof recs);
  memset(mat, k, sizeof mat);
  memset(in, k, sizeof in);
  memset(fb, k, sizeof fb);
  long s = fields(200 * k);
  double d = 0;
  for (int j = 0; j < 8; j++) d += column(j * k);
  down(3000 * k);
  stencil(1000 * k);
  axpy(4999 * k);
  return (s + d + out[5] + fa[7] + ints[3]) == 12345 ? 1 : 0;
}
