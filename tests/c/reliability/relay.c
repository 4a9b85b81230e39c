/* Threads that end and are followed by others: argv[1] threads one after another, then
 * argv[1] / 4 waves of 4 at once. Each calls work() once, which reads a table of 1024 ints
 * (1024 loads, 4096 bytes); a thread-specific destructor of the program's, made after the
 * runtime's own, calls farewell() once the runtime has ended the thread. Prints the
 * checksum on stdout and the process's peak RSS in KiB on stderr ("rss <KiB>"). */
#include "../common.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#define TABLE 1024

static int table[TABLE];
static pthread_key_t key;
static long farewells;

NOINLINE static long work(long k) {
  long s = 0;
  PLAIN_LOOP
  for (int i = 0; i < TABLE; i++)
    s += table[i] * k;
  return s;
}

NOINLINE static void farewell(void *arg) {
  __atomic_add_fetch(&farewells, (long)arg, __ATOMIC_RELAXED);
}

static void *worker(void *arg) {
  pthread_setspecific(key, (void *)1);
  return (void *)work((long)arg);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  PLAIN_LOOP
  for (int i = 0; i < TABLE; i++)
    table[i] = i;
  /* After the first instrumented code: the runtime's key is older, its destructor first. */
  pthread_key_create(&key, farewell);
  long total = 0;
  for (long i = 0; i < n; i++) {
    pthread_t t;
    void *r;
    pthread_create(&t, 0, worker, (void *)i);
    pthread_join(t, &r);
    total += (long)r;
  }
  for (long w = 0; w < n / 4; w++) {
    pthread_t t[4];
    for (long j = 0; j < 4; j++)
      pthread_create(&t[j], 0, worker, (void *)(w + j));
    for (int j = 0; j < 4; j++) {
      void *r;
      pthread_join(t[j], &r);
      total += (long)r;
    }
  }
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  printf("%ld %ld\n", total, farewells);
  fprintf(stderr, "rss %ld\n", u.ru_maxrss);
  return 0;
}
