/* Linked with -static: two threads fill their halves of an array. */
#include "../common.h"
#include <pthread.h>
#include <stdio.h>

#define N 1000
volatile int data[2 * N];

NOINLINE void fill(int half) {
  PLAIN_LOOP
  for (int i = 0; i < N; i++)
    data[half * N + i] = i;
}

static void *run(void *arg) {
  fill((int)(long)arg);
  return 0;
}

int main(void) {
  pthread_t t;
  pthread_create(&t, 0, run, (void *)1L);
  fill(0);
  pthread_join(t, 0);
  printf("%d\n", data[N - 1] + data[2 * N - 1]);
  return 0;
}
