/* Quicksort (Hoare partition, median of three, insertion sort below 16) of n random 64-bit
 * keys, then a check that they are sorted. Usage: quicksort [n]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void insertion(uint64_t *a, long n) {
  for (long i = 1; i < n; i++) {
    uint64_t v = a[i];
    long j = i;
    while (j > 0 && a[j - 1] > v) { a[j] = a[j - 1]; j--; }
    a[j] = v;
  }
}

static void quicksort(uint64_t *a, long n) {
  while (n > 16) {
    uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
    uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
    long i = -1, j = n;
    for (;;) {
      do i++; while (a[i] < pivot);
      do j--; while (a[j] > pivot);
      if (i >= j) break;
      uint64_t t = a[i]; a[i] = a[j]; a[j] = t;
    }
    quicksort(a, j + 1);
    a += j + 1; n -= j + 1;
  }
  insertion(a, n);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 6000000;
  uint64_t *a = malloc(n * sizeof *a);
  uint64_t state = 0x853c49e6748fea9bull;
  for (long i = 0; i < n; i++) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    a[i] = state;
  }
  quicksort(a, n);
  uint64_t checksum = 0, sorted = 1;
  for (long i = 0; i < n; i++) {
    checksum = checksum * 1099511628211ull + a[i];
    if (i && a[i - 1] > a[i]) sorted = 0;
  }
  printf("quicksort n=%ld sorted=%llu checksum=%llu\n", n, (unsigned long long)sorted,
         (unsigned long long)checksum);
  free(a);
  return 0;
}
