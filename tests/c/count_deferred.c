/* Inlined helpers that call out only on some paths (their regions are deferred until they
 * call), in the shapes an optimised interpreter or compressor has them, run on
 * pseudo-random paths: nested helpers each calling rarely, a loop with a rare call inside
 * a helper, helpers left by early returns and a function that returns from inside one,
 * recursion through a helper, a dispatch loop over them left by a goto, and counting
 * switched off and on inside a helper. The test compares the inline count build with the
 * per-access build region by region. */
#include "common.h"
#include "../../crates/kage-rt/include/kage.h"
#include <stdio.h>

#define INLINE static inline __attribute__((always_inline))

volatile int mem[256];
static unsigned state = 1;

/* A load and a store of the generator's state. */
INLINE unsigned rnd(void) {
  state = state * 1103515245u + 12345u;
  return (state >> 16) & 0x7fff;
}

/* Values stay in 0..0xffff, so that only the last run of interp sees negative ones. */
NOINLINE void sink(int x) { mem[x & 255] = x & 0xffff; }

INLINE int inner(int i) {
  int x = mem[i & 255] + mem[(i + 5) & 255] + mem[(i + 9) & 255];
  if ((rnd() & 15) == 0) sink(x);
  return x;
}

INLINE int middle(int i) {
  int s = mem[(i + 1) & 255];
  s += inner(i);
  if ((rnd() & 63) == 0) sink(s);
  return s;
}

INLINE int scan(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    s += mem[i & 255];
    if ((rnd() & 127) == 0) sink(i);
  }
  return s;
}

INLINE int early(int i) {
  if (mem[i & 255] & 1) return 1;
  if ((rnd() & 7) == 0) {
    sink(i);
    return 2;
  }
  mem[(i + 3) & 255] = i;
  return 3;
}

NOINLINE int ends_in_inlined(int i) { return early(i) + middle(i); }

NOINLINE int rec(int n);

INLINE int rec_step(int n) {
  int x = mem[n & 255];
  if (n <= 0) return x;
  if (rnd() & 1) return x + rec(n - 1);
  return x;
}

NOINLINE int rec(int n) {
  int r = rec_step(n);
  mem[(n + 7) & 255] = r & 0xffff;
  return r;
}

NOINLINE int interp(int steps) {
  int acc = 0;
  for (int k = 0; k < steps; k++) {
    switch (rnd() % 6) {
    case 0: acc += middle(k); break;
    case 1: acc += scan(rnd() % 9); break;
    case 2: acc += early(k); break;
    case 3: acc += rec(rnd() % 5); break;
    case 4:
      if (inner(k) < 0) goto out;
      break;
    default: mem[k & 255] = acc & 0xffff; break;
    }
  }
out:
  return acc;
}

INLINE void switching(int i) {
  mem[i & 255] = 1;
  if (i == 500) kage_set_enabled(0);
  mem[(i + 1) & 255] = 2;
  if (i == 700) kage_set_enabled(1);
}

int main(void) {
  for (int i = 0; i < 256; i++) mem[i] = i * 7;
  int acc = interp(20000);
  for (int i = 0; i < 1000; i++) acc += ends_in_inlined(i);
  for (int i = 0; i < 1000; i++) switching(i);
  for (int i = 0; i < 256; i++) mem[i] = -1 - i;
  acc += interp(100);
  printf("%d\n", acc);
  return 0;
}
