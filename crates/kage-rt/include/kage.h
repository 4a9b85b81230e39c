/* Kage runtime control API for instrumented programs.
 *
 * Link with the Kage runtime (kage-cc does it). Both calls are cheap and thread-safe.
 */
#ifndef KAGE_H
#define KAGE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Turn delivery of memory accesses to the tool on (on != 0) or off. Region tracking
 * (instances, nesting) continues while off. KAGE_OPTIONS=enabled=0 starts with it off. */
void kage_set_enabled(int on);

/* Discard every statistic gathered so far, on every thread: the report covers what
 * happens after the call. Other threads apply it at their next region enter/exit. */
void kage_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* KAGE_H */
