/* An interpreter's dispatch by computed goto (`goto *label`), with a loop that one opcode
 * runs and may leave early by the dispatch. The loop's exit and the dispatch's own edges
 * meet at the opcodes' labels: those edges change the open regions differently and cannot
 * have blocks of their own (an `indirectbr`'s), so the count build calls the runtime
 * (`__kage_count_arrive`) at the labels to change the regions. A rare call keeps the
 * function counted in records, so accesses made before a label wait to be added to the
 * thread's totals there. The test compares the inline count build with the per-access
 * build region by region. */
#include "common.h"
#include <stdio.h>

volatile int sink;
int data[64];

NOINLINE void rare(int i) { sink = i; }

static inline int load2(int i) { return data[i & 63] + data[(i + 1) & 63]; }

NOINLINE int run(const unsigned char *code) {
  static void *labels[] = {&&op_add, &&op_loop, &&op_call, &&op_end};
  int pc = 0, acc = 0;
  goto *labels[code[pc]];
op_add:
  acc += load2(pc + acc);
  pc++;
  goto *labels[code[pc]];
op_loop:
  for (int k = 0; k < code[pc + 1]; k++) {
    acc += load2(k + pc);
    data[(k + acc) & 63] = acc;
    if ((acc & 7) == 0) {
      pc += 2;
      goto *labels[code[pc]];
    }
  }
  pc += 2;
  goto *labels[code[pc]];
op_call:
  rare(acc);
  pc++;
  goto *labels[code[pc]];
op_end:
  return acc;
}

int main(void) {
  static unsigned char code[4000];
  int n = 0;
  for (int i = 0; i < 1330; i++) {
    code[n++] = i % 3 == 0 ? 1 : 0;
    if (i % 3 == 0)
      code[n++] = (unsigned char)(i % 13 + 1);
    if (i % 17 == 0)
      code[n++] = 2;
  }
  code[n++] = 3;
  for (int i = 0; i < 64; i++)
    data[i] = i * 7 + 1;
  printf("%d\n", run(code));
  return 0;
}
