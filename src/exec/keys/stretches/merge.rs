//! The merge of every run's stretches ([`super`]): each stretch read by a
//! cursor, the cursors played against one another in a tree of losers by
//! the 8 bytes after the prefix every key shares (their bytes only when
//! those are equal), and the keys cut into ranges merged side by side.

use super::{prefix, Cursor, Stretches, KEY_ROOM, MOST_STRETCHES, RESTART};
use crate::exec::keys::found::Tallied;
use crate::exec::ExecError as Error;

/// Whether `stretches` (every run's together) are few enough to merge.
pub(in crate::exec::keys) fn mergeable(stretches: usize) -> bool {
    stretches <= MOST_STRETCHES
}

/// What `-v` says of the suffix the runs' keys are stored without, if
/// any: the longest.
pub(in crate::exec::keys) fn suffix_said(runs: &[Stretches]) -> String {
    match runs.iter().map(|r| r.suffix.chosen().len()).max() {
        None | Some(0) => String::new(),
        Some(n) => format!(", keys stored without a suffix of {n} bytes"),
    }
}

/// The keys of every run's stretches merged in order of their bytes and
/// counted, null rows as one key when `nulls_equal`; on `threads` threads,
/// each merging a range of the keys (cut at whole keys of the longest
/// stretch).
pub(in crate::exec::keys) fn merged(
    mut runs: Vec<Stretches>,
    nulls_equal: bool,
    threads: usize,
) -> Result<Tallied, Error> {
    runs.iter_mut().for_each(Stretches::finish);
    // Each thread reads every stretch on disk side by side.
    let on_disk = (runs.iter())
        .flat_map(|r| &r.closed)
        .filter(|s| s.on_disk)
        .count();
    runs.iter_mut()
        .for_each(|r| r.window = super::disk::window(on_disk));
    let cuts = cuts(&runs, threads);
    let ranges: Vec<Range> = (0..=cuts.len())
        .map(|i| {
            let from = i.checked_sub(1).map(|j| cuts[j].as_slice());
            (from, cuts.get(i).map(Vec::as_slice))
        })
        .collect();
    let (runs, skip) = (&runs, common(&runs));
    let mut total = std::thread::scope(|scope| {
        let merging: Vec<_> = (ranges.iter())
            .map(|&range| scope.spawn(move || merge_range(runs, range, skip)))
            .collect();
        let mut total = Tallied::default();
        for m in merging {
            let merged =
                (m.join()).map_err(|_| Error::Audit("merging the sorted keys stopped".into()))?;
            total.absorb(merged?);
        }
        Ok::<_, Error>(total)
    })?;
    let nulls: u64 = runs.iter().map(|r| r.nulls).sum();
    if nulls_equal && nulls > 0 {
        total.key(0, &[], nulls);
    }
    Ok(total)
}

/// Keys from one (`None`: the least) to before another (`None`: past the
/// greatest).
type Range<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Keys that cut the merge into about `threads` ranges of as many keys,
/// ascending: whole keys of the longest stretch.
fn cuts(runs: &[Stretches], threads: usize) -> Vec<Vec<u8>> {
    let longest = (runs.iter())
        .flat_map(|r| r.closed.iter().map(move |s| (s.keys, r, s)))
        .max_by_key(|(keys, _, _)| *keys);
    let Some((keys, run, stretch)) = longest else {
        return Vec::new();
    };
    let whole = keys.div_ceil(RESTART);
    let mut cuts: Vec<Vec<u8>> = (1..threads.max(1))
        .filter_map(|t| {
            let mut c = run.cursor(stretch, t * whole / threads);
            c.next().then_some(c.key)
        })
        .collect();
    cuts.dedup();
    cuts.retain(|c| !c.is_empty());
    cuts
}

/// How many bytes every key of `runs` starts with: those the least first
/// key and the greatest last key of their stretches share.
fn common(runs: &[Stretches]) -> usize {
    let mut least: Option<Vec<u8>> = None;
    let mut greatest: Option<&[u8]> = None;
    for r in runs {
        for s in &r.closed {
            let mut c = r.cursor(s, 0);
            if c.next() && least.as_ref().is_none_or(|l| c.key < *l) {
                least = Some(c.key);
            }
            if greatest.is_none_or(|g| *s.last > *g) {
                greatest = Some(&s.last);
            }
        }
    }
    match (least, greatest) {
        (Some(l), Some(g)) => crate::keyindex::shared_len(&l, g),
        _ => 0,
    }
}

/// The keys in `[from, to)` of every run's stretches (`None`: unbounded),
/// merged and counted; every key starts with `skip` shared bytes.
fn merge_range(runs: &[Stretches], (from, to): Range, skip: usize) -> Result<Tallied, Error> {
    let mut cursors = Vec::new();
    for r in runs {
        for s in &r.closed {
            cursors.extend(r.cursor_from(s, from)?);
        }
    }
    for c in &mut cursors {
        c.skip = skip;
        c.prefix = prefix(&c.key, skip);
    }
    let mut tree = Tree::new(&cursors);
    let mut total = Tallied::default();
    let (mut key, mut key_prefix, mut rows) = (Vec::with_capacity(KEY_ROOM), 0, 0u64);
    while let Some(top) = tree.winner(&cursors) {
        let c = &mut cursors[top];
        if rows > 0 && c.prefix == key_prefix && c.key == key {
            rows += c.rows;
        } else {
            if to.is_some_and(|to| c.key.as_slice() >= to) {
                break;
            }
            if rows > 0 {
                total.key_ascending(1, &key, rows);
            }
            key.clear();
            key.extend_from_slice(&c.key);
            (key_prefix, rows) = (c.prefix, c.rows);
        }
        c.done = !c.next();
        tree.replay(top, &cursors);
    }
    if rows > 0 {
        total.key_ascending(1, &key, rows);
    }
    for c in &mut cursors {
        c.failed()?;
    }
    Ok(total)
}

/// A cursor's place in a [`Tree`]: its order but for keys of equal
/// prefixes (whether it is done, past every key, then its prefix), and its
/// number.
#[derive(Clone, Copy, Default)]
struct Node {
    place: u128,
    cursor: u32,
}

impl Node {
    fn of(cursors: &[Cursor], c: usize) -> Node {
        let place = match cursors[c].done {
            true => 1 << 64,
            false => u128::from(cursors[c].prefix),
        };
        Node {
            place,
            cursor: c as u32,
        }
    }

    /// Whether this node's cursor comes before `other`'s: by their places,
    /// then their keys' bytes.
    #[inline]
    fn before(self, other: Node, cursors: &[Cursor]) -> bool {
        if self.place != other.place {
            return self.place < other.place;
        }
        let (a, b) = (
            &cursors[self.cursor as usize],
            &cursors[other.cursor as usize],
        );
        !a.done && a.key < b.key
    }
}

/// Nodes left free at each end of a tree's: the nodes are a small
/// allocation of their own, which the allocator may place beside another
/// merging thread's, and two threads writing one cache line made both 3.5
/// times slower a key (measured). 128 bytes a side.
const PAD: usize = 4;

/// A tree of losers over the cursors: each inner node holds the cursor
/// that lost the match played there, and the root's winner comes first.
/// A cursor that moves on plays only the matches on its way to the root,
/// one comparison a level, against places held in the nodes themselves.
struct Tree {
    /// `PAD` free, the winner, the losers of inner nodes `1..k`, `PAD`
    /// free.
    nodes: Vec<Node>,
    k: usize,
}

impl Tree {
    fn new(cursors: &[Cursor]) -> Tree {
        let k = cursors.len();
        let mut nodes = vec![Node::default(); k.max(1) + 2 * PAD];
        // The winner of each node, leaves `k..2k` being the cursors.
        let mut won: Vec<Node> = vec![Node::default(); 2 * k];
        for (i, w) in won[k..].iter_mut().enumerate() {
            *w = Node::of(cursors, i);
        }
        for n in (1..k).rev() {
            let (a, b) = (won[2 * n], won[2 * n + 1]);
            let (winner, loser) = if b.before(a, cursors) { (b, a) } else { (a, b) };
            won[n] = winner;
            nodes[PAD + n] = loser;
        }
        if k > 1 {
            nodes[PAD] = won[1];
        }
        Tree { nodes, k }
    }

    /// The cursor whose key comes first, unless every cursor is done.
    fn winner(&self, cursors: &[Cursor]) -> Option<usize> {
        let w = self.nodes[PAD].cursor as usize;
        (self.k > 0 && !cursors[w].done).then_some(w)
    }

    /// Plays the matches of cursor `c` (the winner, moved on) to the root.
    #[inline]
    fn replay(&mut self, c: usize, cursors: &[Cursor]) {
        let mut winner = Node::of(cursors, c);
        let mut n = (c + self.k) / 2;
        while n >= 1 {
            // Chosen without a branch: which side wins is a coin toss
            // for keys drawn from many files.
            let loser = self.nodes[PAD + n];
            let lost = loser.before(winner, cursors);
            self.nodes[PAD + n] = if lost { winner } else { loser };
            winner = if lost { loser } else { winner };
            n /= 2;
        }
        self.nodes[PAD] = winner;
    }
}
