/* A call as a loop's condition whose early return the optimiser threads straight to the
 * loop's exit (bench: SQLite's `while ((rc = sqlite3Step(v)) == SQLITE_SCHEMA && ...)` in
 * sqlite3_step): step() returns ROW from inside, which is no RETRY, so the jump goes past
 * the loop's test, and that code of step() lies outside the loop. The loop's branch back
 * has no source location (only the code reloaded for the next iteration has one). Each
 * call of step() is one instance at every level.
 * Usage: retry [N] (default 1000). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

enum { READY, RUN, HALT };
enum { OK, ROW, DONE, RETRY };

struct vm {
  int state;
  int pc;
  int err;
  int retries_left;
  int max_tries;
  long acc;
  int data[64];
};

__attribute__((noinline)) static int exec(struct vm *v) {
  v->acc += v->data[v->pc & 63];
  v->pc++;
  if (v->retries_left > 0 && (v->pc & 7) == 0) {
    v->retries_left--;
    return RETRY;
  }
  return (v->pc & 3) ? ROW : DONE;
}

__attribute__((noinline)) static void reset(struct vm *v) { v->state = READY; }

__attribute__((noinline)) static int reprepare(struct vm *v) {
  v->data[v->pc & 63] += 1;
  return v->data[v->pc & 63] > 1000 ? DONE : OK;
}

static int step(struct vm *v) {
  int rc;
  if (v->state != RUN) {
  restart:
    if (v->state == READY) {
      v->state = RUN;
    } else if (v->state == HALT) {
      reset(v);
      goto restart;
    }
  }
  rc = exec(v);
  if (rc == ROW) {
    v->err = ROW;
    return ROW;
  }
  v->state = HALT;
  v->err = rc;
  return rc;
}

__attribute__((noinline)) int api_step(struct vm *v) {
  int rc, tries = 0;
  while ((rc = step(v)) == RETRY && tries++ < v->max_tries) {
    int saved = v->pc;
    rc = reprepare(v);
    if (rc != OK) {
      v->err = rc;
      break;
    }
    reset(v);
    if (saved & 1) v->pc = saved + 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  static struct vm v;
  for (int i = 0; i < 64; i++) v.data[i] = i * 7 % 13;
  long sum = 0;
  for (int i = 0; i < n; i++) {
    if (i % 100 == 0) v.retries_left = 3;
    v.max_tries = 2 + (i & 1);
    sum += api_step(&v);
  }
  printf("%ld %ld\n", sum, v.acc);
  return 0;
}
