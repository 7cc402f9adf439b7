//! The record stage: one `decision` event in the audit log per judged call: who made it (the
//! caller's `comm` and executable, read before the call is answered: afterwards the process
//! may be gone), what it was, the verdict as carried out, and how long it took.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::audit;
use crate::policy::{self, Action, Reaction, Verdict};
use crate::sys::Notif;

use super::procinfo::ProcInfo;
use super::{lock, Core, Judged};

/// The facts of one decision, before they become an audit event.
pub(super) struct Record {
    pid: u32,
    comm: Arc<OsStr>,
    syscall: &'static str,
    op: Option<&'static str>,
    path: Option<PathBuf>,
    path2: Option<PathBuf>,
    argv: Option<Vec<OsString>>,
    exe: Option<Arc<Path>>,
    cwd: Option<PathBuf>,
    addr: Option<policy::NetAddr>,
    name: Option<String>,
    verdict: Verdict,
}

impl Record {
    /// Who made the call of `n` (its name and executable), for its record. Call it before
    /// answering: afterwards the process may be gone.
    pub(super) fn who(core: &Core, n: &Notif, judged: &Judged) -> ProcInfo {
        let mut procs = lock(&core.procs);
        let now = super::answer::received();
        match judged {
            // Its name and executable are about to change; its record names the program.
            Judged::Call(r) if r.op == policy::Op::Exec => {
                let after = r.comm_after.as_deref().zip(r.exe.as_deref());
                procs.before_exec(n.pid, r.comm.as_deref(), after, now)
            }
            _ => procs.get(n.pid, now),
        }
    }

    /// The record of `judged` by the caller `who`, with `verdict` carried out as `reaction`.
    /// It takes the facts over instead of copying them: build it once the call is answered.
    /// What the record does not keep (the call's pinned descriptors) is dropped here, on the
    /// supervisor's thread.
    pub(super) fn of(
        who: ProcInfo,
        n: &Notif,
        judged: Judged,
        mut verdict: Verdict,
        reaction: Reaction,
    ) -> Record {
        verdict.action = reaction.recorded(verdict.action);
        match judged {
            Judged::Failed(f) => Record {
                op: f.op.map(|op| op.as_str()),
                path: f.path,
                path2: f.path2,
                ..Record::without_call(n.pid, who, f.syscall, verdict)
            },
            Judged::Call(r) => {
                let r = *r;
                Record {
                    pid: n.pid,
                    comm: who.comm,
                    syscall: r.syscall,
                    op: Some(r.op.as_str()),
                    path: r.path,
                    path2: r.path2,
                    argv: (!r.argv.is_empty()).then_some(r.argv),
                    exe: r.exe.map(Arc::from).or(who.exe),
                    cwd: r.cwd,
                    addr: r.addr,
                    name: r.name,
                    verdict,
                }
            }
        }
    }

    /// The record of a read-only open of `path` that the run records without judging it
    /// (`guard learn`): allowed, by rule `observe`.
    pub(super) fn read(core: &Core, n: &Notif, syscall: &'static str, path: PathBuf) -> Record {
        let who = lock(&core.procs).get(n.pid, super::answer::received());
        let verdict = Verdict {
            action: Action::Allow,
            errno: 0,
            rule: policy::RuleId::Builtin(policy::Builtin::Observe),
            reason: None,
        };
        Record {
            op: Some("read"),
            path: Some(path),
            ..Record::without_call(n.pid, who, syscall, verdict)
        }
    }

    /// The record of a call guard failed while judging (a bug, contained by the worker):
    /// refused with EIO, by the rule that refuses what guard cannot make sense of.
    pub(super) fn guard_failed(core: &Core, pid: u32, nr: i32) -> Record {
        let who = lock(&core.procs).get(pid, super::answer::received());
        let verdict = Verdict {
            action: Action::Deny,
            errno: libc::EIO,
            rule: policy::RuleId::Builtin(policy::Builtin::Decode),
            reason: Some(
                "guard failed while judging this call (a bug; its error is on guard's stderr): \
                 the call fails with EIO"
                    .into(),
            ),
        };
        let syscall = crate::confine::syscall_name(i64::from(nr));
        Record::without_call(pid, who, syscall, verdict)
    }

    /// The record of a call of `syscall` by `pid` (`who`) of which nothing else is known.
    fn without_call(pid: u32, who: ProcInfo, syscall: &'static str, verdict: Verdict) -> Record {
        Record {
            pid,
            comm: who.comm,
            syscall,
            op: None,
            path: None,
            path2: None,
            argv: None,
            exe: who.exe,
            cwd: None,
            addr: None,
            name: None,
            verdict,
        }
    }

    /// Add what happened while performing the call (e.g. written without a pre-image).
    pub(super) fn note(&mut self, note: String) {
        self.verdict.reason = Some(match self.verdict.reason.take() {
            Some(r) => format!("{r}; {note}"),
            None => note,
        });
    }

    /// The verdict as the audit log names it.
    fn audit_verdict(&self) -> audit::Verdict {
        match self.verdict.action {
            _ if self.verdict.is_kernel_error() => audit::Verdict::Error,
            Action::Allow => audit::Verdict::Allow,
            Action::Deny => audit::Verdict::Deny,
            Action::Risky => audit::Verdict::Risky,
            Action::Kill => audit::Verdict::Kill,
        }
    }

    pub(super) fn into_event(self, seq: u64, latency_us: u64) -> audit::Decision {
        let verdict = self.audit_verdict();
        audit::Decision {
            seq,
            pid: self.pid,
            comm: audit::PathText::from(&*self.comm),
            exe: self.exe.map(|e| audit::PathText::from(&*e)),
            syscall: self.syscall.to_string(),
            op: self.op.unwrap_or("unknown").to_string(),
            path: self.path.map(Into::into),
            path2: self.path2.map(Into::into),
            argv: self.argv.map(|a| a.into_iter().map(Into::into).collect()),
            addr: self.addr.as_ref().map(format_addr),
            name: self.name,
            cwd: self.cwd.map(Into::into),
            verdict,
            errno: (self.verdict.errno != 0).then(|| audit::errno_name(self.verdict.errno)),
            rule: self.verdict.rule.to_string(),
            reason: self.verdict.reason,
            latency_us,
        }
    }
}

/// Hand `r` to the audit writer; `start`: when the notification was received (its
/// `latency_us` runs from there to the answer). The event is built from `r` on the writer
/// thread, while the caller goes on.
pub(super) fn record(core: &Core, r: Record, start: Instant) {
    let seq = core.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let latency_us = super::answer::since(start).as_micros() as u64;
    core.audit.decision_with(r.audit_verdict(), start, move || {
        r.into_event(seq, latency_us)
    });
}

pub(super) fn format_addr(a: &policy::NetAddr) -> String {
    use policy::NetAddr;
    match a {
        NetAddr::Inet(s) => s.to_string(),
        NetAddr::Unix(p) => p.display().to_string(),
        NetAddr::Abstract(n) => format!("@{}", String::from_utf8_lossy(n)),
        NetAddr::Unspecified => "unspecified".into(),
        NetAddr::Other(f) => format!("family {f}"),
    }
}
