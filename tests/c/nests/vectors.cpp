// C++ loop nests over std::vector (issue 18): the accessors (`size()`, `operator[]`, the
// range-for's iterator) are inlined into the nest before it is analysed, so their accesses
// are the nest's own. dot: parallel with reduction(+:s); scale: parallel (the iterator is
// the loop's induction); prefix: a flow dependence of distance 1.
#include <cstdio>
#include <vector>
double dot(const std::vector<double> &a, const std::vector<double> &b) {
    double s = 0;
#pragma kage profile
    for (size_t i = 0; i < a.size(); i++)
        s += a[i] * b[i];
    return s;
}
void scale(std::vector<double> &v, double f) {
#pragma kage profile
    for (auto &x : v)
        x *= f;
}
void prefix(std::vector<long> &v) {
#pragma kage profile
    for (size_t i = 1; i < v.size(); i++)
        v[i] += v[i - 1];
}
int main() {
    std::vector<double> a(1000), b(1000);
    std::vector<long> c(1000);
    for (int i = 0; i < 1000; i++) { a[i] = i * 0.5; b[i] = 1.0 / (i + 1); c[i] = i % 7; }
    scale(a, 2.0);
    prefix(c);
    printf("%.4f %ld\n", dot(a, b), c[999]);
}
