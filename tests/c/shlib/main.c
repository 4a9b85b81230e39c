#include "../common.h"

void lib_fill(int n);
volatile int main_data[8];

int main(void) {
  main_data[0] = 1;
  lib_fill(16);
  lib_fill(8);
  return 0;
}
