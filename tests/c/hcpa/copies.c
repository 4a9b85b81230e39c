/* Recursion through the compiler's copies of one function: step() is inlined into main()
 * and into run(), and step() calls run(), so the copy of step() in run() runs nested in
 * the copy in main() (and in itself). The source view joins the copies into one function
 * step, whose work must count every instance once: the outer copy's, at most the
 * program's. Four instances of step: step(3) in main, then step(2), step(1), step(0) in
 * run(). */
#include <stdio.h>

static volatile int sink;

static void run(int depth);

static inline __attribute__((always_inline)) void step(int depth) {
  for (int i = 0; i < 100; i++) sink += i * depth;
  if (depth > 0) {
    run(depth - 1);
    sink += depth; /* after the call: no tail call to turn into a loop */
  }
}

__attribute__((noinline)) static void run(int depth) { step(depth); }

int main(void) {
  step(3);
  printf("copies %d\n", sink);
  return 0;
}
