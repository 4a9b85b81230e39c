//! Kage's command-line library: the compiler wrappers ([`cc`]), `kage run` ([`run`]) and
//! `kage report` ([`report`]).
//!
//! The binaries (`kage`, `kage-cc`, `kage-cxx`) only parse arguments and call in here with
//! plain option structs, so everything below is usable and testable without a command line.

pub mod cc;
pub mod report;
pub mod run;

/// Exit codes of Kage's own failures (a program's or compiler's status passes through as is).
pub mod exit_code {
    /// Kage was used wrongly or given bad input: an unreadable report, a malformed option
    /// (clap also exits with 2 on usage errors).
    pub const BAD_INPUT: i32 = 2;
    /// Kage is not set up: the pass plugin or the runtime is missing, or a wrapper would call itself.
    pub const SETUP_ERROR: i32 = 2;
    /// The output could not be written.
    pub const OUTPUT_ERROR: i32 = 1;
    /// The program or compiler could not be started (the shell's "command not found").
    pub const CANNOT_RUN: i32 = 127;
}
