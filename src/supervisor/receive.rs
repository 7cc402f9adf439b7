//! The receive stage, and the worker threads that run the stages: each worker takes the
//! receiving turn, polls the listener, takes one notification off it, gives the turn back and
//! hands the notification to [`super::handle`]; until no process holds the filter any more or
//! the main thread asks to stop.
//!
//! Worker 0 always receives, and waits in the receive ioctl itself: one system call per call
//! fewer than polling first. The kernel wakes it for a notification, and (Linux 6.11 and
//! later) when no process holds the filter any more; the coordinating thread wakes it with a
//! signal when the main thread asks to stop, or the listener hangs up on an older kernel
//! (see [`end_of_run`]). Where that signal already has a handler (a program embedding guard
//! uses it), worker 0 polls first instead, as the standbys do. The standbys are started the first time a call has been in hand
//! for longer than [`SLOW`] (see `Supervisor::spawn`), and step in only while one is (a lookup
//! on a hung network filesystem, a large pre-image copy, a rollback), so such a call holds up
//! one thread, not every process's calls. Otherwise they stay out of the way: handing the receiving turn from thread to thread on every call cost
//! about 15 us per call here (a wake-up on the other vCPU each time).

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::sys::Notif;

use super::{emulate, lock, Core};

/// How many threads can receive notifications: one that always does, and standbys.
pub(super) const WORKERS: usize = 3;
/// The longest a standby parks before it looks for a slow call by itself.
const PARKED: Duration = Duration::from_secs(1);

/// How long a call may be in hand before a standby starts receiving.
pub(super) const SLOW: Duration = Duration::from_millis(5);

/// How often the coordinating thread looks once no call has come for [`QUIET`]: an idle run
/// (a command waiting on the network, an agent thinking) woke guard every [`SLOW`], 200 times
/// a second. The first call after such a spell wakes it at once ([`Doze`]).
pub(super) const IDLE_TICK: Duration = Duration::from_millis(50);

/// How long no call must have come before the coordinating thread looks every [`IDLE_TICK`].
const QUIET: Duration = Duration::from_millis(100);

/// What the coordinating thread has seen of the calls: it looks every [`SLOW`] while they
/// come or one is in hand, and every [`IDLE_TICK`] once none has come for [`QUIET`].
#[derive(Default)]
pub(super) struct Activity {
    calls: u64,
    quiet_ticks: u32,
}

impl Activity {
    /// How long to wait before looking again, from what changed since the last look; the
    /// coordinating thread dozes ([`Doze`]) when that is [`IDLE_TICK`].
    pub(super) fn tick(&mut self, core: &Core) -> Duration {
        let calls = core.calls.load(Ordering::SeqCst);
        let in_hand = core
            .busy_since
            .iter()
            .any(|b| b.load(Ordering::Relaxed) != 0);
        if calls != self.calls || in_hand {
            self.calls = calls;
            self.quiet_ticks = 0;
        } else {
            self.quiet_ticks = self.quiet_ticks.saturating_add(1);
        }
        let quiet = SLOW * self.quiet_ticks;
        if quiet < QUIET || !core.doze.begin() {
            return SLOW;
        }
        // A call taken between the count above and the doze's start woke nobody.
        if core.calls.load(Ordering::SeqCst) != self.calls {
            core.doze.end();
            self.quiet_ticks = 0;
            return SLOW;
        }
        IDLE_TICK
    }
}

/// The coordinating thread's doze, and the word that ends it. While it looks only every
/// [`IDLE_TICK`], the first call a worker takes wakes it (one `write` to an eventfd, once per
/// doze), so that a call that turns slow after a quiet spell still has a standby take the
/// other processes' calls within [`SLOW`], not up to [`IDLE_TICK`] later. Without an
/// eventfd it never dozes: it looks every [`SLOW`], as before idle runs let guard sleep.
pub(super) struct Doze {
    dozing: AtomicBool,
    wake: Option<EventFd>,
}

impl Doze {
    pub(super) fn new() -> Doze {
        let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(|e| tracing::debug!("no eventfd ({e}): the coordinating thread never dozes"))
            .ok();
        Doze {
            dozing: AtomicBool::new(false),
            wake,
        }
    }

    /// Starts a doze: false when it cannot be woken from one.
    fn begin(&self) -> bool {
        if self.wake.is_none() {
            return false;
        }
        self.dozing.store(true, Ordering::SeqCst);
        true
    }

    fn end(&self) {
        self.dozing.store(false, Ordering::SeqCst);
    }

    /// A worker took a call (after counting it in `Core::calls`): wakes the coordinating
    /// thread if it dozes.
    pub(super) fn call_taken(&self) {
        if self.dozing.load(Ordering::SeqCst) && self.dozing.swap(false, Ordering::SeqCst) {
            if let Some(wake) = &self.wake {
                let _ = wake.write(1);
            }
        }
    }

    /// What the coordinating thread polls besides the listener and the stop pipe.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.wake.as_ref().map(AsFd::as_fd)
    }

    /// Takes the word once the coordinating thread has seen it.
    fn clear(&self) {
        if let Some(wake) = &self.wake {
            let _ = wake.read();
        }
    }
}

/// One worker: take the receiving turn, poll the listener, take one notification, give the
/// turn back and handle it; until no process holds the filter any more or the main thread asks
/// to stop. Worker 0 always receives; the others only while another one is slow.
pub(super) fn worker(core: &Core, me: usize) {
    // The caller waits while a worker judges its call. A worker at the same weight as the
    // command's processes made each exec cost about 90 µs more (docs/design-notes.md, "The
    // supervisor's weight").
    let favoured = crate::sys::process::favour_wakeups();
    tracing::debug!("supervisor worker {me}: scheduling favour {favoured:?}");
    let mut inject = core.inject;
    if let Err(e) = emulate::init_thread() {
        // Without a private umask the modes of emulated creations would be wrong: refuse to
        // inject rather than create files with the wrong permissions.
        tracing::error!(
            "cannot give a supervisor thread its own umask: {e}; creations are continued"
        );
        inject = emulate::Inject::Continue;
    }
    let now_us = || now_us(core);
    let someone_slow = || someone_slow(core, me);
    if me == 0 && core.waits_in_recv {
        return receiver(core, inject);
    }
    // Worker 0's receiving turn, kept from the end of its last call (see `after_call`).
    let mut held = None;
    loop {
        if core.finished.load(Ordering::Relaxed) {
            break;
        }
        let turn = if me == 0 {
            held.take().unwrap_or_else(|| lock(&core.receiving))
        } else {
            if !someone_slow() {
                // Woken by the coordinating thread when a call is slow, or when the run ends;
                // the timeout only bounds a missed word. (Sleeping 5 ms at a time instead
                // woke each standby 200 times a second for the rest of the run.)
                std::thread::park_timeout(PARKED);
                continue;
            }
            match core.receiving.try_lock() {
                Ok(t) => t,
                Err(_) => {
                    std::thread::sleep(SLOW);
                    continue;
                }
            }
        };
        let (ready, hup, stop) = {
            let mut fds = [
                PollFd::new(core.listener.fd(), PollFlags::POLLIN),
                PollFd::new(core.stop.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    tracing::error!("supervisor poll failed: {e}");
                    break;
                }
            }
            let l = fds[0].revents().unwrap_or(PollFlags::empty());
            let s = fds[1].revents().unwrap_or(PollFlags::empty());
            (
                l.contains(PollFlags::POLLIN),
                l.intersects(PollFlags::POLLHUP | PollFlags::POLLERR),
                !s.is_empty(),
            )
        };
        if ready {
            // Busy from before the notification is taken off the listener until its decision
            // is recorded: the end of the run waits for that (see `wait_idle`).
            core.busy_since[me].store(now_us(), Ordering::Release);
            core.calls.fetch_add(1, Ordering::SeqCst);
            core.doze.call_taken();
            let n = receive(core);
            drop(turn);
            if n.is_some() && me != 0 {
                core.standby_calls.fetch_add(1, Ordering::SeqCst);
            }
            let before = core.standby_calls.load(Ordering::SeqCst);
            if let Some(n) = n {
                handle(core, n, inject, std::time::Instant::now());
            }
            core.busy_since[me].store(0, Ordering::Release);
            held = after_call(core, me, before);
            continue;
        }
        if hup || stop {
            core.finished.store(true, Ordering::Relaxed);
            break;
        }
    }
}

/// [`super::handle`], with a panic in it contained: its caller is answered EIO (unless it was
/// answered already), the audit log gets a record of the call, and the worker goes on. A worker that unwound would leave its caller,
/// and with worker 0 every later caller, waiting for good.
fn handle(core: &Core, n: Notif, inject: emulate::Inject, start: std::time::Instant) {
    let (id, pid, nr) = (n.id, n.pid, n.nr);
    super::answer::receiving(Some(start));
    let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        super::handle(core, n, inject, start)
    }));
    if handled.is_err() {
        tracing::error!("guard failed while judging a call (a bug); the call fails with EIO");
        super::answer::answer(core, id, super::answer::Answer::Errno(libc::EIO));
        let record = super::record::Record::guard_failed(core, pid, nr);
        super::record::record(core, record, start);
    }
    super::answer::receiving(None);
}

/// Worker 0: take the receiving turn, wait in RECV for a notification, give the turn back and
/// handle it; until the listener hangs up or the run is finished.
fn receiver(core: &Core, inject: emulate::Inject) {
    if let Err(e) = crate::sys::process::accept_wake_signal() {
        tracing::warn!("cannot unblock the wake-up signal in the receiving thread: {e}");
    }
    // The receiving turn, kept from the end of the last call (see `after_call`).
    let mut held = None;
    loop {
        if core.finished.load(Ordering::Relaxed) {
            break;
        }
        let turn = held.take().unwrap_or_else(|| lock(&core.receiving));
        let received = receive(core);
        drop(turn);
        match received {
            Some(n) => {
                let start = std::time::Instant::now();
                core.busy_since[0].store(us_since_t0(core, start), Ordering::Release);
                core.calls.fetch_add(1, Ordering::SeqCst);
                core.doze.call_taken();
                let before = core.standby_calls.load(Ordering::SeqCst);
                handle(core, n, inject, start);
                core.busy_since[0].store(0, Ordering::Release);
                held = after_call(core, 0, before);
            }
            // Woken to look at `finished` (EINTR), a caller gone before its call was taken,
            // or no process holding the filter any more (RECV returns at once from then on).
            None if hung_up(core) => {
                core.finished.store(true, Ordering::Relaxed);
                break;
            }
            None => {}
        }
    }
}

/// A worker between calls stays in the directory whose path it read last (one `getcwd` for
/// the next call about it, see `sys::fs::dir_path_staying_in`) only while no other worker can
/// remove it meanwhile: a worker removes what it removes itself going home first
/// (`base::forget`), and before the standbys are started worker 0 is the only one. Once they
/// are, a standby goes home after each call, and so does worker 0 unless it can tell that none
/// took a call while its own was in hand (`before`: the standbys' count of calls as that call
/// began) and none can take one before its next: it takes the receiving turn now and keeps it
/// (returned, for its next receive), and no standby is in a call. A standby takes calls only
/// while another worker is slow, so after one slow call the rest of the run does not pay two
/// `fchdir`s a call. A directory another worker removes is held past its removal only by a
/// worker still in a call, as a concurrent call would hold it bare.
fn after_call(core: &Core, me: usize, before: u64) -> Option<std::sync::MutexGuard<'_, ()>> {
    if !core.standbys.load(Ordering::SeqCst) {
        return None;
    }
    if me != 0 {
        crate::sys::fs::leave();
        return None;
    }
    let turn = match core.receiving.try_lock() {
        Ok(t) => Some(t),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    let quiet = turn.is_some()
        && core.standby_calls.load(Ordering::SeqCst) == before
        && core.busy_since[1..]
            .iter()
            .all(|b| b.load(Ordering::Acquire) == 0);
    if !quiet {
        crate::sys::fs::leave();
    }
    turn
}

/// Whether the listener has hung up (no process holds the filter), without waiting.
fn hung_up(core: &Core) -> bool {
    let mut fds = [PollFd::new(core.listener.fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(1))
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR))
}

/// Waits at most `limit` for the end of the run: the main thread's stop, or the listener's
/// hang-up. The listener is polled for no event, so only POLLHUP and POLLERR are reported:
/// the kernel's wake-up for each notification (keyed EPOLLIN) passes this waiter by.
pub(super) fn end_of_run(core: &Core, limit: Duration) -> bool {
    // On the stack: this runs every 5 ms while calls come.
    let mut fds = [
        PollFd::new(core.listener.fd(), PollFlags::empty()),
        PollFd::new(core.stop.as_fd(), PollFlags::POLLIN),
        PollFd::new(core.stop.as_fd(), PollFlags::empty()),
    ];
    let mut watched = 2;
    if let Some(wake) = core.doze.fd() {
        fds[2] = PollFd::new(wake, PollFlags::POLLIN);
        watched = 3;
    }
    let fds = &mut fds[..watched];
    let ms = PollTimeout::try_from(limit.as_millis().min(i32::MAX as u128) as i32)
        .unwrap_or(PollTimeout::NONE);
    match poll(fds, ms) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        Ok(_) => {
            let ended = fds[..2].iter().any(|f| f.any().unwrap_or(false));
            if fds.get(2).is_some_and(|f| f.any().unwrap_or(false)) {
                core.doze.clear();
            }
            ended
        }
        Err(e) => {
            tracing::error!("supervisor poll failed: {e}");
            true
        }
    }
}

/// Microseconds since the supervisor started, plus one (0 in `busy_since` means idle).
fn now_us(core: &Core) -> u64 {
    us_since_t0(core, std::time::Instant::now())
}

/// [`now_us`] for a time read already.
fn us_since_t0(core: &Core, at: std::time::Instant) -> u64 {
    at.duration_since(core.t0).as_micros() as u64 + 1
}

/// Whether a worker other than `me` has had a call in hand for longer than [`SLOW`].
pub(super) fn someone_slow(core: &Core, me: usize) -> bool {
    let now = now_us(core);
    core.busy_since.iter().enumerate().any(|(i, b)| {
        let since = b.load(Ordering::Relaxed);
        i != me && since != 0 && now.saturating_sub(since) > SLOW.as_micros() as u64
    })
}

/// Take one notification off the listener.
fn receive(core: &Core) -> Option<Notif> {
    match core.listener.recv() {
        Ok(n) => Some(n),
        // The caller died or was interrupted before we read it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => None,
        Err(e) => {
            tracing::warn!("seccomp notification receive failed: {e}");
            None
        }
    }
}

/// Wait until no worker is handling a call, at most `limit`. When the receiving thread has
/// ended, a standby may still be finishing one (a command's rollback, a large pre-image copy):
/// its change belongs in the journal handed back, and its decision in the audit log before
/// the log is closed.
pub(super) fn wait_idle(core: &Core, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while core
        .busy_since
        .iter()
        .any(|b| b.load(Ordering::Acquire) != 0)
    {
        if std::time::Instant::now() > deadline {
            tracing::warn!(
                "a supervisor thread is still handling a call at the end of the run; its decision may be missing from the audit log"
            );
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the doze's word is there to be seen (a poll that does not wait).
    fn woken(d: &Doze) -> bool {
        let mut fds = [PollFd::new(d.fd().expect("an eventfd"), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).expect("poll") == 1
    }

    #[test]
    fn a_call_taken_wakes_a_dozing_coordinator_once() {
        let d = Doze::new();
        d.call_taken();
        assert!(!woken(&d), "not dozing: nobody to wake");
        assert!(d.begin());
        d.call_taken();
        assert!(woken(&d), "the first call of a doze wakes it");
        d.call_taken();
        d.clear();
        assert!(!woken(&d), "one word per doze, taken once seen");
        d.call_taken();
        assert!(!woken(&d), "woken already: the next calls say nothing");
        assert!(d.begin());
        d.end();
        d.call_taken();
        assert!(!woken(&d), "a doze ended by the coordinator itself");
    }
}
