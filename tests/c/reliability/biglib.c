/* A shared library whose loop runs long enough for every tool's periodic work (the
 * working-set tool's interval tick) to happen inside it. */
#include <stdlib.h>

double big_sum(int n) {
  double *a = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++)
    a[i] = i * 0.5;
  double s = 0;
  for (int r = 0; r < 20; r++)
    for (int i = 0; i < n; i++)
      s += a[i] * r;
  free(a);
  return s;
}
