//! The Kage report: what a tool writes when the program ends, and how it is read back and shown.
//!
//! The runtime builds a [`Report`] and serialises it; `kage report` reads one with
//! [`read_report`] (which turns every kind of bad input into a [`ReadError`], never a panic)
//! and renders it. The schema is documented in `docs/report-schema.md`.

pub mod model;
pub mod output;
pub mod planner;
pub mod read;
pub mod render;

pub use model::*;
pub use output::{expand_output, DEFAULT_OUTPUT};
pub use planner::{plan, plan_regions, plan_shapes};
pub use read::{parse_report, read_report, ReadError};
