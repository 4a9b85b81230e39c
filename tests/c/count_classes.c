/* Promoted trees whose blocks share a counter per execution class (blocks that run equally
 * often: a helper inlined unconditionally into a loop body runs once per iteration). The
 * shapes: a list walk with helpers in its body; a `continue` that splits the body; nested
 * loops with helpers at both levels and a `break`; a comparison loop left by returns at
 * each step (bzip2's mainGtU); a memset of run-time length among helpers; a loop entered
 * in its middle by a goto (an irreducible cycle: no classes); a switch in a loop; a loop in
 * a helper called from a loop that calls (the helper's tree reports at every call). The
 * test compares the inline count build with the per-access build region by region. */
#include "common.h"
#include <stdio.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

struct node {
  struct node *next;
  int value;
};

static struct node nodes[500];
static int a[1024], b[1024];
static unsigned char bytes[4096];
volatile int sink_cell;
static unsigned state = 7;

INLINE unsigned rnd(void) {
  state = state * 1103515245u + 12345u;
  return (state >> 16) & 0x7fff;
}

INLINE int get(const int *p, int i) { return p[i & 1023]; }
INLINE void put(int *p, int i, int v) { p[i & 1023] = v; }
INLINE int node_value(const struct node *n) { return n->value; }
INLINE void node_set(struct node *n, int v) { n->value = v; }

NOINLINE void sink(int x) { sink_cell = x; }

NOINLINE int walk(struct node *p) {
  int sum = 0;
  for (; p; p = p->next) {
    sum += node_value(p);
    node_set(p, sum & 0xff);
  }
  return sum;
}

NOINLINE int split_body(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) {
    int v = get(a, i);
    if (v & 1) continue;
    put(b, i, v + 1);
    sum += get(b, i + 1);
  }
  return sum;
}

NOINLINE int nested(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) {
    sum += get(a, i);
    for (int j = 0; j < 16; j++) {
      int v = get(b, i + j);
      if (v == 12345) break;
      put(a, i + j, v ^ sum);
    }
    put(b, i, sum);
  }
  return sum;
}

/* 1 when block i sorts after block j, comparing up to n bytes: left at every step. */
NOINLINE int greater(int i, int j, int n) {
  for (int k = 0; k < n; k += 4) {
    unsigned char x = bytes[(i + k) & 4095], y = bytes[(j + k) & 4095];
    if (x != y) return x > y;
    x = bytes[(i + k + 1) & 4095], y = bytes[(j + k + 1) & 4095];
    if (x != y) return x > y;
    int u = get(a, i + k), v = get(a, j + k);
    if (u != v) return u > v;
    put(b, k, u);
  }
  return 0;
}

NOINLINE int cleared(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) {
    int len = get(a, i) & 63;
    memset(bytes + (i & 1023), 0, len);
    put(b, i, len);
    sum += get(b, i + 5);
  }
  return sum;
}

NOINLINE int irreducible(int n, int start_inside) {
  int sum = 0, i = 0;
  if (start_inside) goto inside;
  for (; i < n; i++) {
    sum += get(a, i);
  inside:
    put(b, i, sum);
    sum += get(b, i + 2);
  }
  return sum;
}

NOINLINE int switched(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) {
    switch (get(a, i) & 3) {
    case 0: sum += get(b, i); break;
    case 1: put(b, i, sum); break;
    case 2: sum -= get(a, i + 1); put(a, i, sum); break;
    default: break;
    }
    put(a, i + 2, i);
  }
  return sum;
}

INLINE int row_sum(int row) {
  int sum = 0;
  for (int k = 0; k < 8; k++) sum += get(a, row * 8 + k) + get(b, row + k);
  return sum;
}

NOINLINE int calling_loop(int n) {
  int sum = 0;
  for (int i = 0; i < n; i++) {
    sum += row_sum(i);
    if ((rnd() & 7) == 0) sink(sum);
  }
  return sum;
}

int main(void) {
  for (int i = 0; i < 1024; i++) {
    a[i] = (int)(rnd() & 255);
    b[i] = (int)(rnd() & 255);
  }
  for (int i = 0; i < 4096; i++) bytes[i] = (unsigned char)(rnd() & 3);
  for (int i = 0; i < 500; i++) {
    nodes[i].value = i;
    nodes[i].next = i + 1 < 500 ? &nodes[i + 1] : 0;
  }
  long total = 0;
  for (int round = 0; round < 20; round++) {
    total += walk(&nodes[round * 7]);
    total += split_body(300 + round);
    total += nested(40);
    for (int c = 0; c < 50; c++) total += greater((int)rnd(), (int)rnd(), 64);
    total += cleared(100);
    total += irreducible(200, round & 1);
    total += switched(300);
    total += calling_loop(50);
  }
  printf("%ld\n", total);
  return 0;
}
