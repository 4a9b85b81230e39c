/* An n-body simulation (all pairs, softened gravity) of n particles for `steps` steps, in
 * structure-of-arrays layout. Usage: nbody [n] (steps fixed at 10). Prints a checksum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  int steps = 10;
  double dt = 0.01, soft = 0.01;
  double *x = malloc(sizeof(double) * n), *y = malloc(sizeof(double) * n);
  double *z = malloc(sizeof(double) * n), *vx = calloc(n, sizeof(double));
  double *vy = calloc(n, sizeof(double)), *vz = calloc(n, sizeof(double));
  double *m = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) {
    x[i] = (double)(i % 97) / 97; y[i] = (double)(i % 89) / 89; z[i] = (double)(i % 83) / 83;
    m[i] = 1.0 + (double)(i % 7) / 7;
  }
  #pragma kage profile
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < n; i++) {
      double ax = 0, ay = 0, az = 0;
      for (int j = 0; j < n; j++) {
        double dx = x[j] - x[i], dy = y[j] - y[i], dz = z[j] - z[i];
        double r2 = dx * dx + dy * dy + dz * dz + soft;
        double inv = m[j] / (r2 * sqrt(r2));
        ax += dx * inv; ay += dy * inv; az += dz * inv;
      }
      vx[i] += ax * dt; vy[i] += ay * dt; vz[i] += az * dt;
    }
    for (int i = 0; i < n; i++) { x[i] += vx[i] * dt; y[i] += vy[i] * dt; z[i] += vz[i] * dt; }
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += x[i] + y[i] + z[i];
  printf("nbody n=%d checksum=%.10e\n", n, sum);
  free(x); free(y); free(z); free(vx); free(vy); free(vz); free(m);
  return 0;
}
