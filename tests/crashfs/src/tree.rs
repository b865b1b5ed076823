//! The file system's whole state in memory (test tables are kilobytes), and
//! the operations that change it.
//!
//! The mounted file system and the crash-state builder share [`Tree::apply`]:
//! the live state is the seed plus every recorded operation, and a crash
//! state is the seed plus the operations that survived. So `apply` is
//! lenient: an operation whose preconditions a dropped operation took away
//! (a rename whose source was never made durable) does what it still can
//! and never fails. The mounted file system checks preconditions itself,
//! before it records an operation.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::SystemTime;

/// The root directory's inode.
pub const ROOT: u64 = 1;

/// `renameat2` flags (Linux values).
pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<OsString, u64>),
    Symlink(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub kind: Kind,
    pub mode: u32,
    pub mtime: SystemTime,
}

impl Node {
    pub fn new(kind: Kind, mode: u32) -> Node {
        Node {
            kind,
            mode: mode & 0o7777,
            mtime: SystemTime::now(),
        }
    }

    pub fn entries(&self) -> Option<&BTreeMap<OsString, u64>> {
        match &self.kind {
            Kind::Dir(e) => Some(e),
            _ => None,
        }
    }
}

/// What a new inode is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewKind {
    File,
    Dir,
    Symlink(PathBuf),
}

impl NewKind {
    pub fn node(&self, mode: u32) -> Node {
        match self {
            NewKind::File => Node::new(Kind::File(Vec::new()), mode),
            NewKind::Dir => Node::new(Kind::Dir(BTreeMap::new()), mode),
            NewKind::Symlink(t) => Node::new(Kind::Symlink(t.clone()), mode),
        }
    }
}

/// One mutating operation, as the file system received it (after its
/// preconditions were checked). Directory entries are named by their
/// directory's inode and their name, file contents by the file's inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// create, mknod, mkdir, symlink: a new inode and its entry.
    Create {
        parent: u64,
        name: OsString,
        ino: u64,
        kind: NewKind,
        mode: u32,
    },
    /// A hard link: a new entry for an existing inode.
    Link {
        parent: u64,
        name: OsString,
        ino: u64,
    },
    /// unlink, rmdir.
    Unlink {
        parent: u64,
        name: OsString,
    },
    /// rename, renameat2 (`flags`: [`RENAME_NOREPLACE`], [`RENAME_EXCHANGE`]).
    Rename {
        from: u64,
        from_name: OsString,
        to: u64,
        to_name: OsString,
        flags: u32,
    },
    Write {
        ino: u64,
        offset: u64,
        data: Vec<u8>,
    },
    Truncate {
        ino: u64,
        size: u64,
    },
    /// fsync or fdatasync of a file, fsync of a directory: the barrier.
    Sync {
        ino: u64,
    },
}

/// The classes of operations a fault can be injected into.
pub const CLASSES: [&str; 7] = [
    "create", "link", "unlink", "rename", "write", "truncate", "sync",
];

impl Op {
    /// Its class, an index into [`CLASSES`].
    pub fn class(&self) -> usize {
        match self {
            Op::Create { .. } => 0,
            Op::Link { .. } => 1,
            Op::Unlink { .. } => 2,
            Op::Rename { .. } => 3,
            Op::Write { .. } => 4,
            Op::Truncate { .. } => 5,
            Op::Sync { .. } => 6,
        }
    }

    /// The directories whose entries it changes.
    pub fn dirs(&self) -> Vec<u64> {
        match self {
            Op::Create { parent, .. } | Op::Link { parent, .. } | Op::Unlink { parent, .. } => {
                vec![*parent]
            }
            Op::Rename { from, to, .. } => vec![*from, *to],
            _ => Vec::new(),
        }
    }

    /// The file whose data it changes.
    pub fn data_of(&self) -> Option<u64> {
        match self {
            Op::Write { ino, .. } | Op::Truncate { ino, .. } => Some(*ino),
            _ => None,
        }
    }
}

/// Inodes by number; never freed (an unlinked file that is still open
/// stays readable), which costs nothing at test sizes.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    pub nodes: HashMap<u64, Node>,
}

impl Tree {
    pub fn new() -> Tree {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, NewKind::Dir.node(0o755));
        Tree { nodes }
    }

    pub fn entries_mut(&mut self, dir: u64) -> Option<&mut BTreeMap<OsString, u64>> {
        match self.nodes.get_mut(&dir).map(|n| &mut n.kind) {
            Some(Kind::Dir(e)) => Some(e),
            _ => None,
        }
    }

    pub fn lookup(&self, dir: u64, name: &std::ffi::OsStr) -> Option<u64> {
        self.nodes.get(&dir)?.entries()?.get(name).copied()
    }

    /// Applies `op`, leniently (see the module comment).
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Create {
                parent,
                name,
                ino,
                kind,
                mode,
            } => {
                self.nodes.entry(*ino).or_insert_with(|| kind.node(*mode));
                self.link(*parent, name, *ino);
            }
            Op::Link { parent, name, ino } => self.link(*parent, name, *ino),
            Op::Unlink { parent, name } => {
                if let Some(e) = self.entries_mut(*parent) {
                    e.remove(name);
                }
            }
            Op::Rename {
                from,
                from_name,
                to,
                to_name,
                flags,
            } => self.rename(*from, from_name, *to, to_name, *flags),
            Op::Write { ino, offset, data } => {
                if let Some(Kind::File(bytes)) = self.nodes.get_mut(ino).map(|n| &mut n.kind) {
                    let end = *offset as usize + data.len();
                    if bytes.len() < end {
                        bytes.resize(end, 0);
                    }
                    bytes[*offset as usize..end].copy_from_slice(data);
                }
                self.touch(*ino);
            }
            Op::Truncate { ino, size } => {
                if let Some(Kind::File(bytes)) = self.nodes.get_mut(ino).map(|n| &mut n.kind) {
                    bytes.resize(*size as usize, 0);
                }
                self.touch(*ino);
            }
            Op::Sync { .. } => {}
        }
    }

    fn touch(&mut self, ino: u64) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            n.mtime = SystemTime::now();
        }
    }

    fn link(&mut self, parent: u64, name: &OsString, ino: u64) {
        if let Some(e) = self.entries_mut(parent) {
            e.insert(name.clone(), ino);
        }
    }

    fn rename(&mut self, from: u64, from_name: &OsString, to: u64, to_name: &OsString, flags: u32) {
        let src = self.lookup(from, from_name);
        let dst = self.lookup(to, to_name);
        if flags & RENAME_EXCHANGE != 0 {
            if let (Some(s), Some(d)) = (src, dst) {
                self.link(from, from_name, d);
                self.link(to, to_name, s);
            }
            return;
        }
        if let Some(s) = src {
            if let Some(e) = self.entries_mut(from) {
                e.remove(from_name);
            }
            self.link(to, to_name, s);
        }
    }
}
