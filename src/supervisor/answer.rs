//! The answer stage: what the kernel tells the caller. An allowed path-based call is not
//! continued (the supervisor performed it); exec and the metadata-only calls are, and opens on
//! a kernel without SECCOMP_IOCTL_NOTIF_ADDFD.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::Core;

thread_local! {
    /// When this thread last handed an answer to the kernel: the end of the caller's wait,
    /// which the audit record's `latency_us` measures to. The answer's ioctl wakes the caller,
    /// which often takes this CPU before the ioctl returns (a synchronous wake-up); what the
    /// thread does after (journaling a file it made, queuing the record) and the time it waits
    /// for a CPU again are not the caller's wait. An injected descriptor is marked when the
    /// ioctl returns: the kernel returns once the caller has installed it.
    static ANSWERED: Cell<Option<Instant>> = const { Cell::new(None) };
    /// When this thread received the notification it has in hand ([`received`]).
    static RECEIVED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Marks the notification this thread has just taken off the listener as received at `at`,
/// or, with `None`, that it has none in hand.
pub(super) fn receiving(at: Option<Instant>) {
    RECEIVED.set(at);
}

/// When this thread received the notification in hand (now, when it has none). The clock is
/// read once per call: what a call measures against the time (how old a cached name or
/// directory is, the audit log's rate limit, how long the caller waited) takes this reading.
/// Each took its own before, eight per judged call, about 0.3 µs of a 9 µs call here
/// (`perf` of `guard-callloop unlink-missing`); a call is answered within microseconds of
/// this, far within every such limit.
pub(super) fn received() -> Instant {
    RECEIVED.get().unwrap_or_else(Instant::now)
}

/// Marks the answer to the current notification as given at `at` (see [`since`]).
pub(super) fn answered(at: Instant) {
    ANSWERED.set(Some(at));
}

/// How long the caller of the notification received at `start` waited: until this thread
/// answered it, or until now when it did not answer after `start` (the answer came from
/// another thread, or none was given).
pub(super) fn since(start: Instant) -> Duration {
    match ANSWERED.take() {
        Some(at) if at >= start => at - start,
        _ => start.elapsed(),
    }
}

/// How a notification is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// Let the kernel carry the call out (exec, metadata; never a path-based allow).
    Continue,
    /// The supervisor performed the call: this is its return value.
    Value(i64),
    /// Fail the call with this errno.
    Errno(i32),
}

/// Answer notification `id`. Returns whether the answer reached the caller: false when it
/// went away meanwhile (or the kernel refused the answer).
pub(super) fn answer(core: &Core, id: u64, answer: Answer) -> bool {
    let at = Instant::now();
    let r = match answer {
        Answer::Continue => core.listener.respond(id, 0, 0, true),
        Answer::Value(v) => core.listener.respond(id, v, 0, false),
        Answer::Errno(e) => core.listener.respond(id, 0, -e, false),
    };
    if let Err(e) = r {
        // ENOENT: the caller went away meanwhile; nothing to answer.
        if e.raw_os_error() != Some(libc::ENOENT) {
            tracing::warn!("cannot answer seccomp notification {id}: {e}");
        }
        return false;
    }
    answered(at);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait ends at this thread's answer, not when the record is made after it; a mark
    /// left by an earlier notification does not end a later one's wait.
    #[test]
    fn latency_runs_to_this_notifications_answer() {
        let after = Duration::from_millis(5);
        let start = Instant::now();
        answered(Instant::now());
        std::thread::sleep(after);
        assert!(since(start) + after <= start.elapsed());

        answered(Instant::now());
        let start = Instant::now();
        std::thread::sleep(after);
        assert!(
            since(start) >= after,
            "an earlier answer is not this call's"
        );
    }
}
