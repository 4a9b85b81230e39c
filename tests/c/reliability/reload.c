/* Loads the library argv[1] (unloaded.c), calls its fill() and unloads it, three times:
 * the runtime keeps what it counted of a module that is gone, and counts the next load of
 * it (often at the same address) anew. Prints how many times the library was unmapped. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Whether a mapping of `name` is in the process. */
static int mapped(const char *name) {
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (maps && fgets(line, sizeof line, maps))
    found |= strstr(line, name) != 0;
  if (maps)
    fclose(maps);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  const char *base = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
  int unmapped = 0;
  for (int round = 0; round < 3; round++) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
      fprintf(stderr, "%s\n", dlerror());
      return 2;
    }
    void (*fill)(void) = (void (*)(void))dlsym(lib, "fill");
    fill();
    dlclose(lib);
    unmapped += !mapped(base);
  }
  printf("%d\n", unmapped);
  return 0;
}
