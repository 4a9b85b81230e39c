/* An open-addressing hash table (linear probing, power-of-two capacity, load <= 1/2) of
 * 64-bit keys: n inserts, then 4n lookups of which half miss, then n/2 deletions by
 * tombstone. Usage: hash-table [n]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define EMPTY 0
#define TOMBSTONE 1

struct table {
  uint64_t *keys;
  uint64_t *values;
  uint64_t mask;
};

static uint64_t hash(uint64_t k) { /* splitmix64's finaliser */
  k ^= k >> 30; k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27; k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

/* Keys 0 and 1 are reserved markers, so callers pass keys >= 2. */
static void insert(struct table *t, uint64_t key, uint64_t value) {
  for (uint64_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
    if (t->keys[i] == EMPTY || t->keys[i] == TOMBSTONE || t->keys[i] == key) {
      t->keys[i] = key;
      t->values[i] = value;
      return;
    }
  }
}

static uint64_t *find(struct table *t, uint64_t key) {
  for (uint64_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
    if (t->keys[i] == key) return &t->values[i];
    if (t->keys[i] == EMPTY) return NULL;
  }
}

static void erase(struct table *t, uint64_t key) {
  for (uint64_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
    if (t->keys[i] == key) { t->keys[i] = TOMBSTONE; return; }
    if (t->keys[i] == EMPTY) return;
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 3000000;
  uint64_t capacity = 1;
  while (capacity < (uint64_t)n * 2) capacity <<= 1;
  struct table t = {calloc(capacity, sizeof(uint64_t)), calloc(capacity, sizeof(uint64_t)),
                    capacity - 1};
  for (long i = 0; i < n; i++) insert(&t, (uint64_t)i * 7 + 2, (uint64_t)i);
  uint64_t sum = 0, misses = 0;
  #pragma kage profile
  for (long i = 0; i < 4 * n; i++) {
    /* Odd multiples of 7 (+2) were inserted only below 7n: the upper half misses. */
    uint64_t *v = find(&t, (uint64_t)(i % (2 * n)) * 7 + 2);
    if (v) sum += *v; else misses++;
  }
  for (long i = 0; i < n; i += 2) erase(&t, (uint64_t)i * 7 + 2);
  for (long i = 0; i < n; i++) {
    uint64_t *v = find(&t, (uint64_t)i * 7 + 2);
    if (v) sum += *v * 3;
  }
  printf("hash-table n=%ld checksum=%llu misses=%llu\n", n, (unsigned long long)sum,
         (unsigned long long)misses);
  free(t.keys); free(t.values);
  return 0;
}
