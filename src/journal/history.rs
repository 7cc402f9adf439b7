//! The journal's operations, read from its markers: which entries are a run's own changes and
//! which are the steps of an operation (a rollback, or the undo of one), which operations are
//! in effect, and which changes they undid. jj's operation log is the model: every operation,
//! an undo included, is itself undoable.
//!
//! An operation is `begin`, its steps, then one end marker: `rolled-back` (run entries with
//! `after < seq < upto` are undone), `undone` (the operation ending at `target` is reverted) or
//! `aborted` (its own steps were reverted: it never happened). A `begin` without an end marker
//! is an operation interrupted by a crash. Operations are read newest first, so an undo is seen
//! before the operation it reverts.

use std::collections::HashSet;

use super::log::{Entry, Op, OpKind};

/// One operation on the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    pub kind: OpKind,
    /// The seq of its `begin` (0 for a rollback written before operations had one).
    pub begin: u64,
    /// The seq of its end marker; `None` while it is open (interrupted).
    pub end: Option<u64>,
    pub aborted: bool,
    /// Committed and not reverted by a later operation in effect.
    pub in_effect: bool,
    /// A rollback's checkpoint id.
    pub to: Option<u32>,
}

impl Operation {
    /// Whether `seq` is one of its steps.
    pub fn holds(&self, seq: u64) -> bool {
        self.begin != 0 && seq > self.begin && self.end.is_none_or(|e| seq < e)
    }
}

/// What the markers of a log say.
#[derive(Debug, Default)]
pub(crate) struct History {
    pub ops: Vec<Operation>,
    /// Ranges `(after, upto)` of run entries undone by rollbacks in effect.
    undone: Vec<(u64, u64)>,
}

impl History {
    pub fn of(entries: &[Entry]) -> History {
        let mut ops: Vec<Operation> = Vec::new();
        // The end marker of each operation, for the newest-first pass.
        let mut ends: Vec<(usize, &Op)> = Vec::new();
        for e in entries {
            match &e.op {
                Op::Begin { kind, to, .. } => ops.push(Operation {
                    kind: *kind,
                    begin: e.seq,
                    end: None,
                    aborted: false,
                    in_effect: false,
                    to: *to,
                }),
                Op::RolledBack { begin, to, .. } => {
                    let i = match begin.and_then(|b| ops.iter().position(|o| o.begin == b)) {
                        Some(i) => i,
                        None => {
                            ops.push(Operation {
                                kind: OpKind::Rollback,
                                begin: 0,
                                end: None,
                                aborted: false,
                                in_effect: false,
                                to: Some(*to),
                            });
                            ops.len() - 1
                        }
                    };
                    ops[i].end = Some(e.seq);
                    ends.push((i, &e.op));
                }
                Op::Undone { begin, .. } => {
                    if let Some(i) = ops.iter().position(|o| o.begin == *begin) {
                        ops[i].end = Some(e.seq);
                        ends.push((i, &e.op));
                    }
                }
                Op::Aborted { begin } => {
                    if let Some(o) = ops.iter_mut().find(|o| o.begin == *begin) {
                        o.end = Some(e.seq);
                        o.aborted = true;
                    }
                }
                _ => {}
            }
        }
        let mut reverted: HashSet<u64> = HashSet::new();
        let mut undone = Vec::new();
        for (i, op) in ends.into_iter().rev() {
            let end = ops[i].end.unwrap_or_default();
            if reverted.contains(&end) {
                continue;
            }
            ops[i].in_effect = true;
            match op {
                Op::RolledBack { after, upto, .. } => undone.push((*after, *upto)),
                Op::Undone { target, .. } => {
                    reverted.insert(*target);
                }
                _ => {}
            }
        }
        History { ops, undone }
    }

    /// Whether entry `seq` is a step of some operation (not a change the run made).
    pub fn is_step(&self, seq: u64) -> bool {
        self.ops.iter().any(|o| o.holds(seq))
    }

    /// Whether the run entry `seq` was undone by a rollback in effect.
    pub fn is_undone(&self, seq: u64) -> bool {
        self.undone.iter().any(|(a, u)| seq > *a && seq < *u)
    }

    /// The operation that began and never ended (a crash in the middle of it).
    pub fn open(&self) -> Option<&Operation> {
        self.ops
            .iter()
            .rev()
            .find(|o| o.begin != 0 && o.end.is_none())
    }

    /// The newest operation in effect.
    pub fn newest_in_effect(&self) -> Option<&Operation> {
        self.ops
            .iter()
            .filter(|o| o.in_effect)
            .max_by_key(|o| o.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::PathText;

    fn e(seq: u64, op: Op) -> Entry {
        Entry { seq, op }
    }

    fn change(seq: u64) -> Entry {
        e(
            seq,
            Op::Created {
                path: PathText::from("x"),
                id: None,
                obj: None,
            },
        )
    }

    #[test]
    fn undo_of_an_undo_puts_the_rollback_back_in_effect() {
        let begin = |seq, kind| {
            e(
                seq,
                Op::Begin {
                    kind,
                    to: None,
                    target: None,
                },
            )
        };
        let mut log = vec![
            e(
                1,
                Op::Checkpoint {
                    id: 1,
                    reason: "start".into(),
                    pid: None,
                },
            ),
            change(2),
            change(3),
            begin(4, OpKind::Rollback),
            change(5),
            e(
                6,
                Op::RolledBack {
                    to: 1,
                    after: 1,
                    upto: 4,
                    begin: Some(4),
                },
            ),
        ];
        let h = History::of(&log);
        assert!(h.is_undone(2) && h.is_undone(3) && !h.is_undone(5));
        assert!(h.is_step(5) && !h.is_step(2));
        assert_eq!(h.newest_in_effect().map(|o| o.begin), Some(4));
        log.extend([
            begin(7, OpKind::Undo),
            change(8),
            e(
                8 + 1,
                Op::Undone {
                    target: 6,
                    begin: 7,
                },
            ),
        ]);
        let h = History::of(&log);
        assert!(!h.is_undone(2), "the rollback is reverted");
        assert_eq!(h.newest_in_effect().map(|o| o.begin), Some(7));
        log.extend([
            begin(10, OpKind::Undo),
            change(11),
            e(
                12,
                Op::Undone {
                    target: 9,
                    begin: 10,
                },
            ),
        ]);
        let h = History::of(&log);
        assert!(h.is_undone(2), "undoing the undo brings the rollback back");
        log.extend([begin(13, OpKind::Rollback), change(14)]);
        let h = History::of(&log);
        assert_eq!(h.open().map(|o| o.begin), Some(13));
        assert!(h.is_step(14));
        log.push(e(15, Op::Aborted { begin: 13 }));
        let h = History::of(&log);
        assert!(h.open().is_none() && h.is_step(14));
    }
}
