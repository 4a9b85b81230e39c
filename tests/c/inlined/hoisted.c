/* A counted loop with affine accesses, the kind the footprint and working-set builds hoist
 * (one runtime call per chunk of iterations), whose body is an inlined call: its region
 * must still count one instance per call, with its own bytes. Globals only, so that a
 * build with a call per access measures the same bytes.
 * Usage: hoisted [N] (default 1000). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

static long src[4096], dst[4096];

static inline void move_one(long *to, const long *from) { *to = *from * 3 + 1; }

__attribute__((noinline)) static void relocate(long *to, const long *from, int n) {
  /* Neither vectorised nor unrolled: calls merged into one iteration are one instance. */
#pragma clang loop vectorize(disable) interleave(disable) unroll(disable)
  for (int i = 0; i < n; i++) move_one(to + i, from + i);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n > 4096) n = 4096;
  for (int i = 0; i < n; i++) src[i] = i;
  for (int round = 0; round < 3; round++) relocate(dst, src, n - round * 100);
  long sum = 0;
  for (int i = 0; i < n; i++) sum += dst[i];
  printf("%ld\n", sum);
  return 0;
}
