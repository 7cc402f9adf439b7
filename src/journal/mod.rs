//! The transactional workspace: the state directory with one directory per run, and each run's
//! journal, an append-only undo log plus a store of pre-images that lets guard roll the
//! workspace back to any checkpoint, during the run or after it.
//!
//! Layout: `$STATE/runs/<run id>/{run.json, audit.jsonl, summary.json, journal/}`. Run ids sort
//! by start time. The state directory must lie outside every write root of the sandbox.
//! `journal/` is made at the run's first change, with the checkpoints taken before it (a run
//! that changes nothing leaves none, and costs no files beyond its run directory). It holds `journal.json` (workspace, exclude globs, size cap, fsync, store mode),
//! `log.jsonl`, `store/` (pre-images, one object per entry, named by a `seq`, in directories of
//! `bucket` objects each: `store/<seq / bucket>/<seq>`; `store/<seq>` in a journal written
//! before buckets, whose header has none), `seal.json`
//! (the state the run, or the last operation, left: `seal.rs`) and `lock` (held by the guard
//! process operating on the journal).
//!
//! # The log (`log.jsonl`)
//!
//! One JSON object per line, appended in one copy into a mapped window of the file (or one
//! `pwrite` where none can be made; see `log::LogWriter`; fsync'd when the journal was created
//! with `fsync`), always *before* the change it describes. Past the last entry the file may
//! hold zeros, reserved for the next ones, until the writer closes it or the next opening cuts
//! them; readers take them for a torn last line. Paths are relative to the workspace,
//! in the lossless [`PathText`](crate::audit::PathText) form (a string, or `{"base64": ...}`);
//! a path may lie in an excluded directory when a rename crossed into or out of one.
//! `st` is `{"kind","mode","uid","gid","size","atime":[s,ns],"mtime":[s,ns],"dev","ino"[,"rdev"]}`
//! (`mode` holds the permission bits only); an id is `{"dev","ino"}`. An entry's object is
//! `store/<obj>` (in its bucket, as above), `obj` defaulting to the entry's own `seq`.
//!
//! | `op` | fields | undo (only when the state shows it is still in effect) |
//! |---|---|---|
//! | `checkpoint` | `id`, `reason`, `pid` | - |
//! | `created` | `path`, \[`id`\], \[`obj`\] | with `id`: only if `path` holds that inode, back into `store/<obj>` (or removed: a copy or link of something kept); without: remove it (rmdir for a directory; a non-empty one is a conflict) |
//! | `deleted` | `path`, `st`, \[`sha256`\], \[`obj`\] | the object (a file, node, symlink, or a whole directory tree) back to `path` if it exists and `path` does not |
//! | `rmdir` | `path`, `st` | mkdir with the recorded metadata if `path` does not exist |
//! | `dropped` | `path`, `st` | none: a file guard created since the last checkpoint and never renamed since, deleted without a copy; every rollback that undoes this entry undoes its `created` entry too |
//! | `renamed` | `from`, `to`, `src` id, \[`replaced` st\], \[`boundary`\] | move `to` back if it is `src` (with `boundary` `to-left`: not at all); then restore what `to` held (`store/<seq>`, or an empty directory) |
//! | `exchanged` | `from`, `to`, `from_id`, `to_id`, \[`adopted`\] | swap back if they are swapped |
//! | `entered` | `path`, `src` id | something renamed in from outside the workspace: move it into the store if `path` holds `src` |
//! | `modified` | `path`, `st` | write `store/<seq>` back into the file (same inode), restore metadata |
//! | `meta` | `path`, `st` | restore mode, owner, times |
//! | `unprotected` | `path`, `size`, \[`reason`\] | none: reported (written above the pre-image size cap, or unreadable by guard) |
//! | `begin` | `kind` (`rollback`, `undo`), \[`to`\], \[`target`\] | - (an operation starts; its steps follow) |
//! | `rolled-back` | `to`, `after`, `upto`, \[`begin`\] | ends a rollback: run entries `after < seq < upto` are undone |
//! | `undone` | `target`, `begin` | ends an undo: the operation that ended at `target` is reverted |
//! | `aborted` | `begin` | the operation's steps were reverted (it failed, or was interrupted) |
//! | `copied` | `from`, `to`, `stored` | the inode entry `stored` kept as `from` came back as the copy `to` |
//! | `sealed` | `paths` | - (the run ended; fingerprints are in `seal.json`) |
//!
//! `boundary` of a `renamed` entry: `from-excluded` (from an excluded path into the journaled
//! tree), `to-adopted` (into an excluded path, journaled from then on), `to-left` (into an
//! excluded path, made entirely since the last checkpoint: left there by an undo). Operations
//! (rollbacks and undos) and their markers are described in `history.rs` and `rollback.rs`:
//! an operation's steps are ordinary entries, so it can itself be undone.
//!
//! Every line also has `seq`, 1 for the first, +1 per line. A torn last line (a crash in the
//! middle of an append) is ignored and cut off by [`Journal::open`].

mod cache;
mod copy;
mod digest;
mod fresh;
mod fsops;
mod history;
mod hooks;
mod ids;
mod inverse;
#[allow(clippy::module_inception)]
mod journal;
mod keep;
mod log;
mod preimage;
mod rename;
mod report;
mod rollback;
pub(crate) mod rundir;
mod runs;
mod seal;
mod steps;
mod undo;
mod verify;

#[cfg(test)]
mod scenarios;

pub use digest::tree_digest;
pub use hooks::Looked;
pub use journal::{CheckpointId, Journal, JournalError, Saved, StoreMode};
pub use preimage::PreImage;
pub use report::{Conflict, Diff};
pub use rollback::{Planned, RollbackOptions, RollbackReport};
pub use rundir::{default_run, list_runs, state_dir, RunDir, RunMeta, StateError};
pub use runs::{
    interrupted_runs, lock_journal, may_prune, prune, recover, settled_state, JournalLock,
    PruneReport, Recovered, STATE_ROLLING_BACK,
};
