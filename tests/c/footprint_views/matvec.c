/* The footprint views end to end (crates/kage/tests/e2e_footprint_views.rs): a function with
 * two nested loops, a recursive function, one never called.
 *
 * main: the first loop writes A (100 x 100 doubles: 80000 bytes), the second x (800 bytes);
 * the nest reads A and x and writes y (81600 bytes in all), each outer iteration a row of A
 * and all of x (1600 bytes in the inner loop) plus y[i]. fib(10) makes 177 calls. */
#include <stdio.h>

#define N 100
static double A[N][N], x[N], y[N];

int fib(int n) {
    volatile int frame = n;
    return n < 2 ? frame : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) void report_error(const char *message) {
    for (const char *p = message; *p; p++)
        putchar(*p);
}

int main(int argc, char **argv) {
    for (int i = 0; i < N * N; i++)
        (&A[0][0])[i] = i;
    for (int j = 0; j < N; j++)
        x[j] = j;
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int j = 0; j < N; j++)
            s += A[i][j] * x[j];
        y[i] = s;
    }
    int f = fib(10);
    if (argc > 5)
        report_error("too many arguments\n");
    printf("%.0f %d\n", y[N - 1], f);
    return 0;
}
