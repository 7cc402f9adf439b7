//! Telling the refused process why: when guard refuses a call, one line on the caller's own
//! stderr (its descriptor 2, fetched with pidfd_getfd), so it lands in the tool output an agent
//! reads: what was refused, the rule and its reason, and how a human would allow it (the text
//! is [`policy::explain`]'s).
//!
//! Promises:
//! - never blocks the caller or a supervisor thread: the write is `RWF_NOWAIT`, `MSG_DONTWAIT`
//!   for a socket, or goes through a non-blocking reopening of the descriptor where a pipe,
//!   FIFO or terminal does not support `RWF_NOWAIT` (a full one is skipped), and only to a
//!   pipe, a terminal, a regular file or a unix stream socket; anything else is skipped.
//!   Every skip is counted ([`Explanations`]). A pipe whose reader is gone raises SIGPIPE in
//!   the writing thread, which Rust programs (guard included) ignore; an embedding program
//!   must ignore it too;
//! - once per (process, rule, target), and at most [`PER_SEC`] lines a second (burst
//!   [`BURST`]) for the whole run;
//! - written before the call is answered, so the line comes before the program's own message
//!   about the failure;
//! - nothing when the profile says `[report] denials = "none"` (the counts still are kept).
//!
//! Also here: a shell that cannot exec a program tries every `PATH` entry, and each try is
//! refused by the same rule. A refused exec by the same process with the same argv and rule
//! as its previous refused exec (no exec of that process allowed in between) is a repeat: it is
//! answered the same way, but neither logged nor explained again ([`is_repeat`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::audit::{self, RateLimit};
use crate::policy::{self, Denials, Op, Policy, RuleId, Verdict};
use crate::sys;

use super::{lock, Core, Judged};

/// Sustained explanation lines a second, over the whole run.
pub const PER_SEC: u32 = 20;
/// Explanation lines at once after a quiet period.
pub const BURST: u32 = 50;
/// How many (process, rule, target) triples are remembered; past it, the memory starts over.
const MAX_TOLD: usize = 8192;
/// How many processes' last refused exec are remembered; past it, the memory starts over.
const MAX_EXECS: usize = 4096;
/// Longest subject in a line, in characters (argv can be long).
const MAX_SUBJECT: usize = 300;

/// What became of the refusals of a run: how many per rule, and how many were explained on
/// the refused process's stderr or why not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Explanations {
    /// Refused calls per rule id (repeats of one refused exec counted once).
    pub by_rule: BTreeMap<String, u64>,
    /// Lines written to a refused process's stderr.
    pub written: u64,
    /// Not written: the same process was already told about this rule and target.
    pub already_told: u64,
    /// Not written: the process's stderr was closed, or not a pipe, terminal, regular file or
    /// unix stream socket, or guard could not fetch it (the process was gone).
    pub no_stream: u64,
    /// Not written: the write would have blocked (a full pipe or socket).
    pub would_block: u64,
    /// Not written: over the rate limit.
    pub rate_limited: u64,
    /// Not written: the profile says `[report] denials = "none"`.
    pub off: u64,
    /// Execs the policy allowed that Landlock refuses (the program lies outside the roots it
    /// grants execute on); not refusals by policy, so not in `by_rule`.
    pub landlock_execs: u64,
}

impl Explanations {
    /// Refused calls in all.
    pub fn refused(&self) -> u64 {
        self.by_rule.values().sum()
    }

    /// Refusals that were not explained, for any reason but "already told".
    pub fn not_written(&self) -> u64 {
        self.no_stream + self.would_block + self.rate_limited + self.off
    }
}

/// The supervisor's memory of refusals.
pub(super) struct Refusals {
    told: HashSet<(u32, String, String)>,
    last_exec: HashMap<u32, (Vec<OsString>, RuleId)>,
    limit: RateLimit,
    pub(super) stats: Explanations,
}

impl Default for Refusals {
    fn default() -> Self {
        Refusals {
            told: HashSet::new(),
            last_exec: HashMap::new(),
            limit: RateLimit::new(PER_SEC, BURST),
            stats: Explanations::default(),
        }
    }
}

/// Whether `judged`, by `pid`, is a repeat of that process's previous refused exec (see the
/// module documentation). Keeps the memory up to date for execs.
pub(super) fn is_repeat(core: &Core, pid: u32, judged: &Judged, verdict: &Verdict) -> bool {
    let Judged::Call(r) = judged else {
        return false;
    };
    if r.op != Op::Exec {
        return false;
    }
    let mut refusals = lock(&core.refusals);
    if !verdict.is_refusal() {
        refusals.last_exec.remove(&pid);
        return false;
    }
    if let Some((argv, rule)) = refusals.last_exec.get(&pid) {
        if *argv == r.argv && *rule == verdict.rule {
            return true;
        }
    }
    if refusals.last_exec.len() >= MAX_EXECS {
        refusals.last_exec.clear();
    }
    refusals
        .last_exec
        .insert(pid, (r.argv.clone(), verdict.rule.clone()));
    false
}

/// Count the refusal of `judged` (by `pid`) and tell the process why, as the module says.
pub(super) fn tell(core: &Core, pid: u32, judged: &Judged, verdict: &Verdict, policy: &Policy) {
    let (op, subject) = subject(judged);
    let rule = verdict.rule.to_string();
    {
        let mut refusals = lock(&core.refusals);
        *refusals.stats.by_rule.entry(rule.clone()).or_default() += 1;
        if policy.report.denials == Denials::None {
            refusals.stats.off += 1;
            return;
        }
        if refusals.told.len() >= MAX_TOLD {
            refusals.told.clear();
        }
        if !refusals.told.insert((pid, rule, subject.clone())) {
            refusals.stats.already_told += 1;
            return;
        }
        if !refusals.limit.admit() {
            refusals.stats.rate_limited += 1;
            return;
        }
    }
    let mut line = policy::explain(verdict, op, &subject);
    line.push('\n');
    let result = deliver(pid, line.as_bytes());
    let mut refusals = lock(&core.refusals);
    match result {
        Delivery::Written => refusals.stats.written += 1,
        Delivery::NoStream => refusals.stats.no_stream += 1,
        Delivery::WouldBlock => refusals.stats.would_block += 1,
    }
}

/// An exec the policy allows, of a program that lies outside every root Landlock grants
/// execute on: the kernel refuses it (EACCES, the shell's 126) after the supervisor lets it
/// through, and does not tell guard. The caller is told the same way as for a refusal (once
/// per process and program, counted in `landlock_execs`), and the returned note goes into the
/// decision's reason. `None` for everything else.
/// The roots Landlock grants execute on, as the profile lists them; what they resolve to is
/// found only when needed.
pub(super) struct ExecRoots {
    listed: Vec<PathBuf>,
    real: std::sync::OnceLock<Vec<PathBuf>>,
}

impl ExecRoots {
    pub(super) fn new(listed: Vec<PathBuf>) -> ExecRoots {
        ExecRoots {
            listed,
            real: std::sync::OnceLock::new(),
        }
    }

    /// The directories the roots resolve to (roots that do not exist are left out, as
    /// Landlock leaves them out).
    fn real(&self) -> &[PathBuf] {
        self.real.get_or_init(|| {
            self.listed
                .iter()
                .filter_map(|root| std::fs::canonicalize(root).ok())
                .collect()
        })
    }

    /// Whether the program at `exe`, a path the walk resolved (every symlink followed, the
    /// last one included), lies beneath a root. A root it starts with as written is made of
    /// the same directories, none a symlink, so it is that root's real path: the roots'
    /// symlinks are resolved only for a program outside them as written.
    fn hold(&self, exe: &Path) -> bool {
        self.listed.iter().any(|root| exe.starts_with(root))
            || self.real().iter().any(|root| exe.starts_with(root))
    }
}

pub(super) fn landlock_refuses_exec(
    core: &Core,
    pid: u32,
    r: &super::resolve::Resolved,
    policy: &Policy,
) -> Option<String> {
    let roots = core.exec_roots.as_ref()?;
    if r.op != Op::Exec || r.exe_anonymous {
        return None;
    }
    let walked = r.exe.as_ref()?;
    if roots.hold(walked) {
        return None;
    }
    let exe = std::fs::canonicalize(walked).ok()?;
    if roots.real().iter().any(|root| exe.starts_with(root)) {
        return None;
    }
    let dir = exe.parent().unwrap_or(&exe);
    let shown = audit::escape_for_terminal(exe.as_os_str().as_bytes());
    let note = format!("Landlock refuses it: {shown} lies outside the read roots");
    let mut refusals = lock(&core.refusals);
    refusals.stats.landlock_execs += 1;
    if policy.report.denials == Denials::None
        || !refusals
            .told
            .insert((pid, "landlock".into(), shown.clone()))
        || !refusals.limit.admit()
    {
        return Some(note);
    }
    drop(refusals);
    let mut line = policy::explain_landlock_exec(
        &shown,
        &audit::escape_for_terminal(dir.as_os_str().as_bytes()),
    );
    line.push('\n');
    let result = deliver(pid, line.as_bytes());
    let mut refusals = lock(&core.refusals);
    match result {
        Delivery::Written => refusals.stats.written += 1,
        Delivery::NoStream => refusals.stats.no_stream += 1,
        Delivery::WouldBlock => refusals.stats.would_block += 1,
    }
    Some(note)
}

/// The operation and the printable target of a call.
fn subject(judged: &Judged) -> (Option<Op>, String) {
    let r = match judged {
        Judged::Call(r) => r,
        Judged::Failed(f) => return (None, f.syscall.to_string()),
    };
    let path = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| audit::escape_for_terminal(p.as_os_str().as_bytes()))
    };
    let text = match r.op {
        Op::Exec if !r.argv.is_empty() => r
            .argv
            .iter()
            .map(|a| audit::escape_for_terminal(a.as_bytes()))
            .collect::<Vec<_>>()
            .join(" "),
        Op::Dns => r
            .name
            .as_deref()
            .map(|n| audit::escape_for_terminal(n.as_bytes()))
            .unwrap_or_default(),
        Op::Connect | Op::Bind => r
            .addr
            .as_ref()
            .map(super::record::format_addr)
            .unwrap_or_default(),
        Op::Rename | Op::Link => match (path(&r.path), path(&r.path2)) {
            (Some(a), Some(b)) => format!("{a} -> {b}"),
            (a, b) => a.or(b).unwrap_or_default(),
        },
        _ => path(&r.path).or_else(|| path(&r.exe)).unwrap_or_default(),
    };
    (Some(r.op), shorten(text))
}

fn shorten(mut s: String) -> String {
    if s.chars().count() > MAX_SUBJECT {
        s = s.chars().take(MAX_SUBJECT).collect();
        s.push_str("...");
    }
    s
}

enum Delivery {
    Written,
    NoStream,
    WouldBlock,
}

/// Write `line` to the stderr of thread `pid`'s process, without waiting: a socket with
/// `MSG_DONTWAIT`; anything else with `RWF_NOWAIT` where the file supports it. A pipe or FIFO
/// or a terminal that does not is reopened through `/proc/PID/fd/2` with `O_NONBLOCK` (a new
/// open file description: the process's own flags stay as they are), after checking it is
/// the same object; a regular file is written as it is (it does not wait on a reader).
fn deliver(pid: u32, line: &[u8]) -> Delivery {
    let Ok(fd) = sys::process::pidfd_for_thread(pid)
        .and_then(|p| sys::process::pidfd_getfd(p.as_fd(), libc::STDERR_FILENO))
    else {
        return Delivery::NoStream;
    };
    let Some(kind) = kind(&fd) else {
        return Delivery::NoStream;
    };
    let done = |r: nix::Result<usize>| match r {
        Ok(_) => Delivery::Written,
        Err(nix::errno::Errno::EAGAIN) => Delivery::WouldBlock,
        Err(_) => Delivery::NoStream,
    };
    if kind == Kind::Socket {
        use nix::sys::socket::{send, MsgFlags};
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
        return done(send(std::os::fd::AsRawFd::as_raw_fd(&fd), line, flags));
    }
    match sys::stream::write_nowait(fd.as_fd(), line) {
        Ok(_) => Delivery::Written,
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && kind != Kind::File => {
            Delivery::WouldBlock
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EOPNOTSUPP)) => {
            if kind == Kind::File {
                return done(nix::unistd::write(&fd, line));
            }
            match reopen_nonblocking(pid, &fd) {
                Some(nb) => done(nix::unistd::write(&nb, line)),
                None => Delivery::NoStream,
            }
        }
        Err(_) => Delivery::NoStream,
    }
}

/// `/proc/PID/fd/2` opened again for writing with `O_NONBLOCK`, when it still is `same`.
fn reopen_nonblocking(pid: u32, same: &OwnedFd) -> Option<OwnedFd> {
    use nix::fcntl::OFlag;
    let path = format!("/proc/{pid}/fd/{}", libc::STDERR_FILENO);
    let flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let fd = sys::fs::openat(None, path.as_str(), flags, nix::sys::stat::Mode::empty()).ok()?;
    let id = |f: &OwnedFd| {
        nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(f))
            .ok()
            .map(|st| (st.st_dev, st.st_ino))
    };
    (id(&fd).is_some() && id(&fd) == id(same)).then_some(fd)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Terminal,
    File,
    Socket,
}

/// What `fd` is, when it is something a line may be written to.
fn kind(fd: &OwnedFd) -> Option<Kind> {
    let st = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(fd)).ok()?;
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => Some(Kind::Pipe),
        libc::S_IFCHR => Some(Kind::Terminal),
        libc::S_IFREG => Some(Kind::File),
        libc::S_IFSOCK => {
            use nix::sys::socket::{
                getsockname, getsockopt, sockopt, SockType, SockaddrLike, SockaddrStorage,
            };
            let stream = getsockopt(fd, sockopt::SockType).ok()? == SockType::Stream;
            let addr: SockaddrStorage = getsockname(std::os::fd::AsRawFd::as_raw_fd(fd)).ok()?;
            (stream && addr.family() == Some(nix::sys::socket::AddressFamily::Unix))
                .then_some(Kind::Socket)
        }
        _ => None,
    }
}
