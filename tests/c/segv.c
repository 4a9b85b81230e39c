/* Stores 5 ints, then dies of SIGSEGV: the report is best effort. */
#include "common.h"

volatile int g[10];
volatile int *volatile nowhere = 0;

NOINLINE void crash(void) { *nowhere = 1; }

int main(void) {
  PLAIN_LOOP
  for (int i = 0; i < 5; i++)
    g[i] = i;
  crash();
  return 0;
}
