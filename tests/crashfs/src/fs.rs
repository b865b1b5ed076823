//! The mounted file system: a whole tree in memory, served through FUSE,
//! that records every mutating operation it applies (with its data) and can
//! fail the n-th operation of a class with an injected errno.
//!
//! Reads see everything written, as on any file system: what would survive
//! a power cut is decided afterwards, from the trace (see `crash`).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::names::Names;
use crate::tree::{Kind, NewKind, Op, Tree, CLASSES, RENAME_EXCHANGE, RENAME_NOREPLACE, ROOT};

const TTL: Duration = Duration::from_secs(1);

/// Fail the `nth` (1-based) operation of class `class` with `errno`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub class: usize,
    pub nth: u64,
    pub errno: i32,
    pub errno_name: String,
}

pub struct State {
    pub tree: Tree,
    pub ops: Vec<Op>,
    next_ino: u64,
    /// To name paths in the fault log.
    names: Names,
    counts: [u64; CLASSES.len()],
    fault: Option<Fault>,
    fault_log: Option<PathBuf>,
    mount: PathBuf,
    /// Directory listings taken at opendir, by handle.
    listings: HashMap<u64, Vec<(u64, FileType, OsString)>>,
    next_fh: u64,
}

pub struct CrashFs(pub Arc<Mutex<State>>);

impl State {
    pub fn new(
        seed: Tree,
        mount: &Path,
        fault: Option<Fault>,
        fault_log: Option<PathBuf>,
    ) -> State {
        let next_ino = seed.nodes.keys().max().copied().unwrap_or(ROOT) + 1;
        let names = Names::of(&seed);
        State {
            tree: seed,
            ops: Vec::new(),
            next_ino,
            names,
            counts: [0; CLASSES.len()],
            fault,
            fault_log,
            mount: mount.to_path_buf(),
            listings: HashMap::new(),
            next_fh: 1,
        }
    }

    fn path(&self, ino: u64) -> PathBuf {
        self.mount.join(self.names.path(ino))
    }

    fn entry_path(&self, parent: u64, name: &OsStr) -> PathBuf {
        self.path(parent).join(name)
    }

    /// Counts an operation of `op`'s class; fails it if it is the injected
    /// fault, else applies and records it.
    fn commit(&mut self, op: Op, shown: &Path) -> Result<(), Errno> {
        let class = op.class();
        self.counts[class] += 1;
        if let Some(f) = &self.fault {
            if f.class == class && f.nth == self.counts[class] {
                if let Some(log) = &self.fault_log {
                    if let Ok(mut file) = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(log)
                    {
                        let _ = writeln!(
                            file,
                            "{}\t{}\t{}",
                            CLASSES[class],
                            f.errno_name,
                            shown.display()
                        );
                    }
                }
                return Err(Errno::from_i32(f.errno));
            }
        }
        self.names.note(&op, &self.tree);
        self.tree.apply(&op);
        self.ops.push(op);
        Ok(())
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.tree.nodes.get(&ino)?;
        let (kind, size) = match &node.kind {
            Kind::File(d) => (FileType::RegularFile, d.len() as u64),
            Kind::Dir(e) => (FileType::Directory, e.len() as u64),
            Kind::Symlink(t) => (FileType::Symlink, t.as_os_str().len() as u64),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: node.mtime,
            mtime: node.mtime,
            ctime: node.mtime,
            crtime: node.mtime,
            kind,
            perm: node.mode as u16,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn file_type(&self, ino: u64) -> FileType {
        match self.tree.nodes.get(&ino).map(|n| &n.kind) {
            Some(Kind::Dir(_)) => FileType::Directory,
            Some(Kind::Symlink(_)) => FileType::Symlink,
            _ => FileType::RegularFile,
        }
    }

    fn create(
        &mut self,
        parent: u64,
        name: &OsStr,
        kind: NewKind,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        if self
            .tree
            .nodes
            .get(&parent)
            .and_then(|n| n.entries())
            .is_none()
        {
            return Err(Errno::ENOTDIR);
        }
        if self.tree.lookup(parent, name).is_some() {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        let op = Op::Create {
            parent,
            name: name.to_os_string(),
            ino,
            kind,
            mode,
        };
        let shown = self.entry_path(parent, name);
        self.commit(op, &shown)?;
        self.next_ino += 1;
        Ok(self.attr(ino).expect("just created"))
    }

    fn remove(&mut self, parent: u64, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let ino = self.tree.lookup(parent, name).ok_or(Errno::ENOENT)?;
        match (&self.tree.nodes[&ino].kind, dir) {
            (Kind::Dir(e), true) if !e.is_empty() => return Err(Errno::ENOTEMPTY),
            (Kind::Dir(_), false) => return Err(Errno::EISDIR),
            (Kind::Dir(_), true) => {}
            (_, true) => return Err(Errno::ENOTDIR),
            _ => {}
        }
        let shown = self.entry_path(parent, name);
        self.commit(
            Op::Unlink {
                parent,
                name: name.to_os_string(),
            },
            &shown,
        )
    }

    fn rename(
        &mut self,
        from: u64,
        from_name: &OsStr,
        to: u64,
        to_name: &OsStr,
        flags: u32,
    ) -> Result<(), Errno> {
        let src = self.tree.lookup(from, from_name).ok_or(Errno::ENOENT)?;
        let dst = self.tree.lookup(to, to_name);
        if flags & !(RENAME_EXCHANGE | RENAME_NOREPLACE) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & RENAME_NOREPLACE != 0 && dst.is_some() {
            return Err(Errno::EEXIST);
        }
        if flags & RENAME_EXCHANGE != 0 && dst.is_none() {
            return Err(Errno::ENOENT);
        }
        if let (Some(d), 0) = (dst, flags & RENAME_EXCHANGE) {
            let src_dir = self.tree.nodes[&src].entries().is_some();
            match self.tree.nodes[&d].entries() {
                Some(_) if !src_dir => return Err(Errno::EISDIR),
                Some(e) if !e.is_empty() && d != src => return Err(Errno::ENOTEMPTY),
                None if src_dir => return Err(Errno::ENOTDIR),
                _ => {}
            }
        }
        let shown = self.entry_path(from, from_name);
        self.commit(
            Op::Rename {
                from,
                from_name: from_name.to_os_string(),
                to,
                to_name: to_name.to_os_string(),
                flags,
            },
            &shown,
        )
    }

    fn sync(&mut self, ino: u64) -> Result<(), Errno> {
        if !self.tree.nodes.contains_key(&ino) {
            return Err(Errno::ENOENT);
        }
        let shown = self.path(ino);
        self.commit(Op::Sync { ino }, &shown)
    }
}

impl CrashFs {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn reply_entry(reply: ReplyEntry, r: Result<FileAttr, Errno>) {
    match r {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for CrashFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let s = self.state();
        let found = s.tree.lookup(parent.0, name).and_then(|i| s.attr(i));
        reply_entry(reply, found.ok_or(Errno::ENOENT));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.state();
        if !s.tree.nodes.contains_key(&ino.0) {
            return reply.error(Errno::ENOENT);
        }
        if let Some(size) = size {
            let shown = s.path(ino.0);
            if let Err(e) = s.commit(Op::Truncate { ino: ino.0, size }, &shown) {
                return reply.error(e);
            }
        }
        if let Some(node) = s.tree.nodes.get_mut(&ino.0) {
            if let Some(m) = mode {
                node.mode = m & 0o7777;
            }
            match mtime {
                Some(TimeOrNow::SpecificTime(t)) => node.mtime = t,
                Some(TimeOrNow::Now) => node.mtime = SystemTime::now(),
                None => {}
            }
        }
        match s.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.state().tree.nodes.get(&ino.0).map(|n| &n.kind) {
            Some(Kind::Symlink(t)) => reply.data(t.as_os_str().as_encoded_bytes()),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc_s_ifmt() != libc_s_ifreg() {
            return reply.error(Errno::EPERM);
        }
        let r = self
            .state()
            .create(parent.0, name, NewKind::File, mode & !umask);
        reply_entry(reply, r);
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self
            .state()
            .create(parent.0, name, NewKind::Dir, mode & !umask);
        reply_entry(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.state().remove(parent.0, name, false);
        reply_empty(reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = self.state().remove(parent.0, name, true);
        reply_empty(reply, r);
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.state().create(
            parent.0,
            link_name,
            NewKind::Symlink(target.to_path_buf()),
            0o777,
        );
        reply_entry(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = self
            .state()
            .rename(parent.0, name, newparent.0, newname, flags.bits());
        reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut s = self.state();
        let r = if s.tree.lookup(newparent.0, newname).is_some() {
            Err(Errno::EEXIST)
        } else if !s.tree.nodes.contains_key(&ino.0) {
            Err(Errno::ENOENT)
        } else {
            let shown = s.entry_path(newparent.0, newname);
            let op = Op::Link {
                parent: newparent.0,
                name: newname.to_os_string(),
                ino: ino.0,
            };
            s.commit(op, &shown)
                .map(|()| s.attr(ino.0).expect("exists"))
        };
        reply_entry(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.state().tree.nodes.contains_key(&ino.0) {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.state().tree.nodes.get(&ino.0).map(|n| &n.kind) {
            Some(Kind::File(d)) => {
                let start = (offset as usize).min(d.len());
                let end = (start + size as usize).min(d.len());
                reply.data(&d[start..end]);
            }
            Some(Kind::Dir(_)) => reply.error(Errno::EISDIR),
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.state();
        if !matches!(
            s.tree.nodes.get(&ino.0).map(|n| &n.kind),
            Some(Kind::File(_))
        ) {
            return reply.error(Errno::EBADF);
        }
        let shown = s.path(ino.0);
        let op = Op::Write {
            ino: ino.0,
            offset,
            data: data.to_vec(),
        };
        match s.commit(op, &shown) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let r = self.state().sync(ino.0);
        reply_empty(reply, r);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.state();
        let Some(entries) = s.tree.nodes.get(&ino.0).and_then(|n| n.entries()) else {
            return reply.error(Errno::ENOTDIR);
        };
        let parent = s.names.parent(ino.0);
        let mut list = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (parent, FileType::Directory, OsString::from("..")),
        ];
        list.extend(
            entries
                .iter()
                .map(|(n, i)| (*i, FileType::RegularFile, n.clone())),
        );
        for item in list.iter_mut().skip(2) {
            item.1 = s.file_type(item.0);
        }
        let fh = s.next_fh;
        s.next_fh += 1;
        s.listings.insert(fh, list);
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let s = self.state();
        let Some(list) = s.listings.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, kind, name)) in list.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.state().listings.remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _ds: bool,
        reply: ReplyEmpty,
    ) {
        let r = self.state().sync(ino.0);
        reply_empty(reply, r);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.state();
        let r = match s.tree.lookup(parent.0, name) {
            Some(_) if flags & O_EXCL != 0 => Err(Errno::EEXIST),
            Some(ino) => Ok(s.attr(ino).expect("exists")),
            None => s.create(parent.0, name, NewKind::File, mode & !umask),
        };
        match r {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}

const O_EXCL: i32 = 0o200;

fn libc_s_ifmt() -> u32 {
    0o170000
}

fn libc_s_ifreg() -> u32 {
    0o100000
}
