//! The process tree under guard: guard is a child subreaper, so every orphan of the tree comes
//! back to it; [`reap`] collects exit statuses, [`kill_tree`] ends whatever is left.

use std::collections::HashMap;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// One reaped process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    pub pid: i32,
    /// Exit code, or 128 + signal number.
    pub status: i32,
    pub signal: Option<i32>,
}

/// Reap every child that has exited, without blocking.
pub fn reap() -> Vec<Reaped> {
    let mut out = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Exited(pid, code)) => out.push(Reaped {
                pid: pid.as_raw(),
                status: code,
                signal: None,
            }),
            Ok(WaitStatus::Signaled(pid, sig, _)) => out.push(Reaped {
                pid: pid.as_raw(),
                status: 128 + sig as i32,
                signal: Some(sig as i32),
            }),
            Ok(WaitStatus::StillAlive) | Err(_) => break,
            Ok(_) => continue,
        }
    }
    out
}

/// Parent pid of every process, from /proc/PID/stat.
fn parent_map() -> HashMap<i32, i32> {
    let mut map = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The comm field may contain spaces and parentheses: parse after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            map.insert(pid, ppid);
        }
    }
    map
}

/// The children of `pid` from /proc/PID/task/*/children (CONFIG_PROC_CHILDREN), or `None`
/// when the kernel does not offer that file.
fn children_of(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).ok()?;
        out.extend(
            text.split_whitespace()
                .filter_map(|s| s.parse::<i32>().ok()),
        );
    }
    Some(out)
}

/// Every descendant of `root`: walked down through the children files when the kernel has
/// them (a few reads), else found by scanning every process's parent.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        match children_of(p) {
            Some(kids) => {
                out.extend(&kids);
                stack.extend(kids);
            }
            // A process that exited meanwhile has no task directory: skip it, unless it is the
            // root, where the children files are missing altogether.
            None if p == root => return descendants_by_scan(root),
            None => {}
        }
    }
    out
}

fn descendants_by_scan(root: i32) -> Vec<i32> {
    let map = parent_map();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &ppid) in &map {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                out.push(k);
                stack.push(k);
            }
        }
    }
    out
}

/// SIGKILL every descendant of guard and reap them, until none is left. Returns the processes
/// reaped on the way.
pub fn kill_tree() -> Vec<Reaped> {
    let me = std::process::id() as i32;
    let mut reaped = Vec::new();
    for _ in 0..1000 {
        let pids = descendants(me);
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        reaped.extend(reap());
        if pids.is_empty() {
            // Nothing visible is left; make sure no child remains unreaped.
            match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                Err(nix::errno::Errno::ECHILD) => break,
                Ok(WaitStatus::StillAlive) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                _ => reaped.extend(reap()),
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    reaped
}

/// SIGKILL every descendant of guard now, without reaping (the main thread reaps). Used by the
/// supervisor when policy ends the run.
pub fn kill_descendants() {
    let me = std::process::id() as i32;
    for _ in 0..3 {
        let pids = descendants(me);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
