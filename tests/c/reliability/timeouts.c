/* A computation cut short by a timer, five times: the handler leaves with siglongjmp. Under
 * the tools that call the runtime often, the signal mostly comes while the runtime is busy
 * on the thread; the handler used to run there, its siglongjmp leaving the thread marked
 * busy for good (every later event dropped: main, spin and the handler with 0 instances). */
#include "../common.h"
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>

#define ROUNDS 5
static sigjmp_buf recover;
static volatile int timeouts;

NOINLINE void on_alarm(int sig) {
  (void)sig;
  timeouts++;
  siglongjmp(recover, 1);
}

/* Never finishes by itself: the timer ends it. */
NOINLINE double spin(long n) {
  double s = 0;
  for (long i = 0; i < n; i++)
    for (int j = 0; j < 1000; j++)
      s += (double)(i ^ j) * 0.5;
  return s;
}

int main(void) {
  signal(SIGALRM, on_alarm);
  double total = 0;
  for (int round = 0; round < ROUNDS; round++) {
    if (sigsetjmp(recover, 1) == 0) {
      struct itimerval t = {{0, 0}, {0, 20000}};
      setitimer(ITIMER_REAL, &t, 0);
      total += spin(1L << 40);
    }
  }
  printf("%d timeouts\n", timeouts);
  return total < 0;
}
