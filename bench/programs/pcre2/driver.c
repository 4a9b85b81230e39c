/* PCRE2's interpreter (pcre2_match, no JIT) and its DFA matcher for the benchmark suite:
 * generates `mb` MiB of text-like lines (the zstd/bzip2 vocabulary plus dates, addresses
 * and key=value pairs), then runs a set of patterns over every line: literals, classes,
 * alternations, captures, backreferences, lazy and possessive quantifiers, lookarounds,
 * caseless and Unicode matching. A regex engine is a backtracking interpreter: deep
 * recursion through its own frames, heavy inlining, branchy opcode dispatch. Usage:
 * pcre2 [mb]. Prints the match counts and a checksum of the captured offsets. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pcre2.h"


static const char *patterns[] = {
    "region",                                       /* a literal */
    "\\b(shadow|memory|cache)\\s+(line|page)\\b",   /* alternation, captures */
    "(\\d{4})-(\\d\\d)-(\\d\\d)",                   /* a date */
    "\\b(\\w+)\\s+\\1\\b",                          /* a repeated word: backreference */
    "key=([a-z]+);.*?value=(\\d+)",                 /* lazy */
    "(?i)KAGE\\s+TOOL",                             /* caseless */
    "(?<=count )\\d+(?! bytes)",                    /* lookbehind, negative lookahead */
    "^[a-z ]{20,}+$",                               /* possessive, anchored, multiline */
    "(\\d{1,3}\\.){3}\\d{1,3}",                     /* an address */
    "[^aeiou\\s]{4,}",                              /* a negated class */
};

/* One line in buf: words, sometimes a date, an address or a key=value pair. */
static size_t make_line(char *buf, size_t cap, uint64_t *x) {
  size_t at = 0;
  int words = 4 + (int)(*x % 9);
  for (int w = 0; w < words && at + 40 < cap; w++) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    switch (*x % 23) {
      case 0: at += (size_t)snprintf(buf + at, cap - at, "20%02u-%02u-%02u ", (unsigned)(*x >> 20) % 30, 1 + (unsigned)(*x >> 30) % 12, 1 + (unsigned)(*x >> 40) % 28); break;
      case 1: at += (size_t)snprintf(buf + at, cap - at, "10.%u.%u.%u ", (unsigned)(*x >> 16) % 256, (unsigned)(*x >> 24) % 256, (unsigned)(*x >> 32) % 256); break;
      case 2: at += (size_t)snprintf(buf + at, cap - at, "key=%s; x value=%u ", (*x >> 8) % 2 ? "alpha" : "beta", (unsigned)(*x >> 40) % 1000); break;
      case 3: at += (size_t)snprintf(buf + at, cap - at, "count %u%s ", (unsigned)(*x >> 20) % 5000, (*x >> 9) % 2 ? " bytes" : ""); break;
      case 4: at += (size_t)snprintf(buf + at, cap - at, "Kage Tool "); break;
      default: {
        static const char *vocabulary[] = {"the", "shadow", "region", "loop", "memory",
                                           "access", "kage", "count", "working", "set",
                                           "cache", "line", "page", "tool"};
        /* Skewed: the first words are the commonest, so words repeat side by side. */
        const char *v = vocabulary[((*x >> 5) % 14) * ((*x >> 9) % 3 != 0) % 14];
        at += (size_t)snprintf(buf + at, cap - at, "%s ", v);
      }
    }
  }
  if (at > 0) at--; /* no trailing space */
  buf[at] = 0;
  return at;
}

int main(int argc, char **argv) {
  size_t size = (size_t)((argc > 1 ? atof(argv[1]) : 8) * 1024 * 1024);
  size_t npat = sizeof patterns / sizeof *patterns;
  pcre2_code *code[sizeof patterns / sizeof *patterns];
  for (size_t p = 0; p < npat; p++) {
    int err;
    PCRE2_SIZE off;
    uint32_t options = p == 7 ? PCRE2_MULTILINE : 0;
    code[p] = pcre2_compile((PCRE2_SPTR)patterns[p], PCRE2_ZERO_TERMINATED, options, &err, &off, NULL);
    if (!code[p]) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(err, message, sizeof message);
      fprintf(stderr, "pattern %zu: %s at %zu\n", p, (char *)message, (size_t)off);
      return 1;
    }
  }
  pcre2_match_data *md = pcre2_match_data_create(16, NULL);
  int workspace[64];
  uint64_t matches[sizeof patterns / sizeof *patterns] = {0}, dfa = 0, checksum = 1469598103934665603ull;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  char line[512];
  size_t done = 0;
  while (done < size) {
    size_t len = make_line(line, sizeof line, &x);
    done += len + 1;
    for (size_t p = 0; p < npat; p++) {
      PCRE2_SIZE start = 0;
      /* Every match in the line, as a global search does. */
      while (start <= len) {
        int rc = pcre2_match(code[p], (PCRE2_SPTR)line, len, start, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        matches[p]++;
        for (int i = 0; i < 2 * rc; i++) checksum = (checksum ^ ov[i]) * 1099511628211ull;
        start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
      }
    }
    /* The DFA matcher on two of them: every match length at once. */
    if (pcre2_dfa_match(code[1], (PCRE2_SPTR)line, len, 0, 0, md, NULL, workspace, 64) > 0) dfa++;
    if (pcre2_dfa_match(code[9], (PCRE2_SPTR)line, len, 0, 0, md, NULL, workspace, 64) > 0) dfa++;
  }
  printf("pcre2 bytes=%zu", done);
  for (size_t p = 0; p < npat; p++) printf(" %llu", (unsigned long long)matches[p]);
  printf(" dfa=%llu checksum=%llu\n", (unsigned long long)dfa, (unsigned long long)checksum);
  pcre2_match_data_free(md);
  for (size_t p = 0; p < npat; p++) pcre2_code_free(code[p]);
  return 0;
}
