//! What a run prepares before anything is forked: its directories (workspace, state, run
//! directory, private tmp; undone by [`Dirs`] if the run does not start) and its policy,
//! resolved with the run's own variables.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builder::RunBuilder;
use super::RunError;
use crate::journal::{self, RunDir};
use crate::policy::{self, Policy, Vars};

/// The directories of a run; dropped before the run is handed over, they undo themselves.
pub(super) struct Dirs {
    pub workspace: PathBuf,
    pub state: PathBuf,
    pub run_dir: RunDir,
    pub tmp: PathBuf,
    pub armed: bool,
    /// The command and profile selection, for the record of a run that failed to start.
    pub command: Vec<String>,
    pub profile: String,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Nothing of the command ran: this run is not one to recover, nor a default for
        // `guard log`/`diff`/`rollback`.
        self.run_dir
            .record_failed_start(&self.workspace, &self.command, &self.profile);
        self.run_dir.mark_inactive(&self.state);
        remove_tmp(&self.tmp, &[]);
    }
}

/// Remove the run's private temporary directory, in which guard made `made`.
pub(super) fn remove_tmp(tmp: &Path, made: &[PathBuf]) {
    if tmp.as_os_str().is_empty() {
        return;
    }
    // What guard made there itself (a redacted copy of ~/.npmrc), by name: an unlink each
    // before the rmdir, where the tree walk would open, stat and list the directory.
    for file in made {
        let _ = std::fs::remove_file(file);
    }
    // Most commands leave it empty: one rmdir, where the tree walk opens, stats and lists it.
    match std::fs::remove_dir(tmp) {
        Ok(()) => return,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(_) => {}
    }
    if let Err(e) = std::fs::remove_dir_all(tmp) {
        tracing::warn!(
            "cannot remove the private temporary directory {}: {e}",
            tmp.display()
        );
    }
}

/// 1. Workspace, state and run directories, private tmp.
pub(super) fn dirs(b: &RunBuilder) -> Result<Dirs, RunError> {
    let ws_arg = match &b.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|source| RunError::Workspace {
            path: ".".into(),
            source,
        })?,
    };
    let workspace = std::fs::canonicalize(&ws_arg)
        .and_then(|p| {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(io::Error::from_raw_os_error(libc::ENOTDIR))
            }
        })
        .map_err(|source| RunError::Workspace {
            path: ws_arg.clone(),
            source,
        })?;
    let state = match &b.state_dir {
        Some(s) => s.clone(),
        None => journal::state_dir()?,
    };
    std::fs::create_dir_all(&state).map_err(|source| journal::StateError::Create {
        path: state.clone(),
        source,
    })?;
    let state = std::fs::canonicalize(&state).unwrap_or(state);
    let run_dir = RunDir::create(&state)?;
    let tmp = std::env::temp_dir().join(format!("guard-{}", run_dir.id));
    let mut dirs = Dirs {
        workspace,
        state,
        run_dir,
        tmp,
        armed: true,
        command: Vec::new(),
        profile: String::new(),
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        if let Err(source) = std::fs::DirBuilder::new().mode(0o700).create(&dirs.tmp) {
            // Not created: not ours to remove.
            dirs.tmp = PathBuf::new();
            return Err(RunError::Tmp {
                path: std::env::temp_dir().join(format!("guard-{}", dirs.run_dir.id)),
                source,
            });
        }
    }
    Ok(dirs)
}

/// 2. The policy, resolved with this run's variables (and, when the builder asks for it, over
///    the configuration files found for the workspace); with the workspace file that was
///    found but not used because it is not trusted.
pub(super) fn policy(
    b: &mut RunBuilder,
    d: &Dirs,
) -> Result<(Arc<Policy>, Option<PathBuf>), RunError> {
    let vars = Vars {
        workspace: d.workspace.clone(),
        home: std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
        tmp: d.tmp.clone(),
        state: d.state.clone(),
    };
    let found = config_files(b.config_files, &vars);
    let mut policy = run_policy(std::mem::take(&mut b.profiles), &vars, &found, b.atomic)?;
    if b.learning {
        policy.mode = policy::Mode::Observe;
    }
    for root in &policy.fs.write {
        if d.state.starts_with(root) {
            return Err(RunError::StateInsideWriteRoot {
                state: d.state.clone(),
                root: root.clone(),
            });
        }
    }
    Ok((Arc::new(policy), found.untrusted().map(Path::to_path_buf)))
}

/// The configuration files a run on `vars.workspace` finds without a flag, when `on`.
pub(super) fn config_files(on: bool, vars: &Vars) -> super::config::ConfigFiles {
    if on {
        super::config::discover(
            &vars.workspace,
            &vars.state,
            super::config::user_dir(|k| std::env::var_os(k)),
        )
    } else {
        super::config::ConfigFiles::default()
    }
}

/// The policy a run enforces: `profiles` resolved with the run's variables over the
/// configuration files `found`, the nameservers of /etc/resolv.conf added when `net.dns` says
/// so, `--atomic` applied. `guard explain` and `guard learn` judge with the same.
pub(super) fn run_policy(
    profiles: super::Profiles,
    vars: &Vars,
    found: &super::config::ConfigFiles,
    atomic: bool,
) -> Result<Policy, policy::PolicyError> {
    let mut policy = profiles.resolve(vars, &found.layers())?;
    policy.guard_files.extend(found.user_dir.clone());
    if policy.net.dns {
        policy.net.connect.extend(crate::supervisor::nameservers());
    }
    if atomic {
        // Any denial ends the run, any failure too, and both restore the run's start. A mass
        // deletion the profile would only flag is a denial here: the run is all or nothing.
        policy.transaction.on_deny = policy::OnDeny::Kill;
        policy.transaction.on_failure = policy::OnFailure::Rollback;
        if policy.transaction.mass_delete.action == policy::Action::Risky {
            policy.transaction.mass_delete.action = policy::Action::Deny;
        }
    }
    Ok(policy)
}

pub(super) fn cstring(bytes: Vec<u8>) -> CString {
    // Interior NULs cannot come from argv or the environment; replace defensively.
    CString::new(bytes).unwrap_or_else(|e| {
        let mut b = e.into_vec();
        b.retain(|&c| c != 0);
        CString::new(b).unwrap_or_default()
    })
}
