/* Loops that read through an index array (a histogram and a sparse product): the
 * sequential accesses are counted and marked per chunk, the indirect ones marked where
 * they are made (partly hoisted loops). Deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 60000
#define BUCKETS 3000

static uint32_t bucket[N], weight[N];
static uint64_t counts[BUCKETS];
static int col[N];
static double val[N], x[BUCKETS], y[N / 16];

int main(void) {
  uint64_t state = 12345;
  for (int i = 0; i < N; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    bucket[i] = (uint32_t)(state >> 33) % BUCKETS;
    weight[i] = (uint32_t)(state >> 20) & 255;
    col[i] = (int)((state >> 40) % BUCKETS);
    val[i] = (double)(i % 7);
  }
  for (int i = 0; i < BUCKETS; i++) x[i] = i;
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < N; i++)
      counts[bucket[i]] += weight[i];
  for (int r = 0; r < 3; r++)
    for (int row = 0; row < N / 16; row++) {
      double s = 0;
      for (int k = row * 16; k < row * 16 + 16; k++)
        s += val[k] * x[col[k]];
      y[row] = s;
    }
  uint64_t sum = 0;
  for (int i = 0; i < BUCKETS; i++) sum += counts[i];
  double ys = 0;
  for (int i = 0; i < N / 16; i++) ys += y[i];
  printf("%llu %.1f\n", (unsigned long long)sum, ys);
  return 0;
}
