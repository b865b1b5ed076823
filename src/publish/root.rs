//! Where a published table lives, and the few file operations publishing needs:
//! a local directory (written with fsync, as the Hive target writes) or an
//! object-store prefix (`s3://`, `gs://`, `az://`, ...) reached through the
//! same `object_store` stores the audit reads staged files with.
//!
//! On an object store nothing is renamed: the copies of the staged files are
//! written under new, version-unique names (server-side copies when the
//! staged files are in the same bucket), and the only step that makes them
//! visible is the Delta commit, a put-if-absent of the next log entry
//! (`If-None-Match: *` on S3, generation preconditions on GCS, `If-None-Match`
//! on Azure).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use object_store::buffered::BufWriter;
use object_store::{ObjectStore, ObjectStoreExt as _};
use url::Url;

use super::error::{IoContext, PublishError};
use super::fsx;
use super::record::Record;
use crate::staged::remote::{is_url, remote_error, Location, LocationError, Remote};
use crate::staged::{self, InputError, StagedInput};

/// S3's limit for a server-side copy (CopyObject); larger objects stream.
const MAX_SERVER_COPY: u64 = 5 << 30;

/// Chunk size when a local file is uploaded.
const UPLOAD_CHUNK: usize = 8 << 20;

/// A table root: a local directory or an object-store prefix.
#[derive(Debug, Clone)]
pub enum Root {
    Local(PathBuf),
    Remote(Remote),
}

impl Root {
    /// `--table` as given: an object-store URL (`file://` URLs are local
    /// directories), else a path, made absolute. `options` are the
    /// `--storage-option` arguments, which only an object store takes.
    pub fn parse(arg: &Path, options: &[String]) -> Result<Root, LocationError> {
        let shown = arg.display().to_string();
        let bad = |reason: String| LocationError::Unsupported {
            url: shown.clone(),
            reason,
        };
        match arg.to_str().filter(|s| is_url(s)) {
            Some(url) if url.starts_with("file://") => {
                let parsed = Url::parse(url)
                    .map_err(|e| LocationError::BadUrl(url.into(), e.to_string()))?;
                parsed
                    .to_file_path()
                    .map(Root::Local)
                    .map_err(|()| bad("a file:// URL must be absolute: file:///path/to/dir".into()))
            }
            Some(url) => Remote::open(url, options).map(Root::Remote),
            None => std::path::absolute(arg)
                .map(Root::Local)
                .map_err(|e| bad(e.to_string())),
        }
    }

    /// The root as messages show it.
    pub fn show(&self) -> String {
        match self {
            Root::Local(dir) => dir.display().to_string(),
            Root::Remote(r) => r.url.to_string(),
        }
    }

    /// `rel` below the root as messages show it.
    pub fn name_of(&self, rel: &str) -> String {
        match self {
            Root::Local(dir) => dir.join(rel).display().to_string(),
            Root::Remote(r) => r.name_of(rel),
        }
    }

    pub(crate) fn error(&self, e: impl std::fmt::Display) -> PublishError {
        PublishError::Delta {
            path: self.show(),
            reason: e.to_string(),
        }
    }

    /// The audit record in directory `dir` (relative to the root).
    pub(crate) async fn read_record(&self, dir: &str) -> Result<Option<Record>, PublishError> {
        let rel = format!("{dir}/{}", super::record::RECORD);
        match self.read_text(&rel).await? {
            None => Ok(None),
            Some(text) => Record::parse(&text, &self.name_of(&rel)).map(Some),
        }
    }

    /// The text of the file at `rel`; `None` when there is none.
    pub async fn read_text(&self, rel: &str) -> Result<Option<String>, PublishError> {
        let shown = self.name_of(rel);
        let bad = |reason: String| PublishError::BadRecord {
            path: shown.clone(),
            reason,
        };
        let bytes = match self {
            Root::Local(root) => match std::fs::read(root.join(rel)) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(bad(e.to_string())),
            },
            Root::Remote(r) => match r.store.get(&r.path_of(rel)).await {
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(table_error(&shown, e)),
                Ok(got) => got
                    .bytes()
                    .await
                    .map_err(|e| table_error(&shown, e))?
                    .to_vec(),
            },
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }

    /// The input of the files `rels` below the root (their footers read as
    /// discovery reads them): a published partition as the audit reads it.
    pub async fn input_of(&self, rels: &[String]) -> Result<StagedInput, InputError> {
        match self {
            Root::Local(root) => StagedInput::from_listed(
                root,
                rels.iter().map(|r| (r.clone(), root.join(r))).collect(),
            ),
            Root::Remote(r) => StagedInput::open_files(r, rels).await,
        }
    }

    /// Writes `bytes` as `rel`, atomically: a local file through a temporary
    /// name and fsync; an object in one PUT.
    pub async fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), PublishError> {
        match self {
            Root::Local(root) => fsx::write_atomic(&root.join(rel), bytes),
            Root::Remote(r) => r
                .store
                .put(&r.path_of(rel), bytes.to_vec().into())
                .await
                .map(|_| ())
                .map_err(|e| table_error(&r.name_of(rel), e)),
        }
    }

    /// Removes `rel`, as far as possible (a clean-up after a failure).
    pub async fn remove(&self, rel: &str) {
        match self {
            Root::Local(root) => {
                let _ = std::fs::remove_file(root.join(rel));
            }
            Root::Remote(r) => {
                let _ = r.store.delete(&r.path_of(rel)).await;
            }
        }
    }

    /// The data files below the root (hidden names such as `_delta_log/`
    /// skipped, as discovery skips them), with their modification times,
    /// sorted by path.
    pub async fn data_files(&self) -> Result<Vec<(String, std::time::SystemTime)>, PublishError> {
        match self {
            Root::Local(root) => {
                if !root.is_dir() {
                    return Ok(Vec::new());
                }
                staged::list_parquet_files(root)?
                    .into_iter()
                    .map(|(rel, path)| {
                        let modified = std::fs::metadata(&path)
                            .and_then(|m| m.modified())
                            .ctx("cannot stat", &path)?;
                        Ok((rel, modified))
                    })
                    .collect()
            }
            Root::Remote(r) => match r.list_files().await {
                Ok(found) => Ok(found
                    .into_iter()
                    .map(|(rel, meta)| (rel, std::time::SystemTime::from(meta.last_modified)))
                    .collect()),
                Err(InputError::NoFiles(_)) => Ok(Vec::new()),
                Err(e) => Err(e.into()),
            },
        }
    }

    /// The names of the entries directly in directory `rel` (files only).
    pub async fn file_names(&self, rel: &str) -> Result<Vec<String>, PublishError> {
        match self {
            Root::Local(root) => {
                let dir = root.join(rel);
                let mut out = Vec::new();
                for entry in std::fs::read_dir(&dir).ctx("cannot list", &dir)? {
                    let entry = entry.ctx("cannot list", &dir)?;
                    if entry.file_type().is_ok_and(|t| t.is_file()) {
                        out.extend(entry.file_name().to_str().map(str::to_string));
                    }
                }
                out.sort();
                Ok(out)
            }
            Root::Remote(r) => {
                let listed = r
                    .store
                    .list_with_delimiter(Some(&r.path_of(rel)))
                    .await
                    .map_err(|e| table_error(&r.name_of(rel), e))?;
                let mut out: Vec<String> = listed
                    .objects
                    .into_iter()
                    .filter_map(|m| m.location.filename().map(str::to_string))
                    .collect();
                out.sort();
                Ok(out)
            }
        }
    }

    /// Whether a file is at `rel`.
    pub async fn exists(&self, rel: &str) -> Result<bool, PublishError> {
        match self {
            Root::Local(root) => Ok(root.join(rel).is_file()),
            Root::Remote(r) => Ok(r.head(rel).await?.is_some()),
        }
    }

    /// The size and footer of the Parquet file at `rel`, as discovery reads
    /// them (for fingerprints and row counts).
    pub async fn footer(&self, rel: &str) -> Result<(u64, Vec<u8>), PublishError> {
        Ok(match self {
            Root::Local(root) => staged::read_footer(&root.join(rel), &self.name_of(rel))?,
            Root::Remote(r) => r.footer_of(rel).await?,
        })
    }

    /// Copies the staged file `src_rel` of `staged` to `dest_rel`, durably.
    pub async fn copy_from(
        &self,
        staged: &Location,
        src_rel: &str,
        dest_rel: &str,
    ) -> Result<(), PublishError> {
        match (staged, self) {
            (Location::Local(dir), Root::Local(root)) => {
                let dest = root.join(dest_rel);
                if let Some(parent) = dest.parent() {
                    fsx::create_dirs(parent)?;
                }
                std::fs::copy(dir.join(src_rel), &dest).ctx("cannot copy into the table", &dest)?;
                fsx::sync_file(&dest)?;
                match dest.parent() {
                    Some(parent) => fsx::sync_dir(parent),
                    None => Ok(()),
                }
            }
            (Location::Remote(src), Root::Local(root)) => {
                let dest = root.join(dest_rel);
                if let Some(parent) = dest.parent() {
                    fsx::create_dirs(parent)?;
                }
                download(src, src_rel, &dest).await?;
                fsx::sync_file(&dest)?;
                match dest.parent() {
                    Some(parent) => fsx::sync_dir(parent),
                    None => Ok(()),
                }
            }
            (Location::Local(dir), Root::Remote(dst)) => {
                upload(&dir.join(src_rel), dst, dest_rel).await
            }
            (Location::Remote(src), Root::Remote(dst)) => {
                let size = src.head(src_rel).await?.map_or(0, |m| m.size);
                if src.same_bucket(dst) && size <= MAX_SERVER_COPY {
                    dst.store
                        .copy(&src.path_of(src_rel), &dst.path_of(dest_rel))
                        .await
                        .map_err(|e| table_error(&dst.name_of(dest_rel), e))
                } else {
                    stream_between(src, src_rel, dst, dest_rel).await
                }
            }
        }
    }

    /// Whether the staged location and the root overlap (one inside the other).
    pub fn overlaps(&self, staged: &Location) -> bool {
        match (staged, self) {
            (Location::Local(s), Root::Local(r)) => {
                let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
                let (s, r) = (canon(s), canon(r));
                s.starts_with(&r) || r.starts_with(&s)
            }
            (Location::Remote(s), Root::Remote(r)) => {
                s.same_bucket(r)
                    && (s.prefix.as_ref().starts_with(r.prefix.as_ref())
                        || r.prefix.as_ref().starts_with(s.prefix.as_ref()))
            }
            _ => false,
        }
    }
}

/// The relative paths of the data files at a staged location, sorted, as
/// discovery lists them.
pub async fn staged_files(staged: &Location) -> Result<Vec<String>, PublishError> {
    Ok(match staged {
        Location::Local(dir) => staged::list_parquet_files(dir)?
            .into_iter()
            .map(|(rel, _)| rel)
            .collect(),
        Location::Remote(r) => r
            .list_files()
            .await?
            .into_iter()
            .map(|(rel, _)| rel)
            .collect(),
    })
}

/// The row count a Parquet footer (metadata plus trailer) states.
pub fn footer_rows(shown: &str, footer: &[u8]) -> Result<i64, PublishError> {
    let metadata = footer
        .len()
        .checked_sub(8)
        .map(|n| crate::staged::footer::decode(&footer[..n]));
    match metadata {
        Some(Ok(m)) => Ok(m.file_metadata().num_rows()),
        Some(Err(e)) => Err(InputError::Corrupt {
            path: shown.to_string(),
            reason: e.to_string(),
        }
        .into()),
        None => Err(InputError::Corrupt {
            path: shown.to_string(),
            reason: "no footer".into(),
        }
        .into()),
    }
}

/// A GET of the object at `rel`, to be read as a stream of chunks.
async fn read_stream(src: &Remote, rel: &str) -> Result<object_store::GetResult, PublishError> {
    src.store
        .get(&src.path_of(rel))
        .await
        .map_err(|e| PublishError::Input(remote_error(&src.name_of(rel), e)))
}

async fn download(src: &Remote, src_rel: &str, dest: &Path) -> Result<(), PublishError> {
    use std::io::Write as _;
    let shown = src.name_of(src_rel);
    let mut stream = read_stream(src, src_rel).await?.into_stream();
    let mut file = std::fs::File::create(dest).ctx("cannot create", dest)?;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| PublishError::Input(remote_error(&shown, e)))?;
        file.write_all(&chunk).ctx("cannot write", dest)?;
    }
    Ok(())
}

async fn upload(src: &Path, dst: &Remote, dest_rel: &str) -> Result<(), PublishError> {
    let shown = dst.name_of(dest_rel);
    let mut file = std::fs::File::open(src).ctx("cannot open", src)?;
    let store: Arc<dyn ObjectStore> = dst.store.clone();
    let mut writer = BufWriter::new(store, dst.path_of(dest_rel));
    loop {
        let mut chunk = vec![0u8; UPLOAD_CHUNK];
        let mut filled = 0;
        while filled < chunk.len() {
            match file.read(&mut chunk[filled..]).ctx("cannot read", src)? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        chunk.truncate(filled);
        if let Err(e) = writer.put(chunk.into()).await {
            let _ = writer.abort().await;
            return Err(table_error(&shown, e));
        }
    }
    finish(writer, &shown).await
}

async fn stream_between(
    src: &Remote,
    src_rel: &str,
    dst: &Remote,
    dest_rel: &str,
) -> Result<(), PublishError> {
    let shown = src.name_of(src_rel);
    let mut stream = read_stream(src, src_rel).await?.into_stream();
    let store: Arc<dyn ObjectStore> = dst.store.clone();
    let mut writer = BufWriter::new(store, dst.path_of(dest_rel));
    while let Some(chunk) = stream.next().await {
        let put = match chunk {
            Ok(bytes) => writer.put(bytes).await,
            Err(e) => Err(e),
        };
        if let Err(e) = put {
            let _ = writer.abort().await;
            return Err(PublishError::Input(remote_error(&shown, e)));
        }
    }
    finish(writer, &dst.name_of(dest_rel)).await
}

async fn finish(mut writer: BufWriter, shown: &str) -> Result<(), PublishError> {
    use tokio::io::AsyncWriteExt as _;
    writer.shutdown().await.map_err(|e| PublishError::Delta {
        path: shown.to_string(),
        reason: e.to_string(),
    })
}

/// An object-store error on the table's side, naming the object.
pub(crate) fn table_error(url: &str, e: object_store::Error) -> PublishError {
    match remote_error(url, e) {
        InputError::Remote { url, reason } => PublishError::Delta { path: url, reason },
        other => PublishError::Input(other),
    }
}
