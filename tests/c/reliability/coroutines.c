/* Two coroutines (makecontext/swapcontext) and the main context take turns: each turn, a
 * coroutine loads its 64 elements once (in `produce`) and yields back to main, which loads
 * one element itself; 1000 turns each. Every load is charged to the function whose code
 * made it: produce 2 x 1000 x 64 loads, main 2 x 1000. */
#include "../common.h"
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#define TURNS 1000
#define N 64
#define STACK (256 * 1024)

static ucontext_t main_ctx, co_ctx[2];
static volatile int data[2][N];
static volatile long sums[2];

NOINLINE static void produce(int which) {
  for (int turn = 0; turn < TURNS; turn++) {
    long s = 0;
    PLAIN_LOOP
    for (int i = 0; i < N; i++)
      s += data[which][i];
    sums[which] += s;
    swapcontext(&co_ctx[which], &main_ctx);
  }
}

int main(void) {
  for (int c = 0; c < 2; c++) {
    for (int i = 0; i < N; i++)
      data[c][i] = i + c;
    getcontext(&co_ctx[c]);
    co_ctx[c].uc_stack.ss_sp = malloc(STACK);
    co_ctx[c].uc_stack.ss_size = STACK;
    co_ctx[c].uc_link = &main_ctx;
    makecontext(&co_ctx[c], (void (*)(void))produce, 1, c);
  }
  long mine = 0;
  for (int turn = 0; turn < TURNS; turn++)
    for (int c = 0; c < 2; c++) {
      swapcontext(&main_ctx, &co_ctx[c]);
      mine += data[c][turn % N];
    }
  /* Each coroutine's produce returns (its last turn done): main resumes through uc_link. */
  for (int c = 0; c < 2; c++)
    swapcontext(&main_ctx, &co_ctx[c]);
  printf("%ld %ld %ld\n", sums[0], sums[1], mine);
  return 0;
}
