//! Injecting a descriptor (SECCOMP_IOCTL_NOTIF_ADDFD) makes the worker wait for the trapped
//! task to run and install it: a wake-up of the task on its CPU, then one of the worker on
//! its own. Across the vCPUs of a virtual machine that costs tens of microseconds, on one CPU a
//! few (DESIGN.md). With `GUARD_ADDFD_AFFINITY=1` the worker first moves to the CPU the task
//! last ran on (`/proc/PID/stat`, field 39) and stays there until a task elsewhere needs it.
//! Only where the worker runs changes: what is injected, and when, does not.

use std::sync::OnceLock;

use nix::sched::{sched_getcpu, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Whether the worker follows the task before an injection (`GUARD_ADDFD_AFFINITY=1`).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GUARD_ADDFD_AFFINITY").is_some_and(|v| v == "1"))
}

/// The CPU task `pid` last ran on.
fn last_cpu(pid: u32) -> Option<usize> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold anything, parentheses included: count from the
    // last `)`. Field 3 (the state) follows it; the CPU is field 39.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_ascii_whitespace().nth(39 - 3)?.parse().ok()
}

/// Before injecting into `pid`: move this worker to the CPU `pid` last ran on, when enabled
/// and not there already. Best effort: a CPU the worker may not use is left alone.
pub(super) fn follow(pid: u32) {
    if !enabled() {
        return;
    }
    let Some(cpu) = last_cpu(pid) else {
        return;
    };
    if sched_getcpu().is_ok_and(|now| now == cpu) {
        return;
    }
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(Pid::from_raw(0), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_this_thread_runs_on() {
        let cpu = last_cpu(std::process::id()).expect("our own /proc stat");
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert!(cpu < cpus.max(libc::CPU_SETSIZE as usize));
    }
}
