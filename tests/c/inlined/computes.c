/* An inlined callee whose loop only computes (`horner`, a polynomial in registers: no
 * memory access, no call), for crates/kage/tests/e2e_inlined.rs. At -O2 such a callee was
 * left out as a region, and its loop became a loop of `main` at the line of the call. */
volatile long sink;

static long horner(long x, int degree) {
  long s = 0;
  for (int i = 0; i <= degree; i++)
    s = s * x + i;
  return s;
}

int main(int argc, char **argv) {
  (void)argv;
  long total = 0;
  int degree = 20 + (argc > 100);
#pragma clang loop unroll(disable)
  for (long k = 0; k < 1000; k++)
    total += horner(k, degree);
  sink = total;
  return 0;
}
