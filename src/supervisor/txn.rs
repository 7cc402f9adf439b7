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
    stat_of(pid).map(|(parent, _)| parent)
}

/// The parent and the name (`comm`, raw bytes) of `pid`, from one read of /proc/PID/stat.
pub fn stat_of(pid: u32) -> Option<(u32, Vec<u8>)> {
    let stat = crate::sys::process::read_proc(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// `PID (COMM) STATE PPID ...`: the name may hold anything, `)` and spaces included, so it
/// runs from the first `(` to the last `)`.
fn parse_stat(stat: &[u8]) -> Option<(u32, Vec<u8>)> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let comm = stat.get(open + 1..close)?.to_vec();
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((parent, comm))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_runs_to_the_last_parenthesis_and_may_be_any_bytes() {
        let stat = b"4242 (a) S 1 (b\xff) S 77 4242 4242 0 -1 4194560 ...\n";
        assert_eq!(parse_stat(stat), Some((77, b"a) S 1 (b\xff".to_vec())));
        assert_eq!(parse_stat(b"4242 (sh S 77"), None);
    }

    #[test]
    fn our_own_stat_names_our_parent_and_our_thread_name() {
        let (parent, comm) = stat_of(std::process::id()).expect("own stat");
        assert_eq!(parent, nix::unistd::getppid().as_raw() as u32);
        let own = std::fs::read(format!("/proc/{}/comm", std::process::id())).expect("comm");
        assert_eq!(comm, own.strip_suffix(b"\n").unwrap_or(&own));
    }
}
