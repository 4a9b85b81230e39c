/* A byte-scanning tokenizer over generated text: words, numbers, punctuation and white
 * space, classified byte by byte through a table, counting tokens of each kind and hashing
 * the words. Usage: tokenizer [megabytes]. Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { SPACE, LETTER, DIGIT, PUNCT };

int main(int argc, char **argv) {
  long mb = argc > 1 ? atol(argv[1]) : 48;
  long n = mb << 20;
  unsigned char *text = malloc(n);
  uint64_t state = 0x2545f4914f6cdd1dull;
  static const char alphabet[] = "etaoinshrdlu cmfwyp vbgkqjxz 0123456789 ,.;:!?()\n";
  for (long i = 0; i < n; i++) {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    text[i] = (unsigned char)alphabet[state % (sizeof alphabet - 1)];
  }
  unsigned char kind[256];
  for (int c = 0; c < 256; c++)
    kind[c] = (c >= 'a' && c <= 'z') ? LETTER : (c >= '0' && c <= '9') ? DIGIT
              : (c == ' ' || c == '\n') ? SPACE : PUNCT;
  uint64_t tokens[4] = {0}, hash = 0;
  long i = 0;
  while (i < n) {
    unsigned k = kind[text[i]];
    if (k == SPACE) { i++; continue; }
    tokens[k]++;
    uint64_t h = 1469598103934665603ull;
    if (k == PUNCT) { h ^= text[i++]; }
    else while (i < n && kind[text[i]] == k) { h = (h ^ text[i]) * 1099511628211ull; i++; }
    hash += h;
  }
  printf("tokenizer bytes=%ld words=%llu numbers=%llu punct=%llu hash=%llu\n", n,
         (unsigned long long)tokens[LETTER], (unsigned long long)tokens[DIGIT],
         (unsigned long long)tokens[PUNCT], (unsigned long long)hash);
  free(text);
  return 0;
}
