/* longjmp out of a loop two frames down, then more work in main. */
#include <setjmp.h>
#include "common.h"

volatile int g[1000];
jmp_buf env;

NOINLINE void jumper(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++) {
    g[i] = i;
    if (i == 2)
      longjmp(env, 1);
  }
}

NOINLINE void after(void) { g[500] = 1; }

int main(void) {
  if (setjmp(env) == 0)
    jumper(10);
  g[600] = 1;
  after();
  PLAIN_LOOP
  for (int i = 0; i < 3; i++)
    g[700 + i] = 1;
  return 0;
}
