/* The memory effects of C library functions, whose code is not instrumented, each called
 * in a function of its own on data whose sizes are known; built with -fno-builtin too, so
 * that memcpy and memset stay calls. What each reads and writes, by hand (docs/abi.md,
 * "C library functions"):
 *   measure:  strlen("hello, world") reads 13 bytes (12 and the NUL).
 *   compare:  memcmp(a, b, 64) where they first differ at byte 40: reads 41 of each;
 *             strcmp("kage-alpha", "kage-beta"): differ at byte 5, reads 6 of each.
 *   search:   memchr(text, 'w', 64) finds byte 7: reads 8; strchr(text, 'z') finds none:
 *             reads the whole string and its NUL, 13.
 *   copy:     strcpy(buf, text) reads 13 and writes 13; memcpy(big, a, 64) reads and
 *             writes 64; memset(big, 0, 100) writes 100.
 *   append:   strcat(buf, "!!") after "hello, world": reads 13 of buf (to its NUL) and 3,
 *             writes 3 at buf + 12.
 *   io:       read(fd of /dev/zero, big, 50) writes 50; fread(big, 4, 5, /dev/zero) writes
 *             20; fputs(text, /dev/null) reads 13.
 *   scan:     strspn(text, "hel") stops at byte 4: reads 5 of text and "hel" with its NUL;
 *             strstr(text, "wor") matches at 7: reads 10 of text and 4 of "wor";
 *             snprintf(out, 32, "%d-%d", 12, 345) writes "12-345" and its NUL, 7; then one
 *             byte of out is read.
 * Prints what it computed. */
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include "../common.h"

const char text[] = "hello, world";
char a[64], b[64], buf[64], big[128];

NOINLINE size_t measure(const char *s) { return strlen(s); }

NOINLINE int compare(void) {
  return (memcmp(a, b, sizeof a) < 0) + 2 * (strcmp("kage-alpha", "kage-beta") < 0);
}

NOINLINE long search(void) {
  const char *w = memchr(text, 'w', sizeof text);
  const char *z = strchr(text, 'z');
  return (w - text) * 10 + (z == NULL);
}

NOINLINE void copy(void) {
  strcpy(buf, text);
  memcpy(big, a, sizeof a);
  memset(big, 0, 100);
}

NOINLINE void append(void) { strcat(buf, "!!"); }

NOINLINE long io(int fd, FILE *f, FILE *sink) {
  return read(fd, big, 50) + (long)fread(big, 4, 5, f) + (fputs(text, sink) >= 0);
}

NOINLINE long scan(void) {
  char out[32];
  size_t span = strspn(text, "hel");
  const char *w = strstr(text, "wor");
  int n = snprintf(out, sizeof out, "%d-%d", 12, 345);
  return (long)span * 1000 + (w - text) * 100 + n * 10 + (out[2] == '-');
}

int main(void) {
  for (int i = 0; i < 64; i++) a[i] = b[i] = (char)i;
  b[40] = 100;
  int fd = open("/dev/zero", O_RDONLY);
  FILE *f = fopen("/dev/zero", "rb");
  FILE *sink = fopen("/dev/null", "w");
  if (fd < 0 || !f || !sink) return 1;
  printf("%zu %d %ld\n", measure(text), compare(), search());
  copy();
  append();
  printf("%s %ld %ld\n", buf, io(fd, f, sink), scan());
  return 0;
}
