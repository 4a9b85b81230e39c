/* A program that measures its kernel only: counting is off at the start (enabled=0), on
 * around the kernel, and off again before it exits. The kernel touches exactly 4096 cache
 * lines of 64 bytes. */
#include "../../../crates/kage-rt/include/kage.h"
#include <stdio.h>

#define N (1 << 16)
__attribute__((aligned(64))) int a[N];

int main(void) {
  kage_set_enabled(1);
  long s = 0;
  for (int i = 0; i < N; i++)
    a[i] = i;
  for (int i = 0; i < N; i++)
    s += a[i];
  kage_set_enabled(0);
  printf("%ld\n", s);
  return 0;
}
