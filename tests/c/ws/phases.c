/* Working-set phases whose shapes are known: streaming over arrays of different sizes,
 * strided access that skips lines, pointer chasing through a shuffled list, accesses that
 * straddle two lines, memset/memcpy ranges, a call in the middle of a basic block, and
 * branches that touch the same fields on both arms (marks the pass leaves out).
 * The exact per-interval counts are checked against the trace reference (e2e_working_set.rs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL (16 * 1024)        /* 256 lines of 64 bytes */
#define LARGE (4 * 1024 * 1024)  /* 65536 lines */

static unsigned char small_buf[SMALL] __attribute__((aligned(4096)));
static unsigned char large_buf[LARGE] __attribute__((aligned(4096)));
static unsigned char copy_buf[LARGE] __attribute__((aligned(4096)));

struct node {
  struct node *next;
  long pad[7]; /* one node per 64-byte line */
};

__attribute__((noinline)) static long stream(unsigned char *p, long n, int rounds) {
  long s = 0;
  for (int r = 0; r < rounds; r++)
    for (long i = 0; i < n; i++) {
      p[i] += (unsigned char)r;
      s += p[i];
    }
  return s;
}

__attribute__((noinline)) static long strided(unsigned char *p, long n, long stride) {
  long s = 0;
  for (long i = 0; i < n; i += stride) s += p[i];
  return s;
}

__attribute__((noinline)) static long chase(struct node *nodes, long n, int rounds) {
  /* Shuffle deterministically (an LCG), then link in that order. */
  long *order = malloc(n * sizeof(long));
  for (long i = 0; i < n; i++) order[i] = i;
  uint64_t x = 12345;
  for (long i = n - 1; i > 0; i--) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    long j = (long)((x >> 33) % (uint64_t)(i + 1));
    long t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (long i = 0; i < n; i++) nodes[order[i]].next = &nodes[order[(i + 1) % n]];
  free(order);
  long steps = 0;
  struct node *p = &nodes[0];
  for (int r = 0; r < rounds; r++)
    for (long i = 0; i < n; i++) {
      p = p->next;
      steps += (long)(p->pad[0] & 1) + 1;
    }
  return steps;
}

__attribute__((noinline)) static uint64_t straddle(unsigned char *p, long n) {
  uint64_t s = 0;
  for (long i = 0; i < n; i++) {
    uint64_t v;
    memcpy(&v, p + i * 64 + 60, sizeof v); /* bytes 60..67: two lines */
    s += v;
  }
  return s;
}

__attribute__((noinline)) static void noop(void) { __asm__ volatile(""); }

__attribute__((noinline)) static long split_block(long *a) {
  long s = a[0] + a[1];
  noop(); /* a call cuts the block into two segments */
  return s + a[16] + a[17];
}

struct tally {
  long hits, misses, last, pad[5];
  long far[16]; /* two more lines */
};
static struct tally tallies[4];

__attribute__((noinline)) static long branchy(struct tally *t, const unsigned char *keys, long n) {
  for (long i = 0; i < n; i++) {
    if (keys[i] & 1) {
      t->hits++;
      t->last = i;
    } else {
      t->misses++;
      t->far[keys[i] & 15] = i;
    }
    t->last += t->hits; /* both arms marked these bytes since the loop's header */
  }
  return t->hits + t->misses + t->last;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  long total = 0;
  total += stream(small_buf, SMALL, rounds * 8);
  total += stream(large_buf, LARGE, rounds);
  total += strided(large_buf, LARGE, 128); /* every other line */
  memset(copy_buf, 7, LARGE / 2);
  memcpy(copy_buf + LARGE / 2, large_buf, LARGE / 2);
  struct node *nodes = calloc(8192, sizeof(struct node));
  total += chase(nodes, 8192, rounds);
  free(nodes);
  total += (long)straddle(large_buf, 1000);
  total += split_block((long *)small_buf);
  total += branchy(&tallies[1], large_buf + 12345, 300000);
  printf("%ld\n", total);
  return 0;
}
