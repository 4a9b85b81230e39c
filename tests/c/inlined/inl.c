/* Calls an optimiser inlines, for crates/kage/tests/e2e_inlined.rs: built at -O0, -O2 and
 * -O3, a report must name the same source regions with the same lines at every level.
 * `fill` and `sum` are static, small, and called from two places each; `scale` is called
 * once; `depth` recurses (the optimiser may inline part of it). The arrays are global and
 * every one is read, so no store is dead. */
#define N 1000

double a[N], b[N];
volatile double sink;

static void fill(double *x, int n, double v) {
  for (int i = 0; i < n; i++)
    x[i] = v * i;
}

static double sum(const double *x, int n) {
  double s = 0;
  for (int i = 0; i < n; i++)
    s += x[i];
  return s;
}

static void scale(double *x, int n, double k) {
  for (int i = 0; i < n; i++)
    x[i] *= k;
}

static int depth(const double *x, int k) {
  if (k <= 0)
    return 0;
  int left = depth(x, k / 2);
  return (x[k] > 0) + left;
}

int main(int argc, char **argv) {
  (void)argv;
  int n = N - (argc > 100);
  fill(a, n, 1.0);
  fill(b, n, 2.0);
  scale(b, n, 0.5);
  sink = sum(a, n) + sum(b, n);
  sink = depth(a, n - 1);
  return 0;
}
