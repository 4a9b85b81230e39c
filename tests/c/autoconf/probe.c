#include <stdio.h>
#include "../common.h"

volatile int counted[8];

NOINLINE void count_up(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    counted[i] = i;
}

int main(void) {
  count_up(8);
#ifdef HAVE_MEMSET
  puts("have memset");
#endif
  return 0;
}
