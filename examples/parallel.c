/* Two loops for the hcpa tool (hierarchical critical path analysis): the first one's
 * iterations are independent (each smooths one point of the signal), the second's are a
 * chain (each pseudo-random number is computed from the previous one). Build and look at
 * the plan:
 *     KAGE_TOOL=hcpa kage-cc -O2 -g examples/parallel.c -o parallel
 *     kage run --tool hcpa -- ./parallel 20000
 *     kage report kage.parallel.<pid>.json
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  double *signal = malloc(sizeof(double) * n), *smooth = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) signal[i] = (i * 7919) % 1000 / 1000.0;

  /* Obviously parallel: smooth[i] reads only signal[]. */
  for (int i = 1; i < n - 1; i++)
    smooth[i] = (signal[i - 1] + 2.0 * signal[i] + signal[i + 1]) / 4.0;

  /* Obviously serial: each number of a linear congruential generator needs the previous. */
  unsigned *noise = malloc(sizeof(unsigned) * n);
  unsigned x = 12345;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    noise[i] = x;
  }

  printf("%f %u\n", smooth[n / 2] + smooth[n - 2], noise[n - 1]);
  free(noise);
  free(signal);
  free(smooth);
  return 0;
}
