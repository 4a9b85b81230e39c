/* Footprints known by construction, for the footprint tool (crates/kage/tests/
 * e2e_footprint.rs derives every expected number from the byte ranges listed here).
 * Every access is to a volatile global, so -O2 keeps each one as written (one load or
 * store of the stated size) and no local ever lives in memory. */
#include "../common.h"
#include <pthread.h>

static volatile unsigned char buf[4096] __attribute__((aligned(4096)));
static volatile int grid[16][16] __attribute__((aligned(4096))); /* rows of 64 bytes */
static volatile long arr[64] __attribute__((aligned(4096)));
static volatile unsigned char per_thread[2][256] __attribute__((aligned(4096)));
static volatile unsigned char shared[64] __attribute__((aligned(64)));

/* Touches buf[0, n): exactly n distinct bytes per call. */
NOINLINE void touch_n(int n) {
  PLAIN_LOOP for (int i = 0; i < n; i++) buf[i] = 1;
}

/* Rows 0, 2, 4, 6, columns 0..7 of grid, each read and written: the outer loop touches
 * 4 x 32 bytes, each of the 4 instances of the inner loop the 32 bytes of one row. */
NOINLINE void nested(void) {
  PLAIN_LOOP for (int r = 0; r < 4; r++) {
    PLAIN_LOOP for (int c = 0; c < 8; c++) grid[r * 2][c] += 1;
  }
}

/* rec(d) writes arr[d] after recursing: rec(d) touches arr[0..d], 8 (d + 1) bytes. */
NOINLINE void rec(int d) {
  if (d > 0) rec(d - 1);
  arr[d] = d;
}

/* Reads arr[0, k): 8 k bytes per call, whatever earlier calls touched. */
NOINLINE long sum_arr(int k) {
  long s = 0;
  PLAIN_LOOP for (int i = 0; i < k; i++) s += arr[i];
  return s;
}

/* Writes buf[lo, hi). */
NOINLINE void sweep(int lo, int hi) {
  PLAIN_LOOP for (int i = lo; i < hi; i++) buf[i] = 2;
}

/* Each worker writes its own 256 bytes and reads the 64 shared ones: 320 bytes. */
NOINLINE void *worker(void *arg) {
  long id = (long)arg;
  PLAIN_LOOP for (int i = 0; i < 256; i++) per_thread[id][i] = 3;
  PLAIN_LOOP for (int i = 0; i < 64; i++) (void)shared[i];
  return 0;
}

int main(void) {
  touch_n(100);
  touch_n(10);
  touch_n(200);
  nested();
  rec(3);
  sum_arr(64);
  sum_arr(32);
  /* The loop is one instance whose footprint is the union [0, 40) of the three sweeps
   * [0, 20), [10, 30), [20, 40), which each touch 20 bytes. */
  PLAIN_LOOP for (int k = 0; k < 3; k++) sweep(k * 10, k * 10 + 20);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, worker, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  return 0;
}
