//! The transactional workspace. For now: the state directory and the per-run directories that
//! hold each run's audit log, summary and metadata (the undo log and pre-image store join them
//! with the transactions work).
//!
//! Layout: `$STATE/runs/<run id>/{run.json, audit.jsonl, summary.json}`. Run ids sort by start
//! time. The state directory must lie outside every write root of the sandbox.

mod rundir;

pub use rundir::{list_runs, state_dir, RunDir, RunMeta, StateError};
