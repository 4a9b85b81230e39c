/* A macro makes an inlined function's accesses at one source position: get's
 * `if (FASTGET(t, k, lookup))` loads t->kind, calls lookup (never inlined; at the position of
 * its name, an argument of the macro), then loads t->slot, at the macro's position: the same
 * load again, with another position between, as copies of a call laid one after another
 * look. One call of get each time, as at -O0 (two with the pass of 38341d6, as Lua's
 * `luaV_fastget` in auxgetstr). With no argument: get 500 calls, lookup 500. */
#include "../common.h"
#include <stdio.h>
#include <stdlib.h>

struct table {
  int kind;
  long slot;
  long keys[8];
};

static struct table tables[2];

NOINLINE static void lookup(struct table *t, int k) { t->slot = t->keys[k & 7]; }

#define FASTGET(t, k, f) ((t)->kind != 1 ? 0 : (f((t), (k)), (t)->slot != 0))

static long get(struct table *t, int k) {
  if (FASTGET(t, k, lookup))
    return k;
  return -1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 500;
  for (int i = 0; i < 8; i++) {
    tables[0].keys[i] = i;
    tables[1].keys[i] = i * i;
  }
  tables[0].kind = 1;
  tables[1].kind = 1;
  long s = 0;
  for (int i = 0; i < n; i++)
    s += get(&tables[i & 1], i);
  printf("%ld\n", s);
  return 0;
}
