/* OmpSCR- and PolyBench-like kernels for the dependence analysis (issue 18, VMAD's
 * Table 2). Each nest carries `#pragma kage profile`, and `#pragma omp parallel for` where
 * the original benchmark's authors run a loop in parallel (OmpSCR's C versions; PolyBench's
 * OpenMP versions parallelise the outermost parallel loop). The comment before each nest
 * gives its levels (1-based, pre-order) and the levels that carry no dependence, derived by
 * hand; e2e_nests.rs checks the tool against both. Built without -fopenmp: the omp pragmas
 * are the authors' marks, not code. */
#include <stdio.h>
#include <stdlib.h>

#define N 48
#define T 4

static double A[N][N], B[N][N], C[N][N], D[N][N];
static double u[N][N], uold[N][N], f[N][N];
static double vx[N], vy[N], vz[N], w[N];
static double pos[N][3], vel[N][3], force[N][3];
static double path[N][N];

/* OmpSCR c_jacobi01, the copy: 1=i 2=j; parallel: 1, 2. */
void jacobi_copy(void) {
#pragma kage profile
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            uold[i][j] = u[i][j];
}

/* OmpSCR c_jacobi01, the sweep with its residual: 1=i 2=j; parallel: 1, 2. Both with
 * reduction(+:error). */
double jacobi_sweep(double ax, double ay, double b, double omega) {
    double error = 0.0;
#pragma kage profile
#pragma omp parallel for reduction(+:error)
    for (int i = 1; i < N - 1; i++)
        for (int j = 1; j < N - 1; j++) {
            double resid = (ax * (uold[i - 1][j] + uold[i + 1][j]) +
                            ay * (uold[i][j - 1] + uold[i][j + 1]) + b * uold[i][j] - f[i][j]) / b;
            u[i][j] = uold[i][j] - omega * resid;
            error += resid * resid;
        }
    return error;
}

/* OmpSCR c_pi: 1=i; parallel: 1. With reduction(+:sum). */
double pi(void) {
    double sum = 0.0, step = 1.0 / (N * 100);
#pragma kage profile
#pragma omp parallel for reduction(+:sum)
    for (int i = 0; i < N * 100; i++) {
        double x = (i + 0.5) * step;
        sum += 4.0 / (1.0 + x * x);
    }
    return sum * step;
}

/* OmpSCR c_mandel: 1=i (points) 2=the escape iteration (a while loop); parallel: 1.
 * With reduction(+:outside); the while loop carries its z. */
int mandel(void) {
    int outside = 0;
#pragma kage profile
#pragma omp parallel for reduction(+:outside)
    for (int i = 0; i < N * N; i++) {
        double cr = -2.0 + 2.5 * (i % N) / N, ci = -1.125 + 2.25 * (i / N) / N;
        double zr = cr, zi = ci;
        int k = 0;
        while (k < 64) {
            double t = zr * zr - zi * zi + cr;
            zi = 2 * zr * zi + ci;
            zr = t;
            if (zr * zr + zi * zi > 4.0) {
                outside++;
                break;
            }
            k++;
        }
    }
    return outside;
}

/* OmpSCR c_md, the forces: 1=i 2=k (clearing) 3=j 4=k; parallel: 1, 2, 4. j accumulates
 * into force[i][k]: a reduction into memory, which carries flow, anti and output
 * dependences at 3. */
void md_forces(void) {
#pragma kage profile
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3; k++)
            force[i][k] = 0.0;
        for (int j = 0; j < N; j++) {
            if (i == j)
                continue;
            for (int k = 0; k < 3; k++)
                force[i][k] += pos[j][k] - pos[i][k];
        }
    }
}

/* OmpSCR c_lu (LUreduction): 1=k 2=i 3=j; parallel: 2, 3. The authors run i. */
void lu(void) {
#pragma kage profile
    for (int k = 0; k < N - 1; k++) {
#pragma omp parallel for
        for (int i = k + 1; i < N; i++) {
            A[i][k] = A[i][k] / A[k][k];
            for (int j = k + 1; j < N; j++)
                A[i][j] = A[i][j] - A[i][k] * A[k][j];
        }
    }
}

/* PolyBench gemm: 1=i 2=j (scale) 3=k 4=j; parallel: 1, 2, 4. */
void gemm(double alpha, double beta) {
#pragma kage profile
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++)
            C[i][j] *= beta;
        for (int k = 0; k < N; k++)
            for (int j = 0; j < N; j++)
                C[i][j] += alpha * A[i][k] * B[k][j];
    }
}

/* PolyBench syrk, the lower triangle: 1=i 2=j (scaling, j <= i) 3=k 4=j (j <= i);
 * parallel: 1, 2, 4. */
void syrk(double alpha, double beta) {
#pragma kage profile
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        for (int j = 0; j <= i; j++)
            D[i][j] *= beta;
        for (int k = 0; k < N; k++)
            for (int j = 0; j <= i; j++)
                D[i][j] += alpha * B[i][k] * B[j][k];
    }
}

/* PolyBench mvt: 1=i 2=j; parallel: 1. j accumulates into vx[i] in memory. */
void mvt(void) {
#pragma kage profile
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            vx[i] = vx[i] + A[i][j] * vy[j];
}

/* PolyBench trisolv: 1=i 2=j (j < i); parallel: none. x[i] reads x[j], j < i, at 1; j
 * accumulates into x[i] in memory at 2. */
void trisolv(void) {
#pragma kage profile
    for (int i = 0; i < N; i++) {
        vz[i] = w[i];
        for (int j = 0; j < i; j++)
            vz[i] -= A[i][j] * vz[j];
        vz[i] = vz[i] / (A[i][i] + N);
    }
}

/* PolyBench jacobi-2d: 1=t 2=i 3=j (into B) 4=i 5=j (back into C); parallel: 2, 3, 4, 5. */
void jacobi_2d(void) {
#pragma kage profile
    for (int t = 0; t < T; t++) {
#pragma omp parallel for
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < N - 1; j++)
                B[i][j] = 0.2 * (C[i][j] + C[i][j - 1] + C[i][j + 1] + C[i + 1][j] + C[i - 1][j]);
#pragma omp parallel for
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < N - 1; j++)
                C[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][j + 1] + B[i + 1][j] + B[i - 1][j]);
    }
}

/* PolyBench seidel-2d: 1=t 2=i 3=j; parallel: none. In place, with both neighbours. */
void seidel_2d(void) {
#pragma kage profile
    for (int t = 0; t < T; t++)
        for (int i = 1; i < N - 1; i++)
            for (int j = 1; j < N - 1; j++)
                D[i][j] = (D[i - 1][j - 1] + D[i - 1][j] + D[i - 1][j + 1] + D[i][j - 1] +
                           D[i][j] + D[i][j + 1] + D[i + 1][j - 1] + D[i + 1][j] +
                           D[i + 1][j + 1]) / 9.0;
}

/* PolyBench floyd-warshall: 1=k 2=i 3=j; parallel: none. The authors run i in parallel
 * because row and column k keep their values during step k (path[k][k] is 0), but they are
 * written: iteration i = k stores the row the others read, and j = k the column, so both
 * levels carry dependences in memory, which this analysis (like any static one) reports. */
void floyd_warshall(void) {
#pragma kage profile
    for (int k = 0; k < N; k++) {
#pragma omp parallel for
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++)
                path[i][j] = path[i][j] < path[i][k] + path[k][j] ? path[i][j]
                                                                  : path[i][k] + path[k][j];
    }
}

int main(void) {
    for (int i = 0; i < N; i++) {
        vx[i] = i * 0.5;
        vy[i] = 1.0 / (i + 1);
        w[i] = i % 7;
        for (int k = 0; k < 3; k++)
            pos[i][k] = (i * 7 + k * 3) % 11;
        for (int j = 0; j < N; j++) {
            A[i][j] = (i == j) ? N : ((i + 2 * j) % 5) * 0.1;
            B[i][j] = ((i * j) % 7) * 0.25;
            C[i][j] = ((i + j) % 3) * 0.5;
            D[i][j] = ((i * 3 + j) % 4) * 0.5;
            u[i][j] = (i * j % 9) * 0.1;
            f[i][j] = (i + j) % 2;
            path[i][j] = (i == j) ? 0 : ((i * 13 + j * 7) % 17) + 1;
        }
    }
    jacobi_copy();
    double error = jacobi_sweep(1.0, 1.0, -4.5, 0.9);
    double p = pi();
    int outside = mandel();
    md_forces();
    gemm(1.5, 1.2);
    syrk(1.5, 1.2);
    mvt();
    trisolv();
    jacobi_2d();
    seidel_2d();
    floyd_warshall();
    lu();
    double sum = error + p + outside;
    for (int i = 0; i < N; i++) {
        sum += vx[i] + vz[i] + force[i][0] + force[i][2];
        for (int j = 0; j < N; j++)
            sum += A[i][j] + B[i][j] + C[i][j] + D[i][j] + u[i][j] + path[i][j];
    }
    printf("%.6f\n", sum);
    return 0;
}
