/* bzip2 round trip for the benchmark suite: generates `mb` MiB of compressible text-like
 * data, compresses it with block size 9, decompresses and verifies it. Usage: bzip2-bench
 * [mb]. Prints the compressed size and a checksum of the compressed bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bzlib.h"

#include "../common/textgen.h"

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
