/* Source of loop_after_call.ll: clang-22 -S -emit-llvm -O2 -g -fno-vectorize -fno-slp-vectorize -fno-unroll-loops -fdebug-compilation-dir=/src/kage/tests/ir loop_after_call.c */
void note(int);

/* A call, then a loop without one: the loop is kept in registers, the function is not. */
int sum_after_note(const int *a, int n) {
  note(n);
  int s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
