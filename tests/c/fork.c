/* The parent fills 10 then 20 ints; its forked child fills 7 and exits. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

volatile int g[100];

NOINLINE void fill(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    g[i] = i;
}

int main(void) {
  fill(10);
  pid_t child = fork();
  if (child == 0) {
    fill(7);
    exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  fill(20);
  return 0;
}
