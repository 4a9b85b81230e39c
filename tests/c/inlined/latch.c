/* An inlined call whose code ends in the block where the loop around it branches back (its
 * stores, then the loop's increment, compare and branch), for
 * crates/kage/tests/e2e_inlined.rs: the pass cuts that block after the call's code, so the
 * call holds no iteration of the loop and is a leaf, the loop a leaf loop: no region event
 * while it runs. `insert` runs 1000 times (argc 1), each with its probe loop. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct table {
  uint64_t *keys;
  uint64_t *values;
  uint64_t mask;
};

static uint64_t hash(uint64_t k) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  return k ^ (k >> 31);
}

static void insert(struct table *t, uint64_t key, uint64_t value) {
  for (uint64_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
    if (t->keys[i] == 0 || t->keys[i] == key) {
      t->keys[i] = key;
      t->values[i] = value;
      return;
    }
  }
}

int main(int argc, char **argv) {
  (void)argv;
  long n = 1000 * argc;
  struct table t = {calloc(4096, sizeof(uint64_t)), calloc(4096, sizeof(uint64_t)), 4095};
  for (long i = 0; i < n; i++)
    insert(&t, (uint64_t)i * 7 + 2, (uint64_t)i);
  uint64_t sum = 0;
  for (uint64_t i = 0; i < 4096; i++)
    sum += t.keys[i] ^ t.values[i];
  printf("%llu\n", (unsigned long long)sum);
  free(t.keys);
  free(t.values);
  return 0;
}
