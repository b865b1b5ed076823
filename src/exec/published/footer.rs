//! Footer pruning: which row groups of each published file, and which
//! pages within them (in files with a page index), can hold a staged key.

use std::fs::File;
use std::sync::Arc;

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use datafusion::parquet::file::metadata::PageIndexPolicy;
use datafusion::parquet::file::metadata::RowGroupMetaData;

use super::pruned::{Counts, Item, Pruned, Source, PART};
use super::staged_values::{Column, StagedValues};
use super::PublishedPart;
use crate::exec::ExecError as Error;
use crate::plan::join::other_key;
use crate::staged::remote::Location;
use crate::staged::{StagedFile, StagedInput};

impl Pruned {
    /// Picks the row groups and pages of `parts` that can hold a key of
    /// `staged`. `None` when a key column of a part does not come from its
    /// files (a Hive directory column), which this reader does not read.
    pub fn plan(
        parts: &[PublishedPart],
        keys: &[String],
        types: &[DataType],
        staged: &StagedValues,
    ) -> Result<Option<Pruned>, Error> {
        let mut items = Vec::new();
        let mut counts = Counts::default();
        for (p, part) in parts.iter().enumerate() {
            let file_schema = part.input.file_schema();
            if keys.iter().any(|k| file_schema.field_with_name(k).is_err()) {
                return Ok(None);
            }
            for f in &part.input.files {
                counts.files.1 += 1;
                counts.row_groups.1 += f.metadata.num_row_groups();
                counts.rows.1 += f.row_count();
                if let Some(mut item) =
                    plan_file(p, &part.input, f, keys, types, staged, &mut counts)?
                {
                    item.name = f.path.clone();
                    counts.files.0 += 1;
                    counts.row_groups.0 += item.row_groups.len();
                    counts.rows.0 += item.rows;
                    items.push(item);
                }
            }
        }
        let fields: Vec<Field> = types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(other_key(i), t.clone(), true))
            .collect();
        let mut numbered: Vec<Field> = fields
            .iter()
            .map(|f| {
                let t = crate::exec::scan::as_view(f.data_type());
                f.clone().with_data_type(t)
            })
            .collect();
        numbered.push(Field::new(PART, DataType::UInt32, false));
        Ok(Some(Pruned {
            items,
            rels: parts.iter().map(|p| p.rel.clone()).collect(),
            keys: keys.to_vec(),
            schema: Arc::new(Schema::new(fields)),
            with_part: Arc::new(Schema::new(numbered)),
            types: types.to_vec(),
            counts,
        }))
    }
}

/// Whether any key column chunk of `f` has a page index.
fn has_page_index(f: &StagedFile, roots: &[usize]) -> bool {
    f.metadata.row_groups().iter().any(|rg| {
        roots.iter().any(|r| {
            rg.columns().get(*r).is_some_and(|c| {
                c.column_index_offset().is_some() && c.offset_index_offset().is_some()
            })
        })
    })
}

/// The part of one file to read; `None` when its footers rule out every
/// staged key.
fn plan_file(
    part: usize,
    input: &StagedInput,
    f: &StagedFile,
    keys: &[String],
    types: &[DataType],
    staged: &StagedValues,
    counts: &mut Counts,
) -> Result<Option<Item>, Error> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::Audit(format!(
            "reading the footer of `{}`: {e}",
            input.location.name_of(&f.path)
        ))
    };
    let file_schema = input.file_schema();
    let roots: Vec<usize> = keys
        .iter()
        .filter_map(|k| file_schema.index_of(k).ok())
        .collect();
    // A file on an object store is pruned by its row groups' ranges only:
    // its page index would take a request of its own for each file.
    let (source, meta) = match &input.location {
        Location::Local(dir) => {
            let path = dir.join(&f.path);
            let meta = if has_page_index(f, &roots) {
                let file = File::open(&path).map_err(|e| failed(&e))?;
                let options =
                    ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
                ArrowReaderMetadata::load(&file, options).ok()
            } else {
                None
            };
            (Source::Local(path), meta)
        }
        Location::Remote(remote) => {
            let source = Source::Remote {
                store: remote.store.clone(),
                path: remote.path_of(&f.path),
                size: f.bytes,
            };
            (source, None)
        }
    };
    let meta = match meta {
        Some(m) => m,
        None => ArrowReaderMetadata::try_new(f.metadata.clone(), ArrowReaderOptions::new())
            .map_err(|e| failed(&e))?,
    };
    let metadata = meta.metadata().clone();
    let groups: &[RowGroupMetaData] = metadata.row_groups();
    let mut admitted = vec![true; groups.len()];
    let mut converters = Vec::new();
    for ((k, t), column) in keys.iter().zip(types).zip(&staged.columns) {
        let Ok(stats) = StatisticsConverter::try_new(k, meta.schema(), meta.parquet_schema())
        else {
            converters.push(None);
            continue;
        };
        let mins = stats.row_group_mins(groups.iter());
        let maxes = stats.row_group_maxes(groups.iter());
        let nulls = stats.row_group_null_counts(groups.iter());
        if let (Ok(mins), Ok(maxes), Ok(nulls)) = (mins, maxes, nulls) {
            let null_of = |i: usize| nulls.is_valid(i).then(|| nulls.value(i));
            let rows_of = |i: usize| groups[i].num_rows().max(0) as u64;
            let ok = column.admits_ranges(t, &mins, &maxes, &null_of, &rows_of);
            admitted.iter_mut().zip(ok).for_each(|(a, b)| *a &= b);
        }
        converters.push(Some(stats));
    }
    let row_groups: Vec<usize> = (0..groups.len())
        .filter(|i| admitted[*i] && groups[*i].num_rows() > 0)
        .collect();
    if row_groups.is_empty() {
        return Ok(None);
    }
    let mut rows: u64 = row_groups
        .iter()
        .map(|i| groups[*i].num_rows().max(0) as u64)
        .sum();
    let mut selection: Option<RowSelection> = None;
    if let (Some(index), Some(offsets)) = (metadata.column_index(), metadata.offset_index()) {
        let mut pages = None;
        for (((_, t), column), stats) in
            keys.iter().zip(types).zip(&staged.columns).zip(&converters)
        {
            let Some(stats) = stats else { continue };
            let Some(picked) = pick_pages(stats, column, t, index, offsets, groups, &row_groups)
            else {
                continue;
            };
            if pages.is_none() {
                pages = Some((picked.1, picked.2));
            }
            selection = Some(match selection {
                None => picked.0,
                Some(s) => s.intersection(&picked.0),
            });
        }
        if let Some((read, total)) = pages {
            counts.pages.0 += read;
            counts.pages.1 += total;
        }
        if let Some(s) = &selection {
            rows = s.row_count() as u64;
            if rows == 0 {
                return Ok(None);
            }
        }
    }
    Ok(Some(Item {
        part,
        name: String::new(),
        source,
        meta,
        row_groups,
        selection,
        rows,
    }))
}

/// The rows of the pages of `row_groups` (in the file's page index) that
/// can hold a staged value of one key column, with the pages picked and in
/// all; `None` when the index cannot say.
fn pick_pages(
    stats: &StatisticsConverter<'_>,
    column: &Column,
    ty: &DataType,
    index: &datafusion::parquet::file::metadata::ParquetColumnIndex,
    offsets: &datafusion::parquet::file::metadata::ParquetOffsetIndex,
    groups: &[RowGroupMetaData],
    row_groups: &[usize],
) -> Option<(RowSelection, usize, usize)> {
    let mins = stats.data_page_mins(index, offsets, row_groups).ok()?;
    let maxes = stats.data_page_maxes(index, offsets, row_groups).ok()?;
    let nulls = stats
        .data_page_null_counts(index, offsets, row_groups)
        .ok()?;
    let counts = stats
        .data_page_row_counts(offsets, groups, row_groups)
        .ok()??;
    if counts.len() != mins.len() || counts.null_count() > 0 {
        return None;
    }
    let null_of = |i: usize| nulls.is_valid(i).then(|| nulls.value(i));
    let rows_of = |i: usize| counts.value(i);
    let ok = column.admits_ranges(ty, &mins, &maxes, &null_of, &rows_of);
    let picked = ok.iter().filter(|b| **b).count();
    let selectors: Vec<RowSelector> = ok
        .iter()
        .enumerate()
        .map(|(i, keep)| {
            let n = counts.value(i) as usize;
            if *keep {
                RowSelector::select(n)
            } else {
                RowSelector::skip(n)
            }
        })
        .collect();
    Some((RowSelection::from(selectors), picked, ok.len()))
}
