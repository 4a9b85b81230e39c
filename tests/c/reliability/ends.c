/* Ends in the way argv[1] says after known work: "signal N" raises signal N, "quick"
 * calls quick_exit(5), "forward" asks the `kage run` that started it to pass SIGUSR1 on
 * (it sends SIGUSR1 to its parent and waits for it to come back). */
#include "../common.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 100
volatile int data[N];
static volatile sig_atomic_t forwarded;

NOINLINE void work(void) {
  PLAIN_LOOP
  for (int i = 0; i < N; i++)
    data[i] = i;
}

static void on_usr1(int sig) {
  (void)sig;
  forwarded = 1;
}

int main(int argc, char **argv) {
  work();
  if (argc > 2 && strcmp(argv[1], "signal") == 0)
    raise(atoi(argv[2]));
  if (argc > 1 && strcmp(argv[1], "quick") == 0)
    quick_exit(5);
  if (argc > 1 && strcmp(argv[1], "forward") == 0) {
    signal(SIGUSR1, on_usr1);
    kill(getppid(), SIGUSR1);
    for (int i = 0; i < 500 && !forwarded; i++)
      usleep(10000);
    return forwarded ? 0 : 9;
  }
  return 0;
}
