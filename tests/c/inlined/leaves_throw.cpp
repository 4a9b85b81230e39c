// A leaf inlined call (`step`) whose call throws, caught two frames up, for
// crates/kage/tests/e2e_inlined.rs: the footprint build, where the leaf is counted from its
// ranges (or made a level by the call's events), must agree with a build with every
// region event. Every access is to a global.
#include <cstdio>
#include <stdexcept>

volatile int g[64];

__attribute__((noinline)) void check(int i) {
  g[(i + 3) & 63] += 1;
  if (i % 7 == 0)
    throw std::runtime_error("seven");
}

static inline int step(int i) {
  int v = g[i & 63];
  if (i & 1) {
    g[(i + 1) & 63] = v;
    check(i);
  }
  return v + g[(i + 2) & 63];
}

__attribute__((noinline)) int work(int i) { return step(i) + step(i + 1); }

int main() {
  long s = 0, caught = 0;
  for (int i = 0; i < 1000; i++) {
    try {
      s += work(i);
    } catch (const std::exception &) {
      caught++;
    }
  }
  printf("%ld %ld\n", s, caught);
  return 0;
}
