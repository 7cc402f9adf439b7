//! Read-only opens recorded for `guard learn`. A run that learns traps every open (the filter's
//! `trap_reads`), and Landlock is off in it, so the reads that a profile's read roots will have
//! to cover are seen nowhere else. Each one is walked as the caller would walk it and recorded
//! as a `decision` with op `read`, then continued untouched: it is not judged. Opens that
//! reach nothing (the kernel answers ENOENT with or without a root) and `O_PATH` opens (no
//! Landlock right applies to them) are not recorded.

use std::time::Instant;

use super::record::{self, Record};
use super::resolve::ReadOnly;
use super::target::{self, Kind, Last};
use super::Core;
use crate::sys::Notif;

/// Record the read-only open `r` of the caller of `n`, before it is continued.
pub(super) fn record(core: &Core, n: &Notif, r: &ReadOnly, start: Instant) {
    if r.raw.is_empty() || r.flags & libc::O_PATH as u64 != 0 {
        return;
    }
    let last = if r.flags & libc::O_NOFOLLOW as u64 == 0 {
        Last::Follow
    } else {
        Last::NoFollow
    };
    let Ok(t) = target::target(n.pid, r.dirfd, &r.raw, last) else {
        return;
    };
    if matches!(t.kind, None | Some(Kind::Magic)) {
        return;
    }
    record::record(core, Record::read(core, n, r.syscall, t.path), start);
}
