/* Accesses that a footprint build (KAGE_TOOL=footprint) reports in groups, per segment
 * between calls (crates/kage-pass/src/footprint.rs): fields merged into one range or not,
 * bytes accessed again after a call or on both arms of a branch, run-time-sized copies, a
 * longjmp back to a setjmp, and accesses while the tool is off. Each function touches only
 * global arrays aligned to 4096 (its footprint is in its comment, in bytes; they are not
 * static, so the compiler keeps every store to them);
 * crates/kage/tests/e2e_footprint.rs checks these, and that the build for every tool
 * reports the same for every region, accesses included. */
#include "../common.h"
#include "../../../crates/kage-rt/include/kage.h"
#include <setjmp.h>
#include <string.h>

struct rec {
  long a;
  int b;
  int pad;
  long c;
};
struct rec recs[4] __attribute__((aligned(4096)));
int ints[64] __attribute__((aligned(4096)));
char bytes[256] __attribute__((aligned(4096)));
char copy_src[1000] __attribute__((aligned(4096)));
char copy_dst[1000] __attribute__((aligned(4096)));
long jumps[4] __attribute__((aligned(4096)));
static jmp_buf env;

/* Reads a and c, writes b: bytes [0, 12) and [16, 24) of recs[i]: 20. */
NOINLINE void fields(int i) {
  recs[i].b = (int)(recs[i].a + recs[i].c);
}

/* ints[0] before and after a call, ints[1] after: 8 bytes; `other` adds ints[8]: 12. */
NOINLINE void other(void) { ints[8] += 1; }
NOINLINE void around_call(void) {
  ints[0] = 1;
  other();
  ints[0] += 2;
  ints[1] = 3;
}

/* One arm writes bytes[0, 4), the other bytes[2, 6); both then read bytes[0, 6): 6. */
NOINLINE int diamond(int c) {
  if (c)
    memset(bytes, c, 4);
  else
    memset(bytes + 2, 1, 4);
  int s = 0;
  for (int i = 0; i < 6; i++) s += bytes[i];
  return s;
}

/* copy_src[0, n) to copy_dst[0, n): 2 n bytes. */
NOINLINE void copy(size_t n) { memcpy(copy_dst, copy_src, n); }

/* jumps[0] before setjmp, jumps[1] in `thrower`, jumps[0] again after the longjmp: 16. */
NOINLINE void thrower(void) {
  jumps[1] = 1;
  longjmp(env, 1);
}
NOINLINE void jumper(void) {
  jumps[0] = 1;
  if (setjmp(env) == 0) thrower();
  jumps[0] += 1;
}

/* Touches bytes[100, 200) while the tool is off: nothing counted there. */
NOINLINE void unseen(void) { memset(bytes + 100, 7, 100); }

int main(int argc, char **argv) {
  (void)argv;
  fields(argc);
  around_call();
  diamond(argc);
  diamond(argc - 1);
  copy(500 + argc);
  jumper();
  kage_set_enabled(0);
  unseen();
  kage_set_enabled(1);
  return recs[1].b == 12345;
}
