//! The supervisor: threads that receive every trapped call from the listener, judge it,
//! carry out the judgement and record it. Each notification travels down typed stages, each
//! visited once, in [`handle`]:
//!
//! | stage | module | produces |
//! |---|---|---|
//! | receive | [`receive`] | a [`Notif`]: number, registers, pid |
//! | decode | [`decode`] | a [`decode::Call`]: typed arguments, from registers only |
//! | read | [`read`] | a [`read::Memory`]: every pointer argument, copied in one go |
//! | resolve | [`resolve`] | a [`resolve::Resolved`]: pinned targets, exe, address; or a [`decode::Failure`] |
//! | (validate) | | `SECCOMP_IOCTL_NOTIF_ID_VALID`: everything read above is the caller's (before guard acts on it; a call only answered needs no check) |
//! | decide | [`judge`] | a [`Verdict`](crate::policy::Verdict), from the pure `policy::decide` |
//! | react | `policy::react`, then [`react`] | a [`Reaction`](crate::policy::Reaction), carried out: checkpoints, rollback, kill |
//! | perform | [`perform`] ([`emulate`]) | the call done for the caller, journaled first |
//! | answer | [`answer`] | the kernel's answer to the caller |
//! | record | [`record`] | one `decision` event in the audit log |
//!
//! Any failure to read or decode is a deny (fail closed). `handle` applies no policy itself:
//! what a verdict means for the run is `policy::react`'s to say.

// The stage table above is for contributors and links the private stage modules; it reads
// whole with `cargo doc --document-private-items` (this module is hidden from the public docs).
#![allow(rustdoc::private_intra_doc_links)]

mod answer;
mod base;
mod beneath;
mod callers;
mod decode;
mod emulate;
mod explain;
mod fifo;
mod git;
mod hosts;
#[doc(hidden)]
pub mod hotpath;
mod judge;
mod memory;
mod meta;
mod names;
mod net;
mod perform;
pub mod preview;
mod procinfo;
mod react;
mod read;
mod reads;
mod receive;
mod record;
mod resolve;
mod shared;
mod sockaddr;
mod target;
mod txn;
mod volume;
mod warm;

use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::audit::AuditHandle;
use crate::creds;
use crate::journal::Journal;
use crate::policy::{self, Policy, Situation};
use crate::sys::{Listener, Notif};

use answer::Answer;
use decode::Failure;
use record::Record;

pub use emulate::Inject;
pub use explain::Explanations;
pub use hosts::{nameservers, PendingHosts};
pub use net::{add_addresses, resolver_options};
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
    /// The run's refusals, and how many were explained on the refused process's stderr.
    pub explanations: Explanations,
}

/// What the workers share. Everything that orders the workspace's history (the journal, the
/// checkpoints, what the run created) sits behind one lock: a judged change is recorded and
/// performed under it, so the journal's order is the order the changes happened in.
struct Core {
    listener: Arc<Listener>,
    audit: AuditHandle,
    shared: Arc<Shared>,
    stop: OwnedFd,
    policy: Arc<RwLock<Arc<Policy>>>,
    hosts: Mutex<hosts::PendingHosts>,
    /// What the network calls share with the DNS relay (the policy above, the audit log).
    net: Arc<net::NetState>,
    procs: Mutex<procinfo::ProcCache>,
    /// The credentials of the threads that make judged calls.
    callers: callers::Callers,
    inject: emulate::Inject,
    tx: TxLock,
    /// Entries this run created that `protect` patterns care about (see `Request::fresh`); its
    /// own lock, so judging a call never waits for a slow journal operation.
    created: Mutex<HashSet<PathBuf>>,
    /// The entries this run made in shared directories (`fs.shared`).
    made_shared: shared::Made,
    /// Deletes counted per command, for `transaction.mass-delete`.
    volume: Mutex<volume::Volume>,
    /// What the run's refusals were and what the refused processes were told.
    refusals: Mutex<explain::Refusals>,
    /// The run's root process.
    root: RootPid,
    /// The run's process tree: what a `kill` verdict ends.
    tree: crate::launch::RunTree,
    /// See [`Setup::exec_roots`].
    exec_roots: Option<explain::ExecRoots>,
    /// The run has a journal (it is handed back at the end, so look here, not at `tx`).
    transactional: bool,
    /// Record every read-only open in the audit log (`guard learn`).
    record_reads: bool,
    /// Held by the one worker that receives; the others handle what they took.
    /// RECV blocks when nothing is pending, so two workers must never race for one
    /// notification.
    receiving: Mutex<()>,
    /// Per worker: when it started handling its current call (microseconds since `t0`, plus
    /// one), or 0 when it is not handling one.
    busy_since: Vec<AtomicU64>,
    /// How many calls the workers have taken: the coordinating thread slows its polling
    /// while this stands still.
    calls: AtomicU64,
    /// Lets a worker wake the coordinating thread from its idle polling.
    doze: receive::Doze,
    t0: Instant,
    /// Set when a worker saw the end (the listener hung up, or stop): standbys leave.
    finished: AtomicBool,
    /// Set before the standbys are started: from then on a standby goes home after each call
    /// (`sys::fs::leave`), and so does worker 0 unless no standby can have taken a call
    /// during its own (`receive::after_call`), so that none holds a directory another may
    /// remove (see `base::forget`).
    standbys: AtomicBool,
    /// Calls the standbys have taken off the listener, counted as each is taken.
    standby_calls: AtomicU64,
    /// Worker 0 waits in RECV and is woken with `sys::process::wake_signal` at the end; false
    /// when that signal already has a handler of the embedding program's: worker 0 then polls
    /// the listener and the stop pipe, as the standbys do.
    waits_in_recv: bool,
    seq: Arc<AtomicU64>,
}

/// The lock every change to the workspace's names is made under, with a count of its takings
/// and releases ([`TxGuard`]).
struct TxLock(Mutex<TxState>);

/// Every taking and every release of a [`TxLock`] adds one. A worker notes the count before
/// its walk looks at the call's path ([`target::Target::looked`]). Once it holds the
/// lock, a count at its taking (`TxGuard::since`) equal to that note proves that nobody held
/// the lock since the look, so no judged change to a workspace name came in between: the
/// journal may decide on what the walk saw instead of looking again (`emulate::looked`).
/// Shared by every supervisor in the process: another's turns only make a worker look again.
static TX_TURNS: AtomicU64 = AtomicU64::new(0);

/// [`TX_TURNS`] now: what a walk notes before it looks at a name.
fn tx_turns() -> u64 {
    TX_TURNS.load(Ordering::SeqCst)
}

impl TxLock {
    fn take(&self) -> TxGuard<'_> {
        let state = lock(&self.0);
        let since = TX_TURNS.fetch_add(1, Ordering::SeqCst);
        TxGuard { state, since }
    }
}

/// The transactional state, locked; its release counts one more turn.
struct TxGuard<'a> {
    state: std::sync::MutexGuard<'a, TxState>,
    /// [`TX_TURNS`] when this lock was taken, before it counted its own taking.
    since: u64,
}

impl std::ops::Deref for TxGuard<'_> {
    type Target = TxState;
    fn deref(&self) -> &TxState {
        &self.state
    }
}

impl std::ops::DerefMut for TxGuard<'_> {
    fn deref_mut(&mut self) -> &mut TxState {
        &mut self.state
    }
}

impl Drop for TxGuard<'_> {
    fn drop(&mut self) {
        // Counted while still held: the state's guard is dropped after this.
        TX_TURNS.fetch_add(1, Ordering::SeqCst);
    }
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
    /// The pid of the run's root process (the command guard started), which may be set a
    /// moment after the supervisor starts ([`RootPid`]).
    pub root: RootPid,
    /// The run's process tree (the sandbox's init and its descendants).
    pub tree: crate::launch::RunTree,
    /// The roots Landlock grants execute on (read and write roots, as the profile lists
    /// them), when a Landlock ruleset is in force: an exec of a program outside them is
    /// explained to the caller, since the kernel refuses it after the supervisor lets it
    /// through. The supervisor resolves their symlinks only when a program lies outside them
    /// as written.
    pub exec_roots: Option<Vec<PathBuf>>,
    /// Record every read-only open the filter traps (it traps them all for `guard learn`).
    pub record_reads: bool,
}

/// The pid of the run's root process, which guard may learn a moment after the supervisor
/// starts: the sandbox's init reports it once it has forked the command, and the supervisor's
/// threads are started while that report is on its way (they would otherwise be started on
/// the command's start-up path, its first call waiting for them). A worker that needs the pid
/// before it is set (for the command's first call, which can only follow the report) waits
/// for it.
#[derive(Debug, Clone, Default)]
pub struct RootPid(Arc<RootCell>);

#[derive(Debug, Default)]
struct RootCell {
    pid: std::sync::OnceLock<u32>,
    set: Mutex<()>,
    cv: std::sync::Condvar,
}

impl RootPid {
    /// Not known yet: [`RootPid::set`] tells it.
    pub fn pending() -> RootPid {
        RootPid::default()
    }

    /// Already known.
    pub fn known(pid: u32) -> RootPid {
        let root = RootPid::default();
        root.set(pid);
        root
    }

    /// Tells the pid (once; a later value is ignored). A run that cannot learn it sets 0,
    /// which no process has, so that no worker waits for it.
    pub fn set(&self, pid: u32) {
        let _ = self.0.pid.set(pid);
        let _held = lock(&self.0.set);
        self.0.cv.notify_all();
    }

    /// The root's pid, for a call by `caller` (`exec`: an `execve`) in the tree of the
    /// sandbox's `init`. Until guard has read the init's report, a caller of `execve` whose
    /// parent is the init is the root: the init forks nothing else and makes no judged call,
    /// and nothing of the tree runs but the root, before the root's first exec is answered
    /// (the report comes before that exec). That exec is judged at once, not when guard's main
    /// thread reads the report, which it does once it has started the supervisor's threads
    /// (the worker waited 70-150 µs for it here, on the path of every run's start). Any
    /// other caller waits for the report.
    fn for_call(&self, caller: u32, exec: bool, init: u32) -> u32 {
        if let Some(&pid) = self.0.pid.get() {
            return pid;
        }
        if exec && txn::stat_of(caller).is_some_and(|(parent, _)| parent == init) {
            return caller;
        }
        self.get()
    }

    /// The pid, waiting until it is set.
    fn get(&self) -> u32 {
        if let Some(&pid) = self.0.pid.get() {
            return pid;
        }
        let mut held = lock(&self.0.set);
        loop {
            if let Some(&pid) = self.0.pid.get() {
                return pid;
            }
            held = self
                .0
                .cv
                .wait(held)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl Core {
    /// The run's root process (see [`RootPid`]).
    fn root(&self) -> u32 {
        self.root.get()
    }
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
            tree,
            exec_roots,
            record_reads,
        } = setup;
        // Looked up at the command's first network call (`judge.rs`), not at start-up.
        let hosts = hosts::PendingHosts::deferred(&policy);
        let volume = Mutex::new(volume::Volume::new(&policy));
        let listener = Arc::new(listener);
        let policy = Arc::new(RwLock::new(policy));
        let seq = Arc::new(AtomicU64::new(0));
        let net = Arc::new(net::NetState::new(
            Arc::clone(&policy),
            audit.clone(),
            Arc::clone(&seq),
            Arc::clone(&listener),
        ));
        Supervisor {
            core: Arc::new(Core {
                listener,
                audit,
                shared,
                stop,
                policy,
                hosts: Mutex::new(hosts),
                net,
                procs: Mutex::new(procinfo::ProcCache::default()),
                // The sandbox's init has the command's credentials: the command is its fork
                // and changes none of them before its exec (no capability is left to, and
                // no_new_privs keeps a set-id program from it). So the init's tell them
                // before the command's pid is known.
                callers: callers::Callers::new(tree.init_pid() as u32),
                inject,
                created: Mutex::new(HashSet::new()),
                made_shared: shared::Made::default(),
                volume,
                refusals: Mutex::new(explain::Refusals::default()),
                root,
                tree,
                exec_roots: exec_roots.map(explain::ExecRoots::new),
                transactional: journal.is_some(),
                record_reads,
                tx: TxLock(Mutex::new(TxState {
                    journal,
                    txn: txn::Txn::new(),
                })),
                receiving: Mutex::new(()),
                busy_since: (0..receive::WORKERS).map(|_| AtomicU64::new(0)).collect(),
                calls: AtomicU64::new(0),
                doze: receive::Doze::new(),
                t0: Instant::now(),
                finished: AtomicBool::new(false),
                standbys: AtomicBool::new(false),
                standby_calls: AtomicU64::new(0),
                waits_in_recv: match crate::sys::process::install_wake_handler() {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::debug!(
                            "the wake-up signal is taken ({e}): the receiving thread polls"
                        );
                        false
                    }
                },
                seq,
            }),
        }
    }

    /// Run the receiving worker, and a coordinating thread that starts the standbys the first
    /// time a call is in hand for longer than [`receive::SLOW`] (most runs never need them:
    /// two thread starts fewer before the command runs). The returned thread ends when the
    /// receiving worker has, and hands back the report.
    pub fn spawn(self) -> io::Result<Running> {
        let core = Arc::clone(&self.core);
        let (ended, primary_ended) = std::sync::mpsc::channel::<()>();
        let primary = std::thread::Builder::new()
            .name("guard-supervisor-0".into())
            .spawn(move || {
                receive::worker(&core, 0);
                let _ = ended.send(());
            })?;
        let (report_tx, report) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("guard-supervisor".into())
            .spawn(move || {
                let core = self.core;
                // The receiving thread ends when no process holds the filter any more (or on
                // stop): nothing is left to judge. Meanwhile, the standbys are started once a
                // call is slow; then they park while no call is slow, are woken here when one
                // is, and at the end, when they see it and leave.
                let mut standbys: Option<Vec<std::thread::Thread>> = None;
                let mut activity = receive::Activity::default();
                // Until it ends, or panics (the sender is then gone).
                while let Err(std::sync::mpsc::TryRecvError::Empty) = primary_ended.try_recv() {
                    if receive::end_of_run(&core, activity.tick(&core)) {
                        core.finished.store(true, Ordering::Relaxed);
                        if core.waits_in_recv {
                            wake(&core, &primary, &primary_ended);
                        }
                        break;
                    }
                    if !receive::someone_slow(&core, usize::MAX) {
                        continue;
                    }
                    let threads = standbys.get_or_insert_with(|| {
                        core.standbys.store(true, Ordering::SeqCst);
                        (1..receive::WORKERS)
                            .filter_map(|i| {
                                let core = Arc::clone(&core);
                                std::thread::Builder::new()
                                    .name(format!("guard-supervisor-{i}"))
                                    .spawn(move || receive::worker(&core, i))
                                    .map_err(|e| {
                                        tracing::warn!(
                                            "cannot start a standby supervisor thread: {e}"
                                        )
                                    })
                                    .ok()
                                    .map(|h| h.thread().clone())
                            })
                            .collect()
                    });
                    threads.iter().for_each(std::thread::Thread::unpark);
                }
                standbys
                    .iter()
                    .flatten()
                    .for_each(std::thread::Thread::unpark);
                // The receiving worker has returned (it said so, or its sender is gone with
                // a panic): its thread is left to exit on its own, not waited for.
                drop(primary);
                // One still finishing a call is waited for, so its change is in the journal
                // handed back and its decision in the audit log.
                core.finished.store(true, Ordering::Relaxed);
                core.net.stop.store(true, Ordering::Relaxed);
                receive::wait_idle(&core, Duration::from_secs(5));
                let journal = core.tx.take().journal.take();
                let explanations = lock(&core.refusals).stats.clone();
                let _ = report_tx.send(Report {
                    journal,
                    explanations,
                });
            })?;
        Ok(Running { thread, report })
    }
}

/// The supervisor of a run, started.
pub struct Running {
    thread: JoinHandle<()>,
    /// The report, sent as the thread's last act: the run's end waits for it, not for the
    /// thread's exit, which takes tens of microseconds more.
    report: std::sync::mpsc::Receiver<Report>,
}

impl Running {
    /// Whether the supervisor has ended (no process holds the filter any more).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the supervisor's report; `None` when it panicked.
    pub fn report(self) -> Option<Report> {
        self.report.recv().ok()
    }
}

/// Wakes the receiving worker from the receive ioctl it waits in, until it has seen
/// `finished` and ended. It is only signalled while it is not handling a call, so no system
/// call of a call in hand (an injection waits interruptibly) is cut short.
fn wake(core: &Core, primary: &JoinHandle<()>, ended: &std::sync::mpsc::Receiver<()>) {
    use std::os::unix::thread::JoinHandleExt;
    loop {
        if core.busy_since[0].load(Ordering::Acquire) == 0 {
            if let Err(e) = crate::sys::process::interrupt_thread(primary.as_pthread_t()) {
                tracing::warn!("cannot wake the receiving supervisor thread: {e}");
            }
        }
        match ended.recv_timeout(Duration::from_millis(1)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

/// A call ready to be judged: resolved, or failed before it could be.
enum Judged {
    Call(Box<resolve::Resolved>),
    Failed(decode::Failure),
}

impl Judged {
    /// The facts `policy::react` needs besides the verdict.
    fn situation(&self, transactional: bool) -> Situation {
        Situation {
            new_command: matches!(self, Judged::Call(r) if r.new_command),
            transactional,
        }
    }
}

/// One notification, down the stages: decode, read, resolve, validate, decide, react, perform,
/// answer, record. The resolve and perform stages act with the caller's credentials where
/// they act for it (see `crate::creds`). A refused call is explained to the caller before it
/// is answered; a repeat of a process's refused exec (a shell trying each `PATH` entry) is
/// answered like the first but neither explained nor recorded again. `start`: when the
/// notification was received.
fn handle(core: &Core, n: Notif, inject: Inject, start: Instant) {
    // A call of a thread whose chdir guard let through: that chdir is done.
    base::settle(n.pid);
    let call = decode::decode(&n);
    #[cfg(debug_assertions)]
    fail_point(&call);
    match call {
        Ok(decode::Call {
            args: decode::Args::Credentials { umask },
            ..
        }) => return credentials_change(core, &n, umask),
        Ok(decode::Call {
            args: decode::Args::Cwd,
            ..
        }) => return cwd_change(core, &n),
        _ => {}
    }
    let caller = core.callers.caller(n.pid, false);
    let resolved = call.and_then(|call| {
        let caller = caller.as_ref().map_err(|e| {
            Failure::undecodable(call.syscall, e, "cannot read the caller's credentials")
        })?;
        let mem = read::read(n.pid, &call);
        creds::for_caller(caller.clone(), || {
            let exec = matches!(call.args, decode::Args::Exec { .. });
            let root = core.root.for_call(n.pid, exec, core.tree.init_pid() as u32);
            resolve::resolve(&n, &call, mem, root)
        })
    });
    // Everything read from the caller's memory and its /proc entry is only trusted if the
    // caller is still the same task, waiting in the same call: ID_VALID tells, before guard
    // acts on any of it. A call guard only answers needs no such check, since its answer
    // reaches the caller only if it is still waiting in this very call (the answer fails
    // otherwise, and nothing is recorded): a call let through unjudged, and an allowed
    // removal of a name that is not there (`absent`, answered ENOENT below).
    let judged = match resolved {
        Ok(resolve::Resolution::Read(r)) => {
            if answer::answer(core, n.id, Answer::Continue) && core.record_reads {
                reads::record(core, &n, &r, start);
            }
            return;
        }
        Ok(resolve::Resolution::Pass) => {
            answer::answer(core, n.id, Answer::Continue);
            return;
        }
        Ok(resolve::Resolution::Carry(act)) => {
            if core.listener.id_valid(n.id) {
                net::carry(core, &n, &act);
            }
            return;
        }
        Ok(resolve::Resolution::Judge(r)) => Judged::Call(r),
        Err(f) => Judged::Failed(f),
    };
    let absent = matches!(&judged, Judged::Call(r) if r.act.removes_nothing());
    if !absent && !core.listener.id_valid(n.id) {
        return;
    }
    let (policy, verdict) = judge::decide(core, n.pid, &judged);
    let repeat = explain::is_repeat(core, n.pid, &judged, &verdict);
    let reaction = policy::react(&policy, &verdict, &judged.situation(core.transactional));
    let who = Record::who(core, &n, &judged);
    if absent {
        if reaction == policy::Reaction::Allow {
            // Nothing to remove, nothing done: the kernel's own answer, if the caller is still
            // there to get it. Deciding changed nothing either (a missing name is not counted
            // for mass-delete).
            if answer::answer(core, n.id, Answer::Errno(libc::ENOENT)) && !repeat {
                record::record(core, Record::of(who, &n, judged, verdict, reaction), start);
            }
            return;
        }
        // A refusal is explained to the caller, a checkpoint taken: validate first.
        if !core.listener.id_valid(n.id) {
            return;
        }
    }
    let mut notes = Vec::new();
    let answer = match (
        react::react(core, n.pid, &judged, &verdict, reaction),
        &judged,
    ) {
        (react::Next::Perform(tx), Judged::Call(r)) => {
            if r.op == policy::Op::Exec {
                // Its credentials are computed anew, and its process's other threads end.
                core.callers.exec(n.pid);
            }
            notes.extend(explain::landlock_refuses_exec(core, n.pid, r, &policy));
            let caller = if r.act.creates_with_mode() {
                core.callers.caller(n.pid, true)
            } else {
                caller
            };
            match caller {
                Ok(caller) => {
                    let (answer, note) = creds::for_caller(caller, || {
                        perform::perform(core, &n, r, tx, inject, &policy)
                    });
                    notes.extend(note);
                    answer
                }
                // Not performed without the caller's credentials. The caller may be gone
                // (then the answer reaches nobody), or guard may be out of descriptors or
                // memory: a caller that is still waiting must get an answer, or it waits for
                // good.
                Err(e) => {
                    notes.push(format!(
                        "not performed: cannot read the caller's credentials: {e}"
                    ));
                    Some(Answer::Errno(e.raw_os_error().unwrap_or(libc::EIO)))
                }
            }
        }
        (react::Next::Refuse(errno), _) => {
            if verdict.is_refusal() && !repeat {
                explain::tell(core, n.pid, &judged, &verdict, &policy);
            }
            Some(Answer::Errno(errno))
        }
        // A failed call's verdict is a denial: policy::react never lets it through.
        (react::Next::Perform(_), Judged::Failed(f)) => Some(Answer::Errno(f.errno)),
    };
    if let Some(a) = answer {
        answer::answer(core, n.id, a);
    }
    if !repeat {
        let mut record = Record::of(who, &n, judged, verdict, reaction);
        notes.into_iter().for_each(|note| record.note(note));
        record::record(core, record, start);
    }
}

/// Debug builds only: `GUARD_DEBUG_PANIC_ON=SYSCALL` makes the handling of that system call
/// panic, so that tests can prove a failing worker still answers its caller
/// (`a_panic_while_judging_a_call_fails_that_call_and_the_run_goes_on`).
#[cfg(debug_assertions)]
fn fail_point(call: &Result<decode::Call, Failure>) {
    static ON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| std::env::var("GUARD_DEBUG_PANIC_ON").ok());
    if let (Some(on), Ok(call)) = (on, call) {
        if call.syscall == on {
            panic!("GUARD_DEBUG_PANIC_ON={on}");
        }
    }
}

/// A call that changes the caller's credentials or umask: let through, with the cache of
/// callers' credentials told first (its next call re-reads them) or, for umask, once the
/// call is on its way.
fn credentials_change(core: &Core, n: &Notif, umask: Option<u32>) {
    match umask {
        None => core.callers.changing(n.pid),
        Some(_) => core.callers.umask_calling(),
    }
    let answered = core.listener.respond(n.id, 0, 0, true);
    if let (Some(mask), Ok(())) = (umask, answered) {
        core.callers.umask_set(n.pid, mask);
    }
}

/// A chdir or fchdir: let through, with the working directories the workers remember made
/// stale first (`base`).
fn cwd_change(core: &Core, n: &Notif) {
    base::cwd_changing(n.pid);
    // Refused only should the listener be gone, and the caller with it.
    let _ = core.listener.respond(n.id, 0, 0, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx_lock() -> Arc<TxLock> {
        Arc::new(TxLock(Mutex::new(TxState {
            journal: None,
            txn: txn::Txn::new(),
        })))
    }

    /// A worker that needs the root's pid before the run has read it waits until it is set,
    /// and gets the first value set; a pid known at the start is there at once.
    #[test]
    fn the_root_pid_is_waited_for_until_it_is_set() {
        let root = RootPid::pending();
        let waiter = {
            let root = root.clone();
            std::thread::spawn(move || root.get())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the worker waits for the pid");
        root.set(4242);
        root.set(7);
        assert_eq!(waiter.join().expect("waiter"), 4242);
        assert_eq!(root.get(), 4242);
        assert_eq!(RootPid::known(99).get(), 99);
    }

    /// Before the pid is set, an exec by a child of the init is the root's own (it is
    /// answered without waiting); an exec by any other process, and any other call, waits
    /// for the pid.
    #[test]
    fn the_roots_first_exec_does_not_wait_for_its_pid() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        let init = std::process::id();
        let root = RootPid::pending();
        let first = {
            let root = root.clone();
            std::thread::spawn(move || root.for_call(pid, true, init))
        };
        // Not answered within ten seconds: it waits for the pid, as it must not.
        for _ in 0..1000 {
            if first.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(first.is_finished(), "the exec of a child of the init waits");
        assert_eq!(first.join().expect("first"), pid, "a child of the init");
        assert!(root.0.pid.get().is_none(), "nothing is set by it");
        for (exec, init) in [(true, init + 1), (false, init)] {
            let root = RootPid::pending();
            let waiter = {
                let root = root.clone();
                std::thread::spawn(move || root.for_call(pid, exec, init))
            };
            std::thread::sleep(Duration::from_millis(50));
            assert!(!waiter.is_finished(), "exec {exec}, init {init}: waits");
            root.set(4242);
            assert_eq!(waiter.join().expect("waiter"), 4242);
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The journal decides on what a walk saw only when the count noted before the walk equals
    /// the count at the taking of the lock: never when another worker took the lock after the
    /// note, or held it (making its change) while the walk looked. Other tests' supervisors in
    /// this process only add turns, so the refusals are asserted every time.
    #[test]
    fn a_walks_note_stands_only_while_nobody_held_the_lock() {
        let tx = tx_lock();
        // Another worker takes the lock, changes something and lets go after the note.
        let looked = tx_turns();
        drop(tx.take());
        assert_ne!(tx.take().since, looked);

        // Another worker holds the lock while the walk looks, and lets go before this one
        // takes it.
        let (taken_tx, taken) = std::sync::mpsc::channel();
        let (looked_tx, looked_rx) = std::sync::mpsc::channel::<()>();
        let other = {
            let tx = Arc::clone(&tx);
            std::thread::spawn(move || {
                let held = tx.take();
                taken_tx.send(()).expect("send");
                looked_rx.recv().expect("recv");
                drop(held);
            })
        };
        taken.recv().expect("taken");
        let looked = tx_turns();
        looked_tx.send(()).expect("send");
        other.join().expect("join");
        assert_ne!(tx.take().since, looked);

        // Nobody in between: the note stands (retried, since other tests may take turns).
        let stood = (0..1000).any(|_| {
            let looked = tx_turns();
            tx.take().since == looked
        });
        assert!(stood, "a note never stood with nobody holding the lock");
    }
}
