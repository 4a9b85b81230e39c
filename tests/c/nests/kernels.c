/* Loop nests whose memory behaviour is known on paper (issue 18): each function's nest is
 * selected with `#pragma kage profile`; e2e_nests.rs checks what interpolate and
 * dependences report for each. N x N arrays of doubles: a row is N * 8 bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

#define N 64

double A[N][N], B[N][N], C[N][N];
double x[N * N];
int hist[16], idx[N * N];

struct node {
    struct node *next;
    long value;
};
struct node pool[N * N];

/* Every level parallel. */
void all_parallel(void) {
#pragma kage profile
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            C[i][j] = A[i][j] + B[j][i];
}

/* The outer level carries a flow dependence (distance 1, 0), the inner none. */
void outer_carried(void) {
#pragma kage profile
    for (int i = 1; i < N; i++)
        for (int j = 0; j < N; j++)
            A[i][j] = A[i - 1][j] + 1.0;
}

/* The inner level carries a flow dependence (distance 0, 1), the outer none. */
void inner_carried(void) {
#pragma kage profile
    for (int i = 0; i < N; i++)
        for (int j = 1; j < N; j++)
            B[i][j] = B[i][j - 1] * 0.5;
}

/* Gauss-Seidel: both levels carry dependences. */
void gauss_seidel(void) {
#pragma kage profile
    for (int i = 1; i < N - 1; i++)
        for (int j = 1; j < N - 1; j++)
            C[i][j] = (C[i - 1][j] + C[i + 1][j] + C[i][j - 1] + C[i][j + 1]) * 0.25;
}

/* A reduction into a scalar: parallel with reduction(+:sum). */
double reduction(void) {
    double sum = 0;
#pragma kage profile
    for (int i = 0; i < N * N; i++)
        sum += x[i];
    return sum;
}

/* A histogram through an index array: the increments are not affine. */
void histogram(void) {
#pragma kage profile
    for (int i = 0; i < N * N; i++)
        hist[idx[i]]++;
}

/* A linked list walked with a while loop: its nodes in order in memory (linear by
 * accident), or shuffled (not linear). */
long walk_in_order(struct node *p) {
    long total = 0;
#pragma kage profile
    while (p) {
        total += p->value;
        p = p->next;
    }
    return total;
}

long walk_shuffled(struct node *p) {
    long total = 0;
#pragma kage profile
    while (p) {
        total += p->value;
        p = p->next;
    }
    return total;
}

/* Triangular: j < i. The write touches the strict lower triangle, the read the upper. */
void triangular(void) {
#pragma kage profile
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++)
            A[i][j] = A[j][i];
}

/* A pointer walking a buffer, 4 bytes at a time, reading one element ahead. */
void shift(int *p, int *end) {
#pragma kage profile
    while (p < end) {
        *p = *(p + 1);
        p++;
    }
}

/* A recurrence through a scalar: carried. */
void lcg(long *out) {
    long seed = 12345;
#pragma kage profile
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005L + 1442695040888963407L;
        out[i] = seed;
    }
}

/* A dot product: `dot += x * y` is contracted to a fused multiply-add, still a reduction;
 * sqrt touches no memory the program names: the level runs in parallel. */
double dot_roots(void) {
    double dot = 0;
#pragma kage profile
    for (int i = 0; i < N; i++) {
        dot += x[i] * x[N + i];
        C[0][i] = sqrt(x[i]);
    }
    return dot;
}

/* A call whose accesses the analysis does not see (a callee with a loop of its own is not
 * inlined into the nest to be analysed): no level is proved parallel. */
__attribute__((noinline)) void bump(int *counter) {
    for (int k = 0; k < 2; k++)
        *counter += 1;
}

void calls(void) {
#pragma kage profile
    for (int i = 0; i < N; i++)
        bump(&hist[i % 4]);
}

/* A stack array whose address never escapes is not instrumented (the optimiser keeps it
 * in registers): the levels that write it are not proved parallel. */
double local_array(void) {
    double acc = 0;
#pragma kage profile
    for (int i = 0; i < N; i++) {
        double t[4];
        for (int k = 0; k < 4; k++)
            t[k] = x[i * 4 + k];
        acc += t[0] * t[3];
    }
    return acc;
}

static struct node *link_list(int shuffled) {
    int order[N * N];
    for (int i = 0; i < N * N; i++)
        order[i] = i;
    if (shuffled) {
        unsigned r = 7;
        for (int i = N * N - 1; i > 0; i--) {
            r = r * 1103515245u + 12345u;
            int j = (int)((r >> 8) % (unsigned)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    for (int i = 0; i < N * N; i++) {
        pool[order[i]].value = i;
        pool[order[i]].next = i + 1 < N * N ? &pool[order[i + 1]] : NULL;
    }
    return &pool[order[0]];
}

int main(int argc, char **argv) {
    (void)argv;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = i + j;
            B[i][j] = i - j;
            C[i][j] = i * j % 7;
        }
    for (int i = 0; i < N * N; i++) {
        x[i] = i % 13;
        idx[i] = (i * 7 + i / 5) % 16;
    }
    all_parallel();
    outer_carried();
    inner_carried();
    gauss_seidel();
    double sum = reduction();
    histogram();
    long in_order = walk_in_order(link_list(0));
    long shuffled = walk_shuffled(link_list(1));
    triangular();
    static int buffer[N * N + 1];
    for (int i = 0; i <= N * N; i++)
        buffer[i] = i;
    shift(buffer, buffer + N * N);
    static long out[N];
    lcg(out);
    double dot = dot_roots() + local_array();
    calls();
    double check = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            check += A[i][j] + B[i][j] + C[i][j];
    printf("%.3f %.1f %d %ld %ld %d %ld %.3f %d\n", check, sum, hist[3], in_order, shuffled,
           buffer[100], out[N - 1] % 1000, dot, argc);
    return 0;
}
