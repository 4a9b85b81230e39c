/* kage_reset from another thread: a worker stores 10 times, waits while main resets, then
 * stores 3 times. Only the 3 count (the worker applies the reset at its next function
 * entry); its function, open at the reset, counts one instance. The barriers are the C
 * library's: not instrumented, no accesses counted. */
#include "common.h"
#include "../../crates/kage-rt/include/kage.h"
#include <pthread.h>

volatile int g[16];
static pthread_barrier_t stored, reset;

NOINLINE void store_one(int i) { g[i & 15] = i; }

NOINLINE void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < 10; i++)
    store_one(i);
  pthread_barrier_wait(&stored);
  pthread_barrier_wait(&reset);
  for (int i = 0; i < 3; i++)
    store_one(i);
  return 0;
}

int main(void) {
  pthread_t t;
  pthread_barrier_init(&stored, 0, 2);
  pthread_barrier_init(&reset, 0, 2);
  pthread_create(&t, 0, worker, 0);
  pthread_barrier_wait(&stored);
  kage_reset();
  pthread_barrier_wait(&reset);
  pthread_join(t, 0);
  return 0;
}
