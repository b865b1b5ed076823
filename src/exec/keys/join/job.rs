//! What a join pass takes and gives: its two [`Side`]s, what it reports
//! ([`Want`]), what it found ([`Joined`]), and its [`Job`]; and what every
//! way of running it shares: the side streams, the staged words, and the
//! decoded samples.

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::DataType;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SendableRecordBatchStream;

use crate::exec::keys::count;
use crate::exec::keys::encode;
use crate::exec::keys::key::Key;
use crate::exec::keys::pages::{self, TextPages};
use crate::exec::keys::store::StoreError;
use crate::exec::keys::tasks::frame_streams;
use crate::exec::progress;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::plan::keys::Packing;
use crate::staged::StagedInput;
use crate::value::Value;

/// What a join pass reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Staged rows whose key the other side lacks.
    Missing,
    /// Distinct staged keys that the other side holds too.
    Present,
}

impl Want {
    /// What a pass's value counts, for its `-v` line.
    pub(super) fn outcome(self) -> &'static str {
        match self {
            Want::Missing => "staged row(s) whose key is not there",
            Want::Present => "staged key(s) also there",
        }
    }
}

/// What a join pass found.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    /// Staged rows ([`Want::Missing`]) or distinct staged keys
    /// ([`Want::Present`]).
    pub value: u64,
    /// The reported keys with the most staged rows (count descending, key
    /// ascending), values in the order of the key columns.
    pub samples: Vec<(Vec<Value>, u64)>,
    /// One line a pass: what it did and how long it took.
    pub passes: Vec<String>,
    /// For each sample, the parts of the other side that hold it (indices
    /// from the other side's part column), when the pass saw them.
    pub located: Option<Vec<Vec<u32>>>,
}

/// What a join pass computes: the staged packing, the staged key types
/// (for samples), what it reports, and its progress label.
pub(super) struct Job<'a> {
    pub(super) packing: &'a Packing,
    pub(super) types: &'a [DataType],
    pub(super) want: Want,
    pub(super) label: &'a str,
}

/// One side of a join: its key columns (in key order) and its row count
/// (for the progress bar and the partition count).
pub struct Side {
    pub input: SideInput,
    pub rows: u64,
}

/// Where a side's key columns come from.
pub enum SideInput {
    /// A DataFusion plan.
    Frame(DataFrame),
    /// Streams already open (the pruned published side).
    Streams(Vec<SendableRecordBatchStream>),
    /// A single text key of local files, which the spread join and the
    /// in-place table's build walk page by page; other joins read its plan.
    Pages(Box<Paged>),
}

/// A single text key of local files: its pages (read as views, whose
/// fingerprints the joins compare), and its plan.
pub struct Paged {
    pub(super) pages: TextPages,
    frame: DataFrame,
}

impl SideInput {
    /// The key `columns` of `input` as `frame` (their plan) reads them, or,
    /// when they are a single text key of local files, page by page where
    /// the spread join and the in-place table's build read them (`threads`
    /// at a time). Read so, a key
    /// typed as an Arrow dictionary that pyarrow writes whole into every
    /// row group is parsed once a run (see `keys::kept`), not decoded again
    /// for each group and cast for each batch.
    pub fn of(input: &StagedInput, columns: &[String], frame: DataFrame, threads: usize) -> Self {
        match columns {
            [column] => match pages::plan_as_views(input, column, threads) {
                Some(pages) => SideInput::Pages(Box::new(Paged { pages, frame })),
                None => SideInput::Frame(frame),
            },
            _ => SideInput::Frame(frame),
        }
    }
}

impl Side {
    /// Its pages, when it is walked page by page and compared as `compared`:
    /// a single text key compared as views (the fingerprints the page
    /// walker gives).
    pub(super) fn pages_as(&self, compared: &[DataType]) -> Option<&TextPages> {
        match (&self.input, compared) {
            (SideInput::Pages(paged), [DataType::Utf8View]) => Some(&paged.pages),
            _ => None,
        }
    }
}

/// The streams of `side`, with a progress bar when it is a plan.
pub(super) async fn side_streams(
    side: Side,
    label: &str,
) -> Result<(Vec<SendableRecordBatchStream>, Option<progress::Progress>), Error> {
    match side.input {
        SideInput::Frame(frame) => {
            let (streams, bar) = frame_streams(frame, label, side.rows).await?;
            Ok((streams, Some(bar)))
        }
        SideInput::Streams(streams) => Ok((streams, None)),
        SideInput::Pages(paged) => {
            let (streams, bar) = frame_streams(paged.frame, label, side.rows).await?;
            Ok((streams, Some(bar)))
        }
    }
}

/// Staged words of the rows without a null key part.
pub(super) fn staged_words<K: Key>(
    packing: &Packing,
    columns: &[ArrayRef],
    words: &mut Vec<K>,
    mut f: impl FnMut(K) -> Result<(), StoreError>,
) -> Result<(), Error> {
    encode::pack(packing, columns, false, words)?;
    match encode::counted_rows(columns, false) {
        None => words.iter().try_for_each(|w| f(*w)),
        Some(valid) => valid.valid_indices().try_for_each(|i| f(words[i])),
    }
    .map_err(Error::from)
}

/// The best keys over all partitions, decoded.
pub(super) fn samples<K: Key>(
    packing: &Packing,
    types: &[DataType],
    mut best: Vec<(K, u64)>,
) -> Vec<(Vec<Value>, u64)> {
    count::rank_top(&mut best, SAMPLES);
    best.into_iter()
        .map(|(w, n)| (encode::unpack(packing, types, w), n))
        .collect()
}

/// For each of `found`, the parts that hold it, from `located` (a sorted
/// list of (find, part)).
pub(super) fn parts_of<T: Ord + Copy>(
    located: &[(T, u32)],
    found: impl Iterator<Item = T>,
) -> Vec<Vec<u32>> {
    found
        .map(|w| {
            let at = located.partition_point(|(x, _)| *x < w);
            located[at..]
                .iter()
                .take_while(|(x, _)| *x == w)
                .map(|(_, p)| *p)
                .collect()
        })
        .collect()
}
