//! What the footers left to read of the published side: each file's share
//! ([`Item`]: its row groups, and rows within them), the [`Counts`] of what
//! was pruned, and [`Pruned`], which `footer` plans and `reader` reads.

use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::parquet::arrow::arrow_reader::{ArrowReaderMetadata, RowSelection};
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

/// The last column of [`Pruned::streams`]' batches: the part's index.
pub const PART: &str = "__dqgate_part";

/// One published file's share of the read: its row groups, and the rows
/// within them when its page index picked pages.
#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) part: usize,
    /// The path within the table, for `explain`.
    pub(super) name: String,
    pub(super) source: Source,
    pub(super) meta: ArrowReaderMetadata,
    pub(super) row_groups: Vec<usize>,
    pub(super) selection: Option<RowSelection>,
    pub(super) rows: u64,
}

/// Where a published file is read from.
#[derive(Debug, Clone)]
pub(super) enum Source {
    Local(PathBuf),
    /// An object in a store, of `size` bytes: its row groups are fetched
    /// by ranged reads.
    Remote {
        store: Arc<dyn ObjectStore>,
        path: ObjectPath,
        size: u64,
    },
}

/// Counts of what the footers pruned, for `explain` and the timing line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub files: (usize, usize),
    pub row_groups: (usize, usize),
    /// Pages read and pages in the row groups read, of files with a page
    /// index.
    pub pages: (usize, usize),
    /// Rows read and rows published.
    pub rows: (u64, u64),
}

impl Counts {
    /// Whether every published row is read: the footers pruned nothing.
    pub fn reads_all(&self) -> bool {
        self.rows.0 == self.rows.1
    }

    /// `read 3 of 365 file(s), 3 of 365 row group(s), ...`.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{} of {} file(s), {} of {} row group(s)",
            self.files.0, self.files.1, self.row_groups.0, self.row_groups.1
        );
        if self.pages.1 > 0 {
            out += &format!(
                ", {} of {} page(s) in files with a page index",
                self.pages.0, self.pages.1
            );
        }
        out + &format!(", {} of {} row(s)", self.rows.0, self.rows.1)
    }
}

/// The published files to read, and where within them.
#[derive(Debug, Clone)]
pub struct Pruned {
    pub(super) items: Vec<Item>,
    pub(super) rels: Vec<String>,
    pub(super) keys: Vec<String>,
    /// The key columns as read: [`other_key`](crate::plan::join::other_key)
    /// columns of the compared types.
    pub(super) schema: SchemaRef,
    /// The key columns as [`Pruned::streams`] read them (text as
    /// `Utf8View`, which the reader decodes without copying each value),
    /// and [`PART`], the index of the batch's part.
    pub(super) with_part: SchemaRef,
    pub(super) types: Vec<DataType>,
    pub counts: Counts,
}

impl Pruned {
    /// The files read, with their row groups, at most `most` of them.
    pub fn files_read(&self, most: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .items
            .iter()
            .take(most)
            .map(|i| {
                let groups: Vec<String> = i.row_groups.iter().map(|g| g.to_string()).collect();
                let pages = if i.selection.is_some() {
                    ", pages picked by the page index"
                } else {
                    ""
                };
                format!("{} (row group(s) {}{pages})", i.name, groups.join(", "))
            })
            .collect();
        if self.items.len() > most {
            out.push(format!("and {} more file(s)", self.items.len() - most));
        }
        out
    }

    /// Only the items of the parts `keep` says (by part number); the counts
    /// are of what is read of those parts, out of all of them (pages not
    /// counted).
    pub fn only(&self, keep: impl Fn(usize) -> bool) -> Pruned {
        let items: Vec<Item> = self
            .items
            .iter()
            .filter(|i| keep(i.part))
            .cloned()
            .collect();
        let counts = Counts {
            files: (items.len(), self.counts.files.1),
            row_groups: (
                items.iter().map(|i| i.row_groups.len()).sum(),
                self.counts.row_groups.1,
            ),
            pages: (0, 0),
            rows: (items.iter().map(|i| i.rows).sum(), self.counts.rows.1),
        };
        Pruned {
            items,
            rels: self.rels.clone(),
            keys: self.keys.clone(),
            schema: self.schema.clone(),
            with_part: self.with_part.clone(),
            types: self.types.clone(),
            counts,
        }
    }

    /// Whether nothing is left to read.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The `rel` of part `i`.
    pub fn rel(&self, i: usize) -> &str {
        &self.rels[i]
    }
}
