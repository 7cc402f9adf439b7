//! [`RunError`]: why a run could not be started or finished. Everything that can fail with a
//! clear message fails before the fork, so an error from [`RunBuilder::spawn`] means nothing of
//! the command ran.
//!
//! [`RunBuilder::spawn`]: super::RunBuilder::spawn

use std::io;
use std::path::PathBuf;

use crate::{audit, confine, journal, launch, policy};

/// Why a run could not be started, or its end not recorded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The workspace is not an existing directory.
    #[error("cannot use workspace {path}\nhint: pass an existing directory with -w")]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// Why it cannot be used.
        #[source]
        source: io::Error,
    },
    /// The run's private temporary directory could not be created.
    #[error("cannot create the private temporary directory {path}")]
    Tmp {
        /// The directory (`guard-<run id>` in the system's temporary directory).
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The state directory lies inside a write root of the policy.
    #[error("the state directory {state} lies inside the write root {root}: the sandbox could rewrite its own journal\nhint: set GUARD_STATE_DIR to a directory outside {root}")]
    StateInsideWriteRoot {
        /// The state directory.
        state: PathBuf,
        /// The write root that contains it.
        root: PathBuf,
    },
    /// The command could not be found or is not executable.
    #[error(transparent)]
    Command(#[from] launch::CommandError),
    /// The confinement could not be computed.
    #[error(transparent)]
    Confine(#[from] confine::ConfineError),
    /// The sandbox could not be started.
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    /// A step of guard's own setup failed.
    #[error("cannot set up guard's process: {what}")]
    Setup {
        /// The step that failed (`block signals`, `become a child subreaper`, ...).
        what: &'static str,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The kernel has no seccomp user notification.
    #[error("seccomp user notification is not available: {0}\nhint: guard needs Linux 5.0 or newer with CONFIG_SECCOMP_FILTER")]
    NoNotify(#[source] io::Error),
    /// The journal could not be created.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// The profiles could not be resolved.
    #[error(transparent)]
    Policy(Box<policy::PolicyError>),
    /// The state directory or the run directory could not be used.
    #[error(transparent)]
    State(#[from] journal::StateError),
    /// The audit log could not be written.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// Waiting for the sandbox failed.
    #[error("cannot wait for the sandbox's init (pid {pid})")]
    Wait {
        /// The pid of the sandbox's init.
        pid: i32,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
}

impl From<policy::PolicyError> for RunError {
    fn from(e: policy::PolicyError) -> Self {
        RunError::Policy(Box::new(e))
    }
}
