/* Loops of very different weights, for crates/kage/tests/e2e_loops.rs: a count report of
 * this program names two hot loop nests (the first holds about 80% of the accesses, the
 * last about 15%) and one cold loop (under 1%); KAGE_LOOPS=@report selects the hot two. */
#include <stdio.h>

#define N 4096

static double x[N];

int main(int argc, char **argv) {
  (void)argv;
  int n = N - (argc > 5);
  double s = 0;
  for (int r = 0; r < 200; r++) /* loop:hot */
    for (int i = 0; i < n; i++)
      s += x[i];
  for (int i = 0; i < n; i++) /* loop:cold */
    x[i] = i;
  for (int r = 0; r < 20; r++) /* loop:warm */
    for (int i = 0; i < n; i++)
      x[i] += 1;
  printf("%.1f %.1f\n", s, x[n - 1]);
  return 0;
}
