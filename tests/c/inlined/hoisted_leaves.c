/* Hoisted loops (counted, with affine accesses: one report per chunk of iterations) as
 * leaves (docs/abi.md, "Footprint instrumentation"), for crates/kage/tests/e2e_inlined.rs:
 * entered and left by leaf hooks, their chunks' ranges their instances'. `copy`, an inlined
 * call whose code is a hoisted loop, twice in `exec` (zstd's `ZSTD_wildcopy` in
 * `ZSTD_execSequence`); `sum2`, a hoisted loop of up to 15 chunks of two ranges each (more
 * than the runtime's buffer holds, with the function's own); `sum3`, elements apart,
 * reported element by element. Globals only, so that a build with a call per access
 * measures the same bytes. */
#include "../common.h"
#include <stdio.h>

long a[1 << 16], b[1 << 16];
int idx[4096];

static void copy(long *to, const long *from, int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    to[i] = from[i];
}

static long exec(int k, int n) {
  long s = a[idx[k]];
  copy(b + ((k * 37) & 32767), a + idx[k], n);
  copy(a + 40000 + (k & 1023), b + (k & 4095), n / 2);
  return s;
}

NOINLINE long run(int k) { return exec(k, k % 50); }

NOINLINE long sum2(const long *p, const long *q, int n) {
  long s = 0;
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    s += p[i] + q[i];
  return s;
}

NOINLINE long sum3(const long *p, int n) {
  long s = 0;
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    s += p[3 * i];
  return s;
}

int main(void) {
  for (int k = 0; k < 4096; k++)
    idx[k] = (int)(((unsigned)k * 2654435761u) >> 17);
  for (int k = 0; k < (1 << 16); k++)
    a[k] = k, b[k] = 2 * k;
  long s = 0;
  for (int k = 0; k < 3000; k++)
    s += run(k);
  for (int k = 0; k < 200; k++)
    s += sum2(a + k, b + 2 * k, k * 300);
  for (int k = 0; k < 200; k++)
    s += sum3(b + k, k * 50);
  printf("%ld\n", s);
  return 0;
}
