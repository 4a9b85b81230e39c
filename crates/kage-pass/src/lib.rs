//! Kage pass.
