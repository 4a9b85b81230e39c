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
  /* Non-zero while __kage_fp_range appends: a signal handler that interrupts it then
   * reports its own ranges directly (writing the entry being written would tear it), and
   * the runtime, draining the buffer at the handler's events, leaves `len` as it is. */
  uint64_t appending;
  uint64_t ranges[2 * KAGE_FP_BUFFER];
};
__attribute__((tls_model("initial-exec")))
static __thread struct kage_fp_buffer kage_fp_buffer;

void __kage_fp_strided(const void *addr, uint64_t width, uint64_t stride, uint64_t count);

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
      b->ranges[2 * n] = first;
      b->ranges[2 * n + 1] = first + (len - 1);
      b->len = n + 1;
      __atomic_signal_fence(__ATOMIC_SEQ_CST);
      b->appending = 0;
      return;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    b->appending = 0;
  }
  __kage_fp_strided(addr, len, 0, 1);
}

/* The calling thread's buffer, for the runtime (its limit settable by other threads). */
struct kage_fp_buffer *kage_fp_buffer_slot(void) { return &kage_fp_buffer; }
uint64_t kage_fp_buffer_capacity(void) { return KAGE_FP_BUFFER; }

/* The footprint tool's open leaf inlined call on this thread ("Footprint instrumentation"):
 * its region entry (null: none), its activation (the `frame` of its hooks) and where its
 * ranges begin in kage_fp_buffer; and the activation of the innermost leaf an event made a
 * level of the tool's (null: none; the tool keeps them: a leaf that calls, one a signal
 * handler interrupts). */
struct kage_fp_leaf {
  const void *entry;
  const void *frame;
  uint64_t mark;
  const void *level_frame;
};
__attribute__((tls_model("initial-exec")))
static __thread struct kage_fp_leaf kage_fp_leaf;

/* The tool's part (crates/kage-rt/src/tools/footprint.rs): ends the open leaf's instance
 * (counted, the slot freed) and the activation's leaf that is a level, if any, unless it is
 * `keep`'s. */
void __kage_fp_leaf_close(const void *frame, const void *keep);
/* The same for another leaf than `entry` of the activation: 0 when `entry`'s instance
 * begins, 1 when it goes on (the activation's leaf that is a level is `entry`'s), 2 when the
 * runtime did not run (busy under a signal handler, or ended): the slot is left alone. */
uint32_t __kage_fp_leaf_resume(const void *entry, const void *frame);

/* Control is in a block of the leaf inlined call `entry` of the activation at `frame`: its
 * instance open goes on, or a new one begins (ending another's first). */
void __kage_fp_leaf_enter(const void *entry, const void *frame) {
  struct kage_fp_leaf *l = &kage_fp_leaf;
  if (l->entry == entry && l->frame == frame)
    return;
  if ((l->entry || l->level_frame == frame) && __kage_fp_leaf_resume(entry, frame) != 0)
    return;
  l->mark = kage_fp_buffer.len;
  l->frame = frame;
  /* A handler that interrupts here sees no leaf open until the rest is set. */
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  l->entry = entry;
}

/* Control left the activation's open leaf inlined call, if any, unless it is `keep`'s (a
 * block of `keep` that other leaves lead to as well). */
void __kage_fp_leaf_end(const void *frame, const void *keep) {
  struct kage_fp_leaf *l = &kage_fp_leaf;
  if ((l->entry && (l->entry != keep || l->frame != frame)) || l->level_frame == frame)
    __kage_fp_leaf_close(frame, keep);
}

/* The calling thread's leaf slot, for the runtime. */
struct kage_fp_leaf *kage_fp_leaf_slot(void) { return &kage_fp_leaf; }

/* Defined by kage-cc's link (`--defsym`, as an alias of __kage_register_module) when some of
 * the program's object files were compiled without Kage; see crates/kage/src/cc/objects.rs. */
extern char __kage_plain_objects __attribute__((weak));

/* Whether the link said so. */
int kage_link_has_plain_objects(void) { return &__kage_plain_objects != 0; }
