// Where C++ functions end, for crates/kage/tests/e2e_inlined.rs: at -O0 and in optimising
// builds alike, whether or not they are inlined. A destructor that runs at the closing
// brace, an aggregate returned by a lone `return`, several `return`s, an object made with
// `new` (whose landing pad is at the closing brace). With no argument: classify 40 calls (at
// -O2 in a vectorised loop and its remainder unrolled by two), push and Node's constructor
// 20, the others 1.
#include <cstdio>
#include <cstdlib>

struct Guard {
  int *count;
  explicit Guard(int *c) : count(c) { ++*count; }
  ~Guard() { --*count; }
};

static int held;
static int values[64];

static int locked_sum(int n) {
  Guard g(&held);
  int s = 0;
  for (int i = 0; i < n; i++) s += values[i];
  return s + held;
}

struct Cursor {
  int *at;
};

template <typename T> static Cursor find_first(Cursor first, Cursor last, T v) {
  int steps = 0;
  while (first.at != last.at && *first.at != v) {
    ++first.at;
    ++steps;
  }
  values[63] = steps;
  return first;
}

static int classify(int x) {
  int y = values[x] * 3;
  if (y > 30) {
    return 2;
  } else if (y > 10) {
    return 1;
  }
  return 0;
}

struct Node {
  int value;
  Node *next;
  explicit Node(int v) : value(v), next(nullptr) {}
};

static Node *push(Node *head, int v) {
  Node *node = new Node(v);
  node->next = head;
  return node;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  for (int i = 0; i < 64; i++) values[i] = i * 7 % 13;
  int total = locked_sum(n / 4);
  Cursor found = find_first(Cursor{values}, Cursor{values + 63}, 12);
  total += (int)(found.at - values);
  for (int i = 0; i < n / 5; i++) total += classify(i * 5 % 64);
  Node *list = nullptr;
  for (int i = 0; i < n / 10; i++) list = push(list, i);
  while (list) {
    Node *next = list->next;
    total += list->value;
    delete list;
    list = next;
  }
  printf("%d %d\n", total, held);
  return 0;
}
