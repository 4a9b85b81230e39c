/* Inlined leaf helpers run at every iteration of loops whose bodies are counted in records
 * (a rare call inside them): their reports wait across iterations, until a call, the
 * loop's exit, or a region counted in records opening or closing. The shapes: helpers
 * before and after a rare call; helpers in a helper that calls rarely (a deferred region,
 * left at every iteration); a loop left by a goto and by a return; an inner loop counted in
 * records between helpers; inline assembly that calls nothing (a cmov, as zstd's match
 * finders have) in the body; counting switched off and on at an iteration; nested loops.
 * The test compares the inline count build with the per-access build region by region. */
#include "common.h"
#include "../../crates/kage-rt/include/kage.h"
#include <stdio.h>

#define INLINE static inline __attribute__((always_inline))

volatile int mem[256];
static unsigned state = 1;

INLINE unsigned rnd(void) {
  state = state * 1103515245u + 12345u;
  return (state >> 16) & 0x7fff;
}

NOINLINE void sink(int x) { mem[x & 255] = x & 0xffff; }

INLINE int load2(int i) { return mem[i & 255] + mem[(i + 3) & 255]; }

INLINE void store1(int i, int v) { mem[(i + 1) & 255] = v & 0xffff; }

/* b when low > idx, else a; branchless, as zstd's ZSTD_selectAddr. */
INLINE const volatile int *select_addr(unsigned idx, unsigned low, const volatile int *a,
                                       const volatile int *b) {
#if defined(__x86_64__)
  __asm__("cmp %1, %2\n\tcmova %3, %0" : "+r"(a) : "r"(idx), "r"(low), "r"(b));
  return a;
#else
  return low > idx ? b : a;
#endif
}

/* Calls only on rare paths: a deferred region, with leaf helpers in it. */
INLINE int exec(int i) {
  int x = load2(i);
  if ((rnd() & 31) == 0) sink(x);
  store1(i, x);
  return x;
}

NOINLINE int rare_call(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc += load2(i);
    if ((rnd() & 63) == 0) sink(acc);
    store1(i, acc);
    acc += *select_addr(rnd(), 16000, &mem[i & 255], &mem[(i + 7) & 255]);
  }
  return acc;
}

NOINLINE int deferred_in_loop(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc += load2(i + 1);
    acc += exec(i);
    /* After the deferred helper is left, before the loop's exit: its trees must have
     * reported to its locals when it was left. */
    if (acc & 1) store1(i + 2, acc);
  }
  return acc;
}

NOINLINE int left_early(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc += load2(i);
    if ((rnd() & 127) == 0) sink(i);
    if ((rnd() & 2047) == 3) goto out;
    if ((rnd() & 2047) == 5) return acc + load2(i + 2);
  }
out:
  store1(n, acc);
  return acc;
}

NOINLINE int inner_loop_in_records(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc += load2(i);
    PLAIN_LOOP
    for (int j = 0; j < (i & 3); j++) {
      acc += mem[j];
      if ((rnd() & 255) == 0) sink(j);
    }
    store1(i, acc);
    if ((rnd() & 63) == 0) sink(i);
  }
  return acc;
}

NOINLINE int switching(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc += load2(i);
    if (i == n / 3) kage_set_enabled(0);
    if (i == 2 * n / 3) kage_set_enabled(1);
    store1(i, acc);
  }
  return acc;
}

NOINLINE int nested(int n) {
  int acc = 0;
  for (int k = 0; k < n; k++) {
    PLAIN_LOOP
    for (int i = 0; i < 20; i++) {
      acc += load2(i + k);
      if ((rnd() & 63) == 0) sink(acc);
    }
    store1(k, acc);
  }
  return acc;
}

int main(void) {
  for (int i = 0; i < 256; i++) mem[i] = i * 7;
  int acc = rare_call(5000);
  acc += deferred_in_loop(5000);
  for (int k = 0; k < 20; k++) acc += left_early(1000);
  acc += inner_loop_in_records(3000);
  acc += switching(3000);
  acc += nested(300);
  printf("%d\n", acc);
  return 0;
}
