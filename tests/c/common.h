/* Shared by the test programs: keep functions and loops as written, so every region
 * and iteration the tests count is really there at -O2. */
#ifndef KAGE_TEST_COMMON_H
#define KAGE_TEST_COMMON_H
#define NOINLINE __attribute__((noinline))
#define PLAIN_LOOP _Pragma("clang loop unroll(disable) vectorize(disable)")
#endif
