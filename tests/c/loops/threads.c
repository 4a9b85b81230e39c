/* One selected nest entered by four threads at once, for crates/kage/tests/e2e_loops.rs:
 * 5 entries per thread of a 20 x 15 nest. Whichever entries are sampled, the totals are
 * fixed: 20 entries, 400 and 6000 iterations, 8 sampled entries with 80 and 800 iterations
 * instrumented. Prints a checksum. */
#include <pthread.h>
#include <stdio.h>

#define THREADS 4

static double grid[THREADS][20][15];

static void *work(void *arg) {
  double(*g)[15] = grid[(long)arg];
  for (int e = 0; e < 5; e++)
    for (int i = 0; i < 20; i++) /* loop:threads */
      for (int j = 0; j < 15; j++)
        g[i][j] = g[i][j] * 0.5 + i + j + e;
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (long k = 0; k < THREADS; k++)
    pthread_create(&t[k], NULL, work, (void *)k);
  for (int k = 0; k < THREADS; k++)
    pthread_join(t[k], NULL);
  double sum = 0;
  for (int k = 0; k < THREADS; k++)
    for (int i = 0; i < 20; i++)
      for (int j = 0; j < 15; j++)
        sum += grid[k][i][j];
  printf("checksum %.1f\n", sum);
  return 0;
}
