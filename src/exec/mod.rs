//! Staged files → DataFusion session → observed metric values.

pub mod input;
