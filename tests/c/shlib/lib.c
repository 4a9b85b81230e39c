/* Built with `kage-cc -shared -fPIC`: its regions register from the library's own table. */
#include "../common.h"

volatile int lib_data[64];

NOINLINE void lib_fill(int n) {
  PLAIN_LOOP
  for (int i = 0; i < n; i++)
    lib_data[i] = i;
}
