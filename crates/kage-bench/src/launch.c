/* kage-bench's launcher: `launch RESULT PROGRAM [ARGS...]` runs PROGRAM as its own child,
 * without address-space randomisation, writes that child's peak resident set (ru_maxrss,
 * KiB) to the file RESULT, and ends the way the child ended (same exit code, or killed by
 * the same signal).
 *
 * Linux keeps a process's peak RSS across exec, and a forked child starts with the pages of
 * its parent: a program started straight from the harness would inherit the harness's few
 * megabytes as a floor under its own peak. Forked from this small static program, it
 * inherits almost nothing.
 *
 * Without randomisation, every run of a program sees the same addresses (stacks, heap,
 * libraries), so the reports of two configurations of a tool can be compared exactly:
 * otherwise where stack data falls in cache lines changes from run to run. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s RESULT PROGRAM [ARGS...]\n", argv[0]);
    return 127;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("launch: fork");
    return 127;
  }
  if (pid == 0) {
    int current = personality(0xffffffff);
    if (current != -1) personality(current | ADDR_NO_RANDOMIZE);
    execvp(argv[2], argv + 2);
    fprintf(stderr, "launch: cannot run %s: ", argv[2]);
    perror(NULL);
    _exit(127);
  }
  int status;
  struct rusage usage;
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      perror("launch: wait4");
      return 127;
    }
  }
  FILE *result = fopen(argv[1], "w");
  if (!result || fprintf(result, "%ld\n", usage.ru_maxrss) < 0 || fclose(result) != 0) {
    fprintf(stderr, "launch: cannot write %s: ", argv[1]);
    perror(NULL);
    return 127;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    raise(sig);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 127;
}
