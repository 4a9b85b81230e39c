/* STREAM triad: a[i] = b[i] + q*c[i] over three arrays of n doubles, repeated: a pure
 * memory-bandwidth kernel. Usage: stream-triad [n] (reps fixed at 60). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  int reps = 60;
  double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
  double *c = malloc(sizeof(double) * n);
  for (long i = 0; i < n; i++) { a[i] = 1.0; b[i] = 2.0; c[i] = (double)(i % 1000) / 1000; }
  double q = 3.0;
  #pragma kage profile
  for (int r = 0; r < reps; r++) {
    for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    /* Feed the result back so repetitions are not folded into one. */
    double *t = b; b = a; a = t;
    q = q * 0.5 + 0.25;
  }
  double sum = 0;
  for (long i = 0; i < n; i++) sum += b[i];
  printf("stream-triad n=%ld checksum=%.10e\n", n, sum);
  free(a); free(b); free(c);
  return 0;
}
