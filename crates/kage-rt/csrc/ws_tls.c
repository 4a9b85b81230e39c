/* The working-set tool's per-thread access budget (docs/abi.md, "Working-set
 * instrumentation"). Instrumented code decrements it inline; the runtime refills it in
 * __kage_ws_tick. It lives in C because stable Rust cannot define an exported thread-local
 * symbol. Initial-exec: the runtime is always part of the executable. */
#include <stdint.h>

__attribute__((tls_model("initial-exec"), visibility("default")))
__thread int64_t __kage_ws_budget;

int64_t kage_ws_budget_get(void) { return __kage_ws_budget; }
void kage_ws_budget_set(int64_t value) { __kage_ws_budget = value; }
