//! Confinement, computed from a [`Policy`](crate::policy::Policy) before the fork and applied in
//! the child: the Landlock ruleset ([`landlock`]) and the seccomp program ([`seccomp`], assembled
//! with the small classic-BPF toolkit in [`bpf`]).
//!
//! Everything here is safe code. This module builds; it never confines the calling process:
//! `restrict_self()` and installing the filter happen in `launch/` (the latter through `sys/`).

pub mod bpf;
pub mod features;
mod hide;
pub mod landlock;
pub mod seccomp;
pub mod syscalls;

use std::path::PathBuf;

pub use self::bpf::{SeccompData, SockFilter};
pub use self::features::{Feature, Features, Status};
pub use self::landlock::{
    fs_roots, grants, prepare, FsGrant, LandlockReport, Need, Prepared, RootList,
};
pub use self::seccomp::{build, denied_syscalls, syscall_name, trapped_syscalls, FilterSpec};

/// Errors while computing the confinement of a run.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// A jump of the seccomp program could not be encoded.
    #[error("seccomp program: jump from instruction {from} to label {label} cannot be resolved")]
    UnresolvedLabel { from: usize, label: usize },
    /// The seccomp program is longer than the kernel accepts.
    #[error("seccomp program has {len} instructions, the kernel accepts at most {max}")]
    ProgramTooLong { len: usize, max: usize },
    /// A Landlock root could not be opened for a reason other than its absence.
    #[error("cannot open landlock root {}", path.display())]
    OpenRoot {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Adding the rule of a root to the ruleset failed.
    #[error("cannot add landlock rule for {}", path.display())]
    AddRule {
        path: PathBuf,
        #[source]
        source: ::landlock::RulesetError,
    },
    /// Adding the rule of an entry of an expanded root (`fs.hide`) failed.
    #[error("cannot add landlock rule for {}", path.display())]
    AddEntryRule {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Creating the ruleset or adding a port rule failed.
    #[error("cannot build the landlock ruleset\nhint: run `guard doctor` to see what this kernel supports")]
    Ruleset(#[source] ::landlock::RulesetError),
}

impl ConfineError {
    /// The system call's error behind this one, for a channel that carries an errno (the
    /// launch's); another error as `Other`, which such a channel sends as EIO.
    pub fn into_io(self) -> std::io::Error {
        match self {
            ConfineError::OpenRoot { source, .. } | ConfineError::AddEntryRule { source, .. } => {
                source
            }
            other => std::io::Error::other(other.to_string()),
        }
    }
}
