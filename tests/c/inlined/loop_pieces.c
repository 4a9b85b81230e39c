/* Loops the optimiser cuts into nested pieces, each one loop of the report at every level
 * (e2e_inlined.rs), and loops nested on one line, two loops at every level. */
#include <stdio.h>
#include <stdlib.h>

/* A work list whose `continue` path leaves the stack pointer as it was. */
static long drain(int *stack, int n) {
    int sp = 0;
    long s = 0;
    stack[sp++] = n;
    while (sp > 0) {
        int v = stack[--sp];
        if (v < 4) {
            s += v;
            continue;
        }
        stack[sp++] = v / 2;
        stack[sp++] = v - v / 2 - 1;
    }
    return s;
}

/* A `goto` loop: a glob match of `*` and letters. */
static int match(const char *s, const char *p) {
init:
    if (*p == 0)
        return *s == 0;
    if (*p == '*') {
        if (p[1] == 0)
            return 1;
        for (const char *t = s; *t; t++)
            if (match(t, p + 1))
                return 1;
        return 0;
    }
    if (*s != *p)
        return 0;
    s++;
    p++;
    goto init;
}

/* Two loops on one line: a triangle of a matrix against its transpose. */
static long skew(const int *a, int n) {
    long s = 0;
    for (int i = 0; i < n; i++) for (int j = 0; j < i; j++) s += a[i * n + j] ^ a[j * n + i];
    return s;
}

/* Words of a line: a `for (;;)` whose `continue` skips spaces. */
static int words(const char *s) {
    int n = 0, i = 0;
    for (;;) {
        if (s[i] == 0)
            break;
        if (s[i] == ' ') {
            i++;
            continue;
        }
        n++;
        while (s[i] && s[i] != ' ')
            i++;
    }
    return n;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    int *stack = malloc(sizeof(int) * (n + 64));
    int *grid = malloc(sizeof(int) * n * n);
    for (int i = 0; i < n * n; i++)
        grid[i] = i;
    long d = drain(stack, n);
    int m = 0;
    for (int i = 0; i < n; i++)
        m += match("abcabcabcabd", i % 2 ? "a*c*d" : "abc*bd");
    long k = skew(grid, n);
    int w = words("  one two   three four  five   ");
    printf("%ld %d %ld %d\n", d, m, k, w);
    free(stack);
    free(grid);
    return 0;
}
