//! Local files read into reused buffers.
//!
//! DataFusion reads a Parquet row group's column chunks through the object
//! store registered for `file://`, one range a chunk. `object_store`'s
//! `LocalFileSystem` reads each range into a new zeroed `Vec`, and a chunk
//! is tens of MB (a row group of 1Mi URL paths: 33 MB), above glibc's mmap
//! threshold: every chunk is a fresh mapping, zeroed twice (a `memset` in
//! the process, and a page fault and a cleared page in the kernel every
//! 4 KiB) before `pread` fills it, then unmapped. `perf` put a quarter of a
//! text key check's time there.
//!
//! [`PooledLocal`] is that store with one change: a range of at least
//! [`POOLED_FROM`] bytes is read into a buffer taken from a small pool, and
//! the buffer goes back to the pool when the last `Bytes` of it drops (the
//! reader drops a row group's chunks before it fetches the next). A reused
//! buffer's pages are resident and already written, so a chunk costs the
//! `pread`'s copy alone. Any error, and a range past the end of the file,
//! is left to `LocalFileSystem`, whose messages stay as they were.

use std::fmt;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt as _;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Ranges from this size on are read into pooled buffers; smaller ones
/// (footers, page indexes, small chunks) as `LocalFileSystem` reads them.
pub const POOLED_FROM: u64 = 1 << 20;

/// At most this many free buffers are kept ...
const KEEP: usize = 16;
/// ... holding at most this many bytes: what a scan of a few columns on a
/// few threads has in flight at once, not a cache.
const KEEP_BYTES: usize = 256 << 20;

/// `LocalFileSystem`, reading large ranges into pooled buffers.
#[derive(Debug)]
pub struct PooledLocal {
    inner: Arc<LocalFileSystem>,
    pool: Arc<Pool>,
}

impl PooledLocal {
    pub fn new() -> PooledLocal {
        PooledLocal {
            inner: Arc::new(LocalFileSystem::new()),
            pool: Arc::new(Pool::default()),
        }
    }
}

impl Default for PooledLocal {
    fn default() -> Self {
        PooledLocal::new()
    }
}

/// The free buffers. Each keeps its whole length written, so a buffer taken
/// for a shorter range than before is not written again before the read.
#[derive(Debug, Default)]
struct Pool {
    free: Mutex<Vec<Vec<u8>>>,
}

impl Pool {
    /// A buffer of at least `len` written bytes: the smallest free one that
    /// is long enough, else the longest free one grown, else a new one.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut buf = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            let fits = (0..free.len())
                .filter(|&i| free[i].len() >= len)
                .min_by_key(|&i| free[i].len());
            let longest = (0..free.len()).max_by_key(|&i| free[i].len());
            match fits.or(longest) {
                Some(i) => free.swap_remove(i),
                None => Vec::new(),
            }
        };
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf
    }

    /// Keeps `buf` for the next range, unless the pool is full: then the
    /// shortest buffers go.
    fn give(&self, buf: Vec<u8>) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.push(buf);
        free.sort_unstable_by_key(|b| std::cmp::Reverse(b.len()));
        let mut kept = 0;
        let keep = free
            .iter()
            .take(KEEP)
            .take_while(|b| {
                kept += b.len();
                kept <= KEEP_BYTES
            })
            .count();
        free.truncate(keep);
    }

    #[cfg(test)]
    fn free_lengths(&self) -> Vec<usize> {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.iter().map(Vec::len).collect()
    }
}

/// A pooled buffer lent to a `Bytes`: its first `len` bytes are the range.
struct Lent {
    buf: Vec<u8>,
    len: usize,
    pool: Arc<Pool>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

/// Reads `ranges` of the file at `path`; `None` when anything is not as
/// expected (the caller then asks `LocalFileSystem`, for its own error).
fn read_ranges(
    path: &std::path::Path,
    ranges: &[Range<u64>],
    pool: &Arc<Pool>,
) -> Option<Vec<Bytes>> {
    let file = File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if r.start > r.end || r.end > size {
            return None;
        }
        let len = usize::try_from(r.end - r.start).ok()?;
        if (len as u64) < POOLED_FROM {
            let mut buf = vec![0; len];
            file.read_exact_at(&mut buf, r.start).ok()?;
            out.push(Bytes::from(buf));
            continue;
        }
        let mut buf = pool.take(len);
        if file.read_exact_at(&mut buf[..len], r.start).is_err() {
            pool.give(buf);
            return None;
        }
        out.push(Bytes::from_owner(Lent {
            buf,
            len,
            pool: pool.clone(),
        }));
    }
    Some(out)
}

impl fmt::Display for PooledLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

#[async_trait]
impl ObjectStore for PooledLocal {
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        if ranges
            .iter()
            .all(|r| r.end.saturating_sub(r.start) < POOLED_FROM)
        {
            return self.inner.get_ranges(location, ranges).await;
        }
        let path = self.inner.path_to_filesystem(location)?;
        let (owned, pool) = (ranges.to_vec(), self.pool.clone());
        let read = move || read_ranges(&path, &owned, &pool);
        // Off the async workers when there is a runtime, as the local store
        // does; inline otherwise.
        let read = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime.spawn_blocking(read).await.ok().flatten(),
            Err(_) => read(),
        };
        match read {
            Some(bytes) => Ok(bytes),
            None => self.inner.get_ranges(location, ranges).await,
        }
    }

    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range reads the file's bytes, pooled or not, first use or
    /// reuse of a longer buffer; a range past the end is refused as
    /// `LocalFileSystem` refuses it, and a missing file gives its error.
    #[tokio::test]
    async fn ranges_read_the_files_bytes_through_reused_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let len = 3 * POOLED_FROM as usize + 17;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let file = dir.path().join("f.bin");
        std::fs::write(&file, &data).unwrap();
        let store = PooledLocal::new();
        let location = Path::from_filesystem_path(&file).unwrap();
        let big = POOLED_FROM;
        let rounds: [Vec<Range<u64>>; 3] = [
            vec![0..2 * big + 5, 10..20],
            vec![big..2 * big, 3..big + 3],
            vec![len as u64 - big..len as u64, 0..0],
        ];
        for ranges in rounds {
            let got = store.get_ranges(&location, &ranges).await.unwrap();
            for (r, b) in ranges.iter().zip(&got) {
                assert_eq!(b.as_ref(), &data[r.start as usize..r.end as usize], "{r:?}");
            }
        }
        // Dropped, the large buffers are back in the pool, longest first.
        let free = store.pool.free_lengths();
        assert!(
            !free.is_empty() && free.iter().all(|&n| n >= big as usize),
            "{free:?}"
        );
        assert!(free.windows(2).all(|w| w[0] >= w[1]), "{free:?}");

        let past = len as u64 - big..len as u64 + 1;
        let ours = store
            .get_ranges(&location, std::slice::from_ref(&past))
            .await;
        let theirs = LocalFileSystem::new()
            .get_ranges(&location, std::slice::from_ref(&past))
            .await;
        assert_eq!(
            ours.unwrap_err().to_string(),
            theirs.unwrap_err().to_string()
        );
        let root = Path::from_filesystem_path(dir.path()).unwrap();
        let missing = Path::parse(format!("{root}/none.bin")).unwrap();
        let whole = 0..big;
        let err = store
            .get_ranges(&missing, std::slice::from_ref(&whole))
            .await
            .unwrap_err();
        assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
    }

    /// Polled outside a Tokio runtime, the read runs inline.
    #[test]
    fn ranges_read_without_a_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..2 * POOLED_FROM as usize)
            .map(|i| (i % 253) as u8)
            .collect();
        let file = dir.path().join("f.bin");
        std::fs::write(&file, &data).unwrap();
        let store = PooledLocal::new();
        let location = Path::from_filesystem_path(&file).unwrap();
        let whole = 0..data.len() as u64;
        let got =
            futures::executor::block_on(store.get_ranges(&location, std::slice::from_ref(&whole)))
                .unwrap();
        assert_eq!(got[0].as_ref(), data.as_slice());
    }

    /// The pool keeps at most `KEEP` buffers and `KEEP_BYTES` bytes, the
    /// longest ones.
    #[test]
    fn the_pool_keeps_the_longest_buffers_within_its_bounds() {
        let pool = Pool::default();
        for n in 1..=KEEP + 4 {
            pool.give(vec![0; n]);
        }
        let free = pool.free_lengths();
        assert_eq!(free.len(), KEEP);
        assert_eq!(free[0], KEEP + 4);
        pool.give(vec![0; KEEP_BYTES]);
        assert_eq!(pool.free_lengths(), vec![KEEP_BYTES]);
        // A taken buffer is the smallest that fits, at least as long as asked.
        let pool = Pool::default();
        pool.give(vec![1; 100]);
        pool.give(vec![2; 50]);
        let b = pool.take(40);
        assert_eq!((b.len(), b[0]), (50, 2));
        let b = pool.take(200);
        assert_eq!((b.len(), b[0], b[150]), (200, 1, 0));
    }
}
