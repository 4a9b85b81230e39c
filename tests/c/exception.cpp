// A C++ exception thrown two frames below main, out of a loop, caught in main.
#include "common.h"

volatile int g[1000];

NOINLINE void thrower(int i) {
  g[i] = 1;
  if (i == 3)
    throw 42;
}

NOINLINE void looper() {
  PLAIN_LOOP
  for (int i = 0; i < 10; i++)
    thrower(i);
}

NOINLINE void after() { g[500] = 1; }

int main() {
  try {
    looper();
  } catch (int) {
    g[900] = 1;
  }
  g[901] = 1;
  after();
  return 0;
}
