/* An inlined callee that reads bytes its caller read just before the call, for
 * crates/kage/tests/e2e_inlined.rs: the callee's instance touches them too, whatever its
 * caller did first. `main` reads a[0] and a[1]; `pick` reads them again when its `k` is
 * over 2 (here k = argc + 5): 8 bytes (at -O0 its locals on the stack come on top).
 * `volatile` keeps every read where the source has it; the condition gives the reads
 * their own block (a block shared with the caller's code is the caller's). */
#include <stdio.h>

volatile int a[4] = {1, 2, 3, 4};

static int pick(int k) {
  int s = 0;
  if (k > 2)
    s = a[0] + a[1];
  return s;
}

int main(int argc, char **argv) {
  (void)argv;
  int s = a[0] + a[1];
  s += pick(argc + 5);
  printf("%d\n", s);
  return 0;
}
