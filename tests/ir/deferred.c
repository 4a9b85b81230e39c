/* Source of deferred.ll: clang-22 -S -emit-llvm -O2 -g -fno-vectorize -fno-slp-vectorize -fno-unroll-loops -fdebug-compilation-dir=/src/kage/tests/ir deferred.c */
void slow(int *p);

/* Calls only when i is negative: its entry is deferred until it calls. */
int get(int *a, int i) {
  if (i < 0) {
    slow(a);
    return 0;
  }
  return a[i] + 1;
}

/* Always calls: its entry pushes its activation at once. */
int always(int *a) {
  slow(a);
  return a[0];
}
