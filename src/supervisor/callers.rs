//! The credentials of the threads that make judged calls ([`Creds`]), read from
//! /proc/TID/status once and cached, because reading that file costs more than the rest of a
//! judged call (measured: 9-16 us).
//!
//! A cached entry stays exact because credentials only change through calls guard traps:
//! the set*id family, setgroups and capset (each drops the caller's entry before it is let
//! through; the thread is blocked until it is done, so its next call re-reads), exec (drops
//! the process's entries: exec changes capabilities, and a thread that execs takes over its
//! process's id) and umask (see below). No user namespace can be made in the sandbox, and
//! no_new_privs keeps set-id programs and file capabilities powerless. A thread id may be
//! reused once its thread is gone: each entry holds a pidfd of its thread (Linux 6.9) and
//! is only used while that thread exists; without thread pidfds an entry lives one second,
//! far less than the whole pid space takes to wrap.
//!
//! The umask is shared by a process's threads and changes with umask(2), which guard lets
//! through and cannot see finish. The new mask is known from the call's argument, so guard
//! records it for the process at once (another thread's concurrent create may see it a little
//! early, one of the orders the kernel could have run them in) and applies that record over
//! whatever /proc shows, until the process is gone. With the run's credentials fixed (below),
//! that record is all a create needs of a process that asks through its leader (a
//! single-threaded `sed -i`, which sets its umask and then creates): nothing is read in /proc,
//! and umask(2) itself finds the process of a leader with `pidfd_open` alone.
//!
//! When the run's command cannot change its credentials at all ([`Creds::can_change`], the
//! common case: an unprivileged guard, or root with the command's capabilities dropped),
//! every process of the run has the command's credentials but for the umask, and only calls
//! that create something look anything up. An exec then drops nothing either: the credentials
//! cannot change and the process keeps its umask. Until a process of the run calls umask(2),
//! not even those: a process starts with its parent's umask and only umask(2) changes it, so
//! until then every process has the command's (read with the credentials), and a new process's
//! first create reads nothing in /proc (`/proc/TID/status` costs 9-16 us; a shell script's
//! every `cp`, `sed -i` and `>` is such a create).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::creds::{Caller, Creds};
use crate::sys::creds::{pidfd_open_thread, task_exists};
use crate::sys::process::pidfd_open;

/// How long an entry lives where threads have no pidfds.
const TTL: Duration = Duration::from_secs(1);
/// How many entries the cache keeps. Each holds a pidfd, a descriptor of guard's: a run's
/// processes come and go by the thousand (a shell loop's `sed -i` each), and 4,096 entries of
/// gone threads, their pidfds kept until the table was full, took guard past the usual
/// soft limit of 1,024 descriptors.
const MAX_ENTRIES: usize = 256;

struct Entry {
    creds: Arc<Creds>,
    /// The thread the entry was read from (`None`: no thread pidfds here; `at` bounds it).
    pidfd: Option<Arc<OwnedFd>>,
    at: Instant,
}

impl Entry {
    fn valid(&self) -> bool {
        match &self.pidfd {
            Some(fd) => task_exists(fd.as_fd()),
            None => self.at.elapsed() < TTL,
        }
    }
}

/// A umask set by umask(2) for a process, while that process exists.
struct UmaskRecord {
    mask: u32,
    process: OwnedFd,
    /// When the process was last seen alive (its pidfd asked, or the record made).
    seen: Instant,
}

/// How long a umask record's process, once seen alive, is taken to live without asking its
/// pidfd again: a record names another process only once the whole pid space has wrapped
/// (ids are handed out in turn), which takes far longer, as for entries without a thread pidfd
/// ([`TTL`]). A burst of creates (git writing its objects, a `sed -i` setting its mask back)
/// asks once, not at every call.
const SEEN_FOR: Duration = Duration::from_millis(100);

impl UmaskRecord {
    /// Whether the process the record was made for still lives, as of `now`.
    fn lives(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.seen) < SEEN_FOR {
            return true;
        }
        let lives = task_exists(self.process.as_fd());
        if lives {
            self.seen = now;
        }
        lives
    }
}

#[derive(Default)]
struct Tables {
    entries: HashMap<u32, Entry>,
    umasks: HashMap<u32, UmaskRecord>,
    /// Lookups left before a full table is looked over for gone threads again: when
    /// [`MAX_ENTRIES`] threads all live, a look at each of them (a `pidfd_send_signal` each)
    /// on every new one would cost more than re-reading /proc does.
    until_sweep: usize,
}

impl Tables {
    /// The umask umask(2) set for process `tgid`, while that process lives: a record of a
    /// process that is gone says nothing of another given its id since.
    fn umask_of(&mut self, tgid: u32) -> Option<u32> {
        let r = self.umasks.get_mut(&tgid)?;
        r.lives(super::answer::received()).then_some(r.mask)
    }
}

/// `fixed` with the umask `mask`.
fn with_umask(fixed: &Arc<Creds>, mask: u32) -> Arc<Creds> {
    if fixed.umask == mask {
        return Arc::clone(fixed);
    }
    Arc::new(Creds {
        umask: mask,
        ..Creds::clone(fixed)
    })
}

/// The cache (see the module doc).
pub struct Callers {
    /// The credentials of every process of the run, when they cannot change.
    fixed: Option<Arc<Creds>>,
    /// Whether a process of the run has called umask(2): set before the call is let through.
    /// Until then every process's umask is `fixed`'s.
    umask_called: AtomicBool,
    tables: Mutex<Tables>,
}

fn lock(m: &Mutex<Tables>) -> std::sync::MutexGuard<'_, Tables> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Callers {
    /// The cache for a run whose command is process `root`.
    pub fn new(root: u32) -> Callers {
        let fixed = Creds::of_thread(root)
            .ok()
            .filter(|c| !c.can_change())
            .map(Arc::new);
        Callers {
            fixed,
            umask_called: AtomicBool::new(false),
            tables: Mutex::new(Tables::default()),
        }
    }

    /// The caller `tid` as a call it makes is to be performed: `umask` when the call may
    /// create something (its mode goes through the umask).
    pub fn caller(&self, tid: u32, umask: bool) -> io::Result<Caller> {
        let own_umask = umask && self.umask_called.load(Ordering::Acquire);
        if let Some(fixed) = &self.fixed {
            if !own_umask {
                return Ok(Caller {
                    creds: Arc::clone(fixed),
                });
            }
            // A process that set its umask itself, asking through its leader (the id the
            // record is kept under: no other live thread has it): the record is its umask,
            // and the credentials are the run's. /proc/TID/status costs 16-20 us here.
            if let Some(mask) = self.recorded_umask(tid) {
                return Ok(Caller {
                    creds: with_umask(fixed, mask),
                });
            }
        }
        let creds = self.lookup(tid)?;
        let creds = match &self.fixed {
            // Only the umask is the thread's own.
            Some(fixed) => with_umask(fixed, creds.umask),
            None => creds,
        };
        Ok(Caller { creds })
    }

    /// The umask umask(2) set for the process whose leader is `tid`, while that process lives.
    fn recorded_umask(&self, tid: u32) -> Option<u32> {
        lock(&self.tables).umask_of(tid)
    }

    fn lookup(&self, tid: u32) -> io::Result<Arc<Creds>> {
        let cached = {
            let t = lock(&self.tables);
            t.entries
                .get(&tid)
                .map(|e| (Arc::clone(&e.creds), e.pidfd.clone(), e.at))
        };
        if let Some((creds, pidfd, at)) = cached {
            let entry = Entry { creds, pidfd, at };
            if entry.valid() {
                return Ok(entry.creds);
            }
        }
        // Open the pidfd first: if the thread is the one /proc then describes, the pidfd
        // names it (a thread id cannot be reused while the thread exists).
        let pidfd = pidfd_open_thread(tid).ok().map(Arc::new);
        let mut creds = Creds::of_thread(tid)?;
        let mut t = lock(&self.tables);
        if let Some(mask) = t.umask_of(creds.tgid) {
            creds.umask = mask;
        }
        let creds = Arc::new(creds);
        if t.entries.len() >= MAX_ENTRIES {
            if t.until_sweep == 0 {
                t.entries.retain(|_, e| e.valid());
                t.until_sweep = MAX_ENTRIES / 4;
            } else {
                t.until_sweep -= 1;
            }
        }
        // A full table of live threads: this one is read again on its next create.
        if t.entries.len() < MAX_ENTRIES {
            t.entries.insert(
                tid,
                Entry {
                    creds: Arc::clone(&creds),
                    pidfd,
                    at: Instant::now(),
                },
            );
        }
        Ok(creds)
    }

    /// Thread `tid` is about to change its credentials (set*id, setgroups, capset).
    pub fn changing(&self, tid: u32) {
        lock(&self.tables).entries.remove(&tid);
    }

    /// Thread `tid` is about to exec: its process's threads end, it takes over the process's
    /// id, and its capabilities are computed anew.
    pub fn exec(&self, tid: u32) {
        if self.fixed.is_some() {
            // Credentials fixed for the run stay as they are through an exec, and so does the
            // umask, which the process keeps: every entry is still right. (The thread that
            // execs takes over its process's id, whose entry had that process's umask.) Here
            // the walk below cost an exec 12 us: a pidfd_open of the new process and a pass
            // over the entries of every process that has created something.
            return;
        }
        let known = {
            let mut t = lock(&self.tables);
            if t.entries.is_empty() {
                // Nothing cached, nothing to drop: the common exec reads nothing in /proc.
                return;
            }
            t.entries.remove(&tid).map(|e| e.creds.tgid)
        };
        let tgid = known.or_else(|| {
            // pidfd_open without PIDFD_THREAD accepts only a thread group leader, whose id is
            // its process's: that answers without reading /proc/TID/status.
            if pidfd_open(tid as i32).is_ok() {
                Some(tid)
            } else {
                Creds::of_thread(tid).ok().map(|c| c.tgid)
            }
        });
        if let Some(g) = tgid {
            lock(&self.tables).entries.retain(|_, e| e.creds.tgid != g);
        }
    }

    /// A thread is about to be let through umask(2): from now on a create looks its caller's
    /// umask up.
    pub fn umask_calling(&self) {
        self.umask_called.store(true, Ordering::Release);
    }

    /// Thread `tid` was let through umask(`mask`): from now on its process's umask is `mask`.
    pub fn umask_set(&self, tid: u32, mask: u32) {
        self.umask_calling();
        let mask = mask & 0o777;
        // The process's record, while it still names the process, takes the new mask: one
        // look at its pidfd, where a new record costs an open, a look at every other record
        // and a close (`sed -i`'s second umask(2), which puts the mask back). A record under
        // the caller's own id that names a live process names the caller's: no two live
        // tasks share an id.
        let cached = {
            let mut t = lock(&self.tables);
            let Tables {
                entries, umasks, ..
            } = &mut *t;
            let cached = entries.get(&tid).map(|e| e.creds.tgid);
            let tgid = cached.unwrap_or(tid);
            let now = super::answer::received();
            let live = umasks
                .get_mut(&tgid)
                .and_then(|r| r.lives(now).then_some(r));
            if let Some(r) = live {
                r.mask = mask;
                set_umask(entries, tgid, mask);
                return;
            }
            cached
        };
        // pidfd_open without PIDFD_THREAD opens only a thread group leader, whose id is its
        // process's: a single-threaded process (a shell's `sed -i`) is found without reading
        // /proc/TID/status.
        let found = match cached {
            Some(tgid) => pidfd_open(tgid as i32).map(|fd| (tgid, fd)),
            None => pidfd_open(tid as i32).map(|fd| (tid, fd)).or_else(|_| {
                let tgid = Creds::of_thread(tid)?.tgid;
                pidfd_open(tgid as i32).map(|fd| (tgid, fd))
            }),
        };
        // Gone: nothing of it will create anything.
        let Ok((tgid, process)) = found else {
            return;
        };
        let mut t = lock(&self.tables);
        t.umasks.retain(|_, r| task_exists(r.process.as_fd()));
        t.umasks.insert(
            tgid,
            UmaskRecord {
                mask,
                process,
                seen: super::answer::received(),
            },
        );
        set_umask(&mut t.entries, tgid, mask);
    }
}

/// The cached credentials of process `tgid`'s threads take the umask `mask`.
fn set_umask(entries: &mut HashMap<u32, Entry>, tgid: u32, mask: u32) {
    for e in entries.values_mut().filter(|e| e.creds.tgid == tgid) {
        if e.creds.umask != mask {
            e.creds = Arc::new(Creds {
                umask: mask,
                ..Creds::clone(&e.creds)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        nix::unistd::gettid().as_raw() as u32
    }

    /// A cache whose run has this thread's credentials, fixed.
    fn with_fixed_credentials() -> Callers {
        Callers {
            fixed: Creds::of_thread(me()).ok().map(Arc::new),
            umask_called: AtomicBool::new(false),
            tables: Mutex::new(Tables::default()),
        }
    }

    #[test]
    fn entries_are_read_once_and_dropped_on_change() {
        let c = Callers::new(std::process::id());
        let a = c.caller(me(), true).expect("own thread");
        let b = c.caller(me(), true).expect("own thread");
        assert!(Arc::ptr_eq(&a.creds, &b.creds) || c.fixed.is_some());
        c.changing(me());
        assert!(!lock(&c.tables).entries.contains_key(&me()));
    }

    /// With credentials fixed for the run, an exec drops nothing: the process keeps its
    /// umask, and its entry still has it.
    #[test]
    fn an_exec_keeps_the_entries_of_fixed_credentials() {
        let c = with_fixed_credentials();
        // Some process has called umask(2): creates look their caller up.
        c.umask_calling();
        let before = c.caller(me(), true).expect("own thread").creds.umask;
        c.umask_set(me(), before ^ 0o007);
        c.exec(me());
        assert!(lock(&c.tables).entries.contains_key(&me()));
        assert_eq!(
            c.caller(me(), true).expect("kept").creds.umask,
            before ^ 0o007
        );
    }

    /// With credentials fixed for the run, a create reads nothing until some process has
    /// called umask(2): every process then has the command's umask.
    #[test]
    fn with_fixed_credentials_creates_read_nothing_until_a_umask_call() {
        let c = with_fixed_credentials();
        let fixed = c.fixed.clone().expect("own credentials");
        let creds = c.caller(me(), true).expect("fixed").creds;
        assert!(Arc::ptr_eq(&creds, &fixed));
        assert!(lock(&c.tables).entries.is_empty(), "nothing read");
        c.umask_calling();
        c.caller(me(), true).expect("own thread");
        assert!(
            lock(&c.tables).entries.contains_key(&me()),
            "read once called"
        );
        // A call that creates nothing still reads nothing.
        let other = std::thread::spawn(|| nix::unistd::gettid().as_raw() as u32)
            .join()
            .expect("thread");
        let creds = c.caller(other, false).expect("fixed").creds;
        assert!(Arc::ptr_eq(&creds, &fixed));
    }

    /// With credentials fixed for the run, a process that set its umask itself gets it from
    /// its record when it asks through its leader, and neither umask(2) by the leader nor its
    /// create reads /proc; another thread, whose id has no record, is read (and given the
    /// record too).
    #[test]
    fn a_leader_that_set_its_umask_is_answered_from_its_record() {
        let c = with_fixed_credentials();
        let fixed = c.fixed.clone().expect("own credentials");
        let leader = std::process::id();
        let mask = fixed.umask ^ 0o007;
        let reads = || crate::creds::STATUS_READS.with(std::cell::Cell::get);
        let before = reads();
        c.umask_set(leader, mask);
        assert_eq!(reads(), before, "umask(2) read nothing");
        let creds = c.caller(leader, true).expect("recorded").creds;
        assert_eq!(creds.umask, mask);
        assert_eq!(
            (creds.uids, &creds.groups, creds.cap_effective),
            (fixed.uids, &fixed.groups, fixed.cap_effective)
        );
        assert_eq!(reads(), before, "the create read nothing");
        // A thread that is not the leader: its process is found through /proc, its own
        // umask call is recorded for the process, and its create reads its entry.
        let (tid, done, t) = waiting_thread();
        c.umask_set(tid, fixed.umask);
        assert_eq!(reads(), before + 1);
        assert_eq!(
            c.caller(leader, true).expect("recorded").creds.umask,
            fixed.umask
        );
        assert_eq!(c.caller(tid, true).expect("read").creds.umask, fixed.umask);
        assert_eq!(reads(), before + 2);
        drop(done);
        t.join().expect("join");
    }

    #[test]
    fn a_umask_call_is_recorded_for_the_process() {
        let c = Callers::new(std::process::id());
        c.caller(me(), true).expect("own thread");
        c.umask_set(me(), 0o027);
        assert_eq!(c.caller(me(), true).expect("cached").creds.umask, 0o027);
        // A fresh read of another thread of the process gets the record too.
        let other = std::thread::spawn(|| nix::unistd::gettid().as_raw() as u32);
        let _ = other.join();
        c.exec(me());
        assert_eq!(c.caller(me(), true).expect("re-read").creds.umask, 0o027);
    }

    /// A record of a process that is gone says nothing of the process given its id since
    /// (here: a reaped child's record filed under this process's id), read or not.
    #[test]
    fn a_gone_processs_umask_record_is_not_applied_to_the_next_owner_of_its_id() {
        let c = Callers::new(std::process::id());
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let process = pidfd_open(child.id() as i32).expect("pidfd of the child");
        child.wait().expect("reap");
        let own = Creds::of_thread(me()).expect("own").umask;
        lock(&c.tables).umasks.insert(
            std::process::id(),
            UmaskRecord {
                mask: own ^ 0o070,
                process,
                // Seen alive long enough ago for its pidfd to be asked again.
                seen: Instant::now()
                    .checked_sub(SEEN_FOR * 2)
                    .expect("an instant before"),
            },
        );
        assert_eq!(c.lookup(me()).expect("read").umask, own);
        assert_eq!(c.recorded_umask(std::process::id()), None);
    }

    /// A thread that waits until the returned sender is dropped: its id, the sender, and the
    /// handle to join it by.
    fn waiting_thread() -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32)
                .expect("send");
            let _ = done_rx.recv();
        });
        (rx.recv().expect("tid"), done_tx, t)
    }

    #[test]
    fn an_exec_drops_every_entry_of_its_process() {
        let c = Callers::new(std::process::id());
        let leader = std::process::id();
        // A thread that is not the leader, with no entry of its own, execs: it takes over the
        // leader's id, so the leader's entry goes (its process found through /proc).
        let (tid, done, t) = waiting_thread();
        c.lookup(leader).expect("leader");
        c.exec(tid);
        assert!(!lock(&c.tables).entries.contains_key(&leader));
        // The leader execs with no entry of its own: the other threads' entries go (its
        // process is itself, told by pidfd_open).
        c.lookup(tid).expect("thread");
        c.exec(leader);
        assert!(!lock(&c.tables).entries.contains_key(&tid));
        drop(done);
        t.join().expect("join");
    }

    #[test]
    fn a_gone_thread_is_not_served_from_the_cache() {
        let c = Callers::new(std::process::id());
        let (tid, done_tx, t) = waiting_thread();
        c.lookup(tid).expect("alive");
        drop(done_tx);
        t.join().expect("join");
        let pidfd = lock(&c.tables).entries[&tid].pidfd.clone();
        if let Some(fd) = pidfd {
            // Released a moment after join returns.
            let gone = (0..5000).any(|_| {
                std::thread::sleep(Duration::from_millis(1));
                !task_exists(fd.as_fd())
            });
            assert!(gone);
            assert!(c.lookup(tid).is_err(), "its /proc entry is gone too");
        }
    }
}
