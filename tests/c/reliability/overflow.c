/* Recovering from stack overflows: a SIGSEGV handler on an alternate stack leaves by
 * siglongjmp, three times. A fault cannot wait: when the overflow comes inside a runtime
 * hook (the hooks' frames reach deeper than the program's own), the handler leaves the
 * runtime half-way and the thread is ignored from then on; the report must say so rather
 * than show main and down with 0 instances as if that were the answer. */
#include "../common.h"
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static sigjmp_buf back;
static char altstack[1 << 16];

NOINLINE void on_segv(int sig) {
  (void)sig;
  siglongjmp(back, 1);
}

NOINLINE long down(long n) {
  volatile char pad[256];
  pad[n % 256] = (char)n;
  return n == 0 ? 0 : down(n - 1) + pad[n % 256];
}

int main(void) {
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_segv;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGSEGV, &sa, 0);
  int overflows = 0;
  for (int i = 0; i < 3; i++) {
    if (sigsetjmp(back, 1) == 0)
      down(1L << 40);
    else
      overflows++;
  }
  printf("%d overflows, then %ld\n", overflows, down(1000));
  return 0;
}
