//! Kage runtime.
