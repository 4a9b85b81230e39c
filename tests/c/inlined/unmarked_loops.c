/* Loops clang gives no location metadata (crates/kage/tests/e2e_inlined.rs): a loop made by
 * `goto`, and a `while` whose body ends in `continue` (its back edge with the metadata is
 * code that never runs), each inlined into main. At every level each is one loop at the
 * lines of its code as an -O0 build shows them. */
#include <stdio.h>
#include <stdlib.h>

/* The number of runs of equal bytes, counted through both kinds of loop. */
static int runs(const unsigned char *s, int n) {
  int i = 0, count = 0;
again:
  if (i >= n)
    return count;
  while (i + 1 < n && s[i] == s[i + 1]) {
    int step = 1 + (s[i] == 0);
    i += step;
    continue;
  }
  count++;
  i++;
  goto again;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  unsigned char *s = malloc(n);
  for (int i = 0; i < n; i++)
    s[i] = (unsigned char)(1 + i / 3);
  printf("%d\n", runs(s, n));
  free(s);
  return 0;
}
