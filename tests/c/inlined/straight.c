/* Small functions inlined one after another in straight code, and the copies of a call in
 * a loop the optimiser unrolls whole (one with a branch in it): at -O2 and -O3 their code
 * shares blocks with its caller's and with each other's, or runs from one copy's blocks
 * into the next's. Per source function: get, 4 calls (two in pair), 8 bytes read each;
 * pair, 1 call, 16 bytes read; bump, 4 calls, 8 bytes read and written plus note's;
 * guarded, 3 calls, two of which call note; note (never inlined), 6 calls, 8 bytes read and
 * written each. */
#include "../common.h"
#include <stdio.h>

static long table[64];

NOINLINE static void note(long *slot) { *slot += 1; }

static long get(const long *p, int i) { return p[i]; }

static long pair(const long *p, int i) { return get(p, i) + get(p, i + 1); }

static void bump(long *p, int i) {
  p[i] += 1;
  note(&p[i + 1]);
}

static long guarded(long *p, int i) {
  if (p[i] > 20)
    note(&p[i]);
  return p[i];
}

int main(int argc, char **argv) {
  (void)argv;
  for (int i = 0; i < 64; i++)
    table[i] = i * argc;
  long s = get(table, 1) + pair(table, 5) * get(table, 9);
  for (int r = 0; r < 4; r++)
    bump(table, 10 + 2 * r);
  for (int r = 0; r < 3; r++)
    s += guarded(table, 20 + r);
  printf("%ld\n", s + table[11]);
  return 0;
}
