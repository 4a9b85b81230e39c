/* OpenMP: two parallel loops (a scaling, a sum reduction) run five times each by a team
 * of OMP_NUM_THREADS threads that libomp keeps alive between them, and past the end of
 * main. Per run of the loops, the scaling reads and writes N doubles and the sum reads N.
 * Prints the sum and the team's size. */
#include <omp.h>
#include <stdio.h>

#define N 100000

static double a[N], b[N];

static void scale(double k) {
#pragma omp parallel for
  for (int i = 0; i < N; i++)
    a[i] = b[i] * k;
}

static double total(void) {
  double s = 0;
#pragma omp parallel for reduction(+ : s)
  for (int i = 0; i < N; i++)
    s += a[i];
  return s;
}

int main(void) {
  for (int i = 0; i < N; i++)
    b[i] = i % 7;
  double s = 0;
  for (int r = 0; r < 5; r++) {
    scale(r + 1);
    s += total();
  }
  printf("%.0f %d\n", s, omp_get_max_threads());
  return 0;
}
