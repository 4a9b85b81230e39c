/* exit(3) from inside a loop two calls below main. */
#include <stdlib.h>
#include "common.h"

volatile int g[1000];

NOINLINE void deep(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++) {
    g[i] = i;
    if (i == 4)
      exit(3);
  }
}

NOINLINE void middle(int n) {
  g[999] = 1;
  deep(n);
}

int main(void) {
  g[998] = 1;
  middle(10);
  return 0;
}
