// C++ through its standard library, as application code uses it: word counts in an
// unordered_map of strings, a sort of (word, count) pairs with a lambda, an ordered map
// (std::map) of random keys, virtual calls through unique_ptrs, and Dijkstra with a
// priority_queue over an adjacency list of vectors. Templates inlined many levels deep:
// comparators, iterators, string compares, allocations. Usage: stl [scale]. Prints a
// checksum.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

static uint64_t state = 88172645463325252ull;
static uint64_t next_random() {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Circle : Shape {
  double r;
  explicit Circle(double r) : r(r) {}
  double area() const override { return 3.14159 * r * r; }
};
struct Rect : Shape {
  double w, h;
  Rect(double w, double h) : w(w), h(h) {}
  double area() const override { return w * h; }
};

int main(int argc, char **argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 60;
  uint64_t checksum = 0;

  // Words.
  std::vector<std::string> words;
  for (int i = 0; i < 20000 * scale; i++) {
    int len = 3 + next_random() % 6;
    std::string w;
    for (int k = 0; k < len; k++) w.push_back('a' + next_random() % 8);
    words.push_back(std::move(w));
  }
  std::unordered_map<std::string, int> counts;
  for (const auto &w : words) counts[w]++;
  std::vector<std::pair<std::string, int>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  for (size_t i = 0; i < ranked.size() && i < 100; i++) checksum += ranked[i].second * (i + 1);

  // An ordered map.
  std::map<int, int> ordered;
  for (int i = 0; i < 30000 * scale; i++) ordered[next_random() % (10000 * scale)] += i & 7;
  for (auto it = ordered.begin(); it != ordered.end(); ++it) checksum += it->first ^ it->second;

  // Virtual calls.
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < 5000 * scale; i++) {
    if (next_random() & 1) shapes.push_back(std::make_unique<Circle>(1 + i % 10));
    else shapes.push_back(std::make_unique<Rect>(1 + i % 7, 2 + i % 5));
  }
  double total = 0;
  for (int round = 0; round < 20; round++)
    for (const auto &s : shapes) total += s->area();
  checksum += (uint64_t)total;

  // Dijkstra.
  int n = 2000 * scale;
  struct Edge { int to, w; };
  std::vector<std::vector<Edge>> graph(n);
  for (int v = 0; v < n; v++)
    for (int k = 0; k < 6; k++) graph[v].push_back({(int)(next_random() % n), 1 + (int)(next_random() % 100)});
  for (int source = 0; source < 5; source++) {
    std::vector<int64_t> dist(n, INT64_MAX);
    std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>, std::greater<>> queue;
    dist[source] = 0;
    queue.push({0, source});
    while (!queue.empty()) {
      auto [d, v] = queue.top();
      queue.pop();
      if (d > dist[v]) continue;
      for (const Edge &e : graph[v])
        if (d + e.w < dist[e.to]) {
          dist[e.to] = d + e.w;
          queue.push({dist[e.to], e.to});
        }
    }
    for (int v = 0; v < n; v++) if (dist[v] != INT64_MAX) checksum += dist[v];
  }
  printf("checksum %llu\n", (unsigned long long)checksum);
  return 0;
}
