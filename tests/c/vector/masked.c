/* Masked and per-lane vector accesses, written with clang's portable builtins so that the
 * IR holds llvm.masked.{load,store,gather,scatter,expandload,compressstore} on any target
 * (the vectoriser emits the same for AVX2 and AVX-512 targets). Each kind is a function of
 * its own, called with the lane masks 0x05 (lanes 0 and 2), 0xFF (all eight) and 0x00
 * (none): 10 lanes of 8 bytes in all, each lane a load or a store of its own.
 *
 * Where, by hand: `src` and `dst` are 4 KiB-aligned arrays of doubles, reached through
 * pointers the optimiser cannot follow (it would turn a masked load of memory it knows is
 * there into a plain load). The contiguous kinds (load, store, expanding load, compressing
 * store) touch elements 0..7 of their array at most, its first 64-byte line; the gather and
 * the scatter touch elements 0, 8, ..., 56 (`spread`), one per line, lines 0..7. So the
 * program touches 16 lines. Per call, a contiguous kind touches 16, 64 and 0 bytes (one
 * line, one, none), a spread kind 16, 64 and 0 bytes (two lines, eight, none). */
#include <stdio.h>
#include "../common.h"

typedef double v8d __attribute__((ext_vector_type(8)));
typedef long v8l __attribute__((ext_vector_type(8)));
typedef _Bool m8 __attribute__((ext_vector_type(8)));

double src[64] __attribute__((aligned(4096))) = {[0] = 1, 2, 3, 4, 5, 6, 7, 8, [16] = 20, [56] = 70};
double dst[64] __attribute__((aligned(4096)));
static const v8l spread = {0, 8, 16, 24, 32, 40, 48, 56};

/* Lane i is on when bit i of `bits` is. */
static inline m8 lanes(int bits) {
  return __builtin_convertvector((((v8l)bits >> (v8l){0, 1, 2, 3, 4, 5, 6, 7}) & 1) != 0, m8);
}

static inline double total(v8d v) {
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

NOINLINE double masked_load(int bits, const double *p) {
  return total(__builtin_masked_load(lanes(bits), p, (v8d)0));
}

NOINLINE void masked_store(int bits, double *p) {
  __builtin_masked_store(lanes(bits), (v8d){1, 2, 3, 4, 5, 6, 7, 8}, p);
}

NOINLINE double gather(int bits, const double *p) {
  return total(__builtin_masked_gather(lanes(bits), spread, p, (v8d)0));
}

NOINLINE void scatter(int bits, double *p) {
  __builtin_masked_scatter(lanes(bits), spread, (v8d){9, 10, 11, 12, 13, 14, 15, 16}, p);
}

NOINLINE double expand_load(int bits, const double *p) {
  return total(__builtin_masked_expand_load(lanes(bits), p, (v8d)0));
}

NOINLINE void compress_store(int bits, double *p) {
  __builtin_masked_compress_store(lanes(bits), (v8d){17, 18, 19, 20, 21, 22, 23, 24}, p);
}

int main(int argc, char **argv) {
  (void)argv;
  /* argc is 1: the arrays themselves, and the masks 0x05, 0xFF and 0x00. */
  const double *in = src + 64 * (argc - 1);
  double *out = dst + 64 * (argc - 1);
  int masks[3] = {argc + 4, argc + 254, argc - 1};
  double sum = 0;
  for (int i = 0; i < 3; i++) {
    sum += masked_load(masks[i], in);
    masked_store(masks[i], out);
    sum += gather(masks[i], in);
    scatter(masks[i], out);
    sum += expand_load(masks[i], in);
    compress_store(masks[i], out);
  }
  printf("%g\n", sum);
  return 0;
}
