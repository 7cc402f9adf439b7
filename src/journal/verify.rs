//! Verifying a rollback: each path it restored, against what the oldest entry of the plan
//! that touched it recorded (type, permission bits, size); no hashing, no walk of the
//! workspace. The type, mode and size come from the stat pass that also seals the journal.

use std::collections::HashMap;
use std::path::Path;

use super::journal::Journal;
use super::log::{Boundary, Entry, Kind, Op};
use super::rollback::RollbackReport;
use super::steps::inode;
use crate::audit::PathText;

impl Journal {
    /// Checks each path the plan restored against what its oldest entry recorded (step 4 of
    /// the module doc).
    pub(crate) fn verify(
        &self,
        plan: &[Entry],
        probed: &HashMap<&PathText, Option<(Kind, u32, u64)>>,
        report: &mut RollbackReport,
    ) {
        let mut oldest: HashMap<&PathText, &Entry> = HashMap::new();
        // The oldest entry restoring each inode: through a hard link it may have the last
        // word on a path's content and mode.
        let mut by_inode: HashMap<super::log::FileId, u64> = HashMap::new();
        for e in plan {
            for path in e.op.paths() {
                oldest.insert(path, e);
            }
            if let Some(id) = inode(&e.op) {
                by_inode.insert(id, e.seq);
            }
        }
        let first: HashMap<&Path, u64> = oldest
            .iter()
            .map(|(p, e)| (Path::new(p.as_os_str()), e.seq))
            .collect();
        let mut paths: Vec<_> = oldest.iter().map(|(p, e)| (*p, *e)).collect();
        paths.sort_by(|a, b| a.0.cmp(b.0));
        for (path, e) in paths {
            let rel = Path::new(path.as_os_str());
            if self.is_excluded(rel) {
                continue;
            }
            // An older entry on a directory above it (a rename, a removal) decided where it is.
            let moved = rel
                .ancestors()
                .skip(1)
                .any(|a| first.get(a).is_some_and(|s| *s < e.seq));
            if moved {
                continue;
            }
            let Some(mut want) = expect(e, path) else {
                continue;
            };
            let linked = inode(&e.op).and_then(|id| by_inode.get(&id));
            if linked.is_some_and(|seq| *seq < e.seq) {
                if let Expect::Present { mode, size, .. } = &mut want {
                    (*mode, *size) = (None, None);
                }
            }
            let now = match probed.get(path) {
                Some(shape) => *shape,
                None => self
                    .stat_rel(path)
                    .ok()
                    .flatten()
                    .map(|s| (s.kind, s.mode, s.size)),
            };
            if want.matches(now) {
                report.verified += 1;
                continue;
            }
            let why = match (&want, &now) {
                (Expect::Absent, _) => "still exists".to_string(),
                (Expect::Present { .. }, None) => "missing".to_string(),
                (Expect::Present { kind, mode, size }, Some((k, m, z))) => format!(
                    "{k:?} {m:o} {z} bytes, was {kind:?} {:?} {size:?}",
                    mode.map(|m| format!("{m:o}"))
                ),
            };
            report
                .problems
                .push(format!("{} not as before: {why}", path.display()));
        }
    }
}

/// What a path held before the entry that first changed it in the plan.
enum Expect {
    Absent,
    Present {
        kind: Option<Kind>,
        mode: Option<u32>,
        size: Option<u64>,
    },
}

impl Expect {
    /// `now`: type, permission bits and size, `None` when absent.
    fn matches(&self, now: Option<(Kind, u32, u64)>) -> bool {
        match (self, now) {
            (Expect::Absent, None) => true,
            (Expect::Present { kind, mode, size }, Some((k, m, z))) => {
                kind.is_none_or(|want| want == k)
                    && mode.is_none_or(|want| k == Kind::Symlink || want == m)
                    && size.is_none_or(|want| k != Kind::File || want == z)
            }
            _ => false,
        }
    }
}

fn present(st: &super::log::Stat, size: bool) -> Expect {
    Expect::Present {
        kind: Some(st.kind),
        mode: Some(st.mode),
        size: size.then_some(st.size),
    }
}

/// `None`: nothing to verify.
fn expect(e: &Entry, path: &PathText) -> Option<Expect> {
    Some(match &e.op {
        Op::Created { .. } | Op::Entered { .. } | Op::Dropped { .. } => Expect::Absent,
        Op::Deleted { st, .. } => present(st, true),
        Op::Rmdir { st, .. } => present(st, false),
        Op::Modified { st, .. } => present(st, true),
        Op::Meta { st, .. } => Expect::Present {
            kind: Some(st.kind),
            mode: Some(st.mode),
            size: None,
        },
        Op::Renamed {
            from,
            replaced,
            boundary,
            ..
        } => {
            if from == path {
                if *boundary == Some(Boundary::ToLeft) {
                    return None;
                }
                Expect::Present {
                    kind: None,
                    mode: None,
                    size: None,
                }
            } else {
                match replaced {
                    Some(r) => present(r, r.kind == Kind::File),
                    None => Expect::Absent,
                }
            }
        }
        Op::Exchanged { .. } => Expect::Present {
            kind: None,
            mode: None,
            size: None,
        },
        _ => return None,
    })
}
