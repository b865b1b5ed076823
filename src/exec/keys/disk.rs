//! The key engine's temporary files (DataFusion's disk manager): bytes
//! appended, and read back from any offset a window at a time. Stretches
//! ([`super::stretches`]) that fill a run's budget are appended to one,
//! and so are bins ([`super::binned`]).

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;

use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::spill_file::SpillFile;

use super::store::StoreError;

/// Bytes a cursor of a stretch on disk reads at a time (more for a longer
/// key), when it is the only one reading.
pub(super) const WINDOW: usize = 64 << 10;

/// Bytes the cursors of one merging thread read ahead together, at most:
/// with many stretches on disk each reads less at a time ([`window`]).
const AHEAD: usize = 16 << 20;

/// The window of each of `cursors` cursors reading side by side: at most
/// [`WINDOW`], at least 4 KiB.
pub(super) fn window(cursors: usize) -> usize {
    (AHEAD / cursors.max(1)).clamp(4 << 10, WINDOW)
}

/// A run's temporary file.
pub(super) struct Disk {
    /// Kept so that the file lives as long as what it holds.
    _spill: Arc<dyn SpillFile>,
    file: File,
    len: u64,
    /// A write failed: the file may hold some of its bytes past `len`,
    /// where the next append would land, so none is taken.
    failed: bool,
}

impl Disk {
    pub(super) fn create(runtime: &RuntimeEnv, what: &str) -> Result<Disk, StoreError> {
        let spill = (runtime.disk_manager)
            .create_tmp_file(what)
            .map_err(StoreError::Create)?;
        let path = spill.path().ok_or(StoreError::NoTempDir)?;
        let file = (File::options().read(true).append(true))
            .open(path)
            .map_err(StoreError::Open)?;
        Ok(Disk {
            _spill: spill,
            file,
            len: 0,
            failed: false,
        })
    }

    /// Appends `bytes`; where they start in the file. After a write that
    /// failed, every append fails: what it wrote of its bytes would stand
    /// between the last good append and the next.
    pub(super) fn append(&mut self, bytes: &[u8]) -> Result<u64, StoreError> {
        if self.failed {
            let e = std::io::Error::other("an earlier write to it failed");
            return Err(StoreError::Write(e));
        }
        if let Err(e) = self.file.write_all(bytes) {
            self.failed = true;
            return Err(StoreError::Write(e));
        }
        let at = self.len;
        self.len += bytes.len() as u64;
        Ok(at)
    }

    /// Reads `buf.len()` bytes from `at`.
    pub(super) fn read(&self, at: u64, buf: &mut [u8]) -> Result<(), StoreError> {
        self.file.read_exact_at(buf, at).map_err(StoreError::Read)
    }

    /// The bytes written.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// A reader of the file from `at`, `window` bytes at a time.
    pub(super) fn reader(&self, at: u64, window: usize) -> Reader<'_> {
        Reader {
            file: &self.file,
            at,
            end: self.len,
            window: Vec::new(),
            pos: 0,
            size: window,
        }
    }
}

/// The bytes of a file from some offset on, read a window at a time.
pub(super) struct Reader<'a> {
    file: &'a File,
    /// Where in the file the window ends.
    at: u64,
    end: u64,
    window: Vec<u8>,
    /// Where in the window the bytes not yet taken start.
    pos: usize,
    /// How many bytes a read takes, at least.
    size: usize,
}

impl Reader<'_> {
    /// The bytes not yet taken, at least `n` of them unless the file ends
    /// first.
    pub(super) fn ahead(&mut self, n: usize) -> Result<&[u8], StoreError> {
        if self.window.len() - self.pos < n && self.at < self.end {
            self.window.drain(..self.pos);
            self.pos = 0;
            let have = self.window.len();
            let want = (n.max(self.size) - have).min((self.end - self.at) as usize);
            self.window.resize(have + want, 0);
            (self.file.read_exact_at(&mut self.window[have..], self.at))
                .map_err(StoreError::Read)?;
            self.at += want as u64;
        }
        Ok(&self.window[self.pos..])
    }

    /// Takes `n` bytes of those ahead.
    pub(super) fn take(&mut self, n: usize) {
        self.pos += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_cursors_read_less_each_at_a_time() {
        assert_eq!(window(0), WINDOW);
        assert_eq!(window(256), WINDOW);
        assert_eq!(window(1024), 16 << 10);
        assert_eq!(window(1 << 20), 4 << 10);
    }

    #[test]
    fn a_reader_gives_the_bytes_appended_in_windows_of_any_size() {
        let runtime = RuntimeEnv::default();
        let mut disk = Disk::create(&runtime, "test").unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(disk.append(&bytes[..1000]).unwrap(), 0);
        assert_eq!(disk.append(&bytes[1000..]).unwrap(), 1000);
        assert_eq!(disk.len(), bytes.len() as u64);
        let mut r = disk.reader(17, WINDOW);
        let mut got = Vec::new();
        for n in [1, 5, 70_000, 3, 200_000, 1 << 20] {
            let ahead = r.ahead(n).unwrap();
            let k = n.min(ahead.len());
            got.extend_from_slice(&ahead[..k]);
            r.take(k);
        }
        assert_eq!(got, bytes[17..]);
        assert!(r.ahead(1).unwrap().is_empty());
    }

    /// A write that fails (a full device) is the last: the file back on a
    /// good device, the next append still fails rather than land after
    /// whatever the failed one left.
    #[test]
    fn no_append_after_a_failed_write() {
        let runtime = RuntimeEnv::default();
        let mut disk = Disk::create(&runtime, "test").unwrap();
        assert_eq!(disk.append(b"kept").unwrap(), 0);
        let good = std::mem::replace(
            &mut disk.file,
            File::options().write(true).open("/dev/full").unwrap(),
        );
        assert!(matches!(disk.append(b"lost"), Err(StoreError::Write(_))));
        disk.file = good;
        let again = disk.append(b"next").unwrap_err();
        assert!(again.to_string().contains("an earlier write"), "{again}");
        let mut buf = [0u8; 4];
        disk.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"kept");
        assert_eq!(disk.len(), 4);
    }
}
