/* A function holding a loop the optimiser unrolls whole (three iterations: straight code at
 * -O2 and -O3, each iteration a load and a store at the same source position), inlined into
 * a loop of its caller: each call is one instance of it, as at -O0, not one per unrolled
 * iteration. With no argument: step 1000 calls, note (never inlined) 1000. */
#include "../common.h"
#include <stdio.h>
#include <stdlib.h>

struct state {
  long prev[3];
  long total;
};

static struct state st;
static long history[3] = {1, 2, 3};
static long seen;

NOINLINE static void note(const struct state *p) {
  seen += (p->total + p->prev[0] + p->prev[1] + p->prev[2]) & 1;
  history[p->total & 1] += 1;
}

static long step(const long *src, long v) {
  for (int i = 0; i < 3; i++)
    st.prev[i] = src[i] + v;
  st.total += st.prev[0] * st.prev[2];
  return st.total;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  long s = 0;
  for (int k = 0; k < n; k++) {
    s += step(history, k);
    note(&st);
  }
  printf("%ld %ld\n", s, seen);
  return 0;
}
