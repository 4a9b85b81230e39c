/* Unaligned 4-byte reads, each in a function of its own so that it is marked as a range of
 * at most two lines: 100 reads inside one 64-byte line whose next line nothing touches
 * (bytes 10..13 of every fourth line of `inside`), and 100 reads across a line boundary
 * (bytes 62..65 of every fourth line of `across`, so lines 4i and 4i + 1). Each read twice.
 * Lines touched, by hand: 100 + 2 * 100 = 300 (also with 16-byte lines: 10..13 lies in one,
 * 62..65 in two); accesses: 400. */
#include <stdio.h>
#include <string.h>

static unsigned char inside[256 * 100] __attribute__((aligned(4096)));
static unsigned char across[256 * 100] __attribute__((aligned(4096)));

__attribute__((noinline)) static unsigned read32(const unsigned char *p) {
  unsigned v;
  memcpy(&v, p, sizeof v);
  return v;
}

int main(void) {
  unsigned sum = 0;
  for (int round = 0; round < 2; round++)
    for (long i = 0; i < 100; i++) {
      sum += read32(inside + i * 256 + 10);
      sum += read32(across + i * 256 + 62);
    }
  printf("%u\n", sum);
  return 0;
}
