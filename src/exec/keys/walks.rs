//! What the page walkers ([`super::pages`], [`super::rowpages`]) read: the
//! key columns of local files planned a file at a time (each column's leaf
//! and how its values are hashed, [`Kind`]), the row groups cut into runs,
//! and the runs walked side by side in blocking tasks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::schema::types::{ColumnDescriptor, SchemaDescriptor};

use super::direct::{self, FilePlan};
use super::encode::Kind;
use crate::exec::progress::Progress;
use crate::exec::ExecError as Error;
use crate::staged::StagedInput;

/// How `column` (of the table's type `table`) is walked, or `None` when it
/// is not: a flat column of a physical type the table's type reads without
/// converting a value.
pub(super) fn kind_of(table: &DataType, column: &ColumnDescriptor) -> Option<Kind> {
    let flat = column.max_rep_level() == 0
        && column.max_def_level() <= 1
        && column.path().parts().len() == 1;
    let kind = match (table, column.physical_type()) {
        (DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View, PhysicalType::BYTE_ARRAY) => {
            Kind::Text
        }
        (DataType::Dictionary(_, v), PhysicalType::BYTE_ARRAY)
            if matches!(**v, DataType::Utf8 | DataType::LargeUtf8) =>
        {
            Kind::Str
        }
        (DataType::Int32 | DataType::Date32, PhysicalType::INT32) => Kind::I32,
        (DataType::Int64 | DataType::Timestamp(..), PhysicalType::INT64) => Kind::I64,
        _ => return None,
    };
    flat.then_some(kind)
}

/// The type the key engine reads a column of the table's type `t` as:
/// text as views ([`super::direct`]), anything else as it is.
pub(super) fn read_as(t: &DataType) -> DataType {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8View,
        t => t.clone(),
    }
}

/// One file's key columns.
pub(super) struct FileColumns {
    /// How the Arrow reader reads them, for what is not read page by page.
    pub arrow: FilePlan,
    /// Each key column's leaf column and kind, in key order.
    pub parts: Vec<(usize, Kind)>,
}

/// What a walk reads: a plan `F` of every file, and their row groups
/// `(file, group)` cut into runs.
pub(super) struct Walks<F> {
    pub files: Arc<Vec<F>>,
    pub runs: Vec<Vec<(usize, usize)>>,
    pub rows: u64,
}

impl<F> Walks<F> {
    /// The walks of what [`direct::planned`] planned, or `None`.
    pub(super) fn of(planned: Option<direct::Planned<F>>) -> Option<Walks<F>> {
        let direct::Planned { files, runs, rows } = planned?;
        Some(Walks {
            files: Arc::new(files),
            runs,
            rows,
        })
    }
}

impl Walks<FileColumns> {
    /// The rows of run `run`, as the footers say.
    pub(super) fn run_rows(&self, run: usize) -> u64 {
        let rows = |&(f, g): &(usize, usize)| {
            let file: &FileColumns = &self.files[f];
            file.arrow
                .metadata
                .metadata()
                .row_group(g)
                .num_rows()
                .max(0) as u64
        };
        self.runs.get(run).map_or(0, |r| r.iter().map(rows).sum())
    }

    /// How the first key column is hashed (as it is in every file: the
    /// table's type decides).
    pub(super) fn first_kind(&self) -> Kind {
        (self.files.first().and_then(|f| f.parts.first())).map_or(Kind::Text, |p| p.1)
    }
}

/// The leaf column of top-level column `column` in a file, if it has one.
pub(super) fn leaf_of(descr: &SchemaDescriptor, column: &str) -> Option<usize> {
    let root = (descr.root_schema().get_fields().iter()).position(|r| r.name() == column)?;
    (0..descr.num_columns()).find(|&i| descr.get_column_root_idx(i) == root)
}

/// The walks of the key `columns` of `input` on at most `threads` runs,
/// where every file holds each as a flat column of a kind `fits`; `None`
/// otherwise.
pub(super) fn planned(
    input: &StagedInput,
    columns: &[String],
    threads: usize,
    fits: impl Fn(Kind) -> bool,
) -> Option<Walks<FileColumns>> {
    let table: Vec<DataType> = (columns.iter())
        .map(|c| Some(input.schema.field_with_name(c).ok()?.data_type().clone()))
        .collect::<Option<_>>()?;
    let schema = Arc::new(Schema::new(
        (columns.iter().zip(&table))
            .map(|(c, t)| Field::new(c, read_as(t), true))
            .collect::<Vec<_>>(),
    ));
    Walks::of(direct::planned(input, threads, |path, f| {
        let arrow = direct::file_plan(path, f, columns, &schema)?;
        let descr = f.metadata.file_metadata().schema_descr();
        let parts = (columns.iter().zip(&table))
            .map(|(c, t)| {
                let leaf = leaf_of(descr, c)?;
                kind_of(t, &descr.column(leaf))
                    .filter(|k| fits(*k))
                    .map(|k| (leaf, k))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(FileColumns { arrow, parts })
    }))
}

/// Walks every run of `walks` in a blocking task of its own, each with a
/// state from `state` and a visitor from `visitor` (made one run after the
/// other, in run order, before any is walked), `group` reading one row
/// group and returning its rows; returns each run's state and visitor, in
/// run order.
pub(super) async fn walk_runs<F, S, V>(
    walks: &Walks<F>,
    label: &str,
    (state, visitor): (impl Fn() -> S, impl Fn() -> V),
    group: fn(&mut S, &F, usize, &mut V) -> Result<u64, Error>,
) -> Result<Vec<(S, V)>, Error>
where
    F: Send + Sync + 'static,
    S: Send + 'static,
    V: Send + 'static,
{
    let read = Arc::new(AtomicU64::new(0));
    let _bar = Progress::counting(label, read.clone(), walks.rows);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, run) in walks.runs.iter().enumerate() {
        let (files, run, read) = (walks.files.clone(), run.clone(), read.clone());
        let (mut v, mut state) = (visitor(), state());
        tasks.spawn_blocking(move || {
            for (file, g) in run {
                let rows = group(&mut state, &files[file], g, &mut v)?;
                read.fetch_add(rows, Ordering::Relaxed);
            }
            Ok::<_, Error>((i, (state, v)))
        });
    }
    let mut done = Vec::new();
    while let Some(r) = tasks.join_next().await {
        done.push(r.map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??);
    }
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, sv)| sv).collect())
}
