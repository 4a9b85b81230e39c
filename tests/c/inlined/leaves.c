/* Inlined calls with no region inside ("leaves"), which footprint builds measure without
 * region events, for crates/kage/tests/e2e_inlined.rs: the footprint build must give every
 * region the footprints a build with the region hooks and a call per access gives. Every
 * access is to a global, so both builds touch the same bytes. The shapes:
 * - `api`: a leaf at the function's entry (`slot`), then one after it (`twice`);
 * - `maybe_note`: a leaf that sometimes calls (`note`, which recurses back into `api`);
 * - `scatter`: a leaf that reports more ranges than the runtime's buffer holds (40
 *   variables apart from one another);
 * - `pick`: a function whose return sits inside a leaf (`choose`);
 * - `clamp` twice in a row, each a leaf of its own;
 * - `hashed`: a chain of inlined calls around a leaf (`hashed` calls `mix`, which calls
 *   `peek`; only `peek` accesses memory), which footprint builds count as one leaf;
 *   `maybe_mix` calls `mix` on some paths only. */
#include <stdio.h>

volatile int g[64];
volatile long h[64];
volatile int depth;

#define V(n) volatile int v##n __attribute__((aligned(64)));
V(0) V(1) V(2) V(3) V(4) V(5) V(6) V(7) V(8) V(9)
V(10) V(11) V(12) V(13) V(14) V(15) V(16) V(17) V(18) V(19)
V(20) V(21) V(22) V(23) V(24) V(25) V(26) V(27) V(28) V(29)
V(30) V(31) V(32) V(33) V(34) V(35) V(36) V(37) V(38) V(39)

static int slot(int i) {
  int v = g[i & 63];
  if (v > 3)
    h[i & 63] += v;
  return v;
}

static int twice(int i) {
  int v = g[(i + 1) & 63];
  if (i & 1)
    v += g[(i + 2) & 63];
  return v;
}

int api(int i);

__attribute__((noinline)) void note(int i) {
  h[(i * 7) & 63] += 1;
  if (depth < 3) {
    depth++;
    api(i + 1);
    depth--;
  }
}

static void maybe_note(int i) {
  g[i & 63] += 1;
  if ((i & 15) == 0)
    note(i);
  h[(i + 3) & 63] += 2;
}

static void scatter(int i) {
  if (i & 1) {
    v0 = i; v1 = i; v2 = i; v3 = i; v4 = i; v5 = i; v6 = i; v7 = i; v8 = i; v9 = i;
    v10 = i; v11 = i; v12 = i; v13 = i; v14 = i; v15 = i; v16 = i; v17 = i; v18 = i; v19 = i;
    v20 = i; v21 = i; v22 = i; v23 = i; v24 = i; v25 = i; v26 = i; v27 = i; v28 = i; v29 = i;
    v30 = i; v31 = i; v32 = i; v33 = i; v34 = i; v35 = i; v36 = i; v37 = i; v38 = i; v39 = i;
  }
}

__attribute__((noinline)) int api(int i) {
  int s = slot(i);
  s += twice(i);
  maybe_note(i);
  scatter(i);
  return s;
}

static int choose(int i) {
  if (i & 2)
    return g[(i + 5) & 63];
  return (int)h[(i + 9) & 63];
}

__attribute__((noinline)) int pick(int i) {
  g[(i + 11) & 63] = i;
  return choose(i);
}

static int clamp(int i) {
  int v = g[i & 63];
  if (v > 100)
    v = 100;
  return v;
}

static int peek(int i) { return g[i & 63]; }

static int mix(int i) { return peek(i * 3 + 1) * 5 + 1; }

static int hashed(int i) { return (mix(i) ^ 0x5bd1) >> 1; }

static int maybe_mix(int i) {
  if (i & 4)
    return mix(i + 2);
  return 7;
}

int main(int argc, char **argv) {
  (void)argv;
  long total = 0;
  for (int i = 0; i < 3000; i++) {
    total += api(i * argc);
    total += pick(i);
    total += clamp(i) + clamp(i + 17);
    total += hashed(i) + maybe_mix(i);
  }
  printf("%ld\n", total);
  return 0;
}
