//! `guard explain`: how a run under a profile would treat one operation (read, write or delete
//! a path, connect to an address, exec a command line), without running anything, and which
//! layer decides: the seccomp filter, the supervisor, or Landlock.
//!
//! Nothing here re-implements a layer. The filter's answer is the BPF program a run installs
//! ([`seccomp::build`] of the run's [`FilterSpec`]) executed on the call the operation makes;
//! the supervisor's is [`policy::decide`] on the request its resolve stage would build (the path
//! walked by the supervisor's own walker, [`preview::resolve_path`]) and [`policy::react`] on
//! the verdict; Landlock's is the ruleset plan of [`landlock::grants`], over the same roots
//! [`landlock::prepare`] opens. The policy is the run's ([`run_policy`]), the kernel features
//! the run's ([`Features`]), so explain and a run agree by construction; a test runs a table
//! of cases both ways.
//!
//! [`seccomp::build`]: crate::confine::seccomp::build
//! [`landlock::grants`]: crate::confine::landlock::grants
//! [`landlock::prepare`]: crate::confine::landlock::prepare
//! [`preview::resolve_path`]: crate::supervisor::preview::resolve_path
//! [`run_policy`]: super::prepare::run_policy

mod exec;
mod fs;
mod net;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::confine::bpf::{self, SeccompData, SockFilter};
use crate::confine::features::{self, Features};
use crate::confine::landlock::{self, FsGrant, Need};
use crate::confine::seccomp::{self, FilterSpec};
use crate::policy::{self, Action, Policy, Reaction, Request, Situation, Vars};
use crate::supervisor::preview::{self, ChangeView};

use super::{Profiles, RunError};

/// One operation to explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// Open a file (or list a directory) for reading.
    Read(PathBuf),
    /// Open a file for writing, creating it if needed (`> PATH`).
    Write(PathBuf),
    /// Remove a file, or an empty directory.
    Delete(PathBuf),
    /// Connect to `HOST:PORT`, `IP:PORT`, `[IPv6]:PORT`, a unix socket path or `@abstract`.
    Connect(String),
    /// Execute a command line (the program found on `PATH` as a shell would).
    Exec(Vec<OsString>),
}

impl Question {
    /// `read`, `write`, `delete`, `connect` or `exec`.
    pub fn operation(&self) -> &'static str {
        match self {
            Question::Read(_) => "read",
            Question::Write(_) => "write",
            Question::Delete(_) => "delete",
            Question::Connect(_) => "connect",
            Question::Exec(_) => "exec",
        }
    }
}

/// The layer of guard that has the say over a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// The static seccomp filter: lets a call through, traps it, or refuses it itself.
    Filter,
    /// The supervisor: judges a trapped call against the profile and performs it.
    Supervisor,
    /// Landlock: the kernel's own boundary (read, write and execute roots).
    Landlock,
    /// None of guard's: the kernel answers as it would without guard (no such file, ...).
    Kernel,
}

impl Layer {
    /// The name in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Filter => "filter",
            Layer::Supervisor => "supervisor",
            Layer::Landlock => "landlock",
            Layer::Kernel => "kernel",
        }
    }
}

/// What one layer does with the call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    /// The layer.
    pub layer: Layer,
    /// What it does, in words.
    pub says: String,
}

/// The answer for one [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// `read`, `write`, `delete`, `connect` or `exec`.
    pub operation: &'static str,
    /// What is judged: the path as the supervisor resolves it, the address, the command line.
    pub target: String,
    /// The verdict as a run records it (`kill` when the refusal ends the run).
    pub verdict: Action,
    /// The errno the call fails with, when it fails (a refusal's, or the kernel's own).
    pub errno: Option<i32>,
    /// The layer whose decision it is.
    pub layer: Layer,
    /// The rule that decides: a rule id of the audit log for the filter and the supervisor, the
    /// profile list (`fs.read`, `fs.write`) for Landlock, empty for the kernel.
    pub rule: String,
    /// Why, in words.
    pub reason: Option<String>,
    /// Each layer the call meets, in order.
    pub steps: Vec<Step>,
    /// The line a run puts on the refused process's stderr, with the rule and how to allow the
    /// call ([`policy::explain`], the one source of those words); `None` when guard does not
    /// refuse the call, when the refusal ends the process (on-deny kill or rollback), when the
    /// profile says `[report] denials = "none"`, or when the kernel refuses the call without
    /// telling guard (a Landlock read).
    pub told: Option<String>,
}

impl Explanation {
    /// Whether guard refuses the call (the kernel's own errors are not refusals, even when
    /// the supervisor gives them: rule `resolve`).
    pub fn refused(&self) -> bool {
        matches!(self.verdict, Action::Deny | Action::Kill)
            && self.rule != policy::Builtin::Resolve.as_str()
    }

    /// The verdict as the audit log words it: `error` for the kernel's own answer given by
    /// the supervisor (rule `resolve`), else the verdict.
    pub fn recorded(&self) -> &'static str {
        if self.layer == Layer::Supervisor && self.rule == policy::Builtin::Resolve.as_str() {
            "error"
        } else {
            self.verdict.as_str()
        }
    }
}

/// Explains operations under one policy, as a run on this kernel would treat them.
pub struct Explainer {
    policy: Policy,
    /// The policy with `net.connect` host names resolved, once a connect asked for it.
    resolved: std::sync::OnceLock<Arc<Policy>>,
    features: Features,
    filter: Vec<SockFilter>,
    cwd: PathBuf,
    path_var: Option<OsString>,
}

impl std::fmt::Debug for Explainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explainer")
            .field("policy", &self.policy.name)
            .finish_non_exhaustive()
    }
}

impl Explainer {
    /// The policy a run of `profiles` on `workspace` (default: the current directory) would
    /// enforce, on this kernel with the run's feature `options`, layered over the
    /// configuration files found for the workspace when `config_files` (as `guard exec` does
    /// unless `--no-config`, see [`RunBuilder::config_files`](super::RunBuilder::config_files)).
    /// Probing the listener features forks a short-lived child: call this before starting
    /// threads.
    pub fn new(
        profiles: Profiles,
        workspace: Option<PathBuf>,
        options: &features::Options,
        config_files: bool,
    ) -> Result<Explainer, RunError> {
        let cwd = std::env::current_dir().map_err(|source| RunError::Workspace {
            path: ".".into(),
            source,
        })?;
        let ws = workspace.unwrap_or_else(|| cwd.clone());
        let workspace = std::fs::canonicalize(&ws)
            .map_err(|source| RunError::Workspace { path: ws, source })?;
        let vars = Vars {
            workspace,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            // A run's private tmp is named after its id; no run has one yet.
            tmp: std::env::temp_dir().join("guard-RUN"),
            state: crate::journal::state_dir()?,
        };
        let found = super::prepare::config_files(config_files, &vars);
        let policy = super::prepare::run_policy(profiles, &vars, &found, false)?;
        let filter = seccomp::build(&FilterSpec::for_policy(&policy))?;
        Ok(Explainer {
            policy,
            resolved: std::sync::OnceLock::new(),
            features: Features::probe_with(options),
            filter,
            cwd,
            path_var: std::env::var_os("PATH"),
        })
    }

    /// The policy explained.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How a run would treat `q`.
    pub fn explain(&self, q: &Question) -> Explanation {
        let mut e = Explanation {
            operation: q.operation(),
            target: String::new(),
            verdict: Action::Allow,
            errno: None,
            layer: Layer::Kernel,
            rule: String::new(),
            reason: None,
            steps: Vec::new(),
            told: None,
        };
        match q {
            Question::Read(p) => self.read(p, &mut e),
            Question::Write(p) => self.write(p, &mut e),
            Question::Delete(p) => self.delete(p, &mut e),
            Question::Connect(a) => self.connect(a, &mut e),
            Question::Exec(argv) => self.exec(argv, &mut e),
        }
        e
    }

    /// The filter's answer to call `nr` with `args`: `None` when it traps the call to the
    /// supervisor, `Some(Ok)` when it lets it through, `Some(Err(errno))` when it refuses it.
    fn filter(&self, nr: i64, args: [u64; 6], e: &mut Explanation) -> Option<Result<(), i32>> {
        let data = SeccompData {
            nr: nr as i32,
            arch: seccomp::AUDIT_ARCH_NATIVE,
            instruction_pointer: 0,
            args,
        };
        let name = seccomp::syscall_name(nr);
        let ret = bpf::run(&self.filter, &data);
        let (says, answer) = match ret & 0xffff_0000 {
            bpf::SECCOMP_RET_USER_NOTIF => (format!("traps {name} to the supervisor"), None),
            bpf::SECCOMP_RET_ALLOW => (
                format!("lets {} through: it is not judged", call_name(nr)),
                Some(Ok(())),
            ),
            bpf::SECCOMP_RET_ERRNO => {
                let errno = (ret & bpf::SECCOMP_RET_DATA) as i32;
                (
                    format!("refuses {name} with {}", errno_name(errno)),
                    Some(Err(errno)),
                )
            }
            _ => (format!("kills the process that calls {name}"), Some(Err(0))),
        };
        e.steps.push(Step {
            layer: Layer::Filter,
            says,
        });
        if let Some(Err(errno)) = answer {
            e.verdict = if errno == 0 {
                Action::Kill
            } else {
                Action::Deny
            };
            e.errno = (errno != 0).then_some(errno);
            e.layer = Layer::Filter;
            e.rule = "seccomp-deny-list".into();
        }
        answer
    }

    /// The supervisor's judgement of `req`, carried into `e`; whether the call goes ahead.
    fn judge(&self, policy: &Policy, req: &Request<'_>, e: &mut Explanation) -> bool {
        let v = policy::decide(policy, req);
        let reaction = policy::react(
            policy,
            &v,
            &Situation {
                new_command: false,
                transactional: true,
            },
        );
        e.layer = Layer::Supervisor;
        e.verdict = reaction.recorded(v.action);
        e.rule = v.rule.to_string();
        e.reason = v.reason.clone();
        let then = match reaction {
            Reaction::Allow => "allows it".to_string(),
            Reaction::CheckpointThenAllow { .. } => {
                "takes a checkpoint of the workspace, then allows it (risky)".to_string()
            }
            Reaction::Fail => format!("refuses it with {}", errno_name(v.errno)),
            Reaction::RollbackCommand => format!(
                "refuses it with {}, ends the command and rolls back what it did (on-deny = rollback)",
                errno_name(v.errno)
            ),
            Reaction::KillRun => format!(
                "refuses it with {} and ends the run, restoring the workspace (exit 120)",
                errno_name(v.errno)
            ),
        };
        e.steps.push(Step {
            layer: Layer::Supervisor,
            says: format!("{then} (rule {})", v.rule),
        });
        if matches!(v.action, Action::Deny | Action::Kill) {
            e.errno = Some(v.errno);
            // Told only to a process that lives on past the refusal, unless the profile
            // keeps refusals off its stderr.
            if v.is_refusal()
                && reaction == Reaction::Fail
                && policy.report.denials != policy::Denials::None
            {
                let subject = crate::audit::escape_for_terminal(e.target.as_bytes());
                e.told = Some(policy::explain(&v, Some(req.op), &subject));
            }
            return false;
        }
        true
    }

    /// The supervisor's judgement of a change `req` to `change`, where the kernel fails the
    /// call anyway: a run then fails it with the kernel's errno instead of refusing it (rule
    /// `resolve`, as the supervisor's judge stage does): at the write-root boundary the errno
    /// the kernel gives before Landlock would be asked, for a rule guard alone enforces also
    /// the one it gives after its permission checks. Whether the call goes ahead.
    fn judge_change(&self, req: &Request<'_>, change: &ChangeView, e: &mut Explanation) -> bool {
        if self.judge(&self.policy, req, e) {
            return true;
        }
        // The policy's own verdict, before `on-deny` reacts to it: the run answers before
        // that, so no reaction follows.
        if policy::decide(&self.policy, req).action != Action::Deny {
            return false;
        }
        let at_boundary = e.rule == policy::Builtin::WriteRoots.as_str();
        let Some((errno, reason)) =
            preview::kernel_first(&e.rule, change.before_landlock, || change.fails_anyway)
        else {
            return false;
        };
        let when = if at_boundary {
            "first, before the write-root boundary is reached".to_string()
        } else {
            format!("anyway, so rule {} has nothing to refuse", e.rule)
        };
        e.steps.push(Step {
            layer: Layer::Kernel,
            says: format!("answers {} {when}", errno_name(errno)),
        });
        e.verdict = Action::Deny;
        e.errno = Some(errno);
        e.rule = policy::Builtin::Resolve.as_str().into();
        e.reason = Some(reason);
        e.told = None;
        false
    }

    /// Landlock's answer for `need` on `path`, carried into `e`; whether it allows.
    fn landlock(&self, path: &Path, need: Need, e: &mut Explanation) -> bool {
        let what = match need {
            Need::Read => "reading",
            Need::List => "listing",
            Need::Execute => "executing",
            Need::Write => "writing",
        };
        let list = if need == Need::Write {
            "fs.write"
        } else {
            "fs.read"
        };
        match landlock::grants(&self.policy, &self.features, path, need) {
            FsGrant::NotEnforced(why) => {
                e.steps.push(Step {
                    layer: Layer::Landlock,
                    says: format!("does not stand here: {why}"),
                });
                true
            }
            FsGrant::Granted { root, list } => {
                e.steps.push(Step {
                    layer: Layer::Landlock,
                    says: format!("allows {what}: beneath {} ({})", root.display(), list.key()),
                });
                if e.layer != Layer::Supervisor {
                    e.layer = Layer::Landlock;
                    e.rule = list.key().into();
                }
                true
            }
            FsGrant::Refused => {
                e.steps.push(Step {
                    layer: Layer::Landlock,
                    says: format!(
                        "refuses {what} with EACCES: no {} root holds {}",
                        match need {
                            Need::Write => "fs.write",
                            Need::List => "fs.read, fs.write or fs.list",
                            Need::Read | Need::Execute => "fs.read or fs.write",
                        },
                        path.display()
                    ),
                });
                e.layer = Layer::Landlock;
                e.verdict = Action::Deny;
                e.errno = Some(libc::EACCES);
                e.rule = list.into();
                e.reason = Some(format!("{} is outside the {list} roots", path.display()));
                false
            }
            FsGrant::Hidden => {
                e.steps.push(Step {
                    layer: Layer::Landlock,
                    says: format!(
                        "refuses {what} with EACCES: {} is hidden by fs.hide",
                        path.display()
                    ),
                });
                e.layer = Layer::Landlock;
                e.verdict = Action::Deny;
                e.errno = Some(libc::EACCES);
                e.rule = "fs.hide".into();
                e.reason = Some(format!(
                    "{} is hidden (fs.hide): no profile lets the command read it",
                    path.display()
                ));
                false
            }
        }
    }

    /// The kernel's own error, as it would answer without guard.
    fn kernel(&self, errno: i32, why: String, e: &mut Explanation) {
        e.steps.push(Step {
            layer: Layer::Kernel,
            says: format!("fails with {}: {why}", errno_name(errno)),
        });
        e.errno = Some(errno);
        if e.layer == Layer::Kernel {
            e.reason = Some(why);
        }
    }
}

fn errno_name(errno: i32) -> String {
    crate::audit::errno_name(errno)
}

/// The name of a call that the filter lets through, as a person says it.
fn call_name(nr: i64) -> &'static str {
    if nr == openat() {
        "a read-only open"
    } else {
        seccomp::syscall_name(nr)
    }
}

fn openat() -> i64 {
    libc::SYS_openat
}

fn unlinkat() -> i64 {
    libc::SYS_unlinkat
}

fn execve() -> i64 {
    libc::SYS_execve
}

fn connect_nr() -> i64 {
    libc::SYS_connect
}
