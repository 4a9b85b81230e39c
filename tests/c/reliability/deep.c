/* Recursion 400,000 frames deep (on a thread with a 256 MiB stack), each frame storing
 * once: the region stack's work per call must not grow with the depth. */
#include "../common.h"
#include <pthread.h>
#include <stdio.h>

#define DEPTH 400000
volatile int sink, zero;

/* The load after the call keeps the optimiser from turning the recursion into a loop. */
NOINLINE int down(int n) {
  sink = n;
  if (n == 0)
    return 0;
  int below = down(n - 1);
  return below + zero + 1;
}

static void *run(void *arg) {
  (void)arg;
  printf("%d\n", down(DEPTH - 1) + 1);
  return 0;
}

int main(void) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256u << 20);
  pthread_t t;
  pthread_create(&t, &attr, run, 0);
  pthread_join(t, 0);
  return 0;
}
