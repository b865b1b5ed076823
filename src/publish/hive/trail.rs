//! The partition's audit trail: one JSON line per publish and rollback in
//! `ROOT/_dqgate/trail/<k1=v1/...>.jsonl`, appended once the swap is
//! durable, and durable itself (the line synced, and the directory too when
//! the line created the file) before the publish or rollback reports
//! success.
//!
//! The records and kept versions are the truth about what is published; the
//! trail is the history a person reads ("v3 replaced v2, then rollback to
//! v2"). A process killed between the swap and the append leaves the entry
//! out, never a wrong one. No wall-clock time is written: the order of lines
//! is the order of events.

use std::fs::OpenOptions;
use std::io::Write;

use serde::Serialize;

use super::layout::Layout;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;

#[derive(Serialize)]
pub(crate) struct Entry<'a> {
    /// `publish` or `rollback`.
    pub action: &'a str,
    /// The version now published.
    pub version: &'a str,
    /// The version it replaced, if any.
    pub displaced: Option<&'a str>,
}

pub(crate) fn append(layout: &Layout, entry: &Entry<'_>) -> Result<(), PublishError> {
    let path = layout.trail_path();
    if let Some(dir) = path.parent() {
        fsx::create_dirs(dir)?;
    }
    let mut line = serde_json::to_string(entry).expect("trail entries serialize");
    line.push('\n');
    // The partition lock is held, so nobody else creates this file meanwhile.
    let created = !path.exists();
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .ctx("cannot open the audit trail", &path)?;
    f.write_all(line.as_bytes())
        .ctx("cannot append to the audit trail", &path)?;
    f.sync_data().ctx("cannot sync the audit trail", &path)?;
    // A new trail file is reachable after a power cut only once its
    // directory entry is durable too.
    if created {
        fsx::sync_parent(&path)?;
    }
    Ok(())
}
