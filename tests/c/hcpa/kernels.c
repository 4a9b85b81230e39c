/* Hierarchical critical path analysis (docs/hcpa.md): kernels whose self-parallelism is
 * known on paper. Each kernel is its own function (noinline) with its loop at a known
 * line; the loops that tests check exactly are kept as written (no vectorising, no
 * unrolling), so that one iteration of the source is one loop-body instance.
 * Usage: kernels N (default 1000). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

#define KEEP _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#define NOINLINE __attribute__((noinline))

enum { R = 40, C = 50 };

/* Independent iterations: self-parallelism N. */
NOINLINE void independent(double *a, const double *b, int n) {
  KEEP for (int i = 0; i < n; i++) a[i] = b[i] * 2.0 + 1.0;
}

/* A chain through memory: each iteration reads what the previous one wrote. */
NOINLINE void chain(double *a, int n) {
  KEEP for (int i = 1; i < n; i++) a[i] = a[i - 1] * 3.0 + 1.0;
}

/* A sum reduction: does not serialise its loop. */
NOINLINE double reduction(const double *b, int n) {
  double s = 0;
  KEEP for (int i = 0; i < n; i++) s += b[i];
  return s;
}

/* Anti-dependence only (reads a[i + 1] before iteration i + 1 writes it): parallel. */
NOINLINE void anti(double *a, int n) {
  KEEP for (int i = 0; i < n - 1; i++) a[i] = a[i + 1] + 1.0;
}

/* Rows independent, each row a chain: outer loop parallel, inner serial. */
NOINLINE void rows(double m[R][C]) {
  KEEP for (int i = 0; i < R; i++)
    KEEP for (int j = 1; j < C; j++) m[i][j] = m[i][j - 1] * 0.5 + 1.0;
}

/* Each row depends on the previous, columns independent: outer serial, inner parallel. */
NOINLINE void columns(double m[R][C]) {
  KEEP for (int i = 1; i < R; i++)
    KEEP for (int j = 0; j < C; j++) m[i][j] = m[i - 1][j] * 0.5 + 1.0;
}

/* Two recursive calls whose results are independent until they are added. */
NOINLINE int fib(int n) {
  if (n < 2) return n;
  return fib(n - 1) + fib(n - 2);
}

struct node { struct node *next; long value; };

/* A pointer chase: each iteration needs the previous one's load. */
NOINLINE long chase(const struct node *p) {
  long s = 0;
  KEEP for (; p; p = p->next) s += p->value;
  return s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) b[i] = i;
  independent(a, b, n);
  chain(a, n);
  double s = reduction(b, n);
  anti(a, n);
  static double m[R][C];
  rows(m);
  columns(m);
  int f = fib(15);
  struct node *nodes = malloc(sizeof(struct node) * n);
  for (int i = 0; i < n; i++) nodes[i] = (struct node){i + 1 < n ? &nodes[i + 1] : 0, i};
  long c = chase(nodes);
  printf("%.1f %.1f %.1f %d %ld\n", a[n / 2], s, m[R - 1][C - 1], f, c);
  free(a); free(b); free(nodes);
  return 0;
}
