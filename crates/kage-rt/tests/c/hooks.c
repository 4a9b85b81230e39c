/* Drives the Kage runtime's hooks by hand, the way instrumented code would, with known
 * access counts (the expected report is computed by hand in tests/c_program.rs).
 * Usage: hooks basic|exit|longjmp|fork|segv|reset|threads */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kage.h"

struct kage_module;
struct kage_region {
  uint32_t global_id, kind, parent, first_line, last_line, local_index;
  const char *name, *symbol, *file;
  struct kage_module *module;
  const void *code;
  const char *call_file; /* inlined calls only */
  uint32_t call_line, call_column;
  uint32_t source_cell, flags; /* NONE: no copies of its source region in the module */
};
struct kage_module {
  uint32_t abi_version, region_count;
  struct kage_region *regions;
  const char *module_name;
  uint32_t instrumentation, line_shift, slot, source_cells;
};

void __kage_register_module(struct kage_module *m);
void __kage_func_enter(struct kage_region *r, const void *frame);
/* The pass passes llvm.addressofreturnaddress; the caller's frame address orders
 * activations the same way (callees below callers). */
#define __kage_func_enter(r) __kage_func_enter((r), __builtin_frame_address(0))
void __kage_func_exit(struct kage_region *r);
void __kage_loop_iter(struct kage_region *r);
void __kage_settle(struct kage_region *r);
void __kage_load(const void *a, uint64_t n);
void __kage_store(const void *a, uint64_t n);
void __kage_cmpxchg(const void *a, uint64_t n, uint32_t stored);

#define NONE 0xFFFFFFFFu
#define R(kind, parent, l1, l2, idx, nm, sym, file, mod) \
  { NONE, kind, parent, l1, l2, idx, nm, sym, file, mod, 0, 0, 0, 0, NONE, 0 }

extern struct kage_module modA, modB, modC;
static struct kage_region A[14] = {
    R(0, NONE, 10, 50, 0, "main", "main", "/src/t.c", &modA),
    R(1, 0, 20, 30, 1, "main", "main", "/src/t.c", &modA),
    R(2, 1, 20, 30, 2, "main", "main", "/src/t.c", &modA),
    R(0, NONE, 60, 80, 3, "work(int)", "_Z4worki", "/src/t.c", &modA),
    R(1, 3, 62, 78, 4, "work(int)", "_Z4worki", "/src/t.c", &modA),
    R(2, 4, 62, 78, 5, "work(int)", "_Z4worki", "/src/t.c", &modA),
    R(1, 5, 64, 70, 6, "work(int)", "_Z4worki", "/src/t.c", &modA),
    R(2, 6, 64, 70, 7, "work(int)", "_Z4worki", "/src/t.c", &modA),
    R(0, NONE, 90, 95, 8, "rec", "rec", "/src/t.c", &modA),
    R(0, NONE, 100, 110, 9, "thread_fn", "thread_fn", "/src/t.c", &modA),
    R(0, NONE, 120, 130, 10, "deep", "deep", "/src/t.c", &modA),
    R(1, 10, 122, 128, 11, "deep", "deep", "/src/t.c", &modA),
    R(2, 11, 122, 128, 12, "deep", "deep", "/src/t.c", &modA),
    R(0, NONE, 140, 150, 13, "jumper", "jumper", "/src/t.c", &modA),
};
struct kage_module modA = {16, 14, A, "t.c", 0, 0, 0, 0};

/* Never registered explicitly: its first hook registers it. */
static struct kage_region B[1] = {R(0, NONE, 1, 5, 0, "lazy_fn", "lazy_fn", "/src/lazy.c", &modB)};
struct kage_module modB = {16, 1, B, "lazy.c", 0, 0, 0, 0};

/* A table from a future ABI: rejected with a message, its events ignored. */
static struct kage_region C[1] = {R(0, NONE, 1, 2, 0, "bad_fn", "bad_fn", "/src/bad.c", &modC)};
struct kage_module modC = {17, 1, C, "bad.c", 0, 0, 0, 0};

__attribute__((constructor(101))) static void register_tables(void) {
  __kage_register_module(&modA);
  __kage_register_module(&modA); /* idempotent */
  __kage_register_module(&modC);
}

static char buf[256], buf2[256];
static uint64_t word;
static jmp_buf jb;

__attribute__((noinline)) static void work(int n) {
  __kage_func_enter(&A[3]);
  __kage_store(buf, 4);
  for (int j = 0;; j++) {
    __kage_loop_iter(&A[4]);
    if (j >= n) break;
    __kage_load(buf + j, 1);
    for (int k = 0;; k++) {
      __kage_loop_iter(&A[6]);
      if (k >= 2) break;
      __kage_store(buf2 + k, 2);
    }
    __kage_settle(&A[5]);
  }
  __kage_settle(&A[3]);
  __kage_func_exit(&A[3]);
}

__attribute__((noinline)) static void rec(int d) {
  __kage_func_enter(&A[8]);
  __kage_load(buf, 4);
  if (d > 0) rec(d - 1);
  __kage_func_exit(&A[8]);
}

__attribute__((noinline)) static void lazy_fn(void) {
  __kage_func_enter(&B[0]);
  __kage_store(buf, 16);
  __kage_func_exit(&B[0]);
}

__attribute__((noinline)) static void bad_fn(void) {
  __kage_func_enter(&C[0]);
  __kage_load(buf, 4);
  __kage_func_exit(&C[0]);
}

static void *thread_fn(void *arg) {
  (void)arg;
  __kage_load(buf, 4); /* before any region: unattributed */
  __kage_func_enter(&A[9]);
  for (int i = 0; i < 10; i++) __kage_store(buf + i, 4);
  /* No func_exit: the thread's end closes the frame. */
  return NULL;
}

/* Enters its loop, loads 3 x 4 bytes, then leaves by exit(3) or longjmp. */
__attribute__((noinline)) static void deep(int how) {
  __kage_func_enter(&A[10]);
  __kage_loop_iter(&A[11]);
  for (int i = 0; i < 3; i++) __kage_load(buf + i, 4);
  if (how == 0) exit(3);
  longjmp(jb, 1);
}

/* A large frame, so a later, smaller sibling call from main sits higher on the stack. */
__attribute__((noinline)) static void jumper(void) {
  volatile char pad[512];
  __kage_func_enter(&A[13]);
  pad[0] = 1;
  __kage_load(buf, 4);
  __kage_load(buf, 4);
  deep(1);
  (void)pad[0];
}

static int mode_basic(void) {
  __kage_load(&word, 8); /* unattributed */
  __kage_func_enter(&A[0]);
  __kage_store(&word, 8);
  for (int i = 0;; i++) {
    __kage_loop_iter(&A[1]);
    if (i >= 3) break;
    __kage_load(buf, 4);
    __kage_load(buf + 4, 4);
    work(i);
  }
  __kage_settle(&A[0]);
  /* memcpy(buf2, buf, 100) */
  __kage_load(buf, 100);
  __kage_store(buf2, 100);
  memcpy(buf2, buf, 100);
  __kage_cmpxchg(&word, 8, 1);
  __kage_cmpxchg(&word, 8, 0);
  __kage_load(&word, 0);
  __kage_store(&word, 0);
  rec(3);
  lazy_fn();
  bad_fn();
  pthread_t t;
  pthread_create(&t, NULL, thread_fn, NULL);
  pthread_join(t, NULL);
  kage_set_enabled(0);
  for (int i = 0; i < 5; i++) __kage_load(buf, 4);
  kage_set_enabled(1);
  __kage_func_exit(&A[0]);
  return 7;
}

static int mode_exit(void) {
  __kage_func_enter(&A[0]);
  __kage_store(&word, 4);
  deep(0);
  return 0;
}

static int mode_longjmp(void) {
  __kage_func_enter(&A[0]);
  __kage_store(&word, 4);
  if (setjmp(jb) == 0) jumper();
  lazy_fn();
  __kage_func_exit(&A[0]);
  return 0;
}

static int mode_fork(void) {
  __kage_func_enter(&A[0]);
  __kage_load(buf, 4);
  __kage_load(buf, 4);
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    work(1);
    __kage_store(&word, 8);
    printf("child %d\n", (int)getpid());
    exit(0);
  }
  int st;
  waitpid(p, &st, 0);
  __kage_load(buf, 4);
  __kage_func_exit(&A[0]);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static int mode_segv(void) {
  __kage_func_enter(&A[0]);
  for (int i = 0; i < 3; i++) __kage_load(buf, 4);
  *(volatile int *)(uintptr_t)0 = 1;
  return 0;
}

static int mode_reset(void) {
  __kage_func_enter(&A[0]);
  __kage_load(buf, 4);
  work(1);
  kage_reset();
  __kage_load(buf, 4);
  work(0);
  __kage_func_exit(&A[0]);
  return 0;
}

#define WORKERS 8
#define PER_WORKER 100000
static void *worker(void *arg) {
  __kage_func_enter(&A[9]);
  for (int i = 0; i < PER_WORKER; i++) __kage_load(buf + (i & 63), 4);
  if (arg) /* stays busy in its region until the process exits */
    for (;;) __kage_store(buf, 1);
  return NULL;
}

/* Concurrent threads; one still running inside its region when main returns. */
static int mode_threads(void) {
  __kage_func_enter(&A[0]);
  pthread_t t[WORKERS + 1];
  for (int i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  pthread_create(&t[WORKERS], NULL, worker, (void *)1);
  usleep(20000);
  __kage_func_exit(&A[0]);
  return 0;
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "basic";
  if (!strcmp(m, "basic")) return mode_basic();
  if (!strcmp(m, "exit")) return mode_exit();
  if (!strcmp(m, "longjmp")) return mode_longjmp();
  if (!strcmp(m, "fork")) return mode_fork();
  if (!strcmp(m, "segv")) return mode_segv();
  if (!strcmp(m, "reset")) return mode_reset();
  if (!strcmp(m, "threads")) return mode_threads();
  fprintf(stderr, "unknown mode %s\n", m);
  return 2;
}
