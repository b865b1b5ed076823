//! The published side of `unique(k) across published`, read only where it
//! can hold a staged key.
//!
//! The staged key columns are read once into their sorted distinct values,
//! one list a key column, in the type the column is compared in. A
//! published row group is read only if, for every key column, some staged
//! value lies within the row group's footer range `[min, max]`; in a file
//! with a page index the same test picks the pages within each row group
//! that is read. Keys that rise with time (increasing ids, time-prefixed
//! ids, timestamps, `(date, seq)`) then cost the row groups and pages
//! around the staged keys, whatever the table's size. Scattered keys, which
//! every range admits, are read whole: by this module's own reader, the key
//! columns only, with no DataFusion table a file. A table on an object store
//! (Delta) is pruned by its row groups' ranges alone (a page index would
//! cost a request a file), and its row groups are fetched by ranged reads.
//!
//! Pruning never drops a row that could hold a staged key: a range that is
//! missing (no statistics) or cannot be compared admits everything, and a
//! row group or page whose key column is all null holds no key (rows with
//! a null key part are left out of the join on both sides).
//!
//! - `staged_values`: the staged key columns' values, read once
//!   ([`StagedValues`]), and which footer ranges they admit;
//!   `staged_bytes` keeps a text or binary column's values as bytes.
//! - `pruned`: what is left to read ([`Pruned`]) and its [`Counts`].
//! - `footer`: the planning of [`Pruned`] from the published footers and
//!   page indexes.
//! - `reader`: this module's own reader of what is left, as streams or as
//!   a DataFusion table a part.

mod footer;
mod pruned;
mod reader;
mod staged_bytes;
pub(crate) use staged_bytes::window;
mod staged_values;

use crate::staged::StagedInput;

pub use pruned::{Counts, Pruned, PART};
pub use staged_values::StagedValues;

/// A published partition other than the one being replaced, opened.
#[derive(Debug, Clone)]
pub struct PublishedPart {
    /// `k=v[/k=v]`.
    pub rel: String,
    pub input: StagedInput,
}
