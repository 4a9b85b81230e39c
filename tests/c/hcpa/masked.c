/* Dependences through masked and per-lane vector accesses (clang's portable builtins, so
 * the IR holds llvm.masked.* on any target): a loop whose iterations gather what the one
 * before scattered is a chain; the same accesses on a row of each iteration's own are
 * parallel. Prints a checksum. */
#include <stdio.h>

#define KEEP _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#define NOINLINE __attribute__((noinline))

typedef double v8d __attribute__((ext_vector_type(8)));
typedef long v8l __attribute__((ext_vector_type(8)));
typedef _Bool m8 __attribute__((ext_vector_type(8)));

enum { N = 200 };
double grid[N][64];
static const v8l spread = {0, 8, 16, 24, 32, 40, 48, 56};

static inline m8 lanes(int bits) {
  return __builtin_convertvector((((v8l)bits >> (v8l){0, 1, 2, 3, 4, 5, 6, 7}) & 1) != 0, m8);
}

/* Row i is made from row i - 1: each iteration waits for the one before. */
NOINLINE void chained(double (*g)[64], int bits) {
  KEEP for (int i = 1; i < N; i++) {
    v8d v = __builtin_masked_gather(lanes(bits), spread, g[i - 1], (v8d)0);
    __builtin_masked_scatter(lanes(bits), spread, v * 0.5 + 1.0, g[i]);
  }
}

/* Each row from itself: the iterations are independent. */
NOINLINE void rowwise(double (*g)[64], int bits) {
  KEEP for (int i = 0; i < N; i++) {
    v8d v = __builtin_masked_load(lanes(bits), g[i], (v8d)0);
    __builtin_masked_store(lanes(bits), v * 0.5 + 1.0, g[i]);
  }
}

int main(int argc, char **argv) {
  (void)argv;
  double (*g)[64] = grid + (argc - 1); /* the grid itself, through a pointer */
  chained(g, argc + 0xF0);             /* lanes 0, 4, 5, 6, 7 */
  rowwise(g, argc + 0x7E);             /* all lanes */
  double sum = 0;
  for (int i = 0; i < N; i++) sum += grid[i][0];
  printf("%g\n", sum);
  return 0;
}
