//! The join passes on the key engine: `values(k) in REF(k)` (staged rows
//! whose key the other side lacks) and `unique(k) across published` (distinct
//! staged keys that the other side holds too), for keys that pack exactly.
//!
//! The packing is the staged side's, from its footer ranges. A key of the
//! other side outside those ranges cannot equal any staged key, so it is
//! dropped while packing: a reference or a published table much wider than
//! the staged partition costs its scan and nothing more.
//!
//! - Keys of at most [`BITMAP_BITS`] bits: the other side becomes a bitmap
//!   (one bit per possible key), and each staged key is one bit test. Only
//!   the staged keys that the check reports (missing, or present) are kept,
//!   and counted in radix partitions for the samples.
//! - Wider keys: both sides are radix-partitioned the same way, and each
//!   partition is joined on its own, in parallel, in a core's cache.
//!
//! Rows with a null key part are left out on both sides, as in the grouped
//! anti- and semi-join.
//!
//! - `job`: what a pass takes and gives ([`Side`], [`Want`], [`Joined`]),
//!   and the side streams, staged words and samples every way shares.
//! - `bitmap`: the other side as a bitmap, for narrow keys.
//! - `probe`: [`Want::Present`] for a small staged side, probed while the
//!   other side streams.
//! - `partitioned`: both sides radix-partitioned, for the rest.
//! - `fingerprinted`: both [`Want`]s for keys that pack into no word
//!   (text of any shape, composites with a text part): the distinct staged
//!   keys exact, by fingerprint, with their rows, probed by the other side
//!   while it streams; `keyset` is their table.
//! - `spread`: both [`Want`]s of fingerprinted keys too many for that
//!   table: both sides spread into radix partitions by fingerprint, with
//!   their bytes, and joined partition by partition.
//!
//! This file picks the packing and the way a pass runs.

mod bitmap;
mod fingerprinted;
mod job;
mod keyset;
mod paged;
mod partitioned;
mod probe;
mod records;
mod spread;

use datafusion::arrow::datatypes::DataType;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::prelude::SessionContext;

use super::tasks::threads;
use crate::exec::ExecError as Error;
use crate::plan::keys::{KeyJob, Packing, PartKind};
use crate::staged::StagedInput;
use bitmap::{bitmap_words, by_bitmap};
use job::Job;
use partitioned::partitioned;
use probe::{probe_filter_bits, probed};

pub use bitmap::BITMAP_BITS;
pub use fingerprinted::{
    describe_fingerprinted, fingerprinted_for, in_place, Fingerprinted, StagedKeys,
};
pub use job::{Joined, Paged, Side, SideInput, Want};
pub use probe::PROBE_ROWS;
pub use spread::{describe_spread, spread};

/// The packing a join on the staged `columns` runs with, or `None` when the
/// engine cannot run it: a part is not fixed-width, is a float (whose NaN
/// and -0.0 the grouped join compares its own way), or is compared in a type
/// whose values are not the staged values' (`compared`: the type the other
/// side is cast to). Integers of any width compare by value.
pub fn packing_for(
    staged: &StagedInput,
    columns: &[String],
    compared: &[DataType],
) -> Option<Packing> {
    let job = KeyJob {
        keys: columns.to_vec(),
        nulls_equal: false,
    };
    let facts = |c: &str| crate::exec::stats::column_facts(staged, c);
    let packing = crate::plan::keys::packing(&job, &staged.schema, &facts)?;
    let same_values = packing.parts.iter().zip(compared).all(|(part, to)| {
        let Ok(field) = staged.schema.field_with_name(&part.column) else {
            return false;
        };
        let ty = field.data_type();
        match part.kind {
            PartKind::Float32 | PartKind::Float64 => false,
            _ if ty.is_integer() && to.is_integer() => true,
            _ => ty == to,
        }
    });
    (same_values && packing.bits() <= 128 && compared.len() == columns.len()).then_some(packing)
}

/// How the engine joins on `packing`, for `explain`.
pub fn describe(packing: &Packing) -> String {
    let parts: Vec<String> = packing
        .parts
        .iter()
        .map(|p| format!("{} {} bits", p.column, p.bits))
        .collect();
    let how = if packing.bits() <= BITMAP_BITS {
        "a bitmap of the other side's keys, one bit test a staged row"
    } else {
        "both sides radix-partitioned and joined partition by partition"
    };
    format!(
        "by the key engine: keys packed by the staged footer ranges ({} = {} bits; other-side keys outside them dropped), {how}",
        parts.join(" + "),
        packing.bits()
    )
}

/// Runs the join of `staged` against `other` (both projected to the key
/// columns in key order; `types`: the staged key types, for samples).
pub async fn run(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    packing: &Packing,
    types: &[DataType],
    want: Want,
    label: &str,
) -> Result<Joined, Error> {
    let job = Job {
        packing,
        types,
        want,
        label,
    };
    let bitmap_bytes = bitmap_words(packing) * 8 * threads(ctx).max(1);
    if packing.bits() <= BITMAP_BITS {
        let pool = &ctx.runtime_env().memory_pool;
        let reservation = MemoryConsumer::new("dqgate join bitmap").register(pool);
        if reservation.try_grow(bitmap_bytes).is_ok() {
            let joined = by_bitmap(ctx, staged, other, &job).await;
            drop(reservation);
            return joined;
        }
    }
    if want == Want::Present && staged.rows <= PROBE_ROWS {
        let width = if packing.bits() <= 64 { 8 } else { 16 };
        let pool = &ctx.runtime_env().memory_pool;
        let reservation = MemoryConsumer::new("dqgate join table").register(pool);
        let table_bytes = (staged.rows as usize * 2).next_power_of_two() * width;
        let filter_bytes = (1usize << probe_filter_bits(staged.rows)) / 8;
        if reservation.try_grow(table_bytes * 2 + filter_bytes).is_ok() {
            let joined = if packing.bits() <= 64 {
                probed::<u64>(staged, other, &job).await
            } else {
                probed::<u128>(staged, other, &job).await
            };
            drop(reservation);
            return joined;
        }
    }
    if packing.bits() <= 64 {
        partitioned::<u64>(ctx, staged, other, &job).await
    } else {
        partitioned::<u128>(ctx, staged, other, &job).await
    }
}

/// Reads the staged side of a fingerprinted join into its
/// table, or `None` when it does not fit the engine's table or the pool
/// (the join then runs as a DataFusion plan).
pub async fn build_fingerprinted(
    ctx: &SessionContext,
    staged: Side,
    plan: &Fingerprinted,
    label: &str,
) -> Result<Option<StagedKeys>, Error> {
    let Some(reserved) = fingerprinted::fits(ctx, plan, staged.rows) else {
        return Ok(None);
    };
    fingerprinted::build(staged, plan, reserved, label)
        .await
        .map(Some)
}

/// Probes the built staged keys with `other`, for what `want` reports.
pub async fn probe_fingerprinted(
    staged: StagedKeys,
    other: Side,
    want: Want,
    label: &str,
) -> Result<Joined, Error> {
    fingerprinted::probe(staged, other, want, label).await
}
