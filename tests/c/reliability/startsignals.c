/* Signals that come while threads start: each new thread is sent SIGUSR1 again and again
 * while it sets itself up with the runtime (its first event), and runs until its handler
 * ran. A handler that ran during that set-up entered the runtime again, which waited for
 * the lock the set-up held: the program hung (one run in four of a program that signalled
 * three threads 2,000 times; the window is narrow, so this test finds it only sometimes). */
#include "../common.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define THREADS 64
static atomic_long handled;
static _Thread_local volatile int mine;

NOINLINE void on_usr1(int sig) {
  (void)sig;
  mine = 1;
  atomic_fetch_add(&handled, 1);
}

NOINLINE long work(long n) {
  long s = 0;
  for (long i = 0; i < n; i++)
    s += (i * 7) % 13;
  return s;
}

static void *run(void *arg) {
  (void)arg;
  long s = 0;
  while (!mine)
    s += work(100);
  /* Signals still on their way die with the thread: a handler running while the thread
   * ends (after the runtime closed its regions) would not be measured. */
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, 0);
  return (void *)s;
}

int main(void) {
  signal(SIGUSR1, on_usr1);
  pthread_t t[THREADS];
  struct timespec pause = {0, 2000};
  for (int i = 0; i < THREADS; i++) {
    pthread_create(&t[i], 0, run, 0);
    for (int k = 0; k < 20; k++) {
      pthread_kill(t[i], SIGUSR1);
      nanosleep(&pause, 0);
    }
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], 0);
  printf("%ld\n", atomic_load(&handled));
  return 0;
}
