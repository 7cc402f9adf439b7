//! Inode identity over time. Entries name inodes by (device, inode number). Whenever an inode
//! leaves the workspace for the store (a `deleted` entry, a replaced file), its number may be
//! given to a new inode; and a store on another filesystem gives every inode that comes back
//! from it a new number. So an id recorded at seq `s` is followed through the log: to the first
//! time that inode was stored after `s`, then to where it came back from the store (a step that
//! restored the object, or a `copied` entry from a revert), and on from there. An inode number
//! met after its inode left for the store, and before it came back, is another inode.

use std::collections::HashMap;

use super::log::{Entry, FileId, Op};

/// The storing and restoring of inodes recorded in a log, and restorings made since.
#[derive(Debug, Default, Clone)]
pub(crate) struct Copies {
    /// The seqs at which each inode number was put in the store, in log order.
    stored: HashMap<FileId, Vec<u64>>,
    /// The seq an object was stored at -> (the id it came back with, the seq it came back at).
    back: HashMap<u64, (FileId, u64)>,
}

impl Copies {
    pub fn of(entries: &[Entry]) -> Copies {
        // Object -> the seq it was stored at, for the steps that restore it.
        let mut objects: HashMap<u64, u64> = HashMap::new();
        let mut c = Copies::default();
        for e in entries {
            match &e.op {
                Op::Deleted { st, .. } => {
                    objects.insert(e.object(), e.seq);
                    c.stored.entry(st.id()).or_default().push(e.seq);
                }
                // A removed directory is not stored, but a rollback makes it again as a new
                // inode and says so ([`Copies::record`]): an older entry on it (a rename of
                // it, undone next) finds it under its new number.
                Op::Rmdir { st, .. } => {
                    c.stored.entry(st.id()).or_default().push(e.seq);
                }
                Op::Renamed {
                    replaced: Some(r), ..
                } => {
                    objects.insert(e.seq, e.seq);
                    c.stored.entry(r.id()).or_default().push(e.seq);
                }
                Op::Created {
                    id: Some(new),
                    obj: Some(k),
                    ..
                } => {
                    if let Some(at) = objects.get(k) {
                        c.back.insert(*at, (*new, e.seq));
                    }
                }
                Op::Copied { to, stored, .. } => {
                    c.back.insert(*stored, (*to, e.seq));
                }
                _ => {}
            }
        }
        c
    }

    /// The id now of the inode that the entry at seq `since` recorded as `id`.
    pub fn now(&self, id: FileId, since: u64) -> FileId {
        let (mut id, mut t) = (id, since);
        for _ in 0..=self.back.len() {
            let first = self.stored.get(&id).and_then(|seqs| {
                let i = seqs.partition_point(|s| *s < t);
                seqs.get(i).copied()
            });
            match first.and_then(|s| self.back.get(&s)) {
                Some((to, at)) => (id, t) = (*to, *at),
                None => break,
            }
        }
        id
    }

    /// The inode the entry at seq `stored` put in the store came back now, as `to`.
    pub fn record(&mut self, stored: u64, to: FileId) {
        self.back.insert(stored, (to, u64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_inode_number_is_not_taken_for_the_old_inode() {
        let id = |ino| FileId { dev: 1, ino };
        // An inode 7 stored at 3 for good; inode 5 stored at 4, back as a copy numbered 7 at
        // 10; that stored at 12, back as 9 at 20; a new inode numbered 5 stored at 30.
        let mut c = Copies {
            stored: HashMap::from([(id(7), vec![3, 12]), (id(5), vec![4, 30])]),
            back: HashMap::from([(4, (id(7), 10)), (12, (id(9), 20))]),
        };
        assert_eq!(c.now(id(5), 3), id(9), "followed through both copies");
        assert_eq!(c.now(id(7), 11), id(9), "only the second copy applies");
        assert_eq!(
            c.now(id(7), 2),
            id(7),
            "7 before it was a copy's number: another inode"
        );
        assert_eq!(
            c.now(id(5), 25),
            id(5),
            "the new inode 5 did not come back yet"
        );
        c.record(30, id(11));
        assert_eq!(c.now(id(5), 25), id(11));
        assert_eq!(
            c.now(id(5), 3),
            id(9),
            "the first inode 5 is not the second"
        );
    }
}
