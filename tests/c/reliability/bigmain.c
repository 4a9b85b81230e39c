/* Calls big_sum from a library linked at build time (argc == 1), or from the library
 * named by argv[1], loaded with dlopen(RTLD_LAZY) (then the program is linked without it:
 * the declaration is weak). */
#include <dlfcn.h>
#include <stdio.h>

double big_sum(int n) __attribute__((weak));

int main(int argc, char **argv) {
  double (*sum)(int) = big_sum;
  if (argc > 1) {
    void *lib = dlopen(argv[1], RTLD_LAZY);
    if (!lib) {
      fprintf(stderr, "%s\n", dlerror());
      return 2;
    }
    sum = (double (*)(int))dlsym(lib, "big_sum");
  }
  printf("%.1f\n", sum(1 << 20));
  return 0;
}
