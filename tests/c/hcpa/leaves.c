/* Static leaves (docs/hcpa.md, "Static leaves"): small functions inlined into a hot loop,
 * each one block that runs straight through. read_le() loads (and begins the loop's body:
 * its block is the loop's header), put() stores, bump() loads then stores: static leaves,
 * 2048 instances each (N calls in each of two passes). swap_in() stores then loads (the
 * load may read what the store wrote): not static. mix() and clamp() are code the
 * optimiser may merge with their callers' (at -O2 no block of theirs is left). scramble()
 * holds only write32(), which holds only store32(), a static leaf: the three are one
 * chain, 2048 instances each. pick() and skip() branch (a store on one path keeps the
 * branch; skip() may leave from its first block): branchy leaves, whose work and critical
 * path depend on the path and are computed as values next to the program's. */
#include <stdio.h>

#define N 1024

static unsigned data[N];
static unsigned char bytes[4 * N];

static inline unsigned mix(unsigned h, unsigned x) { return (h ^ x) * 16777619u; }

static inline unsigned read_le(const unsigned char *p) {
  return p[0] | p[1] << 8 | p[2] << 16 | (unsigned)p[3] << 24;
}

static inline void put(unsigned *a, int i, unsigned v) { a[i] = v; }

static inline void bump(unsigned *a, int i) { a[i] = a[i] + 1; }

static inline unsigned swap_in(unsigned *a, unsigned *b, unsigned v) {
  *a = v;
  return *b;
}

static inline void store32(unsigned *p, unsigned v) { *p = v; }

static inline void write32(unsigned *p, unsigned v) { store32(p, v); }

static inline void scramble(unsigned *p, unsigned v) { write32(p, v * 2654435761u >> 3); }

static unsigned hits[N];

static inline unsigned pick(const unsigned *a, unsigned x) {
  if (x & 1) {
    hits[x % N]++;
    return x * 3;
  }
  return a[x % N] >> 1;
}

static inline unsigned skip(const unsigned *a, unsigned x) {
  if (x & 2) return x;
  unsigned v = a[(x >> 2) % N];
  if (v & 1) hits[v % N] = x;
  return v + 1;
}

static inline int clamp(int v, int lo, int hi) {
  if (v < lo) return lo;
  if (v > hi) return hi;
  return v;
}

__attribute__((noinline)) static unsigned pass(unsigned seed) {
  unsigned h = seed;
  for (int i = 0; i < N; i++) {
    unsigned x = read_le(bytes + 4 * i);
    h = mix(h, x);
    put(data, i, mix(x, (unsigned)i));
    bump(data, (int)(h % N));
    h += swap_in(&data[i], &data[(i * 7) % N], h);
    h += (unsigned)clamp((int)(x & 0xff) - 100, 0, 50);
    scramble(&data[(h >> 3) % N], h);
    h += pick(data, h ^ x);
    h += skip(data, h + (unsigned)i);
  }
  return h;
}

int main(void) {
  for (int i = 0; i < 4 * N; i++) bytes[i] = (unsigned char)(i * 37 + 11);
  unsigned h = pass(1);
  h = pass(h);
  printf("leaves %u\n", h);
  return 0;
}
