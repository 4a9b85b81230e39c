/* kage_reset in the middle of a function: what ran before it is forgotten; the regions open
 * at the reset (main, before_and_after) count one instance each and their accesses from the
 * reset on. */
#include "common.h"
#include "../../crates/kage-rt/include/kage.h"

volatile int g[16];

NOINLINE void store_one(int i) { g[i & 15] = i; }

NOINLINE void before_and_after(int forgotten, int counted) {
  for (int i = 0; i < forgotten; i++)
    store_one(i);
  kage_reset();
  for (int i = 0; i < counted; i++)
    store_one(i);
}

int main(int argc, char **argv) {
  (void)argv;
  before_and_after(10 * argc, 3 * argc);
  return 0;
}
