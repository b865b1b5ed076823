//! Choosing and opening a publish target from what a command names: the
//! `--table` argument, `--target`, `--storage-option`s. Each target kind
//! says which tables it claims, what it refuses, and how it opens; the
//! targets are listed once, in [`KINDS`].

use std::path::Path;

use async_trait::async_trait;

use super::target::Target;
use super::{PublishError, PublishOptions};
use crate::staged::{Location, LocationError};

/// The target kinds, in the order they claim a `--table` given without
/// `--target`; the last (Hive) claims every table. A new target is one
/// line here.
pub const KINDS: &[&dyn Kind] = &[&super::delta::Kind, &super::hive::Kind];

/// A kind of publish target.
#[async_trait]
pub trait Kind: Sync {
    /// Its name for `--target`.
    fn name(&self) -> &'static str;

    /// Whether a `--table` given without `--target` is a table of this kind.
    fn claims(&self, table: &Path) -> bool;

    /// Refuses `--storage-option`s where this kind reads no object store
    /// (`verify`, `rollback`, `gc`, `report`).
    fn refuse_options(&self, _options: &[String]) -> Result<(), OpenError> {
        Ok(())
    }

    /// Refuses, before anything is read, a publish this kind cannot make
    /// atomic (Hive: staged files or a table on an object store, or a table
    /// of another kind).
    fn refuse_publish(&self, _table: &Path, _staged: &Path) -> Result<(), OpenError> {
        Ok(())
    }

    /// Where a publish into `table` reads the staged files from.
    fn staged_location(
        &self,
        staged: &Path,
        table: &Path,
        options: &[String],
    ) -> Result<Location, LocationError>;

    /// Opens the table; with `publish`, to publish into it (a kind may
    /// refuse a location it would not create a table in).
    async fn open(
        &self,
        table: &Path,
        options: &[String],
        publish: Option<&PublishOptions>,
    ) -> Result<Box<dyn Target>, OpenError>;
}

/// The kind of target `table` is: the one `--target` names, else the first
/// that claims it.
pub fn choose(target: Option<&str>, table: &Path) -> &'static dyn Kind {
    let named = target.and_then(|t| KINDS.iter().find(|k| k.name() == t));
    *named.unwrap_or_else(|| {
        KINDS
            .iter()
            .find(|k| k.claims(table))
            .unwrap_or(&KINDS[KINDS.len() - 1])
    })
}

/// Why a target could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The command asks for something the target cannot do (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The table's location is not usable.
    #[error(transparent)]
    Location(#[from] LocationError),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// `--storage-option` given where no object store is.
pub(crate) fn no_options(options: &[String]) -> Result<(), OpenError> {
    match options {
        [] => Ok(()),
        _ => Err(OpenError::Usage(
            LocationError::OptionsWithoutStore.to_string(),
        )),
    }
}
