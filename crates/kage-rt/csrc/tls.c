/* The thread-locals that instrumented code updates inline (docs/abi.md), and the footprint
 * range buffer with its append. They live in C because stable Rust cannot define an
 * exported thread-local symbol. Initial-exec: the runtime is always part of the
 * executable (instrumented code in the executable reaches them local-exec, code in a
 * shared library initial-exec: docs/abi.md). */
#include <stdatomic.h>
#include <stdint.h>

/* The working-set tool's per-thread access budget ("Working-set instrumentation").
 * Instrumented code decrements it inline; the runtime refills it in __kage_ws_tick. */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread int64_t __kage_ws_budget;

int64_t kage_ws_budget_get(void) { return __kage_ws_budget; }
void kage_ws_budget_set(int64_t value) { __kage_ws_budget = value; }

/* The count tool's per-thread totals ("Count instrumentation"): loads, stores, bytes read,
 * bytes written. Instrumented code adds each segment's to them inline (relaxed atomic loads
 * and stores: only this thread writes them, the report may read them from another); a
 * count-calls build's accesses add to them in the runtime. */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread _Atomic uint64_t __kage_count[4];

/* The calling thread's totals, readable by other threads while it lives. */
_Atomic uint64_t *kage_count_slot(void) { return __kage_count; }

/* Count instrumentation's per-thread records and open function activations ("Count
 * instrumentation"), laid out as kage_abi::count says: the directory of record arrays by
 * module slot (a reset empties it), the activations, their number and capacity, and which
 * of the thread's contexts they belong to (the runtime's). Instrumented code reads and writes
 * it inline; the runtime sets it up (__kage_count_prepare) and swaps it when a coroutine
 * context runs on the thread. */
struct kage_count_thread {
  void **records;
  void *acts;
  uint32_t top, capacity;
  uint64_t owner;
};
/* The directory of a thread that counts nowhere (not set up yet, or its part parked): every
 * module's records null, so that the inline entry checks need not test the directory
 * itself (crates/kage-rt/src/tools/count.rs). */
extern void *kage_count_no_directory[];
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread struct kage_count_thread __kage_count_thread = {.records = kage_count_no_directory};

uint64_t *kage_count_thread_slot(void) { return (uint64_t *)&__kage_count_thread; }

/* The root entry of the promoted tree (counted in locals) that the thread is running, else
 * null ("Count instrumentation"): a fatal signal's report counts an instance of it. */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread const void *_Atomic __kage_count_running;

const void *_Atomic *kage_count_running_slot(void) { return &__kage_count_running; }

/* The region entry of the thread's innermost open region, as of its last region event
 * ("Hooks the pass inserts"): instrumented code calls __kage_settle(r) only when r is not
 * it (a settle to the innermost region changes nothing). */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread const void *_Atomic __kage_innermost;

const void *_Atomic *kage_innermost_slot(void) { return &__kage_innermost; }

/* Non-zero while accesses are not delivered: the runtime's gate bits (crates/kage-rt/src/
 * gate.rs). Count instrumentation masks what it adds with it. */
__attribute__((visibility("default")))
_Atomic uint32_t __kage_gate;

/* The footprint tool's per-thread count of the accesses that footprint instrumentation
 * reports in groups ("Footprint instrumentation"): instrumented code adds to it inline
 * (relaxed atomic loads and stores: only this thread writes it, the report may read it
 * from another). */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread _Atomic uint64_t __kage_fp_accesses;

/* The calling thread's counter, readable by other threads while it lives. */
_Atomic uint64_t *kage_fp_accesses_slot(void) { return &__kage_fp_accesses; }

/* The footprint tool's per-thread buffer of reported ranges ("Footprint instrumentation"):
 * __kage_fp_range appends (first byte, last byte) while len < limit, and calls
 * __kage_fp_strided otherwise; the tool drains it at every region event and sets limit
 * (0 while the thread's accesses are not to be buffered). `limit` may be set by another
 * thread (kage_set_enabled): both sides access it with relaxed atomics. */
#define KAGE_FP_BUFFER 32
struct kage_fp_buffer {
  uint64_t len;
  _Atomic uint64_t limit;
  /* Non-zero while __kage_fp_range appends. The program's handlers wait until it is done
   * (signal_waiting), but a fault's cannot: such a handler reports its own ranges
   * directly (writing the entry being written would tear it), and the runtime, draining
   * the buffer at the handler's events, leaves `len` as it is. */
  uint64_t appending;
  uint64_t ranges[2 * KAGE_FP_BUFFER];
  /* Non-zero while a signal of the program's waits for the hooks here to finish: its
   * handler cannot run while one changes the range buffer or the leaf slot (a handler that
   * leaves by siglongjmp would leave them held for good), so the runtime's trampoline keeps
   * it (crates/kage-rt/src/handlers.rs) and the hook runs it when it is done. Here, not in
   * a thread-local of its own: an append reaches it from the buffer's address. */
  uint64_t signal_waiting;
};
__attribute__((tls_model("initial-exec")))
static __thread struct kage_fp_buffer kage_fp_buffer;

void __kage_fp_strided(const void *addr, uint64_t width, uint64_t stride, uint64_t count);

uint64_t *kage_signal_waiting_slot(void) { return &kage_fp_buffer.signal_waiting; }

/* crates/kage-rt/src/handlers.rs: runs the handlers of the signals kept meanwhile. */
void kage_run_waiting_handlers(void);

/* A hook has released the buffer and the leaf slot: the handlers of signals that came
 * meanwhile run now, as if they had come here. */
static inline __attribute__((always_inline)) void hooks_done(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  if (__builtin_expect(kage_fp_buffer.signal_waiting != 0, 0))
    kage_run_waiting_handlers();
}

/* Appends the bytes `first`..=`last` at `n`, the buffer's length, and ends the append that
 * set `appending`. */
static inline void append_range(struct kage_fp_buffer *b, uint64_t n, uint64_t first,
                                uint64_t last) {
  b->ranges[2 * n] = first;
  b->ranges[2 * n + 1] = last;
  b->len = n + 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  b->appending = 0;
  hooks_done();
}

/* `len` bytes at `addr` are accessed: a segment's report (docs/abi.md). Here, not in the
 * Rust part: the common case is an append, without the thread lookup and dispatch of a
 * runtime event. */
void __kage_fp_range(const void *addr, uint64_t len) {
  struct kage_fp_buffer *b = &kage_fp_buffer;
  if (__builtin_expect(!b->appending, 1)) {
    b->appending = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t n = b->len;
    if (__builtin_expect(n < atomic_load_explicit(&b->limit, memory_order_relaxed) && len != 0, 1)) {
      uint64_t first = (uint64_t)(uintptr_t)addr;
      append_range(b, n, first, first + (len - 1));
      return;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    b->appending = 0;
    hooks_done();
  }
  __kage_fp_strided(addr, len, 0, 1);
}

/* The calling thread's buffer, for the runtime (its limit settable by other threads). */
struct kage_fp_buffer *kage_fp_buffer_slot(void) { return &kage_fp_buffer; }
uint64_t kage_fp_buffer_capacity(void) { return KAGE_FP_BUFFER; }

/* The footprint tool's open leaves on this thread ("Leaves", "Footprint instrumentation"):
 * a stack of `depth` leaves, each inside the one below it, all of the activation at
 * `frame`: each one's region entry, its parent leaf's (null: none) and where its ranges
 * begin in kage_fp_buffer; the activation and the entry of the innermost leaf an event
 * made a level of the tool's (null: none; the tool keeps them: a leaf that calls, one a
 * signal handler interrupts, one whose ranges fill the buffer); and the leaves that ended since the tool last ran, which it counts from
 * the ranges between their `mark` and `end` (those stay in the buffer until it does), with
 * how many leaves were open below them. `changing` is non-zero while a hook changes the
 * slot: the program's signal handlers wait until it is done (signal_waiting), and a
 * fault's handler, which cannot wait, leaves the slot alone (its leaves and regions are
 * not measured). */
#define KAGE_FP_LEAVES 8
#define KAGE_FP_ENDED 32
/* The records of the tool's part running on the thread, for the leaf instances counted here
 * rather than by the tool (one-range leaves, and leaves that reported a few ranges):
 * bound by the part (`records` null: not bound, the tool counts them). The records are the
 * part's, by global id: a directory of KAGE_FP_RECORD_DIR chunks (null: not made yet) of
 * KAGE_FP_RECORD_CHUNK records of KAGE_FP_RECORD_WORDS words: instances, then the sum, least
 * and most of the locations, then of the lines (crates/kage-rt/src/tools/footprint.rs). */
#define KAGE_FP_RECORD_DIR 4096
#define KAGE_FP_RECORD_CHUNK 512
#define KAGE_FP_RECORD_WORDS 7
/* kage_vsm::footprint::MAX_LEVELS: an instance this deep is the tool's to count. */
#define KAGE_FP_MAX_LEVELS 255
struct kage_fp_counting {
  _Atomic(_Atomic uint64_t *) *records;
  /* A reset to apply (the tool's epoch is not the part's): the tool counts. */
  const _Atomic uint64_t *tool_epoch, *part_epoch;
  /* The part's deepest nesting of regions. */
  _Atomic uint64_t *max_depth;
  /* The regions the part has open (leaves in the slot aside). */
  uint64_t open_levels;
  /* log2 of a location's and of a line's size in bytes. */
  uint64_t location_shift, line_shift;
};
struct kage_fp_leaf {
  uint64_t depth;
  const void *frame;
  const void *level_frame;
  const void *level_entry;
  uint64_t changing;
  uint64_t ended_len;
  struct {
    const void *entry;
    const void *parent;
    uint64_t mark;
  } open[KAGE_FP_LEAVES];
  struct {
    const void *entry;
    uint64_t mark;
    uint64_t end;
    uint64_t below;
  } ended[KAGE_FP_ENDED];
  struct kage_fp_counting counting;
};
__attribute__((tls_model("initial-exec")))
static __thread struct kage_fp_leaf kage_fp_leaf;

/* struct kage_region (docs/abi.md): the fields the leaf hooks read. */
struct kage_region {
  _Atomic uint32_t global_id;
  uint32_t kind, parent, first_line, last_line, local_index;
  const char *name, *symbol, *file;
  const void *module, *code;
  const char *call_file;
  uint32_t call_line, call_column, source_cell, flags;
};
_Static_assert(sizeof(struct kage_region) == 88, "struct kage_region is 88 bytes (docs/abi.md)");
#define KAGE_CHAIN_SHIFT 8
#define KAGE_CHAIN_MASK 0xFFu

/* Folds an instance of `units` locations and `lines` lines into `rec` (only this thread
 * writes it; the report may read it from another: relaxed loads and stores). */
static inline __attribute__((always_inline)) void
fold_instance(_Atomic uint64_t *rec, uint64_t units, uint64_t lines) {
#define LOAD(k) atomic_load_explicit(&rec[k], memory_order_relaxed)
#define STORE(k, v) atomic_store_explicit(&rec[k], (v), memory_order_relaxed)
  uint64_t n = LOAD(0);
  STORE(0, n + 1);
  STORE(1, LOAD(1) + units);
  STORE(4, LOAD(4) + lines);
  if (n == 0) {
    STORE(2, units);
    STORE(3, units);
    STORE(5, lines);
    STORE(6, lines);
  } else {
    if (units < LOAD(2))
      STORE(2, units);
    if (units > LOAD(3))
      STORE(3, units);
    if (lines < LOAD(5))
      STORE(5, lines);
    if (lines > LOAD(6))
      STORE(6, lines);
  }
#undef LOAD
#undef STORE
}

/* The most ranges of a leaf's instance counted here (most leaves report 2 to 4: a helper's
 * load and store, a few loads of a struct): more go to the tool, which sorts them. */
#define KAGE_FP_COUNTED_RANGES 8

/* Counts the `n` location ranges first[i]..=last[i], sorted by first, into out[0] (their
 * distinct locations) and out[1] (their distinct lines: `per_line` is log2 of the
 * locations a line holds): touching and overlapping ones joined, a line counted once. */
static inline __attribute__((always_inline)) void
count_sorted(const uint64_t *first, const uint64_t *last, uint64_t n, uint64_t per_line,
             uint64_t out[2]) {
  /* Lines below `next_line` are counted (none at first). */
  uint64_t units = 0, lines = 0, next_line = 0;
  uint64_t run_first = first[0], run_last = last[0];
  for (uint64_t i = 1; i <= n; i++) {
    if (i < n && first[i] <= run_last + 1) {
      if (last[i] > run_last)
        run_last = last[i];
      continue;
    }
    units += run_last - run_first + 1;
    uint64_t from = run_first >> per_line, to = run_last >> per_line;
    if (from < next_line)
      from = next_line;
    if (to >= from) {
      lines += to - from + 1;
      next_line = to + 1;
    }
    if (i < n) {
      run_first = first[i];
      run_last = last[i];
    }
  }
  out[0] = units;
  out[1] = lines;
}

/* Orders ranges i and j (i < j) by first location, without a branch. */
static inline __attribute__((always_inline)) void order(uint64_t *first, uint64_t *last,
                                                        int i, int j) {
  uint64_t fi = first[i], li = last[i], fj = first[j], lj = last[j];
  int swap = fj < fi;
  first[i] = swap ? fj : fi;
  last[i] = swap ? lj : li;
  first[j] = swap ? fi : fj;
  last[j] = swap ? li : lj;
}

/* union_size for 5 to 8 ranges: an insertion sort, out of line (the leaf loop that calls
 * it keeps its registers). */
static __attribute__((noinline)) void union_of_many(const uint64_t *ranges, uint64_t n,
                                                    uint64_t location_shift, uint64_t per_line,
                                                    uint64_t out[2]) {
  uint64_t first[KAGE_FP_COUNTED_RANGES], last[KAGE_FP_COUNTED_RANGES];
  for (uint64_t i = 0; i < n; i++) {
    uint64_t a = ranges[2 * i] >> location_shift, b = ranges[2 * i + 1] >> location_shift;
    uint64_t j = i;
    for (; j > 0 && first[j - 1] > a; j--) {
      first[j] = first[j - 1];
      last[j] = last[j - 1];
    }
    first[j] = a;
    last[j] = b;
  }
  count_sorted(first, last, n, per_line, out);
}

/* The distinct locations and lines of the `n` ranges (bytes first..=last, in pairs) at
 * `ranges`, 2 <= n <= KAGE_FP_COUNTED_RANGES, as Footprint::touched_by counts them
 * (crates/kage-vsm/src/footprint.rs): sorted by first location, merged where they overlap or
 * touch, each line counted once. */
static inline __attribute__((always_inline)) void
union_size(const uint64_t *ranges, uint64_t n, uint64_t location_shift, uint64_t per_line,
           uint64_t out[2]) {
  if (n == 2) {
    /* The most common (a load and a store, two fields): no loops. */
    uint64_t a0 = ranges[0] >> location_shift, b0 = ranges[1] >> location_shift;
    uint64_t a1 = ranges[2] >> location_shift, b1 = ranges[3] >> location_shift;
    if (a1 < a0) {
      uint64_t a = a0, b = b0;
      a0 = a1, b0 = b1, a1 = a, b1 = b;
    }
    if (a1 <= b0 + 1) {
      uint64_t b = b1 > b0 ? b1 : b0;
      out[0] = b - a0 + 1;
      out[1] = (b >> per_line) - (a0 >> per_line) + 1;
    } else {
      /* Apart: the second may begin in the line where the first ends. */
      out[0] = (b0 - a0 + 1) + (b1 - a1 + 1);
      out[1] = (b0 >> per_line) - (a0 >> per_line) + 1 + (b1 >> per_line) - (a1 >> per_line) +
               ((a1 >> per_line) != (b0 >> per_line));
    }
    return;
  }
  if (n <= 4) {
    /* Most of the rest: a sorting network, without loops or branches. */
    uint64_t first[4], last[4];
    for (uint64_t i = 0; i < n; i++) {
      first[i] = ranges[2 * i] >> location_shift;
      last[i] = ranges[2 * i + 1] >> location_shift;
    }
    if (n == 3) {
      order(first, last, 0, 1);
      order(first, last, 1, 2);
      order(first, last, 0, 1);
      count_sorted(first, last, 3, per_line, out);
    } else {
      order(first, last, 0, 1);
      order(first, last, 2, 3);
      order(first, last, 0, 2);
      order(first, last, 1, 3);
      order(first, last, 1, 2);
      count_sorted(first, last, 4, per_line, out);
    }
    return;
  }
  union_of_many(ranges, n, location_shift, per_line, out);
}

/* Counts an instance of the leaf `r` that touched the `n` ranges at `ranges` (bytes
 * first..=last, in pairs; nothing when n is 0), inside `below` open leaves, in the bound
 * part's records (the calls of its chain get its record in the report), as the tool's count
 * of it would (count_leaf in crates/kage-rt/src/tools/footprint.rs). Returns 0, changing
 * nothing, when the tool must count it instead: more than KAGE_FP_COUNTED_RANGES ranges, no
 * part bound, `r` not registered yet (its global id is then 0xFFFFFFFF), a reset to apply, a
 * record not made yet, or as deep as the shadow goes. */
static inline __attribute__((always_inline)) int
count_instance(struct kage_fp_leaf *l, const struct kage_region *r, const uint64_t *ranges,
               uint64_t n, uint64_t below) {
  struct kage_fp_counting *c = &l->counting;
  if (!c->records || n > KAGE_FP_COUNTED_RANGES)
    return 0;
  uint64_t gid = atomic_load_explicit(&r->global_id, memory_order_acquire);
  if (gid >= (uint64_t)KAGE_FP_RECORD_DIR * KAGE_FP_RECORD_CHUNK)
    return 0;
  if (atomic_load_explicit(c->tool_epoch, memory_order_acquire) !=
      atomic_load_explicit(c->part_epoch, memory_order_relaxed))
    return 0;
  if (c->open_levels + 1 >= KAGE_FP_MAX_LEVELS)
    return 0;
  _Atomic uint64_t *chunk =
      atomic_load_explicit(&c->records[gid / KAGE_FP_RECORD_CHUNK], memory_order_relaxed);
  if (!chunk)
    return 0;
  uint64_t units = 0, lines = 0;
  if (n == 1) {
    units = (ranges[1] >> c->location_shift) - (ranges[0] >> c->location_shift) + 1;
    lines = (ranges[1] >> c->line_shift) - (ranges[0] >> c->line_shift) + 1;
  } else if (n > 1) {
    uint64_t out[2];
    union_size(ranges, n, c->location_shift, c->line_shift - c->location_shift, out);
    units = out[0];
    lines = out[1];
  }
  uint64_t chain = (r->flags >> KAGE_CHAIN_SHIFT) & KAGE_CHAIN_MASK;
  uint64_t depth = c->open_levels + below + 1 + chain;
  if (depth > atomic_load_explicit(c->max_depth, memory_order_relaxed))
    atomic_store_explicit(c->max_depth, depth, memory_order_relaxed);
  fold_instance(chunk + KAGE_FP_RECORD_WORDS * (gid % KAGE_FP_RECORD_CHUNK), units, lines);
  return 1;
}

/* The tool's part (crates/kage-rt/src/tools/footprint.rs): counts the leaves that ended,
 * then ends the activation's open leaves, and its leaves that are levels, that are neither
 * `keep` nor around it. */
void __kage_fp_leaf_close(const void *frame, const void *keep);
/* The same for `entry`, which then goes on or begins, with the leaves around it that are
 * not open. */
void __kage_fp_leaf_resume(const void *entry, const void *frame);

/* Control is in a block of the leaf `entry` (an inlined call or a loop), inside the leaf
 * `parent` (null: none), of the activation at `frame`: its open instance goes on, or a new
 * one begins (the runtime ends others first). */
void __kage_fp_leaf_enter(const void *entry, const void *parent, const void *frame) {
  struct kage_fp_leaf *l = &kage_fp_leaf;
  uint64_t d = l->depth;
  if (d && l->open[d - 1].entry == entry && l->frame == frame)
    return;
  /* The innermost leaf level is `entry` (a loop that became one goes round). */
  if (!d && l->level_entry == entry && l->level_frame == frame)
    return;
  if (l->changing)
    return;
  l->changing = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  /* Read again: a handler that interrupted the lines above may have changed the slot. */
  d = l->depth;
  int begins, open = 0;
  if (d) {
    begins = d < KAGE_FP_LEAVES && l->open[d - 1].entry == parent && l->frame == frame;
    /* A loop's header that begins a leaf around the loop too: that leaf goes on. */
    for (uint64_t i = d - 1; !begins && !open && i-- > 0;)
      open = l->open[i].entry == entry && l->frame == frame;
  } else if (l->level_frame == frame) {
    /* The activation's innermost leaf level is `entry` (a loop that called goes round), or
     * `entry` begins inside it. */
    open = l->level_entry == entry;
    begins = parent && l->level_entry == parent;
  } else {
    begins = !parent;
  }
  if (begins) {
    l->open[d].entry = entry;
    l->open[d].parent = parent;
    l->open[d].mark = kage_fp_buffer.len;
    l->frame = frame;
    l->depth = d + 1;
  }
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  l->changing = 0;
  hooks_done();
  if (!begins && !open)
    __kage_fp_leaf_resume(entry, frame);
}

/* Whether the innermost leaf level (of the activation that leaf_end runs in) is `keep`
 * or the leaf around it: nothing of it ends. */
static inline int level_holds(const struct kage_fp_leaf *l, const void *keep,
                              const void *keep_parent) {
  return keep && (l->level_entry == keep || l->level_entry == keep_parent);
}

/* Whether `keep` or `keep_parent` is among the first `d` open leaves. */
static int open_below(const struct kage_fp_leaf *l, uint64_t d, const void *keep,
                      const void *keep_parent) {
  while (d-- > 0) {
    if (l->open[d].entry == keep || l->open[d].entry == keep_parent)
      return 1;
  }
  return 0;
}

/* Control left the activation's open leaves that are neither `keep` (a block of `keep` that
 * other leaves lead to as well; `keep_parent` the leaf around it, null: none) nor around
 * it. The leaves known here to end (all, without `keep`; those inside `keep` or the leaf
 * around it, when one is open; else `keep`'s siblings and children) go to `ended`; the
 * runtime does the rest. */
void __kage_fp_leaf_end(const void *frame, const void *keep, const void *keep_parent) {
  struct kage_fp_leaf *l = &kage_fp_leaf;
  uint64_t d = l->depth;
  if (!d) {
    if (l->level_frame == frame && !level_holds(l, keep, keep_parent))
      __kage_fp_leaf_close(frame, keep);
    return;
  }
  const void *top = l->open[d - 1].entry;
  if ((top == keep || (keep_parent && top == keep_parent)) && l->frame == frame)
    return;
  if (l->changing || l->frame != frame) {
    __kage_fp_leaf_close(frame, keep);
    return;
  }
  l->changing = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  d = l->depth;
  uint64_t n = l->ended_len;
  int done = 0;
  for (;;) {
    if (!d) {
      /* The activation's leaves that are levels are the runtime's to end. */
      done = l->level_frame != frame || level_holds(l, keep, keep_parent);
      break;
    }
    const void *entry = l->open[d - 1].entry;
    const void *parent = l->open[d - 1].parent;
    if (keep) {
      /* `keep` or the leaf around it stays, and what is inside it has ended. */
      if (entry == keep || (keep_parent && entry == keep_parent)) {
        done = 1;
        break;
      }
      /* Neither is this leaf's parent (nor is `keep` without a parent leaf): it ends if
       * one of them is open below it; else a leaf around `keep`'s parent stays open, and
       * only the runtime knows which. */
      if (keep_parent && parent != keep_parent && parent != keep &&
          !open_below(l, d - 1, keep, keep_parent))
        break;
    }
    /* Counted here when it reported a few ranges, else by the tool. */
    uint64_t mark = l->open[d - 1].mark, end = kage_fp_buffer.len;
    if (!count_instance(l, entry, &kage_fp_buffer.ranges[2 * mark], end - mark, d - 1)) {
      if (n == KAGE_FP_ENDED)
        break;
      l->ended[n].entry = entry;
      l->ended[n].mark = mark;
      l->ended[n].end = end;
      l->ended[n].below = d - 1;
      n++;
    }
    d--;
  }
  l->ended_len = n;
  l->depth = d;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  l->changing = 0;
  hooks_done();
  if (!done)
    __kage_fp_leaf_close(frame, keep);
}

/* The tool's part: reports the range as __kage_fp_range's fallback does, and counts the
 * instance of `r` (crates/kage-rt/src/tools/footprint.rs). */
void __kage_fp_leaf_count(const void *addr, uint64_t len, const struct kage_region *r);

/* `len` bytes at `addr` are accessed, the whole of an instance of the one-range leaf `r`
 * ("One-range leaves"): the range goes to the buffer as __kage_fp_range appends it, and the
 * instance is counted here, inside the open leaves of the slot (its parent leaf and those
 * around it: a leaf that ended before it was ended at its block's start). Anything else
 * (the buffer full, accesses off, a signal handler interrupting a hook, a count the tool
 * must make) goes to the tool. */
void __kage_fp_leaf_range(const void *addr, uint64_t len, const struct kage_region *r) {
  struct kage_fp_buffer *b = &kage_fp_buffer;
  struct kage_fp_leaf *l = &kage_fp_leaf;
  if (__builtin_expect(!b->appending, 1)) {
    b->appending = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t n = b->len;
    uint64_t first = (uint64_t)(uintptr_t)addr, last = first + (len - 1);
    if (__builtin_expect(n < atomic_load_explicit(&b->limit, memory_order_relaxed) && len != 0 &&
                             !l->changing,
                         1)) {
      /* Held while the records change (a signal waits; a fault's handler leaves the slot
       * alone). */
      l->changing = 1;
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      const uint64_t range[2] = {first, last};
      int counted = count_instance(l, r, range, 1, l->depth);
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      l->changing = 0;
      if (__builtin_expect(counted, 1)) {
        append_range(b, n, first, last);
        return;
      }
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    b->appending = 0;
    hooks_done();
  }
  __kage_fp_leaf_count(addr, len, r);
}

/* Whether a hook here is changing the range buffer or the leaf slot on the calling thread
 * (async-signal-safe: the trampoline asks). */
int kage_hooks_busy(void) { return kage_fp_buffer.appending != 0 || kage_fp_leaf.changing != 0; }

/* The calling thread's leaf slot, for the runtime. */
struct kage_fp_leaf *kage_fp_leaf_slot(void) { return &kage_fp_leaf; }
uint64_t kage_fp_leaf_capacity(void) { return KAGE_FP_LEAVES; }
uint64_t kage_fp_ended_capacity(void) { return KAGE_FP_ENDED; }
uint64_t kage_fp_leaf_size(void) { return sizeof(struct kage_fp_leaf); }
/* The records' layout and the depth limit, checked against the tool's. */
void kage_fp_record_layout(uint64_t out[4]) {
  out[0] = KAGE_FP_RECORD_DIR;
  out[1] = KAGE_FP_RECORD_CHUNK;
  out[2] = KAGE_FP_RECORD_WORDS;
  out[3] = KAGE_FP_MAX_LEVELS;
}

/* Defined by kage-cc's link (`--defsym`, as an alias of __kage_register_module) when some of
 * the program's object files were compiled without Kage; see crates/kage/src/cc/objects.rs. */
extern char __kage_plain_objects __attribute__((weak));

/* Whether the link said so. */
int kage_link_has_plain_objects(void) { return &__kage_plain_objects != 0; }
