// Hierarchical critical path analysis on C++: the reference model (tests/hcpa/reference.py)
// must agree exactly with the runtime on it. Templates and lambdas inlined into loops,
// std::sort with a lambda comparator (instrumented template code calling back into the
// program's), virtual calls, a std::vector that grows (operator new, uninstrumented),
// destructors run while an exception unwinds through instrumented frames, an exception
// caught two frames up, and a std::function called in a loop.
// Usage: idioms N (default 150). Prints a checksum.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

template <typename T> T square_sum(const std::vector<T> &v) {
  T s{};
  for (const T &x : v) s += x * x;
  return s;
}

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Rect : Shape {
  double w, h;
  Rect(double w, double h) : w(w), h(h) {}
  double area() const override { return w * h; }
};
struct Tri : Shape {
  double b, h;
  Tri(double b, double h) : b(b), h(h) {}
  double area() const override { return 0.5 * b * h; }
};

int destroyed = 0;
struct Guard {
  int id;
  ~Guard() { destroyed += id; }
};

__attribute__((noinline)) int deep(int n, int limit) {
  Guard g{n};
  if (n >= limit) throw std::runtime_error("too deep");
  return deep(n + 1, limit) + g.id;
}

__attribute__((noinline)) int caught(int limit) {
  try {
    return deep(0, limit);
  } catch (const std::exception &) {
    return -limit;
  }
}

} // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 150;
  std::vector<long> values;
  for (int i = 0; i < n; i++) values.push_back((i * 7919L) % 211);
  std::sort(values.begin(), values.end(), [](long a, long b) { return a % 13 < b % 13 || (a % 13 == b % 13 && a < b); });
  long sq = square_sum(values);
  std::vector<double> halves(values.begin(), values.end());
  for (double &h : halves) h *= 0.5;
  double sqd = square_sum(halves);

  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < n; i++) {
    if (i % 3) shapes.push_back(std::make_unique<Rect>(i, i % 7 + 1));
    else shapes.push_back(std::make_unique<Tri>(i, i % 5 + 1));
  }
  double area = 0;
  for (const auto &s : shapes) area += s->area();

  std::function<long(long)> step = [n](long x) { return (x * 31 + n) % 1009; };
  long x = 1;
  for (int i = 0; i < n; i++) x = step(x);

  int c = caught(n % 9 + 3) + caught(100);
  std::printf("%ld %.2f %.2f %ld %d %d\n", sq, sqd, area, x, c, destroyed);
  return 0;
}
