//! Kage command-line library.
