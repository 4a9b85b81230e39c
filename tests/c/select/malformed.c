/* Versions switches that cannot be chunked: each is compiled alone (-DCASE=n) and must stop
 * the build with an error that says why. */
#include <stdio.h>
static double a[100];
int main(void) {
  int n = 100;
#if CASE == 1 /* code after the loop: it would run after every chunk */
#pragma kage versions
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) a[i] = i;
    printf("done\n");
    break;
  case 1:
    for (int i = 0; i < n; i++) a[i] = i;
    break;
  }
#elif CASE == 2 /* a case falls into the next */
#pragma kage versions
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) a[i] = i;
  case 1:
    for (int i = 0; i < n; i++) a[i] = i;
    break;
  }
#elif CASE == 3 /* two loops in a version */
#pragma kage versions
  switch (0) {
  case 0:
    for (int i = 0; i < n; i++) a[i] = i;
    break;
  case 1:
    for (int i = 0; i < n / 2; i++) a[i] = i;
    for (int i = n / 2; i < n; i++) a[i] = i;
    break;
  }
#elif CASE == 4 /* the pragma before something else */
#pragma kage versions
  if (n) a[0] = 1;
#endif
  printf("%g\n", a[n - 1]);
  return 0;
}
