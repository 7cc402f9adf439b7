//! The supervisor's transactional duties: checkpoints when a new command starts (an exec by a
//! direct child of the run's root process) and before a process's first risky call, and the
//! `on-deny = "rollback"` response: end the offending command's process subtree and restore the
//! checkpoint taken when it started, while the root process (the agent) carries on.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::audit::{self, AuditHandle};
use crate::journal::{CheckpointId, Journal};

/// The parent of `pid`, from /proc/PID/stat.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = crate::sys::process::read_proc_text(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Which command (direct child of the root) a process belongs to: walk up its parents.
pub fn command_of(pid: u32, root: u32) -> Option<u32> {
    let mut cur = pid;
    for _ in 0..64 {
        if cur == root {
            return None;
        }
        let parent = parent_of(cur)?;
        if parent == root {
            return Some(cur);
        }
        if parent <= 1 {
            return None;
        }
        cur = parent;
    }
    None
}

#[derive(Debug)]
pub struct Txn {
    pub root: u32,
    /// The checkpoint taken when each running command started, by its pid.
    commands: HashMap<u32, CheckpointId>,
    /// Processes that already had a checkpoint before a risky call.
    risky: HashSet<u32>,
}

impl Txn {
    pub fn new(root: u32) -> Txn {
        Txn {
            root,
            commands: HashMap::new(),
            risky: HashSet::new(),
        }
    }

    fn checkpoint(
        journal: &mut Journal,
        audit: &AuditHandle,
        reason: String,
        pid: u32,
    ) -> Option<CheckpointId> {
        match journal.checkpoint(&reason, Some(pid)) {
            Ok(id) => {
                audit.emit(audit::Event::Checkpoint(audit::Checkpoint {
                    id: id.0.to_string(),
                    reason,
                    pid: Some(pid),
                }));
                Some(id)
            }
            Err(e) => {
                audit.emit(audit::Event::Error(audit::ErrorEvent {
                    message: format!("cannot take a checkpoint: {e}"),
                }));
                None
            }
        }
    }

    /// An exec by `pid`, a direct child of the root, was allowed: a new command starts here.
    /// Returns the checkpoint taken for it.
    pub fn command_starts(
        &mut self,
        journal: &mut Journal,
        audit: &AuditHandle,
        pid: u32,
        argv: &[std::ffi::OsString],
    ) -> Option<CheckpointId> {
        let cmd: Vec<String> = argv
            .iter()
            .take(8)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let reason = format!("command: {}", cmd.join(" "));
        let id = Self::checkpoint(journal, audit, reason, pid);
        if let Some(id) = id {
            self.commands.insert(pid, id);
        }
        id
    }

    /// Before the first risky call of `pid`.
    pub fn on_risky(&mut self, journal: &mut Journal, audit: &AuditHandle, pid: u32, rule: &str) {
        if self.risky.insert(pid) {
            Self::checkpoint(journal, audit, format!("risky: {rule}"), pid);
        }
    }

    /// A call by `pid` was denied under `on-deny = "rollback"`: kill its command's subtree and
    /// restore that command's checkpoint. Returns false when `pid` belongs to no command (the
    /// root itself): then the call just fails.
    pub fn rollback_command(
        &mut self,
        journal: &mut Journal,
        audit: &AuditHandle,
        pid: u32,
    ) -> bool {
        let Some(cmd) = command_of(pid, self.root) else {
            return false;
        };
        let Some(&cp) = self.commands.get(&cmd) else {
            return false;
        };
        kill_subtree(cmd);
        let report = journal.rollback(cp, &mut |_, _| {});
        self.commands.retain(|_, c| c.0 < cp.0);
        match report {
            Ok(r) => {
                audit.emit(audit::Event::Rollback(audit::Rollback {
                    checkpoint: cp.0.to_string(),
                    entries_undone: r.entries_undone,
                    digest_after: String::new(),
                }));
                for p in r.problems {
                    audit.emit(audit::Event::Error(audit::ErrorEvent {
                        message: format!("rollback: {p}"),
                    }));
                }
            }
            Err(e) => audit.emit(audit::Event::Error(audit::ErrorEvent {
                message: format!("rollback of command {cmd} failed: {e}"),
            })),
        }
        true
    }
}

/// SIGKILL `pid` and every descendant, and wait (bounded) until they are gone, so nothing of
/// the command can change the workspace while it is restored. Their parent reaps them.
fn kill_subtree(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mut pids = crate::launch::descendants_of(pid as i32);
        let alive = std::path::Path::new(&format!("/proc/{pid}/stat")).exists() && is_running(pid);
        if alive {
            pids.push(pid as i32);
        }
        pids.retain(|p| is_running(*p as u32));
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for p in pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A process that exists and is not a zombie.
fn is_running(pid: u32) -> bool {
    crate::sys::process::read_proc_text(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}
