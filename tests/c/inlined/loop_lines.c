/* Loops whose metadata the optimiser drops or leaves off its copies: each keeps its lines
 * as written (keyword to end) at -O0, -O2 and -O3 (e2e_inlined.rs). */
#include <stdio.h>
#include <stdlib.h>

/* A `for (;;)` left by `continue`s: at -O2 its latches merge and its metadata is lost. */
static int scan(const unsigned char *s, int n) {
    int i = 0, words = 0;
    for (;;) {
        if (i >= n)
            break;
        if (s[i] == ' ') {
            i++;
            continue;
        }
        words++;
        while (i < n && s[i] != ' ')
            i++;
    }
    return words;
}

/* A do-while the vectoriser splits: neither copy keeps its metadata. */
static void slide(unsigned short *table, unsigned n, unsigned size) {
    unsigned short *p = &table[n];
    do {
        unsigned m = *--p;
        *p = (unsigned short)(m >= size ? m - size : 0);
    } while (--n);
}

/* A counted loop: a vector body, its remainder and the remainder's own copy. */
static void add_one(int *a, const int *b, int n) {
    for (int i = 0; i < n; i++)
        a[i] = b[i] + 1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    unsigned char *text = malloc(n);
    unsigned short *table = malloc(n * sizeof *table);
    int *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (int i = 0; i < n; i++) {
        text[i] = i % 7 == 0 ? ' ' : 'a' + i % 26;
        table[i] = (unsigned short)(i * 37);
        b[i] = i;
    }
    int words = scan(text, n);
    slide(table, (unsigned)n, 500);
    add_one(a, b, n);
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += table[i] + a[i];
    printf("%d %ld\n", words, sum);
    free(text);
    free(table);
    free(a);
    free(b);
    return 0;
}
