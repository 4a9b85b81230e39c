/* Rounds of threads that each touch 1 MiB of their own: argv[1] rounds of 4 threads. */
#include "../common.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define BYTES (1 << 20)

NOINLINE static long touch(unsigned char *p, long v) {
  long s = 0;
  for (long i = 0; i < BYTES; i += 8) {
    p[i] = (unsigned char)(v + i);
    s += p[i];
  }
  return s;
}

static void *worker(void *arg) {
  unsigned char *p = malloc(BYTES);
  long s = touch(p, (long)arg);
  free(p);
  return (void *)s;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 1;
  long total = 0;
  for (int r = 0; r < rounds; r++) {
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++)
      pthread_create(&threads[t], 0, worker, (void *)t);
    for (int t = 0; t < THREADS; t++) {
      void *s;
      pthread_join(threads[t], &s);
      total += (long)s;
    }
  }
  printf("%ld\n", total);
  return 0;
}
