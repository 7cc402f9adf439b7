//! The answer stage: what the kernel tells the caller. An allowed path-based call is not
//! continued (the supervisor performed it); exec and the metadata-only calls are, and opens on
//! a kernel without SECCOMP_IOCTL_NOTIF_ADDFD.

use super::Core;

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
    true
}
