/* Loops that a footprint build (KAGE_TOOL=footprint) reports per chunk of iterations
 * instead of access by access (crates/kage-pass/src/hoist): elements with gaps between
 * them, a column walk, a downward loop, an overlapping stencil, a vectorised loop with its
 * remainder, loops longer than a chunk, a loop entered again and again, loops with accesses
 * the chunks cannot follow (through an index array, a loaded pointer, a run-time length)
 * or that not every iteration makes: reported where they are made. Each function runs
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
static long hist[64] __attribute__((aligned(4096)));
static int idx[500] __attribute__((aligned(4096)));
static int weight[500] __attribute__((aligned(4096)));
static struct rec *ptrs[300] __attribute__((aligned(4096)));
static unsigned char grid[40][256] __attribute__((aligned(4096)));
static char cleared[40] __attribute__((aligned(4096)));
static unsigned char text[700] __attribute__((aligned(4096)));
static unsigned char odd[700] __attribute__((aligned(4096)));

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

/* hist[idx[i]] += weight[i], i < n, idx[i] = 7 i mod 64 (every bucket for n >= 64): idx and
 * weight [0, 4 n), hist [0, 512). */
NOINLINE void indexed(int n) {
  PLAIN_LOOP for (int i = 0; i < n; i++) hist[idx[i]] += weight[i];
}

/* Reads ptrs[i] and ptrs[i]->c, i < n, ptrs[i] = &recs[3 i mod 150]: ptrs [0, 8 n), and the
 * c of recs 0, 3, ..., 147 (8 bytes at 24 r + 16 each) for n >= 50. */
NOINLINE long chased(int n) {
  long s = 0;
  PLAIN_LOOP for (int i = 0; i < n; i++) s += ptrs[i]->c + i;
  return s;
}

/* Clears the first len bytes of grid's rows 0 to n - 1 (256 bytes apart: a run-time length)
 * and sets cleared[i]: cleared [0, n). */
NOINLINE void rows(int n, int len) {
  PLAIN_LOOP for (int i = 0; i < n; i++) {
    memset(grid[i], 0, len);
    cleared[i] = (char)(i + len); /* not a constant: not turned into a memset */
  }
}

/* Reads text[i], i < n, and copies the odd ones (text[i] = i mod 7: i mod 7 in {1, 3, 5})
 * to odd[i]: text [0, n), odd's bytes i of those, a store that not every iteration makes. */
NOINLINE void odds(int n) {
  PLAIN_LOOP for (int i = 0; i < n; i++) {
    unsigned char c = text[i];
    if (c & 1)
      odd[i] = c;
  }
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
  for (int i = 0; i < 500; i++) {
    idx[i] = (7 * i * k) % 64;
    weight[i] = i;
  }
  indexed(500 * k);
  for (int i = 0; i < 300; i++) ptrs[i] = &recs[(3 * i * k) % 150];
  s += chased(300 * k);
  rows(40 * k, 100 * k);
  for (int i = 0; i < 700; i++) text[i] = (unsigned char)((i * k) % 7);
  odds(700 * k);
  return (s + d + out[5] + fa[7] + ints[3] + hist[3] + grid[2][5] + cleared[3] + odd[3]) == 12345 ? 1 : 0;
}
