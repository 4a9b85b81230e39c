/* Hierarchical critical path analysis on what the optimiser makes of common idioms: the
 * reference model (tests/hcpa/reference.py) must agree exactly with the runtime on it.
 * Vectorised loops and their remainders, min/max/abs and bit-count intrinsics, selects,
 * funnel shifts, a switch turned into a lookup table, small functions inlined at several
 * call sites (with a loop inside), a struct returned by value, a variable-length array,
 * overlapping memmove, a variadic function, setjmp/longjmp out of a recursion, and an
 * atomic compare-exchange loop.
 * Usage: idioms N (default 200). Prints a checksum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct span { long lo, hi, sum; };

static inline int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Inlined at two call sites, with a loop of its own. */
static inline long dot(const int *a, const int *b, int n) {
  long s = 0;
  for (int i = 0; i < n; i++) s += (long)a[i] * b[i];
  return s;
}

__attribute__((noinline)) static struct span bounds(const int *v, int n) {
  struct span s = {v[0], v[0], 0};
  for (int i = 0; i < n; i++) {
    s.lo = v[i] < s.lo ? v[i] : s.lo;
    s.hi = v[i] > s.hi ? v[i] : s.hi;
    s.sum += __builtin_popcount((unsigned)v[i]) + abs(v[i] - 50);
  }
  return s;
}

__attribute__((noinline)) static int weight(int kind) {
  switch (kind & 7) {
  case 0: return 3;
  case 1: return 9;
  case 2: return 4;
  case 3: return 17;
  case 4: return 1;
  case 5: return 12;
  case 6: return 8;
  default: return 5;
  }
}

__attribute__((noinline)) static long sum_args(int count, ...) {
  va_list ap;
  va_start(ap, count);
  long s = 0;
  for (int i = 0; i < count; i++) s += va_arg(ap, int);
  va_end(ap);
  return s;
}

static jmp_buf escape;

__attribute__((noinline)) static int descend(int n, int limit) {
  if (n > limit) longjmp(escape, n);
  return descend(n * 2 + 1, limit) + 1;
}

__attribute__((noinline)) static unsigned rotate_all(unsigned *v, int n, int by) {
  unsigned h = 0;
  for (int i = 0; i < n; i++) h = h * 33 + ((v[i] << by) | (v[i] >> (32 - by)));
  return h;
}

static int counter;

__attribute__((noinline)) static void bump_atomically(int times) {
  for (int i = 0; i < times; i++) {
    int old = __atomic_load_n(&counter, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&counter, &old, old + i, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  int *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n);
  for (int i = 0; i < n; i++) {
    a[i] = clamp((i * 7919) % 101 - 10, 0, 90);
    b[i] = (i * 31) % 17;
  }
  long d = dot(a, b, n) + dot(b + 1, a, n - 1);
  struct span s = bounds(a, n);
  long w = 0;
  for (int i = 0; i < n; i++) w += weight(a[i] + i);
  int vla[n % 13 + 3];
  for (int i = 0; i < (int)(sizeof vla / sizeof vla[0]); i++) vla[i] = a[i] + b[i];
  memmove(a + 1, a, sizeof *a * (n - 1));
  long v = sum_args(5, vla[0], vla[1], vla[2], a[1], b[n - 1]);
  int jumped = setjmp(escape);
  if (jumped == 0) descend(1, n * 4);
  unsigned r = rotate_all((unsigned *)b, n, (n % 31) + 1);
  bump_atomically(n);
  printf("%ld %ld %ld %ld %ld %ld %d %u %d\n", d, s.lo, s.hi, s.sum, w, v, jumped, r,
         counter);
  free(a);
  free(b);
  return 0;
}
