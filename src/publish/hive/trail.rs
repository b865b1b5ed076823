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
use std::io::{ErrorKind, Write};

use serde::Serialize;

use super::layout::Layout;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;
use crate::publish::target::HistoryError;

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

/// Counts the `publish` and `rollback` lines of the partition's trail; a
/// partition without a trail (published before trails existed) counts none.
pub(crate) fn counts(layout: &Layout) -> Result<(usize, usize), HistoryError> {
    let path = layout.trail_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(HistoryError::read(&path, &e.to_string())),
    };
    let mut counts = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| HistoryError::read(&path, &format!("bad trail line: {e}")))?;
        match entry.get("action").and_then(|a| a.as_str()) {
            Some("publish") => counts.0 += 1,
            Some("rollback") => counts.1 += 1,
            _ => {}
        }
    }
    Ok(counts)
}
