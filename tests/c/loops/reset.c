/* kage_reset() restarts the loops tool's sampling, for crates/kage/tests/e2e_loops.rs: a nest
 * entered 12 times, then reset, then entered 5 times more. The report covers the 5 entries
 * after the reset, sampled again from the first (3 and 4 iterations sampled of 6 each). */
#include <stdio.h>
#include "../../../crates/kage-rt/include/kage.h"

static double v[6];

static void sweep(int e) {
  for (int i = 0; i < 6; i++) /* loop:sweep */
    v[i] = v[i] * 0.5 + e;
}

int main(void) {
  for (int e = 0; e < 12; e++)
    sweep(e);
  kage_reset();
  for (int e = 0; e < 5; e++)
    sweep(e);
  printf("%.3f\n", v[5]);
  return 0;
}
