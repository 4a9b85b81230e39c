/* Searches in a binary search tree of n random keys (nodes allocated one by one, in
 * insertion order): 4n lookups, half of them misses. Pointer chasing down a data-dependent
 * path. Usage: bst [n]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
  uint64_t key;
  struct node *left, *right;
};

static uint64_t mix(uint64_t k) {
  k ^= k >> 30; k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27; k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 300000;
  struct node *root = NULL;
  for (long i = 0; i < n; i++) {
    uint64_t key = mix((uint64_t)i) | 1; /* odd keys are in the tree */
    struct node **at = &root;
    while (*at) at = key < (*at)->key ? &(*at)->left : &(*at)->right;
    struct node *fresh = malloc(sizeof *fresh);
    fresh->key = key; fresh->left = fresh->right = NULL;
    *at = fresh;
  }
  uint64_t found = 0, depth = 0;
  for (long i = 0; i < 4 * n; i++) {
    uint64_t key = mix((uint64_t)(i % (2 * n)));
    key = i % 2 ? (key | 1) : (key & ~1ull); /* even keys miss */
    struct node *at = root;
    while (at && at->key != key) { at = key < at->key ? at->left : at->right; depth++; }
    found += at != NULL;
  }
  printf("bst n=%ld found=%llu depth=%llu\n", n, (unsigned long long)found,
         (unsigned long long)depth);
  return 0;
}
