#include <cstdio>
#include "../common.h"

extern "C" void scale(int n, int factor);

int main() {
  scale(16, 3);
  std::printf("scaled\n");
  return 0;
}
