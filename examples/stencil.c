/* The demo program: a 2-D Jacobi stencil with a checksum, the kind of kernel whose memory
 * behaviour Kage is for. Usage: stencil [size] [steps] */
#include <stdio.h>
#include <stdlib.h>

static double *grid_new(int n) {
  double *g = calloc((size_t)n * n, sizeof *g);
  if (!g) {
    perror("calloc");
    exit(1);
  }
  return g;
}

static void init(double *g, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      g[i * n + j] = (i == 0 || j == 0 || i == n - 1 || j == n - 1) ? 1.0 : 0.0;
}

static void sweep(const double *in, double *out, int n) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      out[i * n + j] = 0.25 * (in[(i - 1) * n + j] + in[(i + 1) * n + j] + in[i * n + j - 1] + in[i * n + j + 1]);
}

static double checksum(const double *g, int n) {
  double s = 0;
  for (int i = 0; i < n * n; i++)
    s += g[i];
  return s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 256;
  int steps = argc > 2 ? atoi(argv[2]) : 20;
  if (n < 3 || steps < 1) {
    fprintf(stderr, "usage: %s [size >= 3] [steps >= 1]\n", argv[0]);
    return 2;
  }
  double *a = grid_new(n), *b = grid_new(n);
  init(a, n);
  init(b, n);
  for (int s = 0; s < steps; s++) {
    sweep(a, b, n);
    double *t = a;
    a = b;
    b = t;
  }
  printf("checksum %.6f\n", checksum(a, n));
  free(a);
  free(b);
  return 0;
}
