/* Leaves that report a few ranges each (docs/abi.md, "Footprint instrumentation"), for
 * crates/kage/tests/e2e_inlined.rs: the runtime's C part counts an instance of up to 8
 * ranges itself, the tool one of more. The indexes in `at` put the ranges close together:
 * equal, overlapping, touching, out of order, a byte apart, across a line, far apart.
 * `two` (2 ranges), `gather(n)` (the index run and n elements: `gather3` 4 ranges,
 * `gather7` 8, `gather8` 9), `maybe` (nothing, or one range), `copy` (a memcpy across its
 * source), `nest` (two leaves inside a leaf with a range of its own: 5 to 7 in all), `walk` (a loop
 * of 0 to 11 iterations of two ranges each, inside an inlined call), `search` (leaves and
 * a loop inside a leaf, more ranges than the runtime's buffer holds). Each of `run`'s leaves
 * runs once per iteration; `main` runs it 4000 times. */
#include "../common.h"
#include <stdio.h>
#include <string.h>

int a[4096];
unsigned char bytes[4096];
int at[4096 + 16];
volatile long sink;

static int two(int x, int y) { return a[x] + a[y]; }

#define GATHER(n)                                                                          \
  static int gather##n(const int *ix) {                                                    \
    int s = 0;                                                                             \
    for (int k = 0; k < n; k++)                                                            \
      s += bytes[ix[k]];                                                                   \
    return s;                                                                              \
  }
GATHER(3)
GATHER(7)
GATHER(8)

static int maybe(const int *p, int x) {
  if (!p)
    return 0;
  return p[x] + p[x + 1];
}

static void copy(int to, int from) { memcpy(bytes + to, bytes + from, 9); }

static int nest(int i) {
  int s = a[(i * 5) & 4095];
  s += two(at[i], at[i + 1]);
  s += gather3(&at[i + 2]);
  return s;
}

static int walk(int i) {
  int s = 0, j = i;
  PLAIN_LOOP
  for (int k = 0; k < (i % 12); k++) {
    j = at[j];
    s += bytes[j];
  }
  return s + 1;
}

static int probe(int j) { return a[j] + bytes[(j * 3) & 4095]; }

/* Leaves of its own, then a loop of 0 to 23 iterations of three ranges each: the buffer
 * fills inside the loop while `search`, the loop and a `probe` are open. */
static int search(int i) {
  int s = two(at[i + 12], at[i + 13]) + gather3(&at[i + 14]);
  s += a[at[i + 3] ^ 1];
  int j = i;
  PLAIN_LOOP
  for (int k = 0; k < (i % 24); k++) {
    j = at[j];
    s += probe(j);
  }
  return s;
}

NOINLINE long run(int i) {
  long s = two(at[i], at[i + 1]);
  s += gather3(&at[i + 2]);
  s += gather7(&at[i + 3]);
  s += gather8(&at[i + 4]);
  s += maybe((at[i + 5] & 1) ? a : 0, at[i + 5] & 4093);
  copy(at[i + 6] & 4031, at[i + 7] & 4031);
  s += nest(i + 8);
  s += walk(i);
  s += search(i);
  return s;
}

int main(void) {
  /* Indexes near one another (-2 to 3 from a point that moves every 8), every eighth half
   * the array away. */
  unsigned state = 12345;
  for (int k = 0; k < 4096 + 16; k++) {
    state = state * 1103515245u + 12345u;
    int step = (int)((state >> 16) % 6) - 2;
    at[k] = ((k >> 3) * 61 + step + ((k & 7) == 7 ? 2048 : 0) + 4096) & 4095;
  }
  for (int k = 0; k < 4096; k++)
    a[k] = k, bytes[k] = (unsigned char)k;
  long s = 0;
  for (int i = 0; i < 4000; i++)
    s += run(i);
  sink = s;
  printf("%ld\n", s);
  return 0;
}
