//! guard as a library: start a command in the sandbox, wait for its outcome, and work with
//! past runs. The CLI (`guard exec`, `guard rollback`, ...) is a thin layer over this module.
//!
//! - [`Run::builder`] takes the profiles (resolved when the run starts: the private `{tmp}`
//!   depends on the run's id); the [`RunBuilder`] sets the workspace, `--atomic`, the audit
//!   log, the degraded-kernel knobs and the rest; [`RunBuilder::spawn`] starts the command and
//!   returns a [`Running`] handle.
//! - [`Running::wait`] returns the [`Outcome`]: status, signal, outcome kind, counts per
//!   verdict, the automatic rollback, the summary. [`Running::kill`] ends the run's tree.
//! - [`History`] lists past runs, shows what one changed, rolls one back, recovers runs whose
//!   guard died, prunes old journals.
//!
//! No process-wide side effect happens unless the embedding program asks for it: the run
//! waits for and reaps only its own child (the sandbox's init) through a pidfd, and kills only
//! that child's tree. Forwarding signals and becoming a child subreaper are options
//! ([`RunBuilder::forward_signals`], [`RunBuilder::subreaper`]) that the CLI turns on.
//!
//! Starting a run forks, so it must happen while the process is single-threaded (checked).
#![warn(missing_docs)]

mod builder;
pub mod config;
mod finish;
mod history;
mod home;
pub mod learn;
mod operate;
mod outcome;
mod patch;
mod prepare;
mod profiles;
mod prune;
mod running;
mod spawn;
mod start;

mod error;
mod explain;

pub use builder::{Run, RunBuilder, DEFAULT_KEEP_RUNS};
pub use error::RunError;
pub use explain::{Explainer, Explanation, Layer, Question, Step};
pub use history::{History, HistoryError, RunRecord};
pub use operate::{Operation, OperationOptions, OperationReport};
pub use outcome::{Notice, Outcome, RollbackOutcome};
pub use patch::{Content, FilePatch};
pub use profiles::{Profiles, DEFAULT_PROFILE};
pub use running::Running;

pub use crate::journal::{Conflict, Diff, PruneReport, Recovered};
pub use crate::launch::RunTree;
pub use crate::supervisor::Explanations;
