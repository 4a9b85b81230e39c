/* Three threads fill their rows and then wait forever (never joined) while the main thread
 * ends the program: by exit() (no argument), or by a crash ("crash"). The waiting threads'
 * regions are still open when the report is written. With "blocking", the first thread
 * blocks every signal before it waits, as a thread pool's workers often do. */
#include "../common.h"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 1000
volatile int data[4][N];
static volatile int ready;
static int blocking;

NOINLINE void work(int row) {
  PLAIN_LOOP
  for (int i = 0; i < N; i++)
    data[row][i] = i;
}

static void *wait_forever(void *arg) {
  work((int)(long)arg);
  if (blocking && (long)arg == 1) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, 0);
  }
  __sync_fetch_and_add(&ready, 1);
  for (;;)
    pause();
  return 0;
}

int main(int argc, char **argv) {
  pthread_t threads[3];
  blocking = argc > 1 && strcmp(argv[1], "blocking") == 0;
  for (long t = 0; t < 3; t++)
    pthread_create(&threads[t], 0, wait_forever, (void *)(t + 1));
  while (ready < 3)
    usleep(1000);
  work(0);
  if (argc > 1 && strcmp(argv[1], "crash") == 0)
    *(volatile int *)(long)(argc - 2) = 1; /* a null pointer the optimiser cannot see */
  exit(0);
}
