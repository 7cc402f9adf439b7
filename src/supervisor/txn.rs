//! The supervisor's transactional duties: checkpoints when a new command starts (an exec by a
//! direct child of the run's root process) and before a process's first risky call, and the
//! `on-deny = "rollback"` response: end the offending command's process subtree and restore the
//! checkpoint taken when it started, while the root process (the agent) carries on.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::audit::{self, AuditHandle};
use crate::journal::{CheckpointId, Journal};
use crate::sys::creds::{pidfd_open_thread, task_exists};
use crate::sys::process::pidfd_parent;

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

/// How many pidfds [`Parents`] holds at most.
const MAX_HELD: usize = 256;

/// The parents of the processes that delete in the workspace, asked for at each counted
/// delete ([`command_of`]): through a pidfd of each process, held while it lives, one ioctl
/// (`PIDFD_GET_INFO`, Linux 6.13; about 1 us here) tells its parent now, where
/// /proc/PID/stat costs an open, a read and a close (about 9 us), twice for `rm` under
/// `xargs` under a command. A held pidfd names one process: once it is gone the ioctl fails
/// and its pid, which another process may have taken since, is opened anew. Without the
/// ioctl, or without a descriptor to spare, /proc/PID/stat tells.
#[derive(Debug, Default)]
pub struct Parents {
    held: HashMap<u32, OwnedFd>,
    /// The kernel has no PIDFD_GET_INFO (or no thread pidfds): /proc only.
    proc_only: bool,
    /// Processes asked about, not held, before the held ones are looked over for gone ones
    /// again: when [`MAX_HELD`] of them are all alive, a look over every one of them at each
    /// new process (a `pidfd_send_signal` each) would cost more than it saves.
    until_sweep: usize,
}

impl Parents {
    /// Asks /proc only, as on a kernel without PIDFD_GET_INFO.
    #[cfg(test)]
    fn proc_only() -> Parents {
        Parents {
            proc_only: true,
            ..Parents::default()
        }
    }

    /// The parent of `pid` (a thread id) now; `None` when it is gone.
    pub fn parent(&mut self, pid: u32) -> Option<u32> {
        if self.proc_only {
            return parent_of(pid);
        }
        if let Some(fd) = self.held.get(&pid) {
            match pidfd_parent(fd.as_fd()) {
                Ok(parent) => return Some(parent),
                Err(_) => drop(self.held.remove(&pid)),
            }
        }
        let asked = pidfd_open_thread(pid)
            .and_then(|fd| pidfd_parent(fd.as_fd()).map(|parent| (fd, parent)));
        match asked {
            Ok((fd, parent)) => {
                if self.held.len() >= MAX_HELD {
                    if self.until_sweep == 0 {
                        self.held.retain(|_, fd| task_exists(fd.as_fd()));
                        self.until_sweep = MAX_HELD / 4;
                    } else {
                        self.until_sweep -= 1;
                    }
                }
                if self.held.len() < MAX_HELD {
                    self.held.insert(pid, fd);
                }
                Some(parent)
            }
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOTTY | libc::EINVAL | libc::ENOSYS)
                ) {
                    self.proc_only = true;
                }
                parent_of(pid)
            }
        }
    }
}

/// Which command (direct child of the root) a process belongs to: walk up its parents.
pub fn command_of(pid: u32, root: u32, parents: &mut Parents) -> Option<u32> {
    let mut cur = pid;
    for _ in 0..64 {
        if cur == root {
            return None;
        }
        let parent = parents.parent(cur)?;
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

#[derive(Debug, Default)]
pub struct Txn {
    /// The checkpoint taken when each running command started, by its pid.
    commands: HashMap<u32, CheckpointId>,
    /// Processes that already had a checkpoint before a risky call.
    risky: HashSet<u32>,
}

impl Txn {
    pub fn new() -> Txn {
        Txn::default()
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
    /// root process `root` itself): then the call just fails.
    pub fn rollback_command(
        &mut self,
        journal: &mut Journal,
        audit: &AuditHandle,
        pid: u32,
        root: u32,
    ) -> bool {
        let Some(cmd) = command_of(pid, root, &mut Parents::default()) else {
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

    /// Through a held pidfd or through /proc, the same parent and the same command; none
    /// once the process is gone, and a pid taken over is asked about anew.
    #[test]
    fn parents_through_a_pidfd_are_those_proc_tells() {
        // sh (a command of this process) runs sleep as its child, and waits for it.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("sleep's pid");
        let sleep: u32 = line.trim().parse().expect("pid");
        let me = std::process::id();
        for mut parents in [Parents::default(), Parents::proc_only()] {
            for _ in 0..2 {
                assert_eq!(parents.parent(sleep), Some(sh.id()));
                assert_eq!(parents.parent(sh.id()), Some(me));
                assert_eq!(command_of(sleep, me, &mut parents), Some(sh.id()));
                assert_eq!(command_of(me, me, &mut parents), None);
            }
        }
        // A thread's parent is its process's (what /proc/TID/stat says of a thread).
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tid_tx
                .send(nix::unistd::gettid().as_raw() as u32)
                .expect("send");
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().expect("tid");
        let parent = nix::unistd::getppid().as_raw() as u32;
        assert_eq!(Parents::default().parent(tid), Some(parent));
        assert_eq!(Parents::proc_only().parent(tid), Some(parent));
        drop(done_tx);
        thread.join().expect("join");
        let mut held = Parents::default();
        held.parent(sleep).expect("alive");
        assert!(held.held.contains_key(&sleep) || held.proc_only);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(sleep as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill");
        sh.wait().expect("sh reaps sleep and ends");
        assert_eq!(held.parent(sleep), None, "gone");
        assert!(!held.held.contains_key(&sleep));
    }

    /// With every held process alive, a new one is asked about without a look over all the
    /// held ones each time: one look, then a quarter of the cap of new processes before the
    /// next.
    #[test]
    fn a_full_set_of_live_processes_is_looked_over_once_in_a_while() {
        let me = nix::unistd::gettid().as_raw() as u32;
        let mut parents = Parents::default();
        for fake in 0..MAX_HELD as u32 {
            let Ok(fd) = pidfd_open_thread(me) else {
                return; // no thread pidfds here: /proc only, nothing held
            };
            parents.held.insert(u32::MAX - fake, fd);
        }
        let parent = nix::unistd::getppid().as_raw() as u32;
        let pid = std::process::id();
        assert_eq!(parents.parent(pid), Some(parent));
        assert_eq!(
            parents.held.len(),
            MAX_HELD,
            "all alive: none let go, none added"
        );
        assert_eq!(parents.until_sweep, MAX_HELD / 4);
        assert_eq!(parents.parent(pid), Some(parent));
        assert_eq!(parents.until_sweep, MAX_HELD / 4 - 1, "no second look yet");
        assert!(!parents.held.contains_key(&pid));
    }

    #[test]
    fn our_own_stat_names_our_parent_and_our_thread_name() {
        let (parent, comm) = stat_of(std::process::id()).expect("own stat");
        assert_eq!(parent, nix::unistd::getppid().as_raw() as u32);
        let own = std::fs::read(format!("/proc/{}/comm", std::process::id())).expect("comm");
        assert_eq!(comm, own.strip_suffix(b"\n").unwrap_or(&own));
    }
}
