/* Loops as leaves, for crates/kage/tests/e2e_inlined.rs: in a footprint build a loop whose
 * regions inside are all leaves is counted from the ranges it reported, without region
 * events, and must give every region the footprints a build with the region hooks and a
 * call per access gives. Every access is to a global. The shapes:
 * - `find`: an open-addressing lookup, inlined, that calls `hash` (which reads the salt),
 *   then probes in a loop that reads each key through the inlined `key_at` (a loop inside
 *   a call, a call inside the loop), left by a `return` from inside the loop or at its
 *   end;
 * - `walk`: a loop that runs from 0 to 200 iterations, each reporting its own ranges:
 *   short ones stay leaves, long ones fill the runtime's buffer and become levels;
 * - `sums`: two nested loops, the inner one's instances inside the outer one's;
 * - `calls_sometimes`: a loop that calls a function on some iterations (it becomes a level
 *   there, and the leaves inside it go on);
 * - `first_at_header`: a loop with no guard, whose header is the first block of the inlined
 *   call around it (the call's entry hook is at the loop's header in some builds).
 * Prints a checksum. */
#include <stdio.h>

#define SLOTS 256
volatile int keys[SLOTS];
volatile int vals[SLOTS];
volatile int data[4096];
volatile long out[64];
volatile int m[32][32];

volatile unsigned salt = 2654435761u;

static unsigned hash(int k) { return ((unsigned)k * salt) >> 24; }

static int key_at(unsigned i) { return keys[i]; }

static int find(int k) {
  for (unsigned i = hash(k), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
    int here = key_at(i);
    if (here == k)
      return vals[i];
    if (here == 0)
      return -1;
  }
  return -1;
}

static void insert(int k, int v) {
  unsigned i = hash(k);
  while (keys[i] != 0 && keys[i] != k)
    i = (i + 1) & (SLOTS - 1);
  keys[i] = k;
  vals[i] = v;
}

static long walk(int from, int n) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += data[(from + i * 17) & 4095];
  return s;
}

static long sums(int r) {
  long s = 0;
  for (int i = 0; i < 4 + (r & 3); i++)
    for (int j = 0; j < 3 + (r & 1); j++)
      s += m[(r + i) & 31][(j * 5 + i) & 31];
  return s;
}

__attribute__((noinline)) void note(int i) { out[i & 63] += i; }

static long calls_sometimes(int r) {
  long s = 0;
  for (int i = 0; i < 5 + (r & 1); i++) {
    s += data[(r * 7 + i) & 4095];
    if (((r + i) % 5) == 0)
      note(i);
  }
  return s;
}

static long first_at_header(int r) {
  long s = 0;
  int i = 0;
  do {
    s += data[(r + i * 3) & 4095];
    i++;
  } while (i < 1 + (r & 3));
  return s;
}

int main(int argc, char **argv) {
  (void)argv;
  long total = 0;
  for (int k = 1; k <= 150; k++)
    insert(k * 7, k);
  for (int r = 0; r < 3000; r++) {
    total += find((r % 200) * 7 * argc);
    total += walk(r, (r * 37) % 201);
    total += sums(r);
    total += calls_sometimes(r);
    total += first_at_header(r);
  }
  printf("%ld\n", total);
  return 0;
}
