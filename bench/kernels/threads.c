/* Threads started again and again, after mimalloc's stress test: r rounds, each starting 16
 * threads that allocate objects of random sizes (16 B to 4 KiB), fill and sum them, hand
 * each to a slot other threads take objects from (and free), and read a table every thread
 * shares. Many threads over the run, some at a time: what a thread pool's churn costs a
 * tool that keeps state per thread. Usage: threads [rounds]. Prints a checksum. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 16
#define OBJECTS 2000
#define SLOTS 4096
#define TABLE (1 << 18)

static uint32_t table[TABLE];
static void *slots[SLOTS];

struct job {
  unsigned seed;
  uint64_t sum;
};

static uint64_t fill_and_sum(unsigned char *p, size_t n, unsigned v) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) {
    p[i] = (unsigned char)(v + i);
    s += p[i];
  }
  return s;
}

static uint64_t read_table(unsigned from) {
  uint64_t s = 0;
  for (unsigned i = 0; i < TABLE; i += 7)
    s += table[(from + i) & (TABLE - 1)];
  return s;
}

static void *worker(void *arg) {
  struct job *job = arg;
  unsigned seed = job->seed;
  uint64_t sum = read_table(seed);
  for (int i = 0; i < OBJECTS; i++) {
    size_t n = 16 + rand_r(&seed) % 4080;
    unsigned char *p = malloc(n);
    sum += fill_and_sum(p, n, seed);
    void *old = __atomic_exchange_n(&slots[rand_r(&seed) % SLOTS], p, __ATOMIC_ACQ_REL);
    free(old);
  }
  job->sum = sum;
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  for (unsigned i = 0; i < TABLE; i++)
    table[i] = i * 2654435761u;
  uint64_t checksum = 0;
  for (int r = 0; r < rounds; r++) {
    pthread_t threads[THREADS];
    struct job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
      jobs[t].seed = (unsigned)(r * THREADS + t);
      pthread_create(&threads[t], NULL, worker, &jobs[t]);
    }
    for (int t = 0; t < THREADS; t++) {
      pthread_join(threads[t], NULL);
      checksum += jobs[t].sum;
    }
  }
  for (int i = 0; i < SLOTS; i++)
    free(slots[i]);
  printf("threads rounds=%d threads=%d checksum=%llu\n", rounds, rounds * THREADS,
         (unsigned long long)checksum);
  return 0;
}
