/* Leaf inlined calls interrupted by an instrumented signal handler, for
 * crates/kage/tests/e2e_inlined.rs: a profiling timer fires every 50 us while `api` runs
 * its leaves (`slot` at its entry, `twice`, and `first`, a one-range leaf) 2000000 times;
 * the handler runs `on_tick`, with leaves of its own (`tick`, and `seen`, one-range).
 * Whatever a signal interrupts, each leaf's instances are its calls: `slot`, `twice` and
 * `first` 2000000, `tick` and `seen` as many as the handler ran (printed). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

volatile int g[64];
volatile long h[64];
volatile int ticks;

static int slot(int i) {
  int v = g[i & 63];
  if (v > 3)
    h[i & 63] += v;
  return v;
}

static int twice(int i) {
  int v = g[(i + 1) & 63];
  if (i & 1)
    v += g[(i + 2) & 63];
  return v;
}

static int first(int i) { return g[(i + 5) & 63]; }

__attribute__((noinline)) int api(int i) {
  int s = slot(i);
  s += twice(i);
  s += first(i);
  return s;
}

static void tick(int sig) {
  h[sig & 63] += 1;
  if (ticks & 1)
    g[(ticks + 7) & 63] += 1;
}

static int seen(int sig) { return g[(sig + 3) & 63]; }

__attribute__((noinline)) void on_tick(int sig) {
  tick(sig);
  h[2] += seen(sig);
  ticks++;
}

int main(int argc, char **argv) {
  (void)argv;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_tick;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval every = {{0, 50}, {0, 50}};
  setitimer(ITIMER_PROF, &every, NULL);
  long total = 0;
  for (int i = 0; i < 2000000; i++)
    total += api(i * argc);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  printf("%ld %d\n", total, ticks);
  return 0;
}
