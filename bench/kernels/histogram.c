/* A histogram through an index array: counts[bucket[i]] += weight[i] over n items in
 * random buckets, repeated. Usage: histogram [n]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BUCKETS 65536
#define REPEATS 30

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  uint32_t *bucket = malloc(n * sizeof *bucket);
  uint32_t *weight = malloc(n * sizeof *weight);
  uint64_t *counts = calloc(BUCKETS, sizeof *counts);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (long i = 0; i < n; i++) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    bucket[i] = (uint32_t)(state % BUCKETS);
    weight[i] = (uint32_t)(state >> 40) & 1023;
  }
  for (int r = 0; r < REPEATS; r++)
    for (long i = 0; i < n; i++)
      counts[bucket[i]] += weight[i] + (uint32_t)r;
  uint64_t checksum = 0;
  for (long b = 0; b < BUCKETS; b++) checksum = checksum * 31 + counts[b];
  printf("histogram n=%ld checksum=%llu\n", n, (unsigned long long)checksum);
  free(bucket); free(weight); free(counts);
  return 0;
}
