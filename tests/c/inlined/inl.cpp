// C++ calls an optimiser inlines, for crates/kage/tests/e2e_inlined.rs: a lambda called
// twice, a function template, a member function.
#include <cstddef>

constexpr int N = 1000;
double x[N], y[N];
volatile double sink;

template <typename T> static T dot(const T *u, const T *v, int n) {
  T s = 0;
  for (int i = 0; i < n; i++)
    s += u[i] * v[i];
  return s;
}

struct Accumulator {
  double total = 0;
  void add_all(const double *v, int n) {
    for (int i = 0; i < n; i++)
      total += v[i];
  }
};

int main(int argc, char **) {
  int n = N - (argc > 100);
  auto init = [](double *v, int m, double k) {
    for (int i = 0; i < m; i++)
      v[i] = k + i;
  };
  init(x, n, 1.0);
  init(y, n, 2.0);
  Accumulator acc;
  acc.add_all(y, n);
  sink = dot(x, y, n) + acc.total;
  return 0;
}
