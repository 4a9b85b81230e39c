/* bzip2 round trip for the benchmark suite: generates `mb` MiB of compressible text-like
 * data, compresses it with block size 9, decompresses and verifies it. Usage: bzip2-bench
 * [mb]. Prints the compressed size and a checksum of the compressed bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bzlib.h"

/* The same generator as the zstd driver, so the two compressors see similar input. */
static void generate(unsigned char *buf, size_t size) {
  static const char *words[] = {"the", "shadow", "region", "loop", "memory", "access", "kage",
                                "count", "working", "set", "cache", "line", "page", "tool"};
  uint64_t x = 0x2545F4914F6CDD1Dull;
  size_t at = 0;
  while (at < size) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const char *w = words[(x % 14) * (x % 3 != 0) % 14];
    char number[24];
    const char *piece = w;
    if (x % 11 == 0) { snprintf(number, sizeof number, "%llu", (unsigned long long)(x >> 50)); piece = number; }
    for (const char *c = piece; *c && at < size; c++) buf[at++] = (unsigned char)*c;
    if (at < size) buf[at++] = x % 17 == 0 ? '\n' : ' ';
  }
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  unsigned size = (unsigned)((argc > 1 ? atof(argv[1]) : 6) * 1024 * 1024);
  char *input = malloc(size), *output = malloc(size);
  unsigned bound = size + size / 100 + 600; /* bzip2's documented worst case */
  char *compressed = malloc(bound);
  generate((unsigned char *)input, size);
  unsigned csize = bound;
  int rc = BZ2_bzBuffToBuffCompress(compressed, &csize, input, size, 9, 0, 0);
  if (rc != BZ_OK) { fprintf(stderr, "compress failed: %d\n", rc); return 1; }
  unsigned dsize = size;
  rc = BZ2_bzBuffToBuffDecompress(output, &dsize, compressed, csize, 0, 0);
  if (rc != BZ_OK || dsize != size || memcmp(input, output, size) != 0) {
    fprintf(stderr, "bzip2 round trip failed: %d\n", rc);
    return 1;
  }
  printf("bzip2 bytes=%u compressed=%u checksum=%llu\n", size, csize,
         (unsigned long long)fnv1a((unsigned char *)compressed, csize));
  free(input); free(output); free(compressed);
  return 0;
}
