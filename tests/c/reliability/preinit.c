/* An instrumented function in the program's own .preinit_array: it runs before the C
 * library has set up `environ`, and its entry is the runtime's first event. Then main
 * calls it again. */
#include <stdio.h>

static int seen[64];

__attribute__((noinline)) static void early(void) {
  for (int i = 0; i < 64; i++) seen[i] += i;
}
__attribute__((section(".preinit_array"), used)) static void (*early_first)(void) = early;

int main(void) {
  early();
  printf("%d\n", seen[63]);
  return 0;
}
