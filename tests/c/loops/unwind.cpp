// A selected loop left by an exception, for crates/kage/tests/e2e_loops.rs: 12 entries of
// `scan`; in the odd ones a function called in the sixth iteration throws (unwinding out of
// the loop: nothing of Kage's may run on that edge), the even ones run 20 iterations.
// Every entry counts; only the even entries' iterations do (120); the sampled entries (the
// first 8) run their first 10 iterations instrumented, or the 6 begun before the throw:
// 4 x 10 + 4 x 6 = 64. (A `throw` written in the loop itself leaves the loop by a normal
// edge first, and its iterations count.) Prints the number of throws caught and a sum.
#include <cstdio>

static int sum;

[[gnu::noinline]] static void check(int i, int stop) {
  if (i == stop)
    throw i;
}

static int scan(int n, int stop) {
  int found = -1;
  try {
#pragma kage profile
    for (int i = 0; i < n; i++) { // loop:scan
      check(i, stop);
      sum += i;
    }
  } catch (int at) {
    found = at;
  }
  return found;
}

int main(int argc, char **) {
  int caught = 0;
  for (int e = 0; e < 12; e++)
    caught += scan(20 + (argc > 5), e % 2 ? 5 : 100) >= 0;
  std::printf("%d %d\n", caught, sum);
  return 0;
}
