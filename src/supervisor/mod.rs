//! The supervisor: one thread that receives every trapped call from the listener, decodes it,
//! asks the policy, answers the kernel, and records the decision.
//!
//! Per notification: recv -> decode (read the caller's memory, resolve paths) -> check the
//! notification id is still valid -> `decide` -> respond -> audit. Any failure to read or decode
//! is a deny (fail closed). The thread ends when no process holds the filter any more (the
//! listener reports POLLHUP) or when the main thread asks it to stop.

mod decode;
mod emulate;
mod hosts;
mod memory;
mod procinfo;
pub mod resolve;
mod txn;

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::audit::{self, AuditHandle};
use crate::journal::Journal;
use crate::policy::{self, Action, OnDeny, Policy, Request, Verdict};
use crate::sys::Listener;

pub use decode::{decode_sockaddr, syscall_name};
pub use emulate::Inject;
pub use hosts::nameservers;

/// State the supervisor shares with the main thread.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set when policy ended the run (a `kill` rule or `on-deny = "kill"`).
    pub policy_stop: AtomicBool,
}

/// What the supervisor saw, handed back when its thread ends.
#[derive(Default)]
pub struct Report {
    pub judged: u64,
    pub recv_errors: u64,
    /// The journal, handed back for the end of the run.
    pub journal: Option<Journal>,
}

pub struct Supervisor {
    listener: Arc<Listener>,
    policy: Arc<Policy>,
    audit: AuditHandle,
    shared: Arc<Shared>,
    stop: OwnedFd,
    /// Entries this run created that `protect` patterns care about (see `Request::fresh`).
    created: HashSet<PathBuf>,
    seq: u64,
    report: Report,
    hosts: hosts::PendingHosts,
    procs: procinfo::ProcCache,
    inject: emulate::Inject,
    /// The run's journal; `None` when the run is not transactional.
    journal: Option<Journal>,
    txn: txn::Txn,
}

/// Everything a supervisor works with, handed over by `guard exec`.
pub struct Setup {
    pub listener: Listener,
    pub policy: Arc<Policy>,
    pub audit: AuditHandle,
    pub shared: Arc<Shared>,
    /// Readable when the main thread wants the loop to end.
    pub stop: OwnedFd,
    pub inject: emulate::Inject,
    /// The run's journal; `None` for a run that is not transactional.
    pub journal: Option<Journal>,
    /// The pid of the run's root process (the command guard started).
    pub root: u32,
}

impl Supervisor {
    pub fn new(setup: Setup) -> Self {
        let Setup {
            listener,
            policy,
            audit,
            shared,
            stop,
            inject,
            journal,
            root,
        } = setup;
        Supervisor {
            listener: Arc::new(listener),
            audit,
            shared,
            stop,
            created: HashSet::new(),
            seq: 0,
            report: Report::default(),
            hosts: hosts::PendingHosts::start(&policy),
            procs: procinfo::ProcCache::default(),
            inject,
            journal,
            txn: txn::Txn::new(root),
            policy,
        }
    }

    /// Run the loop on a new thread.
    pub fn spawn(self) -> io::Result<JoinHandle<Report>> {
        std::thread::Builder::new()
            .name("guard-supervisor".into())
            .spawn(move || self.run())
    }

    fn run(mut self) -> Report {
        if let Err(e) = emulate::init_thread() {
            // Without a private umask the modes of emulated creations would be wrong: refuse
            // to emulate rather than create files with the wrong permissions.
            tracing::error!(
                "cannot give the supervisor its own umask: {e}; creations are continued"
            );
            self.inject = emulate::Inject::Continue;
        }
        loop {
            let (ready, hup, stop) = {
                let mut fds = [
                    PollFd::new(self.listener.fd(), PollFlags::POLLIN),
                    PollFd::new(self.stop.as_fd(), PollFlags::POLLIN),
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
                self.receive_one();
                continue;
            }
            if hup || stop {
                break;
            }
        }
        self.report.journal = self.journal.take();
        self.report
    }

    fn receive_one(&mut self) {
        let n = match self.listener.recv() {
            Ok(n) => n,
            // The caller died or was interrupted before we read it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR)) => return,
            Err(e) => {
                self.report.recv_errors += 1;
                tracing::warn!("seccomp notification receive failed: {e}");
                return;
            }
        };
        let start = Instant::now();
        self.report.judged += 1;
        let decoded = decode::decode(&n);
        // Everything read from /proc and the caller's memory is only trusted if the caller is
        // still the same task, waiting in the same call.
        if !self.listener.id_valid(n.id) {
            return;
        }
        let d = match decoded {
            Ok(decode::Decision::Pass) => {
                self.answer(n.id, Answer::Continue);
                return;
            }
            Ok(decode::Decision::Judge(d)) => d,
            Err(e) => {
                let verdict = Verdict {
                    action: Action::Deny,
                    errno: e.errno,
                    rule: "decode".into(),
                    reason: Some(e.what),
                };
                let who = self.procs.get(n.pid);
                let record = Record::from_failure(&n, who, e.syscall, &verdict);
                self.answer(n.id, Answer::Errno(verdict.errno));
                self.record(record, start);
                return;
            }
        };
        if self.hosts.is_pending() {
            let wait = d.op == policy::Op::Connect;
            if let Some((resolved, failures)) = self.hosts.poll(wait) {
                for f in failures {
                    self.audit.emit(audit::Event::Error(audit::ErrorEvent {
                        message: format!("net.connect host not resolved, it matches nothing: {f}"),
                    }));
                }
                self.policy = resolved;
            }
        }
        let fresh = self.is_fresh(&d);
        let req = Request {
            op: d.op,
            path: d.path.as_deref(),
            path2: d.path2.as_deref(),
            fresh,
            creates: d.creates.is_some(),
            argv: &d.argv,
            exe: d.exe.as_deref(),
            exe_anonymous: d.exe_anonymous,
            cwd: d.cwd.as_deref(),
            addr: d.addr.as_ref(),
        };
        let mut verdict = if reopens_own_descriptor(&d) {
            Verdict {
                action: Action::Allow,
                errno: 0,
                rule: "fd-reopen".into(),
                reason: Some("re-opening the caller's own pipe or socket".into()),
            }
        } else {
            policy::decide(&self.policy, &req)
        };
        // The write-root boundary is Landlock's: a call refused there fails as it would without
        // the supervisor (programs probe for writable places all the time). on-deny reacts to
        // the profile's own denials: rules, protected paths, the network, anonymous programs.
        let boundary = verdict.rule == "fs.write-roots";
        if verdict.action == Action::Deny
            && !boundary
            && self.policy.transaction.on_deny == OnDeny::Kill
        {
            verdict.action = Action::Kill;
        }
        let who = self.procs.get(n.pid);
        if d.op == policy::Op::Exec {
            self.procs.forget(n.pid);
        }
        let mut record = Record::from_decoded(&n, who, &d, &verdict);
        match verdict.action {
            Action::Allow | Action::Risky => {
                if let Some(j) = self.journal.as_mut() {
                    if verdict.action == Action::Risky {
                        self.txn.on_risky(j, &self.audit, n.pid, &verdict.rule);
                    }
                    if d.op == policy::Op::Exec {
                        self.txn.on_exec(j, &self.audit, n.pid, &d.argv);
                    }
                }
                let mut note = None;
                let succeeded = match emulate::perform(
                    &d.act,
                    &n,
                    &self.listener,
                    self.inject,
                    self.journal.as_mut(),
                    self.policy.transaction.oversize,
                    &mut note,
                ) {
                    emulate::Outcome::Done(v) => {
                        self.answer(n.id, Answer::Value(v));
                        true
                    }
                    emulate::Outcome::Failed(e) => {
                        self.answer(n.id, Answer::Errno(e));
                        false
                    }
                    emulate::Outcome::Answered => true,
                    emulate::Outcome::Continue => {
                        self.answer(n.id, Answer::Continue);
                        true
                    }
                };
                if let Some(note) = note {
                    record.note(note);
                }
                if let (true, Some(c)) = (succeeded, &d.creates) {
                    if self.policy.is_protect_relevant(c) {
                        self.created.insert(c.clone());
                    }
                }
            }
            Action::Deny => {
                // Under on-deny = rollback the command is found and ended while the caller is
                // still waiting in this call: once answered it could exit and be reaped, and
                // its parent chain would be gone.
                if !boundary && self.policy.transaction.on_deny == OnDeny::Rollback {
                    if let Some(j) = self.journal.as_mut() {
                        if !self.txn.rollback_command(j, &self.audit, n.pid) {
                            self.audit.emit(audit::Event::Error(audit::ErrorEvent {
                                message: format!(
                                    "on-deny rollback: pid {} belongs to no command of the run (the root process itself?): the call just fails",
                                    n.pid
                                ),
                            }));
                        }
                    }
                }
                self.answer(n.id, Answer::Errno(verdict.errno));
            }
            Action::Kill => {
                // End the run before the caller can run on past its denied call.
                self.shared.policy_stop.store(true, Ordering::SeqCst);
                crate::launch::kill_descendants();
                self.answer(n.id, Answer::Errno(verdict.errno));
            }
        }
        self.record(record, start);
    }

    /// True when the target of `d` (or an ancestor of it) was created by this run.
    fn is_fresh(&self, d: &decode::Decoded) -> bool {
        if self.created.is_empty() {
            return false;
        }
        let under_created = |p: &Path| p.ancestors().any(|a| self.created.contains(a));
        let targets = [d.path.as_deref(), d.path2.as_deref()];
        let mut any = false;
        for p in targets.into_iter().flatten() {
            if !under_created(p) {
                return false;
            }
            any = true;
        }
        any
    }

    /// Answer the kernel.
    fn answer(&self, id: u64, answer: Answer) {
        let r = match answer {
            Answer::Continue => self.listener.respond(id, 0, 0, true),
            Answer::Value(v) => self.listener.respond(id, v, 0, false),
            Answer::Errno(e) => self.listener.respond(id, 0, -e, false),
        };
        if let Err(e) = r {
            // ENOENT: the caller went away meanwhile; nothing to answer.
            if e.raw_os_error() != Some(libc::ENOENT) {
                tracing::warn!("cannot answer seccomp notification {id}: {e}");
            }
        }
    }

    fn record(&mut self, r: Record, start: Instant) {
        self.seq += 1;
        let latency_us = start.elapsed().as_micros() as u64;
        self.audit.decision(r.into_event(self.seq, latency_us));
    }
}

/// An open of the caller's own /proc/self/fd/N where N is a pipe (rustc's jobserver client,
/// `> /dev/stdout` into a pipe): no file is reached, so no filesystem rule applies.
fn reopens_own_descriptor(d: &decode::Decoded) -> bool {
    matches!(&d.act, decode::Act::Open { at, .. } if at.kind == Some(resolve::Kind::Magic))
}

/// How a notification is answered.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// Let the kernel carry the call out (exec, connect; never a path-based allow).
    Continue,
    /// The supervisor performed the call: this is its return value.
    Value(i64),
    /// Fail the call with this errno.
    Errno(i32),
}

/// The facts of one decision, before they become an audit event.
struct Record {
    pid: u32,
    comm: std::ffi::OsString,
    syscall: &'static str,
    op: Option<&'static str>,
    path: Option<PathBuf>,
    path2: Option<PathBuf>,
    argv: Option<Vec<std::ffi::OsString>>,
    exe: Option<PathBuf>,
    cwd: Option<PathBuf>,
    addr: Option<String>,
    verdict: Verdict,
}

impl Record {
    /// Add what happened while performing the call (e.g. written without a pre-image).
    fn note(&mut self, note: String) {
        self.verdict.reason = Some(match self.verdict.reason.take() {
            Some(r) => format!("{r}; {note}"),
            None => note,
        });
    }

    fn from_failure(
        n: &crate::sys::Notif,
        who: procinfo::ProcInfo,
        syscall: &'static str,
        v: &Verdict,
    ) -> Self {
        Record {
            pid: n.pid,
            comm: who.comm,
            syscall,
            op: None,
            path: None,
            path2: None,
            argv: None,
            exe: who.exe,
            cwd: None,
            addr: None,
            verdict: v.clone(),
        }
    }

    fn from_decoded(
        n: &crate::sys::Notif,
        who: procinfo::ProcInfo,
        d: &decode::Decoded,
        v: &Verdict,
    ) -> Self {
        Record {
            pid: n.pid,
            comm: who.comm,
            syscall: d.syscall,
            op: Some(d.op.as_str()),
            path: d.path.clone(),
            path2: d.path2.clone(),
            argv: (!d.argv.is_empty()).then(|| d.argv.clone()),
            exe: d.exe.clone().or(who.exe),
            cwd: d.cwd.clone(),
            addr: d.addr.as_ref().map(format_addr),
            verdict: v.clone(),
        }
    }

    fn into_event(self, seq: u64, latency_us: u64) -> audit::Decision {
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
            cwd: self.cwd.map(Into::into),
            verdict: match self.verdict.action {
                Action::Allow => audit::Verdict::Allow,
                Action::Deny => audit::Verdict::Deny,
                Action::Risky => audit::Verdict::Risky,
                Action::Kill => audit::Verdict::Kill,
            },
            errno: (self.verdict.errno != 0).then(|| audit::errno_name(self.verdict.errno)),
            rule: self.verdict.rule,
            reason: self.verdict.reason,
            latency_us,
        }
    }
}

fn format_addr(a: &policy::NetAddr) -> String {
    use policy::NetAddr;
    match a {
        NetAddr::Inet(s) => s.to_string(),
        NetAddr::Unix(p) => p.display().to_string(),
        NetAddr::Abstract(n) => format!("@{}", String::from_utf8_lossy(n)),
        NetAddr::Unspecified => "unspecified".into(),
        NetAddr::Other(f) => format!("family {f}"),
    }
}
