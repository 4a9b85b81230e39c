/* zstd round trip for the benchmark suite: generates `mb` MiB of compressible text-like
 * data, compresses it at level 3 and 9, decompresses and verifies it. Usage: zstd-bench [mb].
 * Prints the compressed sizes and a checksum of the compressed bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zstd.h"

/* Words from a small vocabulary with skewed frequencies: roughly 3-4x compressible. */
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
  size_t size = (size_t)(argc > 1 ? atof(argv[1]) : 24) * 1024 * 1024;
  unsigned char *input = malloc(size), *output = malloc(size);
  size_t bound = ZSTD_compressBound(size);
  unsigned char *compressed = malloc(bound);
  generate(input, size);
  uint64_t checksum = 0;
  int levels[] = {3, 9};
  printf("zstd bytes=%zu", size);
  for (int l = 0; l < 2; l++) {
    size_t csize = ZSTD_compress(compressed, bound, input, size, levels[l]);
    if (ZSTD_isError(csize)) { fprintf(stderr, "compress: %s\n", ZSTD_getErrorName(csize)); return 1; }
    size_t dsize = ZSTD_decompress(output, size, compressed, csize);
    if (ZSTD_isError(dsize) || dsize != size || memcmp(input, output, size) != 0) {
      fprintf(stderr, "zstd round trip at level %d failed\n", levels[l]);
      return 1;
    }
    checksum ^= fnv1a(compressed, csize);
    printf(" level%d=%zu", levels[l], csize);
  }
  printf(" checksum=%llu\n", (unsigned long long)checksum);
  free(input); free(output); free(compressed);
  return 0;
}
