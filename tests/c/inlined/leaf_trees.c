/* Leaf inlined calls inside leaf inlined calls ("leaf trees"), for
 * crates/kage/tests/e2e_inlined.rs: the footprint build keeps the open ones on a stack
 * without region events, and must give every region the footprints a build with the region
 * hooks and a call per access gives. Every access is to a global. The shapes:
 * - `enc`: accesses before, between and after its two calls of `add`, whose code begins
 *   with its own call of `low` (the two begin at the same block); `enc`'s code begins at
 *   the loop's header;
 * - `d9`: ten leaves, each inside the next, deeper than the runtime keeps open at once;
 * - `outer_spread`: a leaf around one (`spread`) that reports more ranges than the
 *   runtime's buffer holds;
 * - `wrap_side`: a leaf around one (`maybe_side`) that sometimes calls a function;
 * - `outer_few`: a leaf around one (`inner_few`), six ranges in all, run when the buffer
 *   already holds the 28 that `main` reported just after `d9` (whose end empties it):
 *   the leaves' ranges move down in it. */
#include <stdio.h>

volatile int g[64];
volatile long h[64];

#define V(n) volatile int w##n __attribute__((aligned(64)));
V(0) V(1) V(2) V(3) V(4) V(5) V(6) V(7) V(8) V(9)
V(10) V(11) V(12) V(13) V(14) V(15) V(16) V(17) V(18) V(19)
V(20) V(21) V(22) V(23) V(24) V(25) V(26) V(27) V(28) V(29)
V(30) V(31) V(32) V(33) V(34) V(35) V(36) V(37) V(38) V(39)

static int low(int n) { return g[n & 63]; }

static void add(int i, int n) { h[i & 63] += low(n); }

static void enc(int i) {
  int s = g[(i * 3) & 63];
  add(i, s);
  if (s > 2)
    h[(i + 1) & 63] = s;
  add(i + 5, i);
}

static int d0(int i) { return g[i & 63]; }
static int d1(int i) { return g[(i + 1) & 63] + d0(i * 3); }
static int d2(int i) { return g[(i + 2) & 63] + d1(i * 3); }
static int d3(int i) { return g[(i + 3) & 63] + d2(i * 3); }
static int d4(int i) { return g[(i + 4) & 63] + d3(i * 3); }
static int d5(int i) { return g[(i + 5) & 63] + d4(i * 3); }
static int d6(int i) { return g[(i + 6) & 63] + d5(i * 3); }
static int d7(int i) { return g[(i + 7) & 63] + d6(i * 3); }
static int d8(int i) { return g[(i + 8) & 63] + d7(i * 3); }
static int d9(int i) { return g[(i + 9) & 63] + d8(i * 3); }

static void spread(int i) {
  if (i & 1) {
    w0 = i; w1 = i; w2 = i; w3 = i; w4 = i; w5 = i; w6 = i; w7 = i; w8 = i; w9 = i;
    w10 = i; w11 = i; w12 = i; w13 = i; w14 = i; w15 = i; w16 = i; w17 = i; w18 = i; w19 = i;
    w20 = i; w21 = i; w22 = i; w23 = i; w24 = i; w25 = i; w26 = i; w27 = i; w28 = i; w29 = i;
    w30 = i; w31 = i; w32 = i; w33 = i; w34 = i; w35 = i; w36 = i; w37 = i; w38 = i; w39 = i;
  }
}

static void outer_spread(int i) {
  g[(i + 4) & 63] += 1;
  spread(i);
  h[(i + 6) & 63] += 2;
}

__attribute__((noinline)) void side(int i) { h[(i * 5) & 63] += 1; }

static void maybe_side(int i) {
  g[(i + 2) & 63] += 1;
  if ((i & 7) == 0)
    side(i);
}

static void wrap_side(int i) {
  h[(i + 8) & 63] += 1;
  maybe_side(i);
  g[(i + 9) & 63] += 1;
}

static void inner_few(int i) {
  w30 = i;
  w31 = i;
  w32 = i;
}

static void outer_few(int i) {
  w33 = i;
  inner_few(i);
  w34 = i;
  w35 = i;
}

int main(int argc, char **argv) {
  (void)argv;
  long total = 0;
  for (int i = 0; i < 2000; i++) {
    enc(i * argc);
    total += d9(i);
    w0 = i; w1 = i; w2 = i; w3 = i; w4 = i; w5 = i; w6 = i; w7 = i; w8 = i; w9 = i;
    w10 = i; w11 = i; w12 = i; w13 = i; w14 = i; w15 = i; w16 = i; w17 = i; w18 = i; w19 = i;
    w20 = i; w21 = i; w22 = i; w23 = i; w24 = i; w25 = i; w26 = i; w27 = i;
    outer_few(i);
    outer_spread(i);
    wrap_side(i);
  }
  printf("%ld\n", total + h[3]);
  return 0;
}
