//! The record stage: one `decision` event in the audit log per judged call: who made it (the
//! caller's `comm` and executable, read before the call is answered: afterwards the process
//! may be gone), what it was, the verdict as carried out, and how long it took.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::audit;
use crate::policy::{self, Action, Reaction, Verdict};
use crate::sys::Notif;

use super::procinfo::ProcInfo;
use super::{lock, Core, Judged};

/// The facts of one decision, before they become an audit event.
pub(super) struct Record {
    pid: u32,
    comm: OsString,
    syscall: &'static str,
    op: Option<&'static str>,
    path: Option<PathBuf>,
    path2: Option<PathBuf>,
    argv: Option<Vec<OsString>>,
    exe: Option<PathBuf>,
    cwd: Option<PathBuf>,
    addr: Option<String>,
    name: Option<String>,
    verdict: Verdict,
}

impl Record {
    /// The record of `judged`, a call by the caller of `n`, with `verdict` carried out as
    /// `reaction`. Reads who the caller is: call it before answering.
    pub(super) fn new(
        core: &Core,
        n: &Notif,
        judged: &Judged,
        verdict: &Verdict,
        reaction: Reaction,
    ) -> Record {
        let who = {
            let mut procs = lock(&core.procs);
            let who = procs.get(n.pid);
            if let Judged::Call(r) = judged {
                if r.op == policy::Op::Exec {
                    // Its name and executable are about to change.
                    procs.forget(n.pid);
                }
            }
            who
        };
        Record::of(who, n, judged, verdict, reaction)
    }

    /// The record of `judged` by the caller `who` (its name and executable, read already).
    pub(super) fn of(
        who: ProcInfo,
        n: &Notif,
        judged: &Judged,
        verdict: &Verdict,
        reaction: Reaction,
    ) -> Record {
        let mut verdict = verdict.clone();
        verdict.action = reaction.recorded(verdict.action);
        match judged {
            Judged::Failed(f) => Record {
                pid: n.pid,
                comm: who.comm,
                syscall: f.syscall,
                op: None,
                path: None,
                path2: None,
                argv: None,
                exe: who.exe,
                cwd: None,
                addr: None,
                name: None,
                verdict,
            },
            Judged::Call(r) => Record {
                pid: n.pid,
                comm: who.comm,
                syscall: r.syscall,
                op: Some(r.op.as_str()),
                path: r.path.clone(),
                path2: r.path2.clone(),
                argv: (!r.argv.is_empty()).then(|| r.argv.clone()),
                exe: r.exe.clone().or(who.exe),
                cwd: r.cwd.clone(),
                addr: r.addr.as_ref().map(format_addr),
                name: r.name.clone(),
                verdict,
            },
        }
    }

    /// The record of a read-only open of `path` that the run records without judging it
    /// (`guard learn`): allowed, by rule `observe`.
    pub(super) fn read(core: &Core, n: &Notif, syscall: &'static str, path: PathBuf) -> Record {
        let who = lock(&core.procs).get(n.pid);
        Record {
            pid: n.pid,
            comm: who.comm,
            syscall,
            op: Some("read"),
            path: Some(path),
            path2: None,
            argv: None,
            exe: who.exe,
            cwd: None,
            addr: None,
            name: None,
            verdict: Verdict {
                action: Action::Allow,
                errno: 0,
                rule: policy::RuleId::Builtin(policy::Builtin::Observe),
                reason: None,
            },
        }
    }

    /// Add what happened while performing the call (e.g. written without a pre-image).
    pub(super) fn note(&mut self, note: Option<String>) {
        let Some(note) = note else {
            return;
        };
        self.verdict.reason = Some(match self.verdict.reason.take() {
            Some(r) => format!("{r}; {note}"),
            None => note,
        });
    }

    pub(super) fn into_event(self, seq: u64, latency_us: u64) -> audit::Decision {
        audit::Decision {
            seq,
            pid: self.pid,
            comm: self.comm.into(),
            exe: self.exe.map(Into::into),
            syscall: self.syscall.to_string(),
            op: self.op.unwrap_or("unknown").to_string(),
            path: self.path.map(Into::into),
            path2: self.path2.map(Into::into),
            argv: self.argv.map(|a| a.into_iter().map(Into::into).collect()),
            addr: self.addr,
            name: self.name,
            cwd: self.cwd.map(Into::into),
            verdict: match self.verdict.action {
                _ if self.verdict.is_kernel_error() => audit::Verdict::Error,
                Action::Allow => audit::Verdict::Allow,
                Action::Deny => audit::Verdict::Deny,
                Action::Risky => audit::Verdict::Risky,
                Action::Kill => audit::Verdict::Kill,
            },
            errno: (self.verdict.errno != 0).then(|| audit::errno_name(self.verdict.errno)),
            rule: self.verdict.rule.to_string(),
            reason: self.verdict.reason,
            latency_us,
        }
    }
}

/// Hand `r` to the audit writer; `start`: when the notification was received.
pub(super) fn record(core: &Core, r: Record, start: Instant) {
    let seq = core.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let latency_us = start.elapsed().as_micros() as u64;
    core.audit.decision(r.into_event(seq, latency_us));
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
