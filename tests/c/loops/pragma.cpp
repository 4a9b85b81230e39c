// `#pragma kage profile` in C++, for crates/kage/tests/e2e_loops.rs: before a loop in a
// template function (two instantiations), before a loop in a lambda, and before a function
// definition (every outermost loop of it). The optimiser inlines all of them into main;
// the marks must still name these loops. Prints a checksum.
#include <cstdio>
#include <vector>

template <typename T> static T total(const std::vector<T> &v) {
  T s = 0;
#pragma kage profile
  for (std::size_t i = 0; i < v.size(); i++) // loop:total
    s += v[i];
  return s;
}

#pragma kage profile
static long outer_loops(int n) {
  long s = 0;
  for (int i = 0; i < n; i++) // loop:outer_loops.first
    for (int j = 0; j < i; j++)
      s += i ^ j;
  int k = n;
  while (k > 1) // loop:outer_loops.second
    k = k % 2 ? 3 * k + 1 : k / 2, s++;
  return s;
}

int main(int argc, char **) {
  int n = 30 + (argc > 5);
  std::vector<int> ints(n);
  std::vector<double> doubles(n);
  auto fill = [&](int scale) {
#pragma kage profile
    for (int i = 0; i < n; i++) { // loop:lambda
      ints[i] = i * scale;
      doubles[i] = i * 0.25 * scale;
    }
  };
  long sum = 0;
  for (int round = 0; round < 12; round++) {
    fill(round + 1);
    sum += total(ints) + static_cast<long>(total(doubles)) + outer_loops(round + 3);
  }
  std::printf("checksum %ld\n", sum);
  return 0;
}
