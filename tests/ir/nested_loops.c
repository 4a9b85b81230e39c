/* Source of nested_loops.ll: clang-22 -S -emit-llvm -O2 -g -fno-vectorize -fno-slp-vectorize -fno-unroll-loops -fdebug-compilation-dir=/src/kage/tests/ir nested_loops.c */
static int square(int x) { return x * x; }

int sum2d(const int *a, int n, int m) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < m; j++) {
      s += a[i * m + j];
    }
  }
  return s;
}

int find(const int *a, int n, int key) {
  for (int i = 0; i < n; i++) {
    if (square(a[i]) == key)
      return i;
  }
  return -1;
}
