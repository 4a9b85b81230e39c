/* Dies of SIGSEGV in the sixth iteration of a loop that count builds keep in locals
 * (nothing in it reaches the runtime): the report still names the loop. */
#include "common.h"

volatile int g[10];
int *volatile nowhere = 0;

NOINLINE void touch(int i) { g[i] = i; }

NOINLINE void walk(int *p) {
  touch(1); /* a call: walk is not reported whole, its loop is */
  PLAIN_LOOP
  for (int i = 0; i < 8; i++) {
    if (i == 5)
      p = nowhere;
    p[i] = i;
  }
}

int main(void) {
  static int a[8];
  walk(a);
  return 0;
}
