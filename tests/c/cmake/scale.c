#include "../common.h"

volatile int scaled[16];

NOINLINE void scale(int n, int factor) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    scaled[i] = i * factor;
}
