//! Paths for inodes, for the fault log and `crashfs ops`: the last entry
//! seen for each inode, walked up to the root.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::tree::{Op, Tree, RENAME_EXCHANGE, ROOT};

#[derive(Debug, Default)]
pub struct Names(HashMap<u64, (u64, OsString)>);

impl Names {
    /// The entries of `tree`.
    pub fn of(tree: &Tree) -> Names {
        let mut names = HashMap::new();
        for (ino, node) in &tree.nodes {
            for (name, child) in node.entries().into_iter().flatten() {
                names.insert(*child, (*ino, name.clone()));
            }
        }
        Names(names)
    }

    /// Follows `op`, which is about to be applied to `tree`.
    pub fn note(&mut self, op: &Op, tree: &Tree) {
        match op {
            Op::Create {
                parent, name, ino, ..
            }
            | Op::Link { parent, name, ino } => {
                self.0.insert(*ino, (*parent, name.clone()));
            }
            Op::Rename {
                from,
                from_name,
                to,
                to_name,
                flags,
            } => {
                let dst = tree.lookup(*to, to_name);
                if let Some(s) = tree.lookup(*from, from_name) {
                    self.0.insert(s, (*to, to_name.clone()));
                }
                if let Some(d) = dst.filter(|_| flags & RENAME_EXCHANGE != 0) {
                    self.0.insert(d, (*from, from_name.clone()));
                }
            }
            _ => {}
        }
    }

    /// The directory an inode was last seen in.
    pub fn parent(&self, ino: u64) -> u64 {
        self.0.get(&ino).map_or(ROOT, |(p, _)| *p)
    }

    /// The path of an inode, relative to the root.
    pub fn path(&self, ino: u64) -> PathBuf {
        let mut parts = Vec::new();
        let mut cur = ino;
        while cur != ROOT && parts.len() < 256 {
            match self.0.get(&cur) {
                Some((parent, name)) => {
                    parts.push(name.clone());
                    cur = *parent;
                }
                None => {
                    parts.push(OsString::from(format!("<inode {cur}>")));
                    break;
                }
            }
        }
        parts.iter().rev().collect()
    }

    /// The path of entry `name` of directory `dir`.
    pub fn entry(&self, dir: u64, name: &OsStr) -> PathBuf {
        self.path(dir).join(name)
    }
}
