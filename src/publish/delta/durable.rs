//! The local file system as the Delta log store writes it, made durable.
//!
//! `object_store`'s `LocalFileSystem` writes an object to a staging name,
//! links or renames it to its final name, and never fsyncs: after a power
//! cut an acknowledged commit entry `_delta_log/NNN.json` could be missing,
//! empty or torn, and every reader of the table would then fail. This store
//! wraps it and writes every object as the Hive target writes its files: a
//! hidden temporary sibling, written and fsynced; then a hard link (a
//! put-if-absent, as the Delta commit needs) or a rename (an overwrite, as
//! `_last_checkpoint` needs) to the final name; then an fsync of the
//! directory. When the put returns, the entry and its bytes are durable.
//! A power cut before that leaves the old log (at most a hidden temporary
//! file, which no Delta reader lists as a log entry).
//!
//! Reads, listings and deletes go to `LocalFileSystem` unchanged. Renames
//! and copies are followed by an fsync of what they made.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::path::{Path as FsPath, PathBuf};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt as _, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result, UploadPart,
};

use crate::publish::error::{IoContext as _, PublishError};
use crate::publish::fsx;

const STORE: &str = "LocalFileSystem (durable)";

/// `LocalFileSystem` rooted at `/`, with durable puts.
#[derive(Debug, Default)]
pub(crate) struct DurableLocal {
    inner: LocalFileSystem,
}

impl fmt::Display for DurableLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DurableLocal({})", self.inner)
    }
}

/// How a put places its temporary file under the final name.
#[derive(Clone, Copy)]
enum Place {
    /// A hard link: fails when the name exists (put-if-absent).
    IfAbsent,
    /// A rename over whatever is there.
    Overwrite,
}

impl DurableLocal {
    async fn put_durably(
        &self,
        location: &Path,
        payload: PutPayload,
        place: Place,
    ) -> Result<PutResult> {
        let path = self.inner.path_to_filesystem(location)?;
        let target = path.clone();
        let placed = tokio::task::spawn_blocking(move || write_durably(&target, &payload, place))
            .await
            .map_err(|e| {
                generic(PublishError::Delta {
                    path: path.display().to_string(),
                    reason: format!("the write task failed: {e}"),
                })
            })?
            .map_err(generic)?;
        if !placed {
            return Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: std::io::Error::from(ErrorKind::AlreadyExists).into(),
            });
        }
        let meta = self.inner.head(location).await?;
        Ok(PutResult {
            e_tag: meta.e_tag,
            version: meta.version,
        })
    }

    /// fsyncs the file at `location` (when it is one) and its directory.
    async fn sync(&self, location: &Path) -> Result<()> {
        let path = self.inner.path_to_filesystem(location)?;
        tokio::task::spawn_blocking(move || {
            if path.is_file() {
                fsx::sync_file(&path)?;
            }
            fsx::sync_parent(&path)
        })
        .await
        .map_err(|e| {
            generic(PublishError::Delta {
                path: location.to_string(),
                reason: format!("the fsync task failed: {e}"),
            })
        })?
        .map_err(generic)
    }
}

/// Writes `payload` as `path` durably (see the module doc). Returns false,
/// having changed nothing visible, when `place` is [`Place::IfAbsent`] and
/// the name is taken.
fn write_durably(path: &FsPath, payload: &PutPayload, place: Place) -> Result<bool, PublishError> {
    let dir = path.parent().unwrap_or(FsPath::new("/"));
    if !dir.is_dir() {
        fsx::create_dirs(dir)?;
    }
    let tmp = temporary_name(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .ctx("cannot create", &tmp)?;
    let written = payload
        .iter()
        .try_for_each(|chunk| file.write_all(chunk))
        .ctx("cannot write", &tmp)
        .and_then(|()| file.sync_all().ctx("cannot fsync", &tmp));
    drop(file);
    let placed = written.and_then(|()| match place {
        Place::IfAbsent => match fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(PublishError::io("cannot link", path, e)),
        },
        Place::Overwrite => fs::rename(&tmp, path)
            .map(|()| true)
            .ctx("cannot rename", &tmp),
    });
    // After a link the temporary name goes (one directory fsync below makes
    // both changes durable); after a rename it is already gone.
    if !matches!((place, &placed), (Place::Overwrite, Ok(true))) {
        let _ = fs::remove_file(&tmp);
    }
    if placed? {
        fsx::sync_dir(dir)?;
        return Ok(true);
    }
    Ok(false)
}

/// A hidden sibling of `path`, unique to this write.
fn temporary_name(path: &FsPath) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(
        ".{name}.{}.dqgate-tmp",
        uuid::Uuid::new_v4().simple()
    ))
}

fn generic(e: PublishError) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: Box::new(e),
    }
}

#[async_trait]
impl ObjectStore for DurableLocal {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        match opts.mode {
            PutMode::Create => self.put_durably(location, payload, Place::IfAbsent).await,
            PutMode::Overwrite => self.put_durably(location, payload, Place::Overwrite).await,
            // Not supported by the local store either: it says so.
            PutMode::Update(_) => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let path = self.inner.path_to_filesystem(location)?;
        Ok(Box::new(BufferedUpload {
            path,
            parts: Vec::new(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await?;
        self.sync(to).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await?;
        self.sync(to).await?;
        self.sync(from).await
    }
}

/// A multipart upload kept in memory and written durably, in one piece, on
/// completion (Delta writes checkpoints this way; they are small next to
/// the data).
#[derive(Debug)]
struct BufferedUpload {
    path: PathBuf,
    parts: Vec<PutPayload>,
}

#[async_trait]
impl MultipartUpload for BufferedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.parts.push(data);
        Box::pin(futures::future::ready(Ok(())))
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let payload: PutPayload = std::mem::take(&mut self.parts)
            .into_iter()
            .flat_map(|p| p.into_iter())
            .collect();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || write_durably(&path, &payload, Place::Overwrite))
            .await
            .map_err(|e| {
                generic(PublishError::Delta {
                    path: self.path.display().to_string(),
                    reason: format!("the write task failed: {e}"),
                })
            })?
            .map_err(generic)?;
        Ok(PutResult {
            e_tag: None,
            version: None,
        })
    }

    async fn abort(&mut self) -> Result<()> {
        self.parts.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_path(p: &FsPath) -> Path {
        Path::from_absolute_path(p).unwrap()
    }

    #[tokio::test]
    async fn create_is_put_if_absent_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocal::default();
        let entry = dir.path().join("_delta_log/00000000000000000000.json");
        let loc = store_path(&entry);
        let create = || PutOptions::from(PutMode::Create);
        store
            .put_opts(&loc, "first".into(), create())
            .await
            .unwrap();
        let again = store.put_opts(&loc, "second".into(), create()).await;
        assert!(
            matches!(again, Err(object_store::Error::AlreadyExists { .. })),
            "{again:?}"
        );
        assert_eq!(fs::read_to_string(&entry).unwrap(), "first");
        store
            .put_opts(&loc, "third".into(), PutOptions::from(PutMode::Overwrite))
            .await
            .unwrap();
        assert_eq!(fs::read_to_string(&entry).unwrap(), "third");
        let names: Vec<_> = fs::read_dir(entry.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["00000000000000000000.json"]);
    }

    #[tokio::test]
    async fn multipart_upload_lands_whole_on_completion() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocal::default();
        let file = dir.path().join("cp.parquet");
        let mut upload = store
            .put_multipart_opts(&store_path(&file), Default::default())
            .await
            .unwrap();
        upload.put_part("ab".into()).await.unwrap();
        assert!(!file.exists());
        upload.put_part("cd".into()).await.unwrap();
        upload.complete().await.unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "abcd");
    }
}
