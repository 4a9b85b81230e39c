/* A parent forks children and sends each SIGTERM right after fork, while the child's
 * runtime is still starting its tool over: every child must leave its report, killed by
 * SIGTERM. Usage: killed [children]. Prints how many children SIGTERM ended. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

static void spin(long *a, long n) {
  for (;;)
    for (long i = 0; i < n; i++) sink += a[i]++;
}

int main(int argc, char **argv) {
  int children = argc > 1 ? atoi(argv[1]) : 4;
  /* Memory the tools have shadowed before the fork: a child's runtime has work to do. */
  long n = 1 << 22;
  long *a = calloc(n, sizeof *a);
  for (long i = 0; i < n; i++) a[i] = i;
  int killed = 0;
  for (int c = 0; c < children; c++) {
    pid_t pid = fork();
    if (pid == 0) {
      spin(a, n);
      _exit(0);
    }
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM;
  }
  printf("%d\n", killed);
  return 0;
}
