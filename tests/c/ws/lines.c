/* Touches exactly 1000 distinct 64-byte lines of an aligned array (one byte in each of
 * lines 0, 2, 4, ... 1998), then the same lines again, then 500 new ones: known by hand. */
#include <stdio.h>

static unsigned char buf[4096 * 64] __attribute__((aligned(4096)));

__attribute__((noinline)) static void touch(unsigned char *p, long first, long n, long step) {
  for (long i = 0; i < n; i++) p[(first + i * step) * 64] += 1;
}

int main(void) {
  touch(buf, 0, 1000, 2);
  touch(buf, 0, 1000, 2);
  touch(buf, 2001, 500, 2);
  printf("%d\n", buf[0] + buf[2001 * 64]);
  return 0;
}
