/* Helpers that call C library functions which return without calling back (memcmp,
 * strlen, strtol, sqrt: a negative argument sets errno), inlined into loops: those calls
 * end no segment, so the helpers and loops around them are counted in locals. Also a helper calling strdup (which calls
 * the allocator) and free, which still end segments. The test compares the inline count
 * build with the per-access build region by region. */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char words[64][8];
static char text[64][12];
static double values[64];
static int lengths[64], hits[64], seen[64];
static long parsed[64];
static double roots[64];

static inline int same(int i, int j) {
  seen[i]++;
  int equal = memcmp(words[i], words[j], (size_t)lengths[i]) == 0;
  hits[j] += equal;
  return equal + seen[j];
}

static inline size_t length(int i) {
  seen[i] += 2;
  size_t n = strlen(words[i]);
  lengths[i] = (int)n;
  return n + (size_t)seen[(i + 1) & 63];
}

static inline long number(int i) {
  char *end;
  long n = strtol(text[i], &end, 10);
  parsed[i] = n;
  return n + (end - text[i]) + parsed[(i + 5) & 63];
}

static inline double root(int i) {
  double r = sqrt(values[i] - (double)hits[i]);
  roots[i] = r == r ? r : 0; /* not NaN */
  return roots[i] + roots[(i + 3) & 63];
}

static inline int copied_length(int i) {
  char *copy = strdup(words[i]);
  int n = copy[0] == 'a' ? 1 : (int)strlen(copy);
  free(copy);
  return n;
}

NOINLINE long scan(int rounds) {
  long total = 0;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < 64; i++) {
      total += same(i, (i * 7 + r) & 63);
      total += (long)length(i);
      total += number(i);
      total += (long)root(i);
      if ((i & 15) == r % 16)
        total += copied_length(i);
    }
  }
  return total;
}

int main(void) {
  for (int i = 0; i < 64; i++) {
    int len = 1 + i % 7;
    for (int k = 0; k < len; k++)
      words[i][k] = (char)('a' + (i * 3 + k) % 4);
    snprintf(text[i], sizeof text[i], "%d%s", i * 37, i % 3 ? "x" : "");
    values[i] = i * 11.5 - 40;
    lengths[i] = 1 + i % 4;
  }
  printf("%ld\n", scan(40));
  return 0;
}
