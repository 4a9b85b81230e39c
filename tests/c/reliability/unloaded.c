/* A library the program loads, calls and unloads again (reload.c). */
#include "../common.h"

#define N 1000
int data[N];

NOINLINE void fill(void) {
  PLAIN_LOOP
  for (int i = 0; i < N; i++)
    data[i] = i;
}
