/* Source of library_calls.ll: clang-22 -S -emit-llvm -O2 -g -fno-vectorize -fno-slp-vectorize -fno-unroll-loops -fdebug-compilation-dir=/src/kage/tests/ir library_calls.c */
#include <stdlib.h>
#include <string.h>

/* A library function that returns without calling back and writes no memory but its
 * arguments': memcmp. */
int count_equal(const char *const *words, const char *key, int n) {
  int equal = 0;
  for (int i = 0; i < n; i++)
    equal += memcmp(words[i], key, 4) == 0;
  return equal;
}

/* strdup calls the allocator, which the program may define. */
char *copy(const char *s) { return strdup(s); }

/* The program's own function, declared leaf and const. */
int mix(int x) __attribute__((leaf, const));
int mixed(int x) { return mix(x) + 1; }
