/* zstd round trip for the benchmark suite: generates `mb` MiB of compressible text-like
 * data, compresses it at level 3 and 9, decompresses and verifies it. Usage: zstd-bench [mb].
 * Prints the compressed sizes and a checksum of the compressed bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zstd.h"

#include "../common/textgen.h"

int main(int argc, char **argv) {
  size_t size = (size_t)((argc > 1 ? atof(argv[1]) : 24) * 1024 * 1024);
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
