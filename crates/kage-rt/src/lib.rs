//! Kage runtime: linked into instrumented programs as a static library.
//!
//! The C ABI (`abi.rs`, contract in `docs/abi.md`) is a thin layer over plain Rust:
//! option parsing (`options`), module registration (`registry`), per-thread region stacks
//! with the repair rules (`stack`, `thread`), the tools (`tools`), and the report
//! (`report`). The runtime never calls the program's `malloc` (see `alloc`) and ignores
//! events raised while it is itself running.

pub mod abi;
pub mod alloc;
pub mod chunked;
pub mod options;
pub mod registry;
pub mod report;
pub mod runtime;
pub mod signals;
pub mod stack;
pub mod sync;
pub mod thread;
pub mod tools;

/// Every allocation made by Rust code in the runtime goes to mmap-backed memory, never to
/// the program's (possibly instrumented, possibly interposed) `malloc`.
#[global_allocator]
static GLOBAL: alloc::KageAlloc = alloc::KageAlloc;
