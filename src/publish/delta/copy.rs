//! The staged files copied into the partition directory under version-unique
//! names before the commit, and removed again when the commit does not land.

use futures::{StreamExt as _, TryStreamExt as _};

use super::log::CONCURRENT_COPIES;
use crate::publish::error::PublishError;
use crate::publish::root::{staged_files, Root};
use crate::staged::fingerprint_footers;

/// The staged files copied into the partition directory, not yet committed.
pub(super) struct Copies {
    pub(super) files: Vec<Copy>,
    pub(super) token: String,
}

/// One copied file.
pub(super) struct Copy {
    /// Relative to the staged location.
    pub(super) staged: String,
    /// Relative to the partition directory.
    pub(super) published: String,
    pub(super) bytes: u64,
    /// Its footer, read back from the copy.
    pub(super) footer: Vec<u8>,
}

impl Copies {
    pub(super) async fn remove(&self, root: &Root, rel_dir: &str) {
        for f in &self.files {
            root.remove(&format!("{rel_dir}/{}", f.published)).await;
        }
    }
}

/// Copies the staged files into the partition directory `rel_dir` under
/// version-unique names, durably, and checks by their footers, read back
/// from the copies, that they are the audited files.
pub(super) async fn copy_in(
    staged: &crate::staged::remote::Location,
    root: &Root,
    rel_dir: &str,
    audited: &str,
) -> Result<Copies, PublishError> {
    let listed = staged_files(staged).await?;
    let hex = audited.strip_prefix("sha256:").unwrap_or(audited);
    let token = format!(
        "{}-{}",
        &hex[..8.min(hex.len())],
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    // Every name is recorded before any copy starts, so that a failed
    // publish removes whatever was copied.
    let mut copies = Copies {
        files: listed
            .iter()
            .map(|rel| Copy {
                staged: rel.clone(),
                published: match rel.strip_suffix(".parquet") {
                    Some(stem) => format!("{stem}.{token}.parquet"),
                    None => format!("{rel}.{token}"),
                },
                bytes: 0,
                footer: Vec::new(),
            })
            .collect(),
        token,
    };
    let result = async {
        // Object-store copies overlap (a server-side copy of a large object
        // takes seconds); local copies are sequential blocking I/O anyway.
        // Owned jobs: a future per borrowed file would not be `Send` for
        // every lifetime, as an async trait method needs.
        let jobs: Vec<(String, String)> = copies
            .files
            .iter()
            .map(|c| (c.staged.clone(), format!("{rel_dir}/{}", c.published)))
            .collect();
        let done: Vec<(u64, Vec<u8>)> = futures::stream::iter(jobs)
            .map(|(src, dest)| async move {
                root.copy_from(staged, &src, &dest).await?;
                root.footer(&dest).await
            })
            .buffered(CONCURRENT_COPIES)
            .try_collect()
            .await?;
        for (copy, (bytes, footer)) in copies.files.iter_mut().zip(done) {
            copy.bytes = bytes;
            copy.footer = footer;
        }
        let now = fingerprint_footers(
            copies
                .files
                .iter()
                .map(|f| (f.staged.as_str(), f.bytes, f.footer.as_slice())),
        );
        if now != audited {
            return Err(PublishError::StagedChanged {
                audited: audited.to_string(),
                now,
            });
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(copies),
        Err(e) => {
            copies.remove(root, rel_dir).await;
            Err(e)
        }
    }
}

/// `a/part-0.TOKEN.parquet` → `a/part-0.parquet`.
pub(super) fn staged_name(published: &str) -> String {
    match published
        .strip_suffix(".parquet")
        .and_then(|s| s.rsplit_once('.'))
    {
        Some((stem, _)) => format!("{stem}.parquet"),
        None => published.to_string(),
    }
}

pub(super) fn token_of(published: &str) -> Option<String> {
    published
        .strip_suffix(".parquet")
        .and_then(|s| s.rsplit_once('.'))
        .map(|(_, t)| t.to_string())
}
