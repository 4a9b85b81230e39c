/* Accesses whose exact counts are known by construction.
 *
 * Every function is noinline so it stays a region of its own at -O2; the arrays the
 * kernels touch are volatile so the optimiser keeps every access; the loops forbid
 * unrolling and vectorisation so each iteration is one loop-body instance.
 * The expected numbers live in crates/kage/tests/e2e_count.rs, derived there. */
#include <string.h>
#include "common.h"




volatile int g[1000];
volatile long sink;
char src[256], dst[256];
long counter;
int cas_target;
int plain[1024];

NOINLINE void fill(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    g[i] = i;
}

NOINLINE long sum(int n) {
  long s = 0;
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    s += g[i];
  return s;
}

NOINLINE void nested(int rows, int cols) {
  PLAIN_LOOP
  for (int r = 0; r < rows; r++) {
    PLAIN_LOOP
    for (int c = 0; c < cols; c++)
      g[r * cols + c] += 1;
  }
}

NOINLINE void copy(int n) {
  memcpy(dst, src, n);
  memset(src, 7, n);
}

NOINLINE void atomics(void) {
  __atomic_fetch_add(&counter, 5, __ATOMIC_SEQ_CST);
  int expected = 0;
  __atomic_compare_exchange_n(&cas_target, &expected, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  expected = 0; /* cas_target is 1 now: this exchange fails and stores nothing */
  __atomic_compare_exchange_n(&cas_target, &expected, 2, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Free for the optimiser to vectorise and unroll: only the bytes read are fixed. */
NOINLINE long vector_sum(void) {
  long s = 0;
  for (int i = 0; i < 1024; i++)
    s += plain[i];
  return s;
}

int main(void) {
  fill(100);
  sink = sum(100);
  nested(3, 4);
  copy(100);
  atomics();
  sink = vector_sum();
  return 0;
}
