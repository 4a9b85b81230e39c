/* What counting per segment and per loop could get wrong, each with counts known by
 * construction (4-byte volatile accesses; every function below is its own region):
 * - switched: counting switched off and on in the middle of a block, and a loop without
 *   calls (whose counts are kept in registers) run while it is off;
 * - leaves_by_exit: a block left by exit() after two stores (run last, in a child, see main);
 * - jumps: a block left by longjmp after one store;
 * - split: a loop the compiler vectorises into a vector body and a remainder;
 * - spin_then_call: a loop without calls, then one with a call in its body;
 * - cas_loop: a loop without calls whose body's compare-exchange is counted by its hook;
 * - calls_pick: a helper with a branch and no loop, inlined into a loop (at -O2 its code is
 *   a region kept in registers, reported whole each time it ran);
 * - probes: a helper with a loop of 1 to 4 probes, inlined into a loop (at -O2 the outer
 *   loop, its body, the inlined call and its loop are one tree kept in registers);
 * - calls_leaves: a loop calling a function without calls that has a loop (at -O2 the
 *   leaf function, with its loop, is reported whole at each return);
 * - calls_rarely, descend, sums: functions that call only on some paths (their entries
 *   are deferred until they call): one that calls every tenth time, a recursion whose
 *   innermost call does not call (its inclusive counts are its outermost caller's), and
 *   one whose loop without calls runs before a call made on some paths only;
 * - calls_inl_rarely, descend_inl: the same inlined (their regions are deferred until
 *   they call): a helper that calls every tenth time, inlined into a loop, and a recursion
 *   through an inlined helper whose innermost instance does not call. */
#include "common.h"
#include "../../crates/kage-rt/include/kage.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

volatile int g[64];
int data[1003];
static jmp_buf env;

NOINLINE void switched(void) {
  g[0] = 1;                    /* counted */
  kage_set_enabled(0);
  g[1] = 2;                    /* not counted */
  PLAIN_LOOP
  for (int i = 0; i < 50; i++) /* not counted: 50 stores */
    g[2 + (i & 7)] = i;
  kage_set_enabled(1);
  g[3] = g[0];                 /* counted: a load and a store */
}

NOINLINE void jumper(void) {
  g[10] = 1;                   /* counted */
  longjmp(env, 1);
}

NOINLINE void jumps(void) {
  if (setjmp(env) == 0) jumper();
  g[11] = 2;                   /* counted, after the jump */
}

NOINLINE int split(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) s += data[i]; /* vectorised: n * 4 bytes read */
  return s;
}

NOINLINE void callee(int i) { g[20] = i; }

NOINLINE void spin_then_call(int n) {
  for (int i = 0; i < n; i++) g[21] = g[22]; /* n loads, n stores, in registers */
  for (int i = 0; i < n; i++) callee(i);     /* n stores, in callee */
}

int cas_word;

NOINLINE void cas_loop(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++) { /* each succeeds: a load and a store of 4 bytes */
    int expected = i;
    __atomic_compare_exchange_n(&cas_word, &expected, i + 1, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
  }
}

volatile int v[64];

/* Two loads of 4 bytes: the branch stays (volatile loads cannot be merged into a select). */
static int pick(int i) {
  if (v[i & 31] & 1)
    return v[(i & 31) + 1];
  return v[(i & 31) + 2] * 3;
}

NOINLINE void calls_pick(int n) {
  int s = 0;
  PLAIN_LOOP                   /* unrolled, two copies of pick's code could merge into one run */
  for (int i = 0; i < n; i++) s += pick(i);
  g[40] = s;                   /* one store */
}

/* (key & 3) + 1 loads of 4 bytes. */
static int probe(int key) {
  int s = 0;
  PLAIN_LOOP
  for (int i = 0; i <= (key & 3); i++) s += v[(key + i) & 63];
  return s;
}

NOINLINE void probes(int n) {
  int s = 0;
  PLAIN_LOOP
  for (int k = 0; k < n; k++) s += probe(k);
  g[41] = s;                   /* one store */
}

/* A leaf: (k & 3) + 1 loads of 4 bytes, then a store. */
NOINLINE void leaf_sum(int k) {
  int s = 0;
  PLAIN_LOOP
  for (int i = 0; i <= (k & 3); i++) s += v[(k + i) & 63];
  g[42] = s;
}

NOINLINE void calls_leaves(int n) {
  for (int k = 0; k < n; k++) leaf_sum(k);
}

volatile int h[8];

NOINLINE void rare_callee(int i) { g[53] = i; }

/* One load; every tenth call a store and a call (one store in rare_callee). */
NOINLINE int rarely_calls(int k) {
  int x = h[k & 7];
  if (k % 10 == 0) {
    g[50] = x;
    rare_callee(k);
  }
  return x;
}

NOINLINE void calls_rarely(int n) {
  int s = 0;
  for (int k = 0; k < n; k++) s += rarely_calls(k);
  g[51] = s;                   /* one store */
}

/* One load; but at 0, a call and a store after it (no tail call). */
NOINLINE int descend(int n) {
  int here = h[n & 7];
  if (n == 0) return here;
  int below = descend(n - 1);
  g[52] = below;
  return here + below;
}

/* n loads in a loop without calls; a call when their sum (h[i] = i) is odd. */
NOINLINE int sum_then_maybe_call(int n) {
  int s = 0;
  PLAIN_LOOP
  for (int i = 0; i < n; i++) s += h[i & 7];
  if (s & 1) rare_callee(s);
  return s;
}

NOINLINE void sums(void) {
  int s = 0;
  for (int n = 1; n <= 4; n++) s += sum_then_maybe_call(n);
  g[54] = s;                   /* one store */
}

NOINLINE void rare_callee2(int i) { g[58] = i; }

/* Inlined: one load; every tenth call a store and a call (one store in rare_callee2). */
static inline __attribute__((always_inline)) int inl_rarely(int k) {
  int x = h[k & 7];
  if (k % 10 == 0) {
    g[55] = x;
    rare_callee2(k);
  }
  return x;
}

NOINLINE void calls_inl_rarely(int n) {
  int s = 0;
  for (int k = 0; k < n; k++) s += inl_rarely(k);
  g[56] = s;                   /* one store */
}

NOINLINE int descend_inl(int n);

/* Inlined: one load; but at 0, a call and a store after it. */
static inline __attribute__((always_inline)) int step(int n) {
  int here = h[n & 7];
  if (n == 0) return here;
  int below = descend_inl(n - 1);
  g[57] = below;
  return here + below;
}

/* The inlined step, then a load of its own. */
NOINLINE int descend_inl(int n) {
  int r = step(n);
  return r + h[1];
}

NOINLINE void leaves_by_exit(void) {
  g[30] = 1;
  g[31] = 2;
  exit(0);
}

int main(int argc, char **argv) {
  for (int i = 0; i < 1003; i++) data[i] = i;
  switched();
  jumps();
  printf("%d\n", split(argc > 5 ? 7 : 1003));
  spin_then_call(100);
  cas_loop(10);
  calls_pick(100);
  probes(100);
  calls_leaves(100);
  for (int i = 0; i < 8; i++) h[i] = i;
  calls_rarely(100);
  printf("%d\n", descend(3));
  sums();
  calls_inl_rarely(100);
  printf("%d\n", descend_inl(3));
  leaves_by_exit();
}
