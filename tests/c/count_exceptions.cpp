// Inlined calls whose records open only when they call (deferred regions), in functions
// with landing pads (a destructor to run, a catch), where control arrives from an
// exception: thrown by a rare call inside a deferred helper, caught in the loop around
// it, in a caller, or after a cleanup; and a function that defers its entry and catches.
// The test compares the inline count build with the per-access build region by region.
#include "common.h"
#include <cstdio>

volatile unsigned mem[256];
static unsigned state = 7;

static inline unsigned rnd() {
  state = state * 1103515245u + 12345u;
  return (state >> 16) & 0x7fff;
}

struct Guard {
  int slot;
  explicit Guard(int s) : slot(s) { mem[slot & 255] += 1; }
  ~Guard() { mem[(slot + 1) & 255] += 2; }
};

NOINLINE void rare(int i, bool may_throw) {
  mem[i & 255] = (unsigned)i;
  if (may_throw && i % 3 == 0)
    throw i;
}

// Calls only now and then: a deferred region where it is inlined.
static inline int step(int i, bool may_throw = true) {
  unsigned v = mem[i & 255] + mem[(i + 7) & 255];
  if ((rnd() & 15) == 0)
    rare(i, may_throw);
  mem[(i + 3) & 255] = v;
  return (int)(v & 0xffff);
}

static inline int guarded(int i) {
  Guard g(i);
  return step(i) + step(i + 1);
}

NOINLINE int caught_in_loop(int n) {
  unsigned total = 0;
  for (int i = 0; i < n; i++) {
    try {
      total += (unsigned)guarded(i);
    } catch (int e) {
      total += (unsigned)e & 7;
      mem[e & 255] += 1u;
    }
    total += (unsigned)step(i * 5, false);
  }
  return (int)(total & 0xffffff);
}

NOINLINE int propagates(int n) {
  unsigned total = 0;
  for (int i = 0; i < n; i++) {
    Guard g(i * 3);
    total += (unsigned)(step(i) + guarded(i + 2));
  }
  return (int)(total & 0xffffff);
}

NOINLINE int caught_above(int rounds) {
  unsigned total = 0;
  for (int r = 0; r < rounds; r++) {
    try {
      total += (unsigned)propagates(20);
    } catch (int e) {
      total -= (unsigned)e;
    }
  }
  return (int)(total & 0xffffff);
}

// Returns without calling on most calls (its entry defers), and catches.
NOINLINE int quiet(int i) {
  unsigned v = mem[i & 255];
  if ((i & 31) == 0) {
    try {
      rare(i, true);
    } catch (int e) {
      v += (unsigned)e;
    }
  }
  return (int)((v + 1) & 0xffff);
}

int main() {
  unsigned total = (unsigned)caught_in_loop(3000) + (unsigned)caught_above(200);
  for (int i = 0; i < 2000; i++)
    total += (unsigned)quiet(i);
  std::printf("%u\n", total);
  return 0;
}
