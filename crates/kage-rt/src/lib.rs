//! Kage runtime: linked into instrumented programs as a static library.
//!
//! The C ABI (contract in `docs/abi.md`, written once in `kage_abi`) is a thin layer over
//! plain Rust, in layers that import only downwards (checked by `tests/module_layers.rs`):
//!
//! - `runtime` (start-up, the tool for the build, the end, fork), `abi` (the common hooks
//!   and `include/kage.h`) and `contexts` (coroutines' context switches) on top;
//! - `thread` (the list of threads, their creation and end), `signals` (fatal signals, given
//!   what to do), `report` (the report file);
//! - `tools`: the `TOOLS` table and one module per tool: its options as data, its part of
//!   the C ABI (the entry points only its instrumentation calls), its `Tool`;
//! - `gate` (the on/off gate and the calling thread's state, what every hook reads first),
//!   `inline` (what instrumented code reads inline about the thread's regions: the innermost
//!   one) and `tool` (the `Tool`/`ThreadTool`
//!   interface);
//! - `options` (the option table: the common options, and the tools' as given), `registry`
//!   (module tables, global ids), `stack` (region stacks and their repair), `sync`, `alloc`,
//!   `chunked`, `collections`.
//!
//! The runtime never calls the program's `malloc` (see `alloc`) and ignores events raised
//! while it is itself running.

pub mod abi;
pub mod alloc;
pub mod chunked;
pub mod collections;
pub mod contexts;
pub mod gate;
pub mod handlers;
pub mod inline;
pub mod options;
pub mod registry;
pub mod report;
pub mod runtime;
pub mod signals;
pub mod stack;
pub mod sync;
pub mod thread;
pub mod tool;
pub mod tools;

/// Every allocation made by Rust code in the runtime goes to mmap-backed memory, never to
/// the program's (possibly instrumented, possibly interposed) `malloc`.
#[global_allocator]
static GLOBAL: alloc::KageAlloc = alloc::KageAlloc;
