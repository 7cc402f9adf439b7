//! Keeping idle CPUs awake while descriptors are being injected.
//!
//! SECCOMP_IOCTL_NOTIF_ADDFD has the trapped task install the descriptor: the worker's ioctl
//! wakes the task and sleeps until the task has run. The answer of any other call wakes the
//! task on the worker's own CPU (SYNC_WAKE_UP), but this wake-up is an ordinary one: the
//! scheduler sends the task to an idle CPU, and the worker's CPU goes idle in turn while it
//! waits. Where an idle CPU halts at once (a virtual machine whose guest does not poll before
//! halting, as on the machine of `docs/benchmarks.md`: `haltpoll.guest_halt_poll_ns=0`), each
//! of those two wake-ups waits for a halted vCPU to be scheduled again by the host: a
//! write-open of an existing file took 89-131 µs there, against 25-27 µs when the call is
//! continued instead of injected, and 34 µs with the guest's halt polling switched on.
//!
//! So for [`WINDOW_US`] after each injection that follows another within [`BURST_US`],
//! [`SPINNERS`] threads of the lowest scheduling class (SCHED_IDLE) spin on whatever CPU has
//! nothing else to run: a CPU running one counts
//! as idle to the scheduler's wake-up placement, does not halt, and hands itself over to the
//! woken task at once. They only ever get CPU time nothing else wants, and park when no
//! injection came for the window. They do not run when a CPU quota applies to guard's cgroup
//! (`cpu.max`): there, spinning would spend the quota the command needs.
//!
//! `GUARD_ADDFD_SPIN_US` sets the window in microseconds; `0` switches the spinners off.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Instant;

/// How long the spinners keep going after the last injection (the guest kernel's own halt
/// polling defaults to 200 µs for the same reason).
pub const WINDOW_US: u64 = 200;

/// How close the injection before must be for an injection to wake parked spinners. A
/// shell loop that starts a command per file injects once per command, a few milliseconds
/// apart: waking the spinners for each made its creates 310 µs (median) instead of 96 µs
/// without spinners (`sed -i`, `cp` and `mv` of 500 files, 2026-12-05), while calls in a burst
/// (a loop of 20,000 write-opens, git writing its objects) took a third of their time without.
pub const BURST_US: u64 = 1_000;

/// One spinner for each side of the exchange: the CPU the task wakes on and the worker's.
pub const SPINNERS: usize = 2;

static EPOCH: OnceLock<Instant> = OnceLock::new();
/// When the last injection began, in µs since [`EPOCH`].
static LAST: AtomicU64 = AtomicU64::new(0);
/// Whether the spinners are (about to be) parked.
static PARKED: AtomicBool = AtomicBool::new(false);
static THREADS: OnceLock<Vec<Thread>> = OnceLock::new();

fn now_us() -> u64 {
    EPOCH.get().map_or(0, |e| e.elapsed().as_micros() as u64)
}

/// The window in µs, or `None` when spinning is off.
fn window() -> Option<u64> {
    static WINDOW: OnceLock<Option<u64>> = OnceLock::new();
    *WINDOW.get_or_init(|| {
        let us = match std::env::var("GUARD_ADDFD_SPIN_US") {
            Ok(v) => v.trim().parse().unwrap_or(WINDOW_US),
            Err(_) => WINDOW_US,
        };
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        (us > 0 && cpus > 1 && !cpu_quota()).then_some(us)
    })
}

/// Whether guard's cgroup (v2) has a CPU quota (`cpu.max` other than `max ...`).
fn cpu_quota() -> bool {
    std::fs::read_to_string("/proc/self/cgroup")
        .is_ok_and(|groups| quota_in(&groups, std::path::Path::new("/sys/fs/cgroup")))
}

/// Whether the cgroup v2 line of `groups` (`/proc/self/cgroup`) names a group under `root`
/// whose `cpu.max` sets a quota.
fn quota_in(groups: &str, root: &std::path::Path) -> bool {
    groups
        .lines()
        .filter_map(|l| l.strip_prefix("0::"))
        .any(|path| {
            let file = root.join(path.trim_start_matches('/')).join("cpu.max");
            std::fs::read_to_string(file).is_ok_and(|max| !max.starts_with("max"))
        })
}

/// Called before each injection: notes it (running spinners keep going), and says whether
/// the spinners are to be started or woken after it ([`after_injection`]): when the injection
/// before this one was less than [`BURST_US`] ago.
///
/// Not before it: a spinner woken from its park is runnable on a vCPU that the host has yet
/// to bring back from halt, and the scheduler, which takes a CPU running only SCHED_IDLE
/// threads for an idle one, sent the injected task there to wait with it. `cp f1 f2 dir/`
/// under guard, 200 times: the second create of each `cp` (the one that woke the spinners)
/// took 147-152 µs of the supervisor's time (median), against 21-22 µs with no spinners at
/// all, and 60-66 µs for the first (2026-12-07).
#[must_use]
pub fn before_injection() -> Option<Wake> {
    let window = window()?;
    EPOCH.get_or_init(Instant::now);
    // Never 0, which stands for "no injection yet".
    let now = now_us() + 1;
    let previous = LAST.swap(now, Ordering::SeqCst);
    in_a_burst(previous, now).then_some(Wake { window })
}

/// The spinners to start or wake once the injection is made.
pub struct Wake {
    window: u64,
}

/// Starts the spinners (once), or wakes them when parked: for the injections that follow
/// this one within the window.
pub fn after_injection(wake: Option<Wake>) {
    let Some(Wake { window }) = wake else {
        return;
    };
    // The window counts from the end of this injection.
    LAST.store(now_us() + 1, Ordering::SeqCst);
    let threads = THREADS.get_or_init(|| {
        (0..SPINNERS)
            .filter_map(|i| {
                std::thread::Builder::new()
                    .name(format!("guard-warm{i}"))
                    .spawn(move || spin(window))
                    .map(|h| h.thread().clone())
                    .ok()
            })
            .collect()
    });
    if PARKED.load(Ordering::SeqCst) {
        threads.iter().for_each(Thread::unpark);
    }
}

/// Whether an injection at `now` follows the one at `previous` (0: none yet) closely enough
/// to wake the spinners. A lone injection (a program's first write-open after its exec, a
/// shell loop's one create per command) wakes nobody: waking parked spinners costs more than
/// the halted vCPU they would save (see [`BURST_US`]).
fn in_a_burst(previous: u64, now: u64) -> bool {
    previous != 0 && now.saturating_sub(previous) <= BURST_US
}

/// Spins while injections keep coming, then parks, yielding (`sched_yield`) every few tens of
/// microseconds to any thread the scheduler has queued on its CPU.
///
/// Without the yield, on the machine of `docs/benchmarks.md`, a worker that slept in the
/// kernel during the window (waiting for the disk) did not run again until the spinners
/// parked (`perf sched`: 192 µs between its wake-up and its running, both spinners running
/// meanwhile), and the next call of every process waited with it. On that machine's root
/// filesystem (ext4 mounted with `discard`, no journal: freeing a block waits for a discard) a
/// Python loop of `mkdir d`, create and delete `d/f`, `rmdir d` had its `unlink` take 200 µs
/// (median of 100, in most runs; 100 µs with a 100 µs window), against 11-18 µs with the
/// yield, and the git session of `benches/compare.sh` went from 825 to 771 ms (7 rounds
/// alternated, bare 498 ms). On a journaled ext4 image, where nothing waits for the disk,
/// neither moved (git 708 / 701 ms). Another system call in the yield's place (`getppid`) did
/// not help: the scheduler has to be asked. Yielding every 5-6 µs made the per-call loops'
/// injections 5-9% slower (medians of 7-11 rounds alternated); every 45 µs they run as fast
/// as without.
fn spin(window: u64) {
    if let Err(e) = crate::sys::process::become_idle_class() {
        tracing::debug!("spinner stays in its class ({e}): not spinning");
        return;
    }
    let mut stretches = 0u32;
    loop {
        while now_us().saturating_sub(LAST.load(Ordering::Relaxed)) < window {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            // A yield every few tens of microseconds (64 stretches: about 45 µs here).
            stretches = stretches.wrapping_add(1);
            if stretches % 64 == 0 {
                std::thread::yield_now();
            }
        }
        // Park unless an injection came in between: `before_injection` stores LAST before it
        // reads PARKED, this reads LAST after storing PARKED, so one of them sees the other.
        PARKED.store(true, Ordering::SeqCst);
        if now_us().saturating_sub(LAST.load(Ordering::SeqCst)) >= window {
            std::thread::park();
        }
        PARKED.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::quota_in;

    #[test]
    fn only_an_injection_close_after_another_wakes_the_spinners() {
        use super::{in_a_burst, BURST_US};
        assert!(!in_a_burst(0, 5), "the first injection of the run");
        assert!(!in_a_burst(10, 10 + BURST_US + 1), "one after a pause");
        assert!(in_a_burst(10, 10 + BURST_US));
        assert!(in_a_burst(10, 40), "a loop's next call");
        // Another worker's injection stored meanwhile may be later than this one's clock.
        assert!(in_a_burst(50, 40));
    }

    #[test]
    fn spinning_stays_off_under_a_cpu_quota_and_only_there() {
        let root = tempfile::tempdir().expect("tempdir");
        let group = root.path().join("ci.slice/job");
        std::fs::create_dir_all(&group).expect("group");
        std::fs::write(group.join("cpu.max"), "max 100000\n").expect("cpu.max");
        assert!(!quota_in("0::/ci.slice/job\n", root.path()));
        std::fs::write(group.join("cpu.max"), "200000 100000\n").expect("cpu.max");
        assert!(quota_in("0::/ci.slice/job\n", root.path()));
        // cgroup v1 lines, and a group with no cpu controller, say nothing.
        assert!(!quota_in("4:cpu,cpuacct:/ci.slice/job\n", root.path()));
        assert!(!quota_in("0::/elsewhere\n", root.path()));
    }

    #[test]
    fn a_spinner_thread_runs_in_the_idle_class() {
        let class = std::thread::spawn(|| {
            crate::sys::process::become_idle_class().expect("lowering our own policy");
            // SAFETY: sched_getscheduler(0) reads the calling thread's policy.
            #[allow(unsafe_code)]
            unsafe {
                libc::sched_getscheduler(0)
            }
        })
        .join()
        .expect("thread");
        assert_eq!(class, libc::SCHED_IDLE);
    }
}
