/* Hierarchical critical path analysis on code with calls of every sort: the reference
 * model (tests/hcpa/reference.py) must agree exactly with the runtime on it. Calls through
 * pointers, a callback from uninstrumented code (qsort), memcpy and memset, a switch,
 * loops left early, recursion, struct copies, integer division and floating point, and
 * loop-invariant operands the pass hoists (a division LICM may not move: it only runs on
 * odd iterations, and its operands are the costliest candidates of the store).
 * Usage: mixed N (default 300). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct point { double x, y; int tag; };

static int compare(const void *a, const void *b) {
  const struct point *p = a, *q = b;
  return (p->x > q->x) - (p->x < q->x);
}

__attribute__((noinline)) static double norm(struct point p) { return p.x * p.x + p.y * p.y; }

static double scale(double v) { return v * 0.5; }
static double shift(double v) { return v + 3.0; }

__attribute__((noinline)) static long collatz(long n) {
  long steps = 0;
  while (n != 1) {
    n = n % 2 ? 3 * n + 1 : n / 2;
    steps++;
    if (steps > 1000) break;
  }
  return steps;
}

__attribute__((noinline)) static int depth(int n, int *seen) {
  seen[n % 16]++;
  return n <= 1 ? 1 : 1 + depth(n / 2, seen) + (n % 3 == 0 ? depth(n / 3, seen) : 0);
}

__attribute__((noinline)) static long invariant_operands(long *a, long x, long y, int n) {
  for (int i = 0; i < n; i++)
    if (i & 1) a[i] = x / y + x % y;
  long s = 0;
  for (int i = 0; i < n; i++) s += a[i];
  return s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  struct point *pts = malloc(sizeof *pts * n), *copy = malloc(sizeof *copy * n);
  for (int i = 0; i < n; i++) pts[i] = (struct point){(i * 37) % n, i * 0.25, i % 5};
  memcpy(copy, pts, sizeof *pts * n);
  qsort(copy, n, sizeof *copy, compare);
  double (*ops[2])(double) = {scale, shift};
  double acc = 0;
  for (int i = 0; i < n; i++) {
    switch (copy[i].tag) {
    case 0: acc += norm(copy[i]); break;
    case 1: acc -= copy[i].y / (i + 1); break;
    case 2: acc = ops[i % 2](acc); break;
    default: acc += collatz(i + 1); break;
    }
  }
  int seen[16];
  memset(seen, 0, sizeof seen);
  int d = depth(n, seen);
  long h = 0;
  for (int i = 0; i < 16; i++) {
    if (seen[i] == 0) continue;
    h = h * 31 + seen[i] / (i + 1);
  }
  long *odd = calloc(n, sizeof *odd);
  h += invariant_operands(odd, n + 7, argc + 2, n);
  free(odd);
  printf("%.3f %d %ld\n", acc, d, h);
  free(pts);
  free(copy);
  return 0;
}
