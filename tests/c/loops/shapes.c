/* Loop nests of every shape, for crates/kage/tests/e2e_loops.rs: `for`, `while` with a
 * condition that calls, `do`, a `goto` loop, `continue`/`break`/`return` out of a nest, a
 * nest in a recursive function. Each loop is marked `loop:<name>` on its first line; the
 * test selects them with KAGE_LOOPS.
 *
 * Beside its work, the program models what the loops tool must report: per nest, entries,
 * iterations per level and the iterations the sampling rule runs in the instrumented
 * version (the first `entries` entries of the nest, and in them the first `iterations`
 * iterations of each level whose enclosing iteration is instrumented). It prints the work's
 * checksum and the model; the model lines are the test's expectations.
 * Usage: shapes [iterations entries]   (the runtime's sample_iterations= and
 * sample_entries=; 10 and 8 by default). */
#include <stdio.h>
#include <stdlib.h>

#define N 40

struct model {
  const char *name;
  long entries, sampled_entries, iterations[2], instrumented[2];
};

static long sample_iterations = 10, sample_entries = 8;
static double a[N][N];
static unsigned long checksum;

/* A nest entry: whether it is sampled. */
static int enter(struct model *m) {
  int sampled = m->entries++ < sample_entries;
  m->sampled_entries += sampled;
  return sampled;
}

/* Iteration `index` of `level` begins; `outer` says whether the enclosing iteration runs
 * instrumented (for level 0: whether the entry is sampled). Returns whether this one does. */
static int iteration(struct model *m, int level, long index, int outer) {
  int instrumented = outer && index < sample_iterations;
  m->iterations[level]++;
  m->instrumented[level] += instrumented;
  return instrumented;
}

static struct model m_nest2 = {"nest2"}, m_while = {"while_calls"}, m_do = {"do_loop"},
                    m_goto = {"goto_loop"}, m_find = {"find_first"}, m_rec = {"rec"};

static void nest2(int n, int m) {
  int s = enter(&m_nest2);
  long i0 = 0;
  for (int i = 0; i < n; i++) { /* loop:nest2 */
    int in0 = iteration(&m_nest2, 0, i0++, s);
    long i1 = 0;
    for (int j = 0; j < m; j++) { /* loop:nest2.inner */
      iteration(&m_nest2, 1, i1++, in0);
      a[i][j] = a[i][j] * 0.5 + i - j;
    }
  }
}

static int next(int *k, int n) { return (*k)++ < n; }

static void while_calls(int n) {
  int s = enter(&m_while);
  long i0 = 0;
  int k = 0;
  while (next(&k, n)) { /* loop:while_calls */
    iteration(&m_while, 0, i0++, s);
    checksum += (unsigned long)k * 3;
  }
}

static void do_loop(int n) {
  int s = enter(&m_do);
  long i0 = 0;
  int k = 0;
  do { /* loop:do_loop */
    iteration(&m_do, 0, i0++, s);
    checksum += (unsigned long)k;
    k++;
  } while (k < n);
}

static void goto_loop(int n) {
  int s = enter(&m_goto);
  long i0 = 0;
  int k = 0;
again: iteration(&m_goto, 0, i0++, s); /* loop:goto_loop */
  checksum += (unsigned long)k * 7;
  if (++k < n)
    goto again;
}

static int find_first(int n, double limit) {
  int s = enter(&m_find);
  long i0 = 0;
  for (int i = 0; i < n; i++) { /* loop:find_first */
    int in0 = iteration(&m_find, 0, i0++, s);
    long i1 = 0;
    for (int j = 0; j < n; j++) { /* loop:find_first.inner */
      iteration(&m_find, 1, i1++, in0);
      if (j % 5 == 3)
        continue;
      if (a[i][j] > limit)
        return i * n + j;
      if (j > 30)
        break;
    }
  }
  return -1;
}

static long rec(int depth, int n) {
  int s = enter(&m_rec);
  long i0 = 0, sum = 0;
  for (int i = 0; i < n; i++) { /* loop:rec */
    iteration(&m_rec, 0, i0++, s);
    if (depth > 0 && i == 1)
      sum += rec(depth - 1, n);
    sum += i;
  }
  return sum;
}

static void print(const struct model *m) {
  printf("model %s entries=%ld sampled=%ld iterations=%ld,%ld instrumented=%ld,%ld\n", m->name,
         m->entries, m->sampled_entries, m->iterations[0], m->iterations[1], m->instrumented[0],
         m->instrumented[1]);
}

int main(int argc, char **argv) {
  if (argc > 2) {
    sample_iterations = atol(argv[1]);
    sample_entries = atol(argv[2]);
  }
  for (int e = 0; e < 12; e++)
    nest2(3 + e % 15, 1 + (e * 7) % 20);
  for (int e = 0; e < 10; e++) {
    while_calls(e * 3);
    do_loop(1 + e * 2);
    goto_loop(1 + e);
  }
  long found = 0;
  for (int e = 0; e < 14; e++)
    found += find_first(5 + e * 2, 10.0 - e);
  long r = rec(12, 4) + rec(3, 15);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      checksum += (unsigned long)(a[i][j] * 8);
  printf("checksum %lu found %ld rec %ld\n", checksum, found, r);
  const struct model *all[] = {&m_nest2, &m_while, &m_do, &m_goto, &m_find, &m_rec};
  for (unsigned k = 0; k < sizeof all / sizeof *all; k++)
    print(all[k]);
  return 0;
}
