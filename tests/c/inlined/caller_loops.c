/* A caller's loops whose last code is an inlined call (crates/kage/tests/e2e_inlined.rs):
 * the optimiser gives such a loop's back-edge branch the callee's location, yet each loop
 * is the caller's, at its own lines, at every level; the callee's loops stay the callee's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

struct lexer {
  const char *s;
};

NOINLINE void advance(struct lexer *lx) { lx->s++; }

/* Takes `c` when it comes next: no loop of its own. */
static int take(struct lexer *lx, char c) {
  if (*lx->s == c) {
    advance(lx);
    return 1;
  }
  return 0;
}

/* A loop whose whole code is the inlined `take`: its branch back is take's. */
static int skip_semicolons(struct lexer *lx) {
  int skipped = 0;
  while (take(lx, ';')) {}
  skipped = *lx->s == 'x';
  return skipped;
}

NOINLINE int exists(const char *name) { return name[0] == 'c'; }

/* The next name of a `;`-separated list, cut in place (NULL at the end). */
static char *next_name(char **list, char *end) {
  char *name = *list;
  if (name == end)
    return NULL;
  if (*name == '\0')
    name++;
  char *sep = strchr(name, ';');
  if (sep == NULL)
    sep = end;
  *sep = '\0';
  *list = sep;
  return name;
}

/* Whether a name can be used: returns early, and that early return is what goes back to
 * the loop around it. */
static int usable(const char *name) {
  int ok = exists(name);
  if (!ok)
    return 0;
  return name[1] != '\0';
}

/* A search that goes round while the inlined `usable` says no. */
static char *first_usable(char *list) {
  char *end = list + strlen(list);
  char *name;
  while ((name = next_name(&list, end)) != NULL) {
    if (usable(name))
      return name;
  }
  return NULL;
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
  struct lexer lx = {";;;;x"};
  int skipped = skip_semicolons(&lx);
  char names[] = "a;bb;cc;dd";
  char *found = first_usable(names);
  printf("%ld %d %d %s\n", sum, state, skipped, found ? found : "none");
  free(nodes);
  return 0;
}
