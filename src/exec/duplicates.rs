//! What a key set's pass finds, shared by every way of finding it (the
//! grouped pass, the dense bitmap, the key engine): [`Duplicates`], and how
//! many samples a failed check shows ([`SAMPLES`]).

use crate::value::Value;

/// How many samples a failed check shows.
pub const SAMPLES: usize = 5;

/// The result of a key set's grouped pass.
#[derive(Debug, Clone, Default)]
pub struct Duplicates {
    /// Distinct keys occurring in more than one row.
    pub keys: u64,
    /// The most frequent duplicated keys, values in key-set (sorted) order.
    pub samples: Vec<(Vec<Value>, u64)>,
}
