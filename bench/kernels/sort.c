/* Sorting n pseudo-random 64-bit integers with a top-down merge sort (insertion sort
 * below 16 elements), then verifying order. Written out rather than calling qsort so the
 * work happens in instrumented code. Usage: sort [n]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void insertion_sort(uint64_t *a, long n) {
  for (long i = 1; i < n; i++) {
    uint64_t v = a[i];
    long j = i - 1;
    while (j >= 0 && a[j] > v) { a[j + 1] = a[j]; j--; }
    a[j + 1] = v;
  }
}

#pragma kage profile
static void merge_sort(uint64_t *a, uint64_t *scratch, long n) {
  if (n <= 16) { insertion_sort(a, n); return; }
  long half = n / 2;
  merge_sort(a, scratch, half);
  merge_sort(a + half, scratch, n - half);
  long i = 0, j = half, k = 0;
  while (i < half && j < n) scratch[k++] = a[i] <= a[j] ? a[i++] : a[j++];
  while (i < half) scratch[k++] = a[i++];
  while (j < n) scratch[k++] = a[j++];
  for (long m = 0; m < n; m++) a[m] = scratch[m];
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 12000000;
  uint64_t *a = malloc(sizeof(uint64_t) * n), *scratch = malloc(sizeof(uint64_t) * n);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (long i = 0; i < n; i++) { /* xorshift64* */
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    a[i] = x * 0x2545F4914F6CDD1Dull;
  }
  merge_sort(a, scratch, n);
  uint64_t sum = 0;
  long unsorted = 0;
  for (long i = 0; i < n; i++) {
    sum = sum * 31 + (a[i] >> 32);
    if (i > 0 && a[i - 1] > a[i]) unsorted++;
  }
  printf("sort n=%ld checksum=%llu unsorted=%ld\n", n, (unsigned long long)sum, unsorted);
  free(a); free(scratch);
  return 0;
}
