/* Shared by the zstd and bzip2 drivers, so the two compressors see the same input and
 * report their output the same way. */
#ifndef KAGE_BENCH_TEXTGEN_H
#define KAGE_BENCH_TEXTGEN_H
#include <stdint.h>
#include <stdio.h>

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

#endif
