//! The trace of a mounted run: the seed (the directory's content when it was
//! mounted, taken as durable) and every mutating operation in the order the
//! file system applied them. A small binary format of our own.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::tree::{Kind, NewKind, Node, Op, Tree, ROOT};

const MAGIC: &[u8; 8] = b"CRASHFS1";

pub struct Trace {
    pub seed: Tree,
    pub ops: Vec<Op>,
}

/// Reads the directory `dir` into a tree (symlinks kept as links).
pub fn load_dir(dir: &Path) -> io::Result<Tree> {
    let mut tree = Tree::new();
    let mut next = ROOT + 1;
    load_into(dir, ROOT, &mut tree, &mut next)?;
    Ok(tree)
}

fn load_into(dir: &Path, ino: u64, tree: &mut Tree, next: &mut u64) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(dir)?.collect::<io::Result<_>>()?;
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        let path = entry.path();
        let meta = fs::symlink_metadata(&path)?;
        let child = *next;
        *next += 1;
        let kind = if meta.file_type().is_symlink() {
            Kind::Symlink(fs::read_link(&path)?)
        } else if meta.is_dir() {
            Kind::Dir(BTreeMap::new())
        } else {
            Kind::File(fs::read(&path)?)
        };
        let mut node = Node::new(kind, meta.permissions().mode());
        node.mtime = meta.modified()?;
        let is_dir = meta.is_dir();
        tree.nodes.insert(child, node);
        tree.entries_mut(ino)
            .expect("a directory")
            .insert(entry.file_name(), child);
        if is_dir {
            load_into(&path, child, tree, next)?;
        }
    }
    Ok(())
}

struct W(Vec<u8>);

impl W {
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn name(&mut self, n: &OsString) {
        self.bytes(n.as_bytes());
    }
}

struct R<'a>(&'a [u8]);

impl R<'_> {
    fn u64(&mut self) -> io::Result<u64> {
        if self.0.len() < 8 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "truncated trace",
            ));
        }
        let (head, rest) = self.0.split_at(8);
        self.0 = rest;
        Ok(u64::from_le_bytes(head.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u64()? as usize;
        if self.0.len() < n {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "truncated trace",
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head.to_vec())
    }
    fn name(&mut self) -> io::Result<OsString> {
        self.bytes().map(OsString::from_vec)
    }
}

impl Trace {
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let mut w = W(MAGIC.to_vec());
        let mut inos: Vec<_> = self.seed.nodes.keys().copied().collect();
        inos.sort();
        w.u64(inos.len() as u64);
        for ino in inos {
            let node = &self.seed.nodes[&ino];
            w.u64(ino);
            w.u64(u64::from(node.mode));
            match &node.kind {
                Kind::File(data) => {
                    w.u64(0);
                    w.bytes(data);
                }
                Kind::Dir(entries) => {
                    w.u64(1);
                    w.u64(entries.len() as u64);
                    for (name, child) in entries {
                        w.name(name);
                        w.u64(*child);
                    }
                }
                Kind::Symlink(target) => {
                    w.u64(2);
                    w.bytes(target.as_os_str().as_bytes());
                }
            }
        }
        w.u64(self.ops.len() as u64);
        for op in &self.ops {
            encode(&mut w, op);
        }
        fs::write(path, w.0)
    }

    pub fn load(path: &Path) -> io::Result<Trace> {
        let bytes = fs::read(path)?;
        if !bytes.starts_with(MAGIC) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a trace"));
        }
        let mut r = R(&bytes[MAGIC.len()..]);
        let mut seed = Tree::default();
        for _ in 0..r.u64()? {
            let ino = r.u64()?;
            let mode = r.u64()? as u32;
            let kind = match r.u64()? {
                0 => Kind::File(r.bytes()?),
                1 => {
                    let mut entries = BTreeMap::new();
                    for _ in 0..r.u64()? {
                        let name = r.name()?;
                        entries.insert(name, r.u64()?);
                    }
                    Kind::Dir(entries)
                }
                _ => Kind::Symlink(PathBuf::from(r.name()?)),
            };
            seed.nodes.insert(ino, Node::new(kind, mode));
        }
        let mut ops = Vec::new();
        for _ in 0..r.u64()? {
            ops.push(decode(&mut r)?);
        }
        Ok(Trace { seed, ops })
    }
}

fn encode(w: &mut W, op: &Op) {
    w.u64(op.class() as u64);
    match op {
        Op::Create {
            parent,
            name,
            ino,
            kind,
            mode,
        } => {
            w.u64(*parent);
            w.name(name);
            w.u64(*ino);
            w.u64(u64::from(*mode));
            match kind {
                NewKind::File => w.u64(0),
                NewKind::Dir => w.u64(1),
                NewKind::Symlink(t) => {
                    w.u64(2);
                    w.bytes(t.as_os_str().as_bytes());
                }
            }
        }
        Op::Link { parent, name, ino } => {
            w.u64(*parent);
            w.name(name);
            w.u64(*ino);
        }
        Op::Unlink { parent, name } => {
            w.u64(*parent);
            w.name(name);
        }
        Op::Rename {
            from,
            from_name,
            to,
            to_name,
            flags,
        } => {
            w.u64(*from);
            w.name(from_name);
            w.u64(*to);
            w.name(to_name);
            w.u64(u64::from(*flags));
        }
        Op::Write { ino, offset, data } => {
            w.u64(*ino);
            w.u64(*offset);
            w.bytes(data);
        }
        Op::Truncate { ino, size } => {
            w.u64(*ino);
            w.u64(*size);
        }
        Op::Sync { ino } => w.u64(*ino),
    }
}

fn decode(r: &mut R<'_>) -> io::Result<Op> {
    Ok(match r.u64()? {
        0 => {
            let parent = r.u64()?;
            let name = r.name()?;
            let ino = r.u64()?;
            let mode = r.u64()? as u32;
            let kind = match r.u64()? {
                0 => NewKind::File,
                1 => NewKind::Dir,
                _ => NewKind::Symlink(PathBuf::from(r.name()?)),
            };
            Op::Create {
                parent,
                name,
                ino,
                kind,
                mode,
            }
        }
        1 => Op::Link {
            parent: r.u64()?,
            name: r.name()?,
            ino: r.u64()?,
        },
        2 => Op::Unlink {
            parent: r.u64()?,
            name: r.name()?,
        },
        3 => Op::Rename {
            from: r.u64()?,
            from_name: r.name()?,
            to: r.u64()?,
            to_name: r.name()?,
            flags: r.u64()? as u32,
        },
        4 => Op::Write {
            ino: r.u64()?,
            offset: r.u64()?,
            data: r.bytes()?,
        },
        5 => Op::Truncate {
            ino: r.u64()?,
            size: r.u64()?,
        },
        _ => Op::Sync { ino: r.u64()? },
    })
}
