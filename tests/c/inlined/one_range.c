/* One-range leaves (docs/abi.md, "Footprint instrumentation"), for
 * crates/kage/tests/e2e_inlined.rs: inlined calls whose every instance is the one range
 * they report, counted without leaf hooks. `peek` (4 bytes) and the chain `get` -> `peek`
 * in straight code; `peek` inside a leaf that reads more (`pair`); `wipe`, a memset of a
 * run-time length (0 on every fourth call); 40 in a row in `spread` (more than the
 * runtime's range buffer holds); calls before a reset (not counted), with accesses off
 * (counted, touching nothing), and on two more threads. Per thread after the reset, `api`
 * runs 3100 times: 1000 + 100 (off) in main, 1000 in each worker. `deeper` runs `pair`
 * 100 times one call deeper than anything before it (the C part's count alone gives the
 * deepest nesting). */
#include "../common.h"
#include "../../../crates/kage-rt/include/kage.h"
#include <pthread.h>
#include <string.h>

int a[4096], b[4096];
char bytes[256];
volatile long sink;

static int peek(const int *p, int i) { return p[i]; }

static int get(const int *p, int i) { return peek(p, i); }

/* A leaf with a range of its own besides its one-range leaf's. */
static int pair(int i) {
  int x = a[(i * 7) & 4095];
  return x + peek(b, (i * 13 + 1) & 4095);
}

static void wipe(char *p, int n) { memset(p, 0, (size_t)n); }

NOINLINE int api(int i) {
  int s = peek(a, i & 4095);
  s += get(b, (i * 3) & 4095);
  s += pair(i);
  wipe(bytes + (i & 63), (i & 3) * 16);
  return s;
}

#define P(k) s += peek(a, (i + (k) * 97) & 4095);
NOINLINE int spread(int i) {
  int s = 0;
  P(0)
  P(1)
  P(2)
  P(3)
  P(4)
  P(5)
  P(6)
  P(7)
  P(8)
  P(9)
  P(10)
  P(11)
  P(12)
  P(13)
  P(14)
  P(15)
  P(16)
  P(17)
  P(18)
  P(19)
  P(20)
  P(21)
  P(22)
  P(23)
  P(24)
  P(25)
  P(26)
  P(27)
  P(28)
  P(29)
  P(30)
  P(31)
  P(32)
  P(33)
  P(34)
  P(35)
  P(36)
  P(37)
  P(38)
  P(39)
  return s;
}

NOINLINE int deeper(int i) { return pair(i + 3); }

NOINLINE int below_main(int i) { return deeper(i); }

static void *worker(void *arg) {
  long s = 0;
  for (int i = 0; i < 1000; i++)
    s += api(i + (int)(long)arg);
  sink += s;
  return 0;
}

int main(void) {
  long s = 0;
  for (int i = 0; i < 500; i++)
    s += api(i);
  kage_reset();
  for (int i = 0; i < 1000; i++)
    s += api(i);
  kage_set_enabled(0);
  for (int i = 0; i < 100; i++)
    s += api(i);
  kage_set_enabled(1);
  for (int i = 0; i < 200; i++)
    s += spread(i);
  for (int i = 0; i < 100; i++)
    s += below_main(i);
  pthread_t t[2];
  for (long k = 0; k < 2; k++)
    pthread_create(&t[k], 0, worker, (void *)(k * 5000));
  for (int k = 0; k < 2; k++)
    pthread_join(t[k], 0);
  sink += s;
  return 0;
}
