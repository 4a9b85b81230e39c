/* Recursion through the compiler's copies of a function: step() is inlined into main() and
 * into run() (at every level: always_inline), and step() calls run(), so the copy of step()
 * in run() runs nested in the copy in main(), and in itself. Four instances of step:
 * step(3) in main, then step(2), step(1), step(0) in run. Each reads and writes data[]
 * once (N ints), and the three that call run() then add to data[0]: joined into one source
 * function, step reads and writes 4 * (4 N + 3) bytes, each instance counted once. */
#include <stdio.h>

#define N 100

int data[N]; /* not static: its accesses stay */

static void run(int depth);

static inline __attribute__((always_inline)) void step(int depth) {
  for (int i = 0; i < N; i++) data[i] += depth;
  if (depth > 0) {
    run(depth - 1);
    data[0] += 1; /* after the call: no tail call to turn into a loop */
  }
}

__attribute__((noinline)) static void run(int depth) { step(depth); }

int main(void) {
  step(3);
  printf("recursion %d\n", data[0]);
  return 0;
}
