/* THREADS workers each store WORK ints; the main thread only starts and joins them. */
#include <pthread.h>
#include "common.h"

#define THREADS 4
#define WORK 1000

volatile int data[THREADS][WORK];

NOINLINE void *worker(void *arg) {
  long t = (long)arg;
  PLAIN_LOOP
  for (int i = 0; i < WORK; i++)
    data[t][i] = i;
  return 0;
}

int main(void) {
  pthread_t th[THREADS];
  PLAIN_LOOP
  for (long t = 0; t < THREADS; t++)
    pthread_create(&th[t], 0, worker, (void *)t);
  PLAIN_LOOP
  for (long t = 0; t < THREADS; t++)
    pthread_join(th[t], 0);
  return 0;
}
