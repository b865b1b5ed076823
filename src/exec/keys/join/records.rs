//! One side of a spread join ([`super::spread`]): each scan task's keys
//! by radix partition, each key a record of its fingerprint, length and
//! bytes, written to the task's temporary file whenever the partitions
//! fill its share of the join's budget.

use std::sync::{Arc, Mutex};

use datafusion::execution::runtime_env::RuntimeEnv;

use super::probe::filter_spot;
use crate::exec::keys::key::Key;
use crate::exec::keys::segments::Segments;
use crate::exec::keys::store::StoreError;

/// Bytes of a record before its key: the fingerprint and the key's length.
pub(super) const HEAD: usize = 12;

/// One side's keys, by partition: each partition's records end to end,
/// those written to disk when the partitions filled the task's budget
/// included.
pub(super) struct Records {
    pub(super) parts: Vec<Vec<u8>>,
    /// Records of each partition.
    pub(super) counts: Vec<u32>,
    /// 64 minus the bits of a partition's number.
    shift: u32,
    /// The most bytes the partitions' room may take, and what it takes.
    most: usize,
    held: usize,
    /// Where the partitions go past `most`, if anywhere.
    spill: Option<Spill>,
    /// The first write that failed: the side is then an error, and no
    /// record is kept after it.
    pub(super) failed: Option<StoreError>,
}

/// Where a task's partitions go when they fill its budget: its temporary
/// file, and, on the first side of a filtered join, the filter of the
/// fingerprints, which the records written no longer build at the end.
struct Spill {
    segments: Segments,
    builds: Option<Arc<Mutex<Filter>>>,
}

/// How a side's scan tasks keep their records when the join spills: the
/// side's budget (shared out over its tasks), and what a task's [`Spill`]
/// is made of.
#[derive(Clone)]
pub(super) struct Room {
    pub(super) runtime: Arc<RuntimeEnv>,
    pub(super) most: usize,
    pub(super) builds: Option<Arc<Mutex<Filter>>>,
}

/// A filter of fingerprints: a bit of one of its words a fingerprint, both
/// picked by the high bits of its mix (as its partition is), so that one
/// built partition by partition is written a small block at a time.
#[derive(Default)]
pub(super) struct Filter {
    pub(super) words: Vec<u64>,
    pub(super) shift: u32,
}

impl Filter {
    pub(super) fn new(words: usize, bits: u32) -> Filter {
        Filter {
            words: vec![0; words],
            shift: 64 - (bits - 6),
        }
    }

    #[inline]
    pub(super) fn add(&mut self, fp: u64) {
        let (w, m) = filter_spot(fp.mix(), self.shift);
        self.words[w] |= m;
    }
}

impl Records {
    /// Empty partitions with room for `bytes_each` bytes each, or, in the
    /// `room` of a spilling join, for at most their share of `most`.
    pub(super) fn new(
        partitions: usize,
        bytes_each: usize,
        room: Option<(&Room, usize)>,
    ) -> Records {
        let (most, spill) = match room {
            Some((room, tasks)) => (
                room.most / tasks.max(1),
                Some(Spill {
                    segments: Segments::new(&room.runtime, "dqgate spread join"),
                    builds: room.builds.clone(),
                }),
            ),
            None => (usize::MAX, None),
        };
        let each = bytes_each.min(most / partitions);
        Records {
            parts: (0..partitions).map(|_| Vec::with_capacity(each)).collect(),
            counts: vec![0; partitions],
            shift: 64 - partitions.trailing_zeros(),
            most,
            held: each * partitions,
            spill,
            failed: None,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, fp: u64, key: &[u8]) {
        let p = partition_of(fp, self.shift);
        let need = HEAD + key.len();
        if self.parts[p].capacity() - self.parts[p].len() < need && !self.room(p, need) {
            return;
        }
        let part = &mut self.parts[p];
        part.extend_from_slice(&fp.to_le_bytes());
        part.extend_from_slice(&(key.len() as u32).to_le_bytes());
        part.extend_from_slice(key);
        self.counts[p] += 1;
    }

    /// Room for `need` more bytes in partition `p`: the partition's room
    /// doubled, or, past the budget, every partition written to disk
    /// first (a record longer than its emptied partition's room then
    /// grows it by what it needs). False once a write failed.
    #[cold]
    fn room(&mut self, p: usize, need: usize) -> bool {
        if self.failed.is_some() {
            return false;
        }
        let grow = self.parts[p].capacity().max(need).max(64);
        if self.held + grow > self.most {
            if let Some(spill) = &mut self.spill {
                if let Some(filter) = &spill.builds {
                    let mut filter = filter.lock().expect("lock");
                    for part in &self.parts {
                        each_record(part, |fp, _| filter.add(fp));
                    }
                }
                if let Err(e) = spill.segments.write(&mut self.parts) {
                    self.failed = Some(e);
                    return false;
                }
                self.grow(p, need);
                return true;
            }
        }
        self.grow(p, grow);
        true
    }

    /// Room for at least `more` bytes past partition `p`'s length.
    fn grow(&mut self, p: usize, more: usize) {
        let part = &mut self.parts[p];
        let before = part.capacity();
        part.reserve_exact(more);
        self.held += part.capacity() - before;
    }

    pub(super) fn bytes(&self) -> usize {
        self.held
    }

    /// The bytes of partition `p`, on disk and in memory.
    pub(super) fn bytes_of(&self, p: usize) -> usize {
        let on_disk = self.spill.as_ref().map_or(0, |s| s.segments.len_of(p));
        on_disk + self.parts[p].len()
    }

    /// The bytes written to disk.
    pub(super) fn written(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.segments.len())
    }
}

/// Calls `f` with the fingerprint and bytes of each record of partition
/// `p` of every one of `sides`, those on disk read back into `buf` a
/// segment at a time.
pub(super) fn each_of(
    sides: &[Records],
    p: usize,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<(), StoreError> {
    for side in sides {
        if let Some(spill) = &side.spill {
            spill
                .segments
                .each(p, buf, |segment| each_record(segment, &mut f))?;
        }
        each_record(&side.parts[p], &mut f);
    }
    Ok(())
}

/// The partition of a key with fingerprint `fp` (the mixed fingerprint's
/// high bits; the set in a partition takes its slot from the low bits).
#[inline]
fn partition_of(fp: u64, shift: u32) -> usize {
    fp.mix().checked_shr(shift).unwrap_or(0) as usize
}

/// Calls `f` with the fingerprint and bytes of each record of `part`.
pub(super) fn each_record(part: &[u8], mut f: impl FnMut(u64, &[u8])) {
    let mut at = 0;
    while at < part.len() {
        let fp = u64::from_le_bytes(part[at..at + 8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(part[at + 8..at + HEAD].try_into().expect("4 bytes")) as usize;
        f(fp, &part[at + HEAD..at + HEAD + len]);
        at += HEAD + len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records come back as they went in, each in the partition its
    /// fingerprint's mix picks, keys of any length (none included).
    #[test]
    fn records_come_back_in_their_partitions() {
        let mut records = Records::new(16, 0, None);
        let keys: Vec<(u64, Vec<u8>)> = (0..500u64)
            .map(|i| {
                (
                    i.wrapping_mul(0x2545_F491_4F6C_DD1D),
                    vec![i as u8; (i % 40) as usize],
                )
            })
            .collect();
        for (fp, key) in &keys {
            records.push(*fp, key);
        }
        let mut back = Vec::new();
        for (p, part) in records.parts.iter().enumerate() {
            let mut n = 0;
            each_record(part, |fp, key| {
                assert_eq!(partition_of(fp, records.shift), p);
                back.push((fp, key.to_vec()));
                n += 1;
            });
            assert_eq!(n, records.counts[p]);
        }
        back.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(back, want);
        assert!(records.counts.iter().filter(|&&n| n > 0).count() > 8);
    }

    /// Records past a small budget are written to disk, every partition
    /// at once, and come back with those still in memory, each once; the
    /// filter built as they are written, and from the rest after, is the
    /// filter of them all. Nothing is held past the budget but a record
    /// longer than its partition's room.
    #[test]
    fn records_past_the_budget_are_written_to_disk_and_come_back() {
        let filter = Arc::new(Mutex::new(Filter::new(64, 12)));
        let room = Room {
            runtime: Arc::new(RuntimeEnv::default()),
            most: 8 << 10,
            builds: Some(filter.clone()),
        };
        let mut records = Records::new(16, 1 << 20, Some((&room, 2)));
        assert_eq!(records.bytes(), 4 << 10);
        let keys: Vec<(u64, Vec<u8>)> = (0..3000u64)
            .map(|i| {
                let len = if i == 1234 { 3000 } else { (i % 50) as usize };
                (
                    i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    vec![(i % 251) as u8; len],
                )
            })
            .collect();
        for (fp, key) in &keys {
            records.push(*fp, key);
            assert!(
                records.bytes() <= (4 << 10) + 3000 + HEAD,
                "{}",
                records.bytes()
            );
        }
        assert!(records.written() > 50_000, "{}", records.written());
        let mut built = std::mem::take(&mut *filter.lock().unwrap());
        assert!(built.words.iter().any(|&w| w != 0));
        let (mut back, mut buf) = (Vec::new(), Vec::new());
        for p in 0..16 {
            let mut n = 0;
            each_of(std::slice::from_ref(&records), p, &mut buf, |fp, key| {
                assert_eq!(partition_of(fp, records.shift), p);
                back.push((fp, key.to_vec()));
                n += 1;
            })
            .unwrap();
            assert_eq!(n, records.counts[p]);
            assert_eq!(
                records.bytes_of(p),
                records.counts[p] as usize * HEAD + {
                    let mut bytes = 0;
                    each_of(std::slice::from_ref(&records), p, &mut buf, |_, k| {
                        bytes += k.len()
                    })
                    .unwrap();
                    bytes
                }
            );
            each_record(&records.parts[p], |fp, _| built.add(fp));
        }
        back.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(back, want);
        let mut all = Filter::new(64, 12);
        keys.iter().for_each(|(fp, _)| all.add(*fp));
        assert_eq!(built.words, all.words);
    }
}
