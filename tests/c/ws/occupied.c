/* Maps a page in the middle of the working-set shadow's fixed range before the runtime
 * reserves it: its own .preinit_array entry runs first (the runtime is linked last). Then
 * touches exactly 100 distinct 64-byte lines. */
#include <stdio.h>
#include <sys/mman.h>

/* Not instrumented: with marks, its entry would reserve the shadow before it maps. */
__attribute__((disable_sanitizer_instrumentation)) static void occupy(void) {
  void *want = (void *)0x10000000000; /* 1 TiB: inside [0x7fff8000, 0x7fff8000 + 8 TiB) */
  void *p = mmap(want, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != want) fprintf(stderr, "occupied.c: could not map the page\n");
}
__attribute__((section(".preinit_array"), used)) static void (*occupy_first)(void) = occupy;

static unsigned char buf[100 * 64] __attribute__((aligned(64)));

int main(void) {
  for (int i = 0; i < 100; i++) buf[i * 64] += 1;
  printf("%d\n", buf[0] + buf[99 * 64]);
  return 0;
}
