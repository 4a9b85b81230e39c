/* Pointer chasing: a singly linked list of n nodes laid out in a random permutation of a
 * node array, walked `laps` times. Every load depends on the previous one, so this measures
 * latency, not bandwidth. Usage: list-chase [n] (laps fixed at 8). Prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
  struct node *next;
  uint64_t value;
};

static uint64_t rng_state = 88172645463325252ull;
static uint64_t xorshift64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  int laps = 8;
  struct node *nodes = malloc(sizeof(struct node) * n);
  long *order = malloc(sizeof(long) * n);
  for (long i = 0; i < n; i++) order[i] = i;
  for (long i = n - 1; i > 0; i--) { /* Fisher-Yates */
    long j = (long)(xorshift64() % (uint64_t)(i + 1));
    long t = order[i]; order[i] = order[j]; order[j] = t;
  }
  for (long i = 0; i < n; i++) {
    nodes[order[i]].next = i + 1 < n ? &nodes[order[i + 1]] : &nodes[order[0]];
    nodes[order[i]].value = (uint64_t)i * 2654435761u;
  }
  uint64_t sum = 0;
  struct node *p = &nodes[order[0]];
  #pragma kage profile
  for (int lap = 0; lap < laps; lap++)
    for (long i = 0; i < n; i++) {
      sum += p->value ^ (uint64_t)lap;
      p = p->next;
    }
  printf("list-chase n=%ld checksum=%llu\n", n, (unsigned long long)sum);
  free(nodes); free(order);
  return 0;
}
