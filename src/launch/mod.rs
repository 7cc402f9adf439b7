//! Starting the confined command and looking after its process tree.
//!
//! The launch sequence is written out step by step in `docs/launch.md`; [`spawn`] and the child
//! side in `child.rs` follow it in the same order. The parent is single-threaded when it forks,
//! so the child may allocate, but it does as little as it can before `execve`.
#![warn(missing_docs)]

mod child;
mod command;
mod env;
mod init;
mod message;
mod signals;
mod tree;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt as _;

use nix::sys::memfd::MemFdCreateFlag;
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

pub use command::{resolve_program, CommandError};
pub use env::sanitize_env;
pub use message::Stage;
pub use signals::{SignalEvent, Signals};
pub use tree::{descendants as descendants_of, kill_tree, Reaped, RunTree};

use crate::sys;

/// How long guard and the sandbox's init wait for each other's messages of the launch
/// without sleeping (`sys::process::spin_until_readable`): each side answers within some
/// hundred microseconds, and a side that slept meanwhile was woken 100-300 µs later on a VM
/// whose idle vCPUs halt.
const HANDSHAKE_SPIN: std::time::Duration = std::time::Duration::from_millis(1);

/// Exit status when guard itself fails (usage, setup): nothing of the command ran.
pub const EXIT_GUARD_ERROR: i32 = 125;
/// Exit status when the command could not be executed (as the shells use it).
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit status when the command was not found (as the shells use it).
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit status when the run was stopped by policy (a `kill` rule, or `on-deny = "kill"`).
pub const EXIT_POLICY_STOP: i32 = 120;

/// What the child needs to confine itself, prepared in the parent before the fork. The
/// command line comes later ([`Spawned::go_ahead`]).
pub struct LaunchSpec {
    /// The seccomp program (already built and checked).
    pub filter: Vec<libc::sock_filter>,
    /// The Landlock ruleset to enforce, `None` in observe mode or without Landlock.
    pub landlock: Option<landlock::RulesetCreated>,
    /// The share of the ruleset's rules the child grants (with `protect_init` only: the init
    /// does not enforce the ruleset itself, the command does, after guard's go-ahead).
    pub share: Option<crate::confine::landlock::Share>,
    /// Drop every capability in the child (always, unless the profile keeps them).
    pub drop_caps: bool,
    /// The working directory of the command (`None`: guard's own).
    pub cwd: Option<CString>,
    /// Put the command in a nested Landlock domain that scopes signals, so it cannot signal
    /// the sandbox's init (needs Landlock ABI 6, with the run's ruleset enforced).
    pub protect_init: bool,
}

/// The command the init forks and execs, sent to it once it has confined itself.
pub struct CommandLine {
    /// The program, as resolved on `PATH`.
    pub program: CString,
    /// Its arguments, `argv[0]` included.
    pub argv: Vec<CString>,
    /// Its environment, `NAME=value`.
    pub envp: Vec<CString>,
}

/// A started child.
#[derive(Debug)]
pub struct Spawned {
    /// The sandbox's init (guard's child) and everything under it.
    pub tree: RunTree,
    /// The seccomp listener, from [`Spawned::receive_listener`] until the supervisor takes
    /// it.
    pub listener: Option<OwnedFd>,
    status: OwnedFd,
    /// Where the command line goes for the child to read ([`Spawned::go_ahead`]).
    command: std::fs::File,
    /// The command's working directory, to name it should the child fail to enter it.
    cwd: Option<std::path::PathBuf>,
    /// guard's descriptor of the Landlock ruleset, kept until the command has exec'd: the
    /// last close frees the ruleset's rules (some 200 of them for a root guard, tens of
    /// microseconds), and it should not be the close in the child or the command, on the
    /// way to the command's start. [`Spawned::wait_exec`] closes it.
    ruleset: Option<OwnedFd>,
}

/// Why the sandbox could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The socket pair to the child could not be made or read.
    #[error("cannot set up the launch channel")]
    Channel(#[source] io::Error),
    /// fork(2) failed.
    #[error("cannot fork")]
    Fork(#[source] io::Error),
    /// The process has more than one thread (`seen`: what the check found, for the report).
    #[error("a run starts only from a single-threaded process: the sandbox's setup runs in a fork of it ({seen})\nhint: start the run before the program starts threads, or run the guard binary")]
    Threads {
        /// The threads listed in /proc/self/task, or that none but this one is.
        seen: String,
    },
    /// A setup step failed in the child or the init.
    #[error("the sandbox could not be set up in the child: {stage} failed")]
    Child {
        /// The step.
        stage: Stage,
        /// Its errno.
        #[source]
        source: io::Error,
    },
    /// The child could not enter the command's working directory.
    #[error("cannot start the command in {path}\nhint: the working directory must exist and be searchable by the user guard runs the command as")]
    WorkingDirectory {
        /// The directory.
        path: std::path::PathBuf,
        /// Its errno.
        #[source]
        source: io::Error,
    },
    /// The child ended without saying why.
    #[error("the child exited before handing over its seccomp listener")]
    ChildVanished,
    /// pidfd_open(2) of the child failed.
    #[error("cannot open a pidfd for the child {pid}")]
    Pidfd {
        /// The child.
        pid: libc::pid_t,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Why `execve` of the command failed in the child.
#[derive(Debug)]
pub struct ExecFailed(pub io::Error);

/// Fork the child, which confines itself; [`Spawned::receive_listener`] then waits for its
/// listener fd.
///
/// The process must be single-threaded (checked: [`LaunchError::Threads`]): the child does
/// more than async-signal-safe work before it execs. Signals blocked by the caller (see
/// [`Signals`]) are unblocked in the child.
pub fn spawn(mut spec: LaunchSpec) -> Result<Spawned, LaunchError> {
    if !sys::process::single_threaded().map_err(LaunchError::Fork)? {
        return Err(LaunchError::Threads {
            seen: sys::process::threads_seen(),
        });
    }
    let (parent_sock, child_sock) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| LaunchError::Channel(e.into()))?;
    let parent_pid = std::process::id();
    // Decided here, for the child too (see the function).
    sys::process::spinning_pays();
    // The child confines itself (the share of the Landlock rules, the filter) while guard
    // prepares the command line, the journal and the audit writer: on a CPU of its own, or
    // one of them waits for the other.
    let elsewhere = sys::process::elsewhere();
    // The command line is written here later: the child reads it once it has confined
    // itself, and the caller computes it meanwhile.
    let command = nix::sys::memfd::memfd_create(c"guard-command", MemFdCreateFlag::MFD_CLOEXEC)
        .map_err(|e| LaunchError::Channel(e.into()))?;
    // Where the init tells how the command ended before it exits (`tree::tell_end`).
    let (end_r, end_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| LaunchError::Channel(e.into()))?;
    match sys::process::fork_single_threaded().map_err(LaunchError::Fork)? {
        sys::process::Forked::Child => {
            drop(parent_sock);
            drop(end_r);
            child::run(spec, command, child_sock, end_w, parent_pid, elsewhere)
        }
        sys::process::Forked::Parent { child } => {
            // A new process is queued on its parent's CPU and, with the other one idle (and
            // halted, on a VM), waits there until guard sleeps: moved now, it starts at once.
            // The child moves itself too, should it run first.
            if let Some((_, others)) = &elsewhere {
                let _ = sys::process::set_affinity_of(child, others);
            }
            drop(child_sock);
            drop(end_w);
            let cwd = spec
                .cwd
                .take()
                .map(|c| std::path::PathBuf::from(std::ffi::OsString::from_vec(c.into_bytes())));
            let ruleset: Option<OwnedFd> = spec.landlock.take().and_then(Into::into);
            drop(spec);
            let reap = || {
                // The child is exiting on its own; reap it so no zombie is left.
                let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
            };
            let pidfd = match sys::process::pidfd_open(child) {
                Ok(p) => p,
                Err(source) => {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(child),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    reap();
                    return Err(LaunchError::Pidfd { pid: child, source });
                }
            };
            Ok(Spawned {
                tree: RunTree::new(child, pidfd, end_r),
                listener: None,
                status: parent_sock,
                command: command.into(),
                cwd,
                ruleset,
            })
        }
    }
}

impl Spawned {
    /// Waits for the child to confine itself and hand over its seccomp listener, and keeps it
    /// in [`Spawned::listener`]; returns what the child's share of the Landlock rules
    /// ([`LaunchSpec::share`]) granted. Until then the child is on its own (Landlock, the
    /// filter), so whatever the caller does between [`spawn`] and this call runs alongside.
    /// The child then waits for [`Spawned::go_ahead`]. When the child failed or vanished, it
    /// is killed and reaped, and the error says at which step.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Child`] naming the step of the child's that failed,
    /// [`LaunchError::ChildVanished`], or [`LaunchError::Channel`].
    pub fn receive_listener(
        &mut self,
    ) -> Result<crate::confine::landlock::ShareGranted, LaunchError> {
        let sent = child::receive_listener(self.status.as_fd(), self.tree.pidfd());
        match sent {
            Ok((fd, granted)) => {
                self.listener = Some(fd);
                Ok(granted)
            }
            Err(e) => {
                self.tree.kill();
                let _ = self.tree.reap();
                Err(match (e, &self.cwd) {
                    (
                        LaunchError::Child {
                            stage: Stage::WorkingDirectory,
                            source,
                        },
                        Some(path),
                    ) => LaunchError::WorkingDirectory {
                        path: path.clone(),
                        source,
                    },
                    (e, _) => e,
                })
            }
        }
    }

    /// Gives the child, once its listener is here ([`Spawned::receive_listener`]), `command`
    /// to fork and exec. Once it returns, the init may fork the command, which enforces the
    /// ruleset and execs, a judged call: every rule of the caller's must be in by then, and a
    /// supervisor should be answering the listener. On failure the child is killed and
    /// reaped.
    ///
    /// # Errors
    ///
    /// [`LaunchError::Channel`].
    pub fn go_ahead(&mut self, command: &CommandLine) -> Result<(), LaunchError> {
        let sent = child::go_ahead(self.status.as_fd(), &self.command, command);
        if sent.is_err() {
            self.tree.kill();
            let _ = self.tree.reap();
        }
        sent
    }

    /// The pid of the command itself (the sandbox's init forked it): the run's root process.
    pub fn command_pid(&self) -> Result<libc::pid_t, LaunchError> {
        child::receive_command_pid(self.status.as_fd())
    }

    /// Wait until the child's `execve` either succeeded (the close-on-exec channel reads EOF)
    /// or failed. The supervisor must already be answering notifications, since the child's
    /// own `execve` is a judged call.
    pub fn wait_exec(&mut self) -> Result<(), ExecFailed> {
        let exec = child::wait_exec(self.status.as_fd()).map_err(ExecFailed);
        // The command runs (or will not): the ruleset is its own now, or no one's.
        drop(self.ruleset.take());
        exec
    }
}
