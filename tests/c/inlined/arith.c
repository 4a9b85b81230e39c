/* An inlined callee that only computes (`mix`, a hash finaliser) whose code the optimiser
 * schedules into the same block as its caller's load (`probe` reads the slot the hash
 * names), for crates/kage/tests/e2e_inlined.rs: the load is `probe`'s, never `mix`'s. */
#include <stdint.h>

#define SLOTS 1024
#define LOOKUPS 5000

uint64_t table[SLOTS];
volatile uint64_t sink;

static uint64_t mix(uint64_t k) {
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

static uint64_t probe(uint64_t key) {
  return table[mix(key) & (SLOTS - 1)];
}

int main(int argc, char **argv) {
  (void)argv;
  uint64_t total = 0;
  uint64_t lookups = LOOKUPS + (argc > 100);
  /* Unrolled, two inlined calls would share a block and count as one instance. */
#pragma clang loop unroll(disable)
  for (uint64_t i = 0; i < lookups; i++)
    total += probe(i);
  sink = total;
  return 0;
}
