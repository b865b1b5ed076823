//! Parts of a run's entries (the bins of [`super::binned`], the radix
//! partitions of a spread join) written to the run's temporary file when
//! they fill its budget: each time, every part is appended as one segment
//! and emptied, keeping its room; a part is read back as its segments
//! end to end.

use std::sync::Arc;

use datafusion::execution::runtime_env::RuntimeEnv;

use super::disk::Disk;
use super::store::StoreError;

/// A run's parts on disk.
pub(super) struct Segments {
    runtime: Arc<RuntimeEnv>,
    what: &'static str,
    /// The run's temporary file, once a part was written.
    disk: Option<Disk>,
    /// Where each part's segment of each write is.
    written: Vec<Vec<(u64, usize)>>,
}

impl Segments {
    /// No part on disk yet; the file, when one is, is made by `runtime`'s
    /// disk manager and named for `what`.
    pub(super) fn new(runtime: &Arc<RuntimeEnv>, what: &'static str) -> Segments {
        Segments {
            runtime: runtime.clone(),
            what,
            disk: None,
            written: Vec::new(),
        }
    }

    /// Makes the file if there is none yet.
    pub(super) fn open(&mut self) -> Result<&mut Disk, StoreError> {
        match &mut self.disk {
            Some(disk) => Ok(disk),
            none => Ok(none.insert(Disk::create(&self.runtime, self.what)?)),
        }
    }

    /// Appends every part to the file and empties it (keeping its room).
    /// When there is no file to write to, or a write fails, the parts not
    /// yet written keep their bytes (an empty segment each), so that
    /// nothing is lost.
    pub(super) fn write(&mut self, parts: &mut [Vec<u8>]) -> Result<(), StoreError> {
        let disk = self.open()?;
        let mut segments = Vec::with_capacity(parts.len());
        let mut failed = None;
        for part in parts {
            if failed.is_some() {
                segments.push((0, 0));
                continue;
            }
            match disk.append(part) {
                Ok(at) => {
                    segments.push((at, part.len()));
                    part.clear();
                }
                Err(e) => {
                    failed = Some(e);
                    segments.push((0, 0));
                }
            }
        }
        self.written.push(segments);
        failed.map_or(Ok(()), Err)
    }

    /// The bytes of part `p` on disk.
    pub(super) fn len_of(&self, p: usize) -> usize {
        self.written.iter().map(|s| s[p].1).sum()
    }

    /// Part `p`'s segments read back into `buf`, end to end.
    pub(super) fn read(&self, p: usize, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        buf.clear();
        buf.resize(self.len_of(p), 0);
        let mut read = 0;
        if let Some(disk) = &self.disk {
            for s in &self.written {
                let (at, len) = s[p];
                disk.read(at, &mut buf[read..read + len])?;
                read += len;
            }
        }
        Ok(())
    }

    /// Calls `f` with each of part `p`'s segments in turn, read into `buf`:
    /// one segment in memory at a time.
    pub(super) fn each(
        &self,
        p: usize,
        buf: &mut Vec<u8>,
        mut f: impl FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        let Some(disk) = &self.disk else {
            return Ok(());
        };
        for &(at, len) in self.written.iter().map(|s| &s[p]) {
            if len > 0 {
                buf.clear();
                buf.resize(len, 0);
                disk.read(at, buf)?;
                f(buf);
            }
        }
        Ok(())
    }

    /// The bytes written.
    pub(super) fn len(&self) -> u64 {
        self.disk.as_ref().map_or(0, Disk::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts written three times come back as their bytes end to end,
    /// empty parts included.
    #[test]
    fn parts_come_back_as_their_segments_end_to_end() {
        let runtime = Arc::new(RuntimeEnv::default());
        let mut segments = Segments::new(&runtime, "test");
        let mut parts = vec![Vec::new(); 5];
        let mut want = vec![Vec::new(); 5];
        for round in 0..3u8 {
            for (p, part) in parts.iter_mut().enumerate() {
                let bytes: Vec<u8> = (0..p * 100 + round as usize)
                    .map(|i| i as u8 ^ round)
                    .collect();
                part.extend_from_slice(&bytes);
                want[p].extend_from_slice(&bytes);
            }
            segments.write(&mut parts).unwrap();
            assert!(parts.iter().all(Vec::is_empty));
        }
        let mut buf = vec![7u8; 3];
        for (p, want) in want.iter().enumerate() {
            segments.read(p, &mut buf).unwrap();
            assert_eq!(&buf, want, "part {p}");
            assert_eq!(segments.len_of(p), want.len());
            let mut each = Vec::new();
            segments
                .each(p, &mut buf, |s| each.extend_from_slice(s))
                .unwrap();
            assert_eq!(&each, want, "part {p}, a segment at a time");
        }
        assert_eq!(
            segments.len(),
            want.iter().map(Vec::len).sum::<usize>() as u64
        );
    }
}
