/* A caller's loops whose last code is an inlined call (crates/kage/tests/e2e_inlined.rs):
 * the optimiser gives such a loop's back-edge branch the callee's location, yet each loop
 * is the caller's, at its own lines, at every level; the callee's loops stay the callee's. */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct node {
  struct node *left, *right, *parent;
  long value;
};

/* The next node in order: two loops of its own. */
static struct node *next_node(const struct node *n) {
  if (n->right) {
    n = n->right;
    while (n->left)
      n = n->left;
    return (struct node *)n;
  }
  while (n->parent && n->parent->right == n)
    n = n->parent;
  return n->parent;
}

/* A do-while that ends by stepping to the next node. */
static long sum_in_order(const struct node *first) {
  long sum = 0;
  const struct node *n = first;
  do {
    sum += n->value;
    n = next_node(n);
  } while (n);
  return sum;
}

NOINLINE int poll_state(int *state) {
  *state += 1;
  return *state < 0;
}

/* A wait that the caller repeats: a call and its check, which ends the loop's last block. */
static void wait_once(int *state) {
  int failed = poll_state(state);
  if (failed)
    abort();
}

static struct node *build(struct node *nodes, int lo, int hi, struct node *parent) {
  if (lo > hi)
    return NULL;
  int mid = lo + (hi - lo) / 2;
  struct node *n = &nodes[mid];
  n->value = mid;
  n->parent = parent;
  n->left = build(nodes, lo, mid - 1, n);
  n->right = build(nodes, mid + 1, hi, n);
  return n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  struct node *nodes = calloc(n, sizeof *nodes);
  build(nodes, 0, n - 1, NULL);
  long sum = sum_in_order(&nodes[0]);
  int state = 0;
  while (state < n)
    wait_once(&state);
  printf("%ld %d\n", sum, state);
  free(nodes);
  return 0;
}
