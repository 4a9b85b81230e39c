//! `timestamp_trace=PATH`: every event the hcpa engine receives, one line each, in the order
//! it receives them, for the reference model (`tests/hcpa/reference.py`, which documents
//! the format). For tests: one lock and one formatted line per event, and the lines of
//! several threads interleave (the reference model replays one thread).

use crate::sync::SpinLock;
use kage_abi::Candidate;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static ON: AtomicBool = AtomicBool::new(false);
static OUT: SpinLock<Option<BufWriter<File>>> = SpinLock::new(None);

/// Starts writing the trace to `path` (truncated); a file that cannot be created is
/// reported and the trace stays off.
pub fn open(path: &str) {
    match File::create(path) {
        Ok(file) => {
            *OUT.lock() = Some(BufWriter::new(file));
            ON.store(true, Relaxed);
        }
        Err(e) => eprintln!("kage: warning: timestamp_trace: cannot create '{path}': {e}"),
    }
}

/// Whether events are traced.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Writes one event line.
pub fn line(event: fmt::Arguments) {
    if let Some(out) = OUT.lock().as_mut() {
        let _ = writeln!(out, "{event}");
    }
}

/// Writes out what is buffered (the report is being written).
pub fn flush() {
    if let Some(out) = OUT.lock().as_mut() {
        let _ = out.flush();
    }
}

/// Candidates as the trace writes them: `slot:offset` separated by spaces.
pub struct Cands<'a>(pub &'a [Candidate]);

impl fmt::Display for Cands<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, c) in self.0.iter().enumerate() {
            let sep = if k == 0 { "" } else { " " };
            write!(f, "{sep}{}:{}", c.slot, c.offset)?;
        }
        Ok(())
    }
}

/// Regions as the trace writes them after other fields: ` region` each.
pub struct Regions<I>(pub I);

impl<I: Iterator<Item = u32> + Clone> fmt::Display for Regions<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for region in self.0.clone() {
            write!(f, " {region}")?;
        }
        Ok(())
    }
}

/// Traces an event when the trace is on. The formatting is out of line (`cold`), so that
/// the entry points do not keep their arguments in memory for it.
macro_rules! event {
    ($($arg:tt)*) => {
        if $crate::tools::hcpa::trace::on() {
            $crate::tools::hcpa::trace::cold(move || {
                $crate::tools::hcpa::trace::line(format_args!($($arg)*))
            });
        }
    };
}

/// Runs `f`, out of line.
#[cold]
#[inline(never)]
pub fn cold(f: impl FnOnce()) {
    f()
}
pub(crate) use event;
