//! Who made a call: the command name and executable of a pid, for the audit log.
//!
//! Reading /proc/PID/comm and /proc/PID/exe costs about as much as the rest of a decision
//! together (measured: 44 us -> 25 us median per judged call without them), so answers are
//! cached per pid for a short time. An exec by the pid drops its entry at once; the time limit
//! bounds the damage of pid reuse, which would need the whole pid space to wrap within it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(1);
const MAX_ENTRIES: usize = 4096;

/// Shared, so that a cache hit on every judged call copies two pointers, not two strings.
#[derive(Debug, Clone)]
pub struct ProcInfo {
    /// Raw bytes: a process may name itself anything (prctl PR_SET_NAME).
    pub comm: Arc<OsStr>,
    pub exe: Option<Arc<Path>>,
}

#[derive(Debug, Default)]
pub struct ProcCache {
    entries: HashMap<u32, (Instant, ProcInfo)>,
    /// What the execs let through will make of their processes, until each one's next call.
    foretold: HashMap<u32, Foretold>,
}

/// The name and executable an exec gives its process when it succeeds: the last component
/// of the path it was given, cut to a task name's 15 bytes, and the program judged.
#[derive(Debug)]
struct Foretold {
    at: Instant,
    comm: Arc<OsStr>,
    exe: Arc<Path>,
}

impl ProcCache {
    /// The caller's name and executable, `now` (a cached answer is taken while it is younger
    /// than [`TTL`]). Call before answering the notification: afterwards the process may be
    /// gone.
    pub fn get(&mut self, pid: u32, now: Instant) -> ProcInfo {
        if let Some((at, info)) = self.entries.get(&pid) {
            if now.duration_since(*at) < TTL {
                return info.clone();
            }
        }
        let exe: Option<Arc<Path>> = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(Arc::from);
        // The first call after an exec guard let through: when the executable is the program
        // judged, the exec was done, and the kernel named the process as foretold; otherwise
        // (it failed, or ran a script's interpreter) the name is read.
        let foretold = self
            .foretold
            .remove(&pid)
            .filter(|f| now.duration_since(f.at) < TTL);
        let comm = match (foretold, &exe) {
            (Some(f), Some(exe)) if *f.exe == **exe => f.comm,
            _ => comm_of(pid),
        };
        let info = ProcInfo { comm, exe };
        if self.entries.len() >= MAX_ENTRIES {
            self.entries
                .retain(|_, (at, _)| now.duration_since(*at) < TTL);
            if self.entries.len() >= MAX_ENTRIES {
                self.entries.clear();
            }
        }
        self.entries.insert(pid, (now, info.clone()));
        info
    }

    /// `pid` is about to exec: its name and executable change, so its entry goes. The record
    /// of the exec names the program being started as its executable, so only the name is
    /// needed: `comm` when the caller already read it, else the cached one, else it is read.
    /// `after`: the name the exec gives the process and the program it runs, when foretold
    /// (its next call's record then reads only the executable, to see the exec done).
    pub fn before_exec(
        &mut self,
        pid: u32,
        comm: Option<&[u8]>,
        after: Option<(&[u8], &Path)>,
        now: Instant,
    ) -> ProcInfo {
        if let Some((name, exe)) = after {
            if self.foretold.len() >= MAX_ENTRIES {
                self.foretold.retain(|_, f| now.duration_since(f.at) < TTL);
            }
            let f = Foretold {
                at: now,
                comm: Arc::from(OsStr::from_bytes(name)),
                exe: Arc::from(exe),
            };
            self.foretold.insert(pid, f);
        }
        let cached = self.entries.remove(&pid);
        let comm = match (comm, cached) {
            (Some(c), _) => Arc::from(OsStr::from_bytes(c)),
            (None, Some((at, info))) if now.duration_since(at) < TTL => return info,
            (None, _) => comm_of(pid),
        };
        ProcInfo { comm, exe: None }
    }
}

/// The name of `pid` (empty when it cannot be read).
fn comm_of(pid: u32) -> Arc<OsStr> {
    crate::sys::process::read_proc(format!("/proc/{pid}/comm"))
        .map(|mut b| {
            if b.last() == Some(&b'\n') {
                b.pop();
            }
            Arc::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(b))
        })
        .unwrap_or_else(|_| Arc::from(OsStr::new("")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_name_and_forgets_it_before_an_exec() {
        let mut c = ProcCache::default();
        let me = std::process::id();
        let info = c.get(me, Instant::now());
        assert!(!info.comm.is_empty());
        assert_eq!(info.exe.as_deref(), std::env::current_exe().ok().as_deref());
        let before = c.before_exec(me, None, None, Instant::now());
        assert_eq!(before.comm, info.comm);
        assert!(c.entries.is_empty());
        let uncached = c.before_exec(me, None, None, Instant::now());
        assert_eq!(uncached.comm, info.comm);
        assert_eq!(uncached.exe, None);
        let told = c.before_exec(me, Some(b"told"), None, Instant::now());
        assert_eq!(&*told.comm, OsStr::new("told"));
    }

    /// A foretold name is taken only while the executable is the program foretold: an exec
    /// that did not happen (this process still runs its own executable) leaves the name read.
    #[test]
    fn a_foretold_name_is_taken_only_once_the_executable_is_the_program() {
        let mut c = ProcCache::default();
        let me = std::process::id();
        let exe = std::env::current_exe().expect("own executable");
        let real = c.get(me, Instant::now()).comm;
        c.before_exec(me, None, Some((b"foretold", &exe)), Instant::now());
        assert_eq!(&*c.get(me, Instant::now()).comm, OsStr::new("foretold"));
        c.before_exec(
            me,
            None,
            Some((b"foretold", Path::new("/nowhere"))),
            Instant::now(),
        );
        assert_eq!(c.get(me, Instant::now()).comm, real);
    }
}
