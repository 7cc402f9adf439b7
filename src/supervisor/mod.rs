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
mod read;
mod resolve;
mod sockaddr;
mod target;
mod txn;

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::audit::{self, AuditHandle};
use crate::journal::Journal;
use crate::policy::{self, Action, Builtin, OnDeny, Policy, RuleId, Verdict};
use crate::sys::{Listener, Notif};

pub use emulate::Inject;
pub use hosts::nameservers;
pub use sockaddr::decode_sockaddr;

/// State the supervisor shares with the main thread.
#[derive(Debug, Default)]
pub struct Shared {
    /// Set when policy ended the run (a `kill` rule or `on-deny = "kill"`).
    pub policy_stop: AtomicBool,
}

/// What the supervisor saw, handed back when its thread ends.
#[derive(Default)]
pub struct Report {
    /// The journal, handed back for the end of the run.
    pub journal: Option<Journal>,
}

/// How many threads can receive notifications: one that always does, and standbys that step in
/// while a call has been in hand for longer than [`SLOW`] (a lookup on a hung network
/// filesystem, a large pre-image copy, a rollback), so such a call holds up one thread, not
/// every process's calls. Standbys stay out of the way otherwise: handing the receiving turn
/// from thread to thread on every call cost about 15 us per call here (a wake-up on the other
/// vCPU each time).
const WORKERS: usize = 3;
/// How long a call may be in hand before a standby starts receiving.
const SLOW: Duration = Duration::from_millis(5);

/// What the workers share. Everything that orders the workspace's history (the journal, the
/// checkpoints, what the run created) sits behind one lock: a judged change is recorded and
/// performed under it, so the journal's order is the order the changes happened in.
struct Core {
    listener: Arc<Listener>,
    audit: AuditHandle,
    shared: Arc<Shared>,
    stop: OwnedFd,
    policy: RwLock<Arc<Policy>>,
    hosts: Mutex<hosts::PendingHosts>,
    procs: Mutex<procinfo::ProcCache>,
    inject: emulate::Inject,
    tx: Mutex<TxState>,
    /// Entries this run created that `protect` patterns care about (see `Request::fresh`); its
    /// own lock, so judging a call never waits for a slow journal operation.
    created: Mutex<HashSet<PathBuf>>,
    /// The run's root process.
    root: u32,
    /// Held by the one worker that polls and receives; the others handle what they took.
    /// RECV blocks when nothing is pending, so two workers must never race for one
    /// notification.
    receiving: Mutex<()>,
    /// Per worker: when it started handling its current call (microseconds since `t0`, plus
    /// one), or 0 when it is not handling one.
    busy_since: Vec<AtomicU64>,
    t0: Instant,
    /// Set when a worker saw the end (the listener hung up, or stop): standbys leave.
    finished: AtomicBool,
    seq: AtomicU64,
}

/// The workspace's transactional state.
struct TxState {
    /// The run's journal; `None` when the run is not transactional.
    journal: Option<Journal>,
    txn: txn::Txn,
}

pub struct Supervisor {
    core: Arc<Core>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A worker that panicked while holding the lock leaves consistent data behind (every
    // update is a single insert or a journal append): keep going rather than stop judging.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let hosts = hosts::PendingHosts::start(&policy);
        Supervisor {
            core: Arc::new(Core {
                listener: Arc::new(listener),
                audit,
                shared,
                stop,
                policy: RwLock::new(policy),
                hosts: Mutex::new(hosts),
                procs: Mutex::new(procinfo::ProcCache::default()),
                inject,
                created: Mutex::new(HashSet::new()),
                root,
                tx: Mutex::new(TxState {
                    journal,
                    txn: txn::Txn::new(root),
                }),
                receiving: Mutex::new(()),
                busy_since: (0..WORKERS).map(|_| AtomicU64::new(0)).collect(),
                t0: Instant::now(),
                finished: AtomicBool::new(false),
                seq: AtomicU64::new(0),
            }),
        }
    }

    /// Run the workers; the returned thread ends when they all have, and hands back the report.
    pub fn spawn(self) -> io::Result<JoinHandle<Report>> {
        let mut workers = Vec::with_capacity(WORKERS);
        for i in 0..WORKERS {
            let core = Arc::clone(&self.core);
            workers.push(
                std::thread::Builder::new()
                    .name(format!("guard-supervisor-{i}"))
                    .spawn(move || worker(&core, i))?,
            );
        }
        std::thread::Builder::new()
            .name("guard-supervisor".into())
            .spawn(move || {
                // The receiving thread ends when no process holds the filter any more (or on
                // stop): nothing is left to judge. Standbys see `finished` within one nap and
                // leave on their own; one still finishing a call holds the transactional lock,
                // which is taken below, so its change is in the journal handed back.
                let mut workers = workers.into_iter();
                if let Some(primary) = workers.next() {
                    let _ = primary.join();
                }
                let core = self.core;
                core.finished.store(true, Ordering::Relaxed);
                let journal = lock(&core.tx).journal.take();
                Report { journal }
            })
    }
}

/// One worker: take the receiving turn, poll the listener, take one notification, give the
/// turn back and handle it; until no process holds the filter any more or the main thread asks
/// to stop. Worker 0 always receives; the others only while another one is slow.
fn worker(core: &Core, me: usize) {
    let mut inject = core.inject;
    if let Err(e) = emulate::init_thread() {
        // Without a private umask the modes of emulated creations would be wrong: refuse to
        // inject rather than create files with the wrong permissions.
        tracing::error!(
            "cannot give a supervisor thread its own umask: {e}; creations are continued"
        );
        inject = emulate::Inject::Continue;
    }
    let now_us = || core.t0.elapsed().as_micros() as u64 + 1;
    let someone_slow = || {
        let now = now_us();
        core.busy_since.iter().enumerate().any(|(i, b)| {
            let since = b.load(Ordering::Relaxed);
            i != me && since != 0 && now.saturating_sub(since) > SLOW.as_micros() as u64
        })
    };
    loop {
        if core.finished.load(Ordering::Relaxed) {
            break;
        }
        let turn = if me == 0 {
            lock(&core.receiving)
        } else {
            if !someone_slow() {
                std::thread::sleep(SLOW);
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
            let n = receive(core);
            drop(turn);
            if let Some(n) = n {
                core.busy_since[me].store(now_us(), Ordering::Relaxed);
                handle(core, n, inject);
                core.busy_since[me].store(0, Ordering::Relaxed);
            }
            continue;
        }
        if hup || stop {
            core.finished.store(true, Ordering::Relaxed);
            break;
        }
    }
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

/// Judge one notification and answer it.
fn handle(core: &Core, n: Notif, inject: emulate::Inject) {
    let start = Instant::now();
    let resolved = decode::decode(&n).and_then(|call| {
        let mem = read::read(n.pid, &call);
        resolve::resolve(&n, &call, mem, core.root)
    });
    // Everything read from /proc and the caller's memory is only trusted if the caller is
    // still the same task, waiting in the same call.
    if !core.listener.id_valid(n.id) {
        return;
    }
    let d = match resolved {
        Ok(resolve::Resolution::Pass) => {
            answer(core, n.id, Answer::Continue);
            return;
        }
        Ok(resolve::Resolution::Judge(d)) => d,
        Err(e) => {
            let verdict = e.verdict();
            let who = lock(&core.procs).get(n.pid);
            let record = Record::from_failure(&n, who, e.syscall, &verdict);
            answer(core, n.id, Answer::Errno(verdict.errno));
            record_decision(core, record, start);
            return;
        }
    };
    let pending = lock(&core.hosts).is_pending();
    if pending {
        // Only this worker waits (for a connect) while the names are looked up.
        let wait = d.op == policy::Op::Connect;
        let resolved = lock(&core.hosts).poll(wait);
        if let Some((resolved, failures)) = resolved {
            for f in failures {
                core.audit.emit(audit::Event::Error(audit::ErrorEvent {
                    message: format!("net.connect host not resolved, it matches nothing: {f}"),
                }));
            }
            *core
                .policy
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = resolved;
        }
    }
    let policy = Arc::clone(
        &core
            .policy
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let fresh = is_fresh(&lock(&core.created), &d);
    let req = d.request(fresh);
    let mut verdict = policy::decide(&policy, &req);
    // The write-root boundary is Landlock's: a call refused there fails as it would without
    // the supervisor (programs probe for writable places all the time). on-deny reacts to
    // the profile's own denials: rules, protected paths, the network, anonymous programs.
    let boundary = verdict.rule == RuleId::Builtin(Builtin::WriteRoots);
    if verdict.action == Action::Deny && !boundary && policy.transaction.on_deny == OnDeny::Kill {
        verdict.action = Action::Kill;
    }
    let who = {
        let mut procs = lock(&core.procs);
        let who = procs.get(n.pid);
        if d.op == policy::Op::Exec {
            procs.forget(n.pid);
        }
        who
    };
    let mut record = Record::from_decoded(&n, who, &d, &verdict);
    match verdict.action {
        Action::Allow | Action::Risky => {
            // The transactional state is locked only for what touches the workspace's history:
            // a change inside the workspace, a new command, a risky call. Everything else (the
            // private tmp, execs deeper in the tree, connects) goes on while another worker
            // copies a large pre-image or rolls a command back.
            let ws = &policy.vars.workspace;
            let in_workspace = d.paths().any(|p| p.starts_with(ws));
            // A new command: an exec by a direct child of the root (read once, here).
            let new_command = d.new_command;
            let needs_tx = in_workspace || verdict.action == Action::Risky || new_command;
            let mut note = None;
            let outcome = if needs_tx {
                let mut tx = lock(&core.tx);
                let TxState { journal, txn } = &mut *tx;
                if let Some(j) = journal.as_mut() {
                    if verdict.action == Action::Risky {
                        txn.on_risky(j, &core.audit, n.pid, verdict.rule.as_str());
                    }
                    if new_command {
                        txn.command_starts(j, &core.audit, n.pid, &d.argv);
                    }
                }
                let outcome = emulate::perform(
                    &d.act,
                    &n,
                    &core.listener,
                    inject,
                    journal.as_mut(),
                    policy.transaction.oversize,
                    &mut note,
                );
                let succeeded = !matches!(outcome, emulate::Outcome::Failed(_));
                if let (true, Some(c)) = (succeeded, &d.creates) {
                    if policy.is_protect_relevant(c) {
                        lock(&core.created).insert(c.clone());
                    }
                }
                outcome
            } else {
                emulate::perform(
                    &d.act,
                    &n,
                    &core.listener,
                    inject,
                    None,
                    policy.transaction.oversize,
                    &mut note,
                )
            };
            match outcome {
                emulate::Outcome::Done(v) => answer(core, n.id, Answer::Value(v)),
                emulate::Outcome::Failed(e) => answer(core, n.id, Answer::Errno(e)),
                emulate::Outcome::Answered => {}
                emulate::Outcome::Continue => answer(core, n.id, Answer::Continue),
            }
            if let Some(note) = note {
                record.note(note);
            }
        }
        Action::Deny => {
            // Under on-deny = rollback the command is found and ended while the caller is
            // still waiting in this call: once answered it could exit and be reaped, and its
            // parent chain would be gone.
            if !boundary && policy.transaction.on_deny == OnDeny::Rollback {
                let mut tx = lock(&core.tx);
                let TxState { journal, txn, .. } = &mut *tx;
                if let Some(j) = journal.as_mut() {
                    if !txn.rollback_command(j, &core.audit, n.pid) {
                        core.audit.emit(audit::Event::Error(audit::ErrorEvent {
                            message: format!(
                                "on-deny rollback: pid {} belongs to no command of the run (the root process itself?): the call just fails",
                                n.pid
                            ),
                        }));
                    }
                }
            }
            answer(core, n.id, Answer::Errno(verdict.errno));
        }
        Action::Kill => {
            // End the run before the caller can run on past its denied call.
            core.shared.policy_stop.store(true, Ordering::SeqCst);
            crate::launch::kill_descendants();
            answer(core, n.id, Answer::Errno(verdict.errno));
        }
    }
    record_decision(core, record, start);
}

/// True when every target of `d` lies in (or is) something this run created.
fn is_fresh(created: &HashSet<PathBuf>, d: &resolve::Resolved) -> bool {
    if created.is_empty() {
        return false;
    }
    let under_created = |p: &Path| p.ancestors().any(|a| created.contains(a));
    let mut any = false;
    for p in d.paths() {
        if !under_created(p) {
            return false;
        }
        any = true;
    }
    any
}

/// Answer the kernel.
fn answer(core: &Core, id: u64, answer: Answer) {
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
    }
}

fn record_decision(core: &Core, r: Record, start: Instant) {
    let seq = core.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let latency_us = start.elapsed().as_micros() as u64;
    core.audit.decision(r.into_event(seq, latency_us));
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
        d: &resolve::Resolved,
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
            rule: self.verdict.rule.to_string(),
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
