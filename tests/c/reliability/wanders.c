/* A program that changes its working directory (to its first argument) before it ends: its
 * report still goes where it started, where `kage run` and the user look for it. Prints the
 * sum of what it wrote. */
#include <stdio.h>
#include <unistd.h>

volatile int values[100];

int main(int argc, char **argv) {
  for (int i = 0; i < 100; i++) values[i] = i;
  if (argc < 2 || chdir(argv[1]) != 0) {
    perror("chdir");
    return 1;
  }
  int sum = 0;
  for (int i = 0; i < 100; i++) sum += values[i];
  printf("%d\n", sum);
  return 0;
}
