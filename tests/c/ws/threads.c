/* Threads share and split arrays: a line touched by several threads counts once. The main
 * thread alone runs before and after the workers, which all run inside one interval (the
 * test picks the interval), so interval boundaries are deterministic. */
#include <pthread.h>
#include <stdio.h>

#define WORKERS 4
#define PRIVATE (64 * 1024) /* 1024 lines per worker */
#define SHARED (32 * 1024)  /* 512 lines, read by every worker */

static unsigned char shared_buf[SHARED] __attribute__((aligned(4096)));
static unsigned char private_buf[WORKERS][PRIVATE] __attribute__((aligned(4096)));
static unsigned char main_buf[256 * 1024] __attribute__((aligned(4096)));
static long results[WORKERS];

/* volatile: one access per iteration, so the test can place interval boundaries outside
 * the workers' phase by counting. */
static void *worker(void *arg) {
  long id = (long)arg, s = 0;
  volatile unsigned char *sh = shared_buf, *mine = private_buf[id];
  for (long i = 0; i < SHARED; i += 8) s += sh[i];
  for (long i = 0; i < PRIVATE; i += 16) mine[i] = (unsigned char)(s + i);
  results[id] = s;
  return 0;
}

__attribute__((noinline)) static long sweep(long n, int rounds) {
  long s = 0;
  volatile unsigned char *p = main_buf;
  for (int r = 0; r < rounds; r++)
    for (long i = 0; i < n; i++) s += p[i] += 1;
  return s;
}

int main(void) {
  long s = sweep(sizeof main_buf, 4);
  pthread_t t[WORKERS];
  for (long i = 0; i < WORKERS; i++) pthread_create(&t[i], 0, worker, (void *)i);
  for (long i = 0; i < WORKERS; i++) pthread_join(t[i], 0);
  s += sweep(sizeof main_buf / 2, 4);
  for (int i = 0; i < WORKERS; i++) s += results[i];
  printf("%ld\n", s);
  return 0;
}
