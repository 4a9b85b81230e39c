/* Calls the optimiser cuts into pieces and moves (bench: bzip2's bsW, Lua's testnext), each
 * piece of which must not count as a call of its own:
 * - put() called on both sides of an if/else on one line: LLVM merges the calls' common
 *   tail into one block with a call site at column 0, and the caller's load it reloads
 *   where put's own loop exits sits between put's blocks;
 * - put() in a loop whose loads of the stream's state LICM hoists out of it;
 * - next_is() as a loop's condition, `while (next_is(&lex, ','))`: the loop is rotated, the
 *   test at the end of each iteration and the rest of the call (its call of advance(),
 *   taken when the test passed) at the start of the next one.
 * Usage: pieces [N] (default 1000). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

struct stream {
  unsigned buf;
  int live;
  int n;
  unsigned char out[4096];
};

static void put(struct stream *s, int bits, unsigned v) {
  while (s->live >= 8) {
    s->out[s->n++ & 4095] = (unsigned char)(s->buf >> 24);
    s->buf <<= 8;
    s->live -= 8;
  }
  s->buf |= v << (32 - s->live - bits);
  s->live += bits;
}

struct lexer {
  const char *text;
  int pos;
  int token;
};

/* Not inlined: a call inside next_is's code, as luaX_next is in testnext's. */
__attribute__((noinline)) static void advance(struct lexer *lex) {
  lex->pos++;
  lex->token = lex->text[lex->pos];
}

static int next_is(struct lexer *lex, int c) {
  if (lex->token == c) {
    advance(lex);
    return 1;
  }
  return 0;
}

/* Counts the items of a comma-separated list of one-character items, ended by any other
 * character. */
__attribute__((noinline)) static int items(struct lexer *lex) {
  int n = 1;
  advance(lex); /* to the first item */
  advance(lex); /* past it */
  while (next_is(lex, ',')) {
    advance(lex);
    n++;
  }
  return n;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  static struct stream s;
  unsigned char *bits = malloc(n);
  for (int i = 0; i < n; i++) bits[i] = (i * 7919) % 3 == 0;
  /* n calls of put, one per element. */
  for (int i = 0; i < n; i++)
    if (bits[i]) put(&s, 1, 1); else put(&s, 1, 0);
  /* n / 4 more, 5 bits each. */
  for (int i = 0; i < n / 4; i++) put(&s, 5, bits[i] ? 21u : 10u);
  /* Lists of 1, 2, 3, ... items: "a", "a,a", "a,a,a", ...; list k makes k calls of next_is
   * (k - 1 of them true) and 2k calls of advance (one per item and one per comma). */
  int lists = n / 100;
  long total = 0;
  char *text = malloc(2 * (size_t)lists + 2);
  for (int k = 1; k <= lists; k++) {
    for (int j = 0; j < 2 * k - 1; j++) text[j] = j % 2 ? ',' : 'a';
    text[2 * k - 1] = ';';
    struct lexer lex = {text, -1, 0};
    total += items(&lex);
  }
  printf("%u %d %d %ld\n", s.buf, s.live, s.n, total);
  free(text);
  free(bits);
  return 0;
}
