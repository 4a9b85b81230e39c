/* A versioned nest entered by four threads at once, each on its own rows, many times: every
 * thread's result must be the plain build's, and every outermost iteration of every entry
 * must run exactly once whatever chunks the shared decisions give each entry. */
#include <pthread.h>
#include <stdio.h>

#define THREADS 4
#define ROWS 300
#define COLS 200
static double grid[THREADS][ROWS][COLS];
static int seen[THREADS][ROWS];

static void smooth(int t, int rows) {
#pragma kage versions(plain, by_four)
  switch (0) {
  case 0:
    for (int i = 0; i < rows; i++) {
      seen[t][i]++;
      for (int j = 1; j < COLS; j++) grid[t][i][j] = 0.5 * (grid[t][i][j] + grid[t][i][j - 1]);
    }
    break;
  case 1:
    for (int ii = 0; ii < rows; ii += 4)
      for (int i = ii; i < ii + 4 && i < rows; i++) {
        seen[t][i]++;
        for (int j = 1; j < COLS; j++) grid[t][i][j] = 0.5 * (grid[t][i][j] + grid[t][i][j - 1]);
      }
    break;
  }
}

static void *work(void *arg) {
  int t = (int)(long)arg;
  for (int i = 0; i < ROWS; i++)
    for (int j = 0; j < COLS; j++) grid[t][i][j] = (i * 7 + j * 3 + t) % 17;
  for (int r = 0; r < 200; r++) smooth(t, ROWS - (r % 3));
  return 0;
}

int main(void) {
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], 0, work, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], 0);
  for (int t = 0; t < THREADS; t++) {
    double s = 0;
    int bad = 0;
    for (int i = 0; i < ROWS; i++) {
      /* entries r = 0..199 run ROWS - r % 3 rows: the last row in 67 of them (r % 3 == 0),
       * the one before in 134, the others in all 200 */
      int expected = i < ROWS - 2 ? 200 : i < ROWS - 1 ? 134 : 67;
      bad += seen[t][i] != expected;
      for (int j = 0; j < COLS; j++) s += grid[t][i][j] * (j + 1);
    }
    printf("thread %d: %.6e, %s\n", t, s, bad ? "iterations ran too often or too rarely" : "each iteration once per entry");
  }
  return 0;
}
