/* Memory mapped, touched and unmapped between two interval boundaries: with mmap/munmap
 * directly and through glibc's malloc of large blocks (which uses its internal munmap, out
 * of reach of interposition). The scan must still find their lines (checked against the
 * trace reference in e2e_working_set.rs). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

__attribute__((noinline)) static long touch(volatile unsigned char *p, long n) {
  long s = 0;
  for (long i = 0; i < n; i += 64) s += p[i] += 1;
  return s;
}

int main(void) {
  long s = 0;
  for (int round = 0; round < 6; round++) {
    long n = (1 << 20) + round * 65536;
    unsigned char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    s += touch(p, n);
    munmap(p, n);
    unsigned char *q = malloc(512 * 1024 + round * 4096);
    s += touch(q, 512 * 1024);
    free(q);
  }
  printf("%ld\n", s);
  return 0;
}
