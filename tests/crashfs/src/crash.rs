//! What a power cut after the k-th operation leaves, built from a trace.
//!
//! The power-loss model. An operation is *durable* once a sync covers it:
//!
//! - the data of a file (writes, truncations) once that file is fsynced;
//! - an entry of a directory (create, link, unlink, rename in or out) once
//!   that directory is fsynced.
//!
//! A rename is one atomic step, as in every journalling file system: once
//! either of its directories is fsynced it is durable in both, and so is
//! every earlier entry change of both directories (they are ordered before
//! it). Nothing else is.
//!
//! - **Strict**: only durable operations survive. A file whose entry is
//!   durable but whose data is not comes back empty (or as it was at its
//!   last fsync).
//! - **Random** (ALICE-style): durable operations survive, and so does an
//!   arbitrary seeded subset of the others, each write cut into 4 KiB pieces
//!   that survive independently (a torn file). A rename can survive while the
//!   data of the file it renamed does not; a later operation can survive
//!   while an earlier one does not.
//!
//! Durable state changes only at a sync, so the strict state after k
//! operations is the same for every k between two syncs.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::trace::Trace;
use crate::tree::{Kind, Op, Tree, ROOT};

/// Which operations survive a power cut.
#[derive(Debug, Clone, Copy)]
pub enum Model {
    Strict,
    Random(u64),
    /// No power cut: every operation (the state readers saw).
    Full,
}

/// Whether each of `ops` is durable at their end (see the module comment).
pub fn durable(ops: &[Op]) -> Vec<bool> {
    let mut mark: HashMap<u64, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Op::Sync { ino } = op {
            mark.insert(*ino, i);
        }
    }
    let at = |mark: &HashMap<u64, usize>, d: u64| mark.get(&d).copied().unwrap_or(0);
    loop {
        let mut changed = false;
        for (i, op) in ops.iter().enumerate() {
            if let Op::Rename { from, to, .. } = op {
                if i < at(&mark, *from) || i < at(&mark, *to) {
                    for d in [*from, *to] {
                        if at(&mark, d) < i + 1 {
                            mark.insert(d, i + 1);
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    ops.iter()
        .enumerate()
        .map(|(i, op)| match op.data_of() {
            Some(ino) => i < at(&mark, ino),
            None if matches!(op, Op::Sync { .. }) => true,
            None => op.dirs().iter().any(|d| i < at(&mark, *d)),
        })
        .collect()
}

/// A small deterministic generator (SplitMix64), so that a seed names one
/// crash state on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

const PAGE: u64 = 4096;

/// The tree a power cut after the first `k` operations leaves.
pub fn state_after(trace: &Trace, k: usize, model: Model) -> Tree {
    let ops = &trace.ops[..k.min(trace.ops.len())];
    let mut tree = trace.seed.clone();
    // Inodes exist from their creation on; only their entries and their data
    // are subject to the power cut.
    for op in ops {
        if let Op::Create {
            ino, kind, mode, ..
        } = op
        {
            tree.nodes.entry(*ino).or_insert_with(|| kind.node(*mode));
        }
    }
    let keep = match model {
        Model::Full => vec![true; ops.len()],
        _ => durable(ops),
    };
    let mut rng = match model {
        Model::Random(seed) => Some(Rng(seed ^ 0x5EED_C0DE)),
        _ => None,
    };
    for (op, durable) in ops.iter().zip(keep) {
        if durable {
            tree.apply(op);
            continue;
        }
        let Some(rng) = rng.as_mut() else { continue };
        match op {
            Op::Write { ino, offset, data } => {
                let mut at = 0usize;
                while at < data.len() {
                    let off = offset + at as u64;
                    let len = ((PAGE - off % PAGE) as usize).min(data.len() - at);
                    if rng.coin() {
                        tree.apply(&Op::Write {
                            ino: *ino,
                            offset: off,
                            data: data[at..at + len].to_vec(),
                        });
                    }
                    at += len;
                }
            }
            _ => {
                if rng.coin() {
                    tree.apply(op);
                }
            }
        }
    }
    tree
}

/// Writes `tree` into the empty directory `out` (which stands for the
/// root); returns a digest of what it wrote (paths, kinds, contents), so
/// that identical crash states can be checked once.
pub fn materialize(tree: &Tree, out: &Path) -> io::Result<u64> {
    for entry in fs::read_dir(out)? {
        let path = entry?.path();
        if fs::symlink_metadata(&path)?.is_dir() {
            fs::remove_dir_all(&path)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    let mut w = Writer {
        tree,
        files: HashMap::new(),
        dirs: HashSet::new(),
        digest: Fnv::default(),
    };
    w.dir(ROOT, out)?;
    Ok(w.digest.0)
}

struct Writer<'a> {
    tree: &'a Tree,
    /// Files written already, for hard links.
    files: HashMap<u64, std::path::PathBuf>,
    dirs: HashSet<u64>,
    digest: Fnv,
}

impl Writer<'_> {
    fn dir(&mut self, ino: u64, at: &Path) -> io::Result<()> {
        self.dirs.insert(ino);
        let entries: Vec<(OsString, u64)> = match self.tree.nodes.get(&ino).map(|n| &n.kind) {
            Some(Kind::Dir(e)) => e.iter().map(|(n, i)| (n.clone(), *i)).collect(),
            _ => Vec::new(),
        };
        for (name, child) in entries {
            let path = at.join(&name);
            let Some(node) = self.tree.nodes.get(&child) else {
                continue;
            };
            self.digest.add(path.as_os_str().as_bytes());
            match &node.kind {
                Kind::Dir(_) => {
                    // A directory reachable twice (only an inconsistent
                    // random state can do that) is written once.
                    if self.dirs.contains(&child) {
                        continue;
                    }
                    self.digest.add(b"/dir");
                    fs::create_dir(&path)?;
                    self.dir(child, &path)?;
                    fs::set_permissions(&path, fs::Permissions::from_mode(node.mode))?;
                }
                Kind::File(data) => {
                    self.digest.add(b"/file");
                    self.digest.add(data);
                    match self.files.get(&child) {
                        Some(first) => fs::hard_link(first, &path)?,
                        None => {
                            fs::write(&path, data)?;
                            fs::set_permissions(&path, fs::Permissions::from_mode(node.mode))?;
                            self.files.insert(child, path.clone());
                        }
                    }
                }
                Kind::Symlink(target) => {
                    self.digest.add(b"/link");
                    self.digest.add(target.as_os_str().as_bytes());
                    std::os::unix::fs::symlink(target, &path)?;
                }
            }
        }
        Ok(())
    }
}

/// FNV-1a, 64 bits: stable across builds, unlike `DefaultHasher`.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for b in bytes.iter().chain(&[0xff]) {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
