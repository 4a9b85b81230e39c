/* The thread-locals that instrumented code updates inline (docs/abi.md). They live in C
 * because stable Rust cannot define an exported thread-local symbol. Initial-exec: the
 * runtime is always part of the executable. */
#include <stdint.h>

/* The working-set tool's per-thread access budget ("Working-set instrumentation").
 * Instrumented code decrements it inline; the runtime refills it in __kage_ws_tick. */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread int64_t __kage_ws_budget;

int64_t kage_ws_budget_get(void) { return __kage_ws_budget; }
void kage_ws_budget_set(int64_t value) { __kage_ws_budget = value; }

/* The footprint tool's per-thread count of the accesses that footprint instrumentation
 * reports in groups ("Footprint instrumentation"): instrumented code adds to it inline
 * (relaxed atomic loads and stores: only this thread writes it, the report may read it
 * from another). */
__attribute__((tls_model("initial-exec"), visibility("default")))
__thread _Atomic uint64_t __kage_fp_accesses;

/* The calling thread's counter, readable by other threads while it lives. */
_Atomic uint64_t *kage_fp_accesses_slot(void) { return &__kage_fp_accesses; }
