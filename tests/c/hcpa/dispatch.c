/* An interpreter's shapes, for the exact comparisons (the HCPA reference model, and a
 * footprint build against a build with every event): a dispatch loop on computed gotos
 * whose handlers call small inlined helpers (one with a loop, inlined at two sites),
 * callbacks through a table of function pointers, a partly inlined recursion, a loop left
 * by `continue` and by an early return from two loops deep, and a do-while. Globals only.
 * Usage: dispatch [N] (default 300). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

enum { PUSH, ADD, MUL, DUP, SWAP, SUM, JNZ, HALT };

static long stack[64];
static long heap[256];
static unsigned char program[] = {PUSH, 3, PUSH, 4, MUL, DUP, SUM, ADD, PUSH, 1,
                                  SWAP, JNZ, 0,    HALT};

static inline long clamp_index(long v) { return v < 0 ? 0 : v > 255 ? 255 : v; }

/* Inlined at two sites, with a loop. */
static inline long window_sum(long from, int width) {
  long s = 0;
  for (int i = 0; i < width; i++) s += heap[clamp_index(from + i)];
  return s;
}

static long run(int budget) {
  static void *handlers[] = {&&push, &&add, &&mul, &&dup, &&swap, &&sum, &&jnz, &&halt};
  int pc = 0, sp = 0;
  long steps = 0;
#define NEXT()                                                                           \
  do {                                                                                   \
    if (++steps > budget) goto halt;                                                     \
    goto *handlers[program[pc++]];                                                       \
  } while (0)
  NEXT();
push:
  stack[sp++] = program[pc++];
  NEXT();
add:
  sp--;
  stack[sp - 1] += stack[sp];
  NEXT();
mul:
  sp--;
  stack[sp - 1] *= stack[sp];
  NEXT();
dup:
  stack[sp] = stack[sp - 1];
  sp++;
  NEXT();
swap: {
  long t = stack[sp - 1];
  stack[sp - 1] = stack[sp - 2];
  stack[sp - 2] = t;
  NEXT();
}
sum:
  stack[sp - 1] = window_sum(stack[sp - 1], 4);
  heap[clamp_index(stack[sp - 1])] += 1;
  NEXT();
jnz:
  sp--;
  if (stack[sp] && sp < 60) pc = program[pc];
  else pc++;
  NEXT();
halt:
  return sp > 0 ? stack[sp - 1] + window_sum(steps, 3) : steps;
#undef NEXT
}

typedef long (*visit_fn)(long, long);
static long visit_add(long acc, long v) { return acc + v; }
static long visit_max(long acc, long v) { return v > acc ? v : acc; }
static long visit_mix(long acc, long v) { return acc * 31 + (v & 7); }

__attribute__((noinline)) static long fold(visit_fn f, long from, int n) {
  long acc = 0;
  for (int i = 0; i < n; i++) {
    if ((i & 3) == 3) continue;
    acc = f(acc, heap[(from + i) & 255]);
  }
  return acc;
}

static long walk(int n);
static inline long step(int n) { return n <= 1 ? heap[n & 255] : walk(n - 1) + walk(n - 2); }
__attribute__((noinline)) static long walk(int n) { return n > 12 ? 0 : step(n) + 1; }

__attribute__((noinline)) static int find_pair(long target) {
  for (int i = 0; i < 64; i++)
    for (int j = i + 1; j < 64; j++)
      if (heap[i] + heap[j] == target) return i * 64 + j;
  return -1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  for (int i = 0; i < 256; i++) heap[i] = (i * 7919) % 97;
  long total = 0;
  for (int round = 0; round < n / 30 + 1; round++) total += run(n + round);
  static const visit_fn visits[] = {visit_add, visit_max, visit_mix};
  for (int k = 0; k < 3; k++) total += fold(visits[k], k * 17, n);
  total += walk(10) + window_sum(total & 127, 8);
  int found = find_pair(heap[5] + heap[9]);
  long countdown = n;
  do {
    countdown -= 7;
    total ^= countdown;
  } while (countdown > 0);
  printf("%ld %d\n", total, found);
  return 0;
}
