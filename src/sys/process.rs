//! Process-level calls without a safe `nix` wrapper: fork (checked for a single thread, or
//! a vfork-style clone straight into exec), pidfds, close_range, openat2 and the Landlock ABI probe.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use nix::sched::CpuSet;

fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: callers pass the return value of a system call that created a new descriptor,
    // which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The result of a fork.
#[derive(Debug)]
pub enum Forked {
    /// In the parent, with the child's pid.
    Parent {
        /// The child's pid.
        child: libc::pid_t,
    },
    /// In the child.
    Child,
}

/// fork(2).
///
/// # Safety
///
/// The calling process must have no other thread: the child is a copy of the calling thread
/// alone, and a lock any other thread held at the fork (the allocator's, stdio's, the
/// environment's) stays locked in the child for good. Otherwise the child may only make
/// async-signal-safe calls until it execs or exits.
unsafe fn fork() -> io::Result<Forked> {
    // SAFETY: fork has no memory arguments; the caller guarantees what the child may do.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

/// Whether no other task shares this process's memory: `unshare(CLONE_VM)` changes nothing
/// and fails with EINVAL exactly when another thread (or a `CLONE_VM` child) exists. Where a
/// seccomp filter refuses `unshare`, the threads in /proc/self/task are counted instead.
///
/// A thread that was just joined may still be ending: `pthread_join` returns when the kernel
/// clears the thread's id, as it lets go of the memory (`exit_mm`), and the kernel takes the
/// thread out of the process a little later (`exit_notify`); until then the check says no.
/// On a busy machine that window was up to 1.7 ms (a C loop of spawn, join and check, three at
/// once on 2 CPUs: EINVAL after 3% of the joins), so a no is asked again for up to
/// [`ENDING_THREAD_GRACE`] before it stands: first yielding the CPU (the ending thread usually
/// needs only that), then sleeping 100 µs between tries, so a process that really has another
/// thread does not spin a CPU for the whole grace.
pub fn single_threaded() -> io::Result<bool> {
    let deadline = std::time::Instant::now() + ENDING_THREAD_GRACE;
    let mut tries = 0u32;
    loop {
        // SAFETY: unshare takes flags only; with CLONE_VM alone it unshares nothing (the
        // kernel only checks that the caller is the sole user of its memory).
        let rc = unsafe { libc::unshare(libc::CLONE_VM) };
        if rc == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINVAL) {
            return Ok(std::fs::read_dir("/proc/self/task")?.count() == 1);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        if tries < 16 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        tries += 1;
    }
}

/// How long [`single_threaded`] waits for threads that are ending (joined, not yet gone).
/// A thread that is not ending makes the check wait this long before it says no.
pub const ENDING_THREAD_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// What [`single_threaded`] saw when it said no, for an error report: the threads
/// /proc/self/task lists with their names, or that it lists only the calling one (then the
/// kernel's EINVAL came from another process sharing this memory, or a thread slow to end).
pub fn threads_seen() -> String {
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                    format!("{} {}", e.file_name().to_string_lossy(), comm.trim())
                })
                .collect()
        })
        .unwrap_or_default();
    match names.len() {
        0 => "/proc/self/task cannot be read".to_string(),
        1 => format!(
            "/proc/self/task lists this thread alone: another process shares this memory, or \
             a thread took more than {} ms to end",
            ENDING_THREAD_GRACE.as_millis()
        ),
        n => format!("{n} threads: {}", names.join(", ")),
    }
}

/// fork(2) for a single-threaded process, checked: fails with `EAGAIN` and a message when the
/// process has other threads (the child of a multi-threaded fork could block on a lock that
/// another thread held). The child may then do anything the parent could.
pub fn fork_single_threaded() -> io::Result<Forked> {
    if !single_threaded()? {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the process has more than one thread",
        ));
    }
    // SAFETY: checked just above that no other thread exists; only this thread runs, so none
    // can be started between the check and the fork.
    unsafe { fork() }
}

/// A command to exec, with every pointer `execve` needs built before the fork, so the child
/// of [`fork_exec`] allocates nothing. guard builds it before its first fork, too: the
/// sandbox's init then forks the command without copying a string (each write of a page it
/// shares with guard would copy the page).
pub struct ExecImage {
    program: CString,
    /// Every string of `argv` and `envp`, NUL-terminated, back to back in one allocation:
    /// guard frees it after the fork as one chunk, where a string each would write a free
    /// list into every page they span, and each page guard writes that it still shares with
    /// the init is copied (about 30 µs of a run's start when they were separate).
    _strings: Box<[u8]>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl ExecImage {
    /// The image of `program` with `argv` and `envp` (`NAME=value`).
    pub fn new(program: CString, argv: Vec<CString>, envp: Vec<CString>) -> ExecImage {
        let all = || argv.iter().chain(&envp).map(|s| s.as_bytes_with_nul());
        let mut strings = Vec::with_capacity(all().map(<[u8]>::len).sum());
        let mut starts = Vec::with_capacity(argv.len() + envp.len());
        for s in all() {
            starts.push(strings.len());
            strings.extend_from_slice(s);
        }
        let strings = strings.into_boxed_slice();
        let base = strings.as_ptr();
        let ptrs = |starts: &[usize]| {
            let mut v: Vec<*const libc::c_char> = starts
                .iter()
                // SAFETY: each start is the offset of a string inside `strings`, whose heap
                // buffer stays where it is when the box moves into the image.
                .map(|&at| unsafe { base.add(at) }.cast())
                .collect();
            v.push(std::ptr::null());
            v
        };
        let (argv_starts, envp_starts) = starts.split_at(argv.len());
        ExecImage {
            program,
            argv: ptrs(argv_starts),
            envp: ptrs(envp_starts),
            _strings: strings,
        }
    }

    /// The image of `program` with `argv` and `envp` as bytes, for another process to make
    /// it from ([`ExecImage::decode`]): `argv`'s length (u32, little endian), then the
    /// program and every string of `argv` and `envp`, each NUL-terminated.
    pub fn encode(program: &CStr, argv: &[CString], envp: &[CString]) -> Vec<u8> {
        let strings = std::iter::once(program)
            .chain(argv.iter().map(CString::as_c_str))
            .chain(envp.iter().map(CString::as_c_str))
            .map(CStr::to_bytes_with_nul);
        let mut bytes = Vec::with_capacity(4 + strings.clone().map(<[u8]>::len).sum::<usize>());
        let argc = u32::try_from(argv.len()).unwrap_or(u32::MAX);
        bytes.extend_from_slice(&argc.to_le_bytes());
        strings.for_each(|s| bytes.extend_from_slice(s));
        bytes
    }

    /// The image [`ExecImage::encode`] wrote; `None` when `bytes` are not such an image.
    pub fn decode(bytes: &[u8]) -> Option<ExecImage> {
        let argc = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        let rest = bytes.get(4..)?;
        let nul = rest.iter().position(|&b| b == 0)?;
        let program = CString::new(&rest[..nul]).ok()?;
        let strings = &rest[nul + 1..];
        if strings.last().is_some_and(|&b| b != 0) {
            return None;
        }
        let mut all: Vec<CString> = strings
            .split_inclusive(|&b| b == 0)
            .map(|s| CStr::from_bytes_with_nul(s).ok().map(CStr::to_owned))
            .collect::<Option<_>>()?;
        if all.len() < argc {
            return None;
        }
        let envp = all.split_off(argc);
        Some(ExecImage::new(program, all, envp))
    }
}

/// What the child of [`fork_exec`] does before `execve`, and where it reports. Its messages
/// (one `send` each on `report`): `P` + its pid (i32, little endian) right before `execve`;
/// `S` + errno (i32 LE) when enforcing `landlock` failed, `C` + errno when giving it back
/// `affinity` failed (then it exits with `exit_setup`); `X` + errno when `execve` failed (then it exits with `exit_not_found` for ENOENT, else
/// `exit_not_executable`).
pub struct ExecSetup<'a> {
    /// The socket the child reports on.
    pub report: BorrowedFd<'a>,
    /// A Landlock ruleset to enforce first (`landlock_restrict_self`); no_new_privs must
    /// already be set.
    pub landlock: Option<BorrowedFd<'a>>,
    /// The parent-death signal to set.
    pub pdeathsig: libc::c_int,
    /// The exit status when enforcing `landlock` failed.
    pub exit_setup: i32,
    /// The exit status when `execve` failed with ENOENT.
    pub exit_not_found: i32,
    /// The exit status when `execve` failed otherwise.
    pub exit_not_executable: i32,
    /// The CPU affinity to give the child back before it reports its pid, when the caller
    /// pinned itself (and so the child) to its CPU for the fork ([`pin_to_this_cpu`]).
    pub affinity: Option<&'a CpuSet>,
}

/// Waits up to `budget` for `fd` to become readable without sleeping, so that this CPU does
/// not go idle meanwhile: on a VM whose idle vCPUs halt, waking a process that slept costs
/// 100-300 µs (the host has to run the vCPU again). For the short waits of a run's start and
/// end, where the other side answers within some hundred microseconds. Returns whether it
/// became readable; either way the caller then reads, or blocks, as it would have. It only
/// spins where this thread may run on two CPUs or more (on one, what it waits for needs it),
/// and yields the CPU now and then.
pub fn spin_until_readable(fd: BorrowedFd<'_>, budget: std::time::Duration) -> bool {
    if !spinning_pays() {
        return false;
    }
    let start = std::time::Instant::now();
    for round in 1u32.. {
        let mut fds = [libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: `fds` is one valid pollfd; a zero timeout never sleeps.
        if unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) } > 0 {
            return true;
        }
        if start.elapsed() >= budget {
            return false;
        }
        if round % 32 == 0 {
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
        }
        std::hint::spin_loop();
    }
    false
}

/// Whether [`spin_until_readable`] spins in this process: decided once, from the CPUs this
/// thread may run on and the processes runnable now. Call it before a fork whose child waits
/// with [`spin_until_readable`] once its seccomp filter is in (the child then opens nothing to
/// decide: `guard learn` traps every open, and the supervisor is not there yet).
pub fn spinning_pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| {
        let cpus = allowed_cpus().map_or(1, |(_, n)| n);
        // Not where more processes are runnable than there are CPUs (the count of
        // `/proc/loadavg`, which includes this one and, as a rule, the one it waits for):
        // spinning then takes time from them (guard started three at a time on two CPUs:
        // 1.79 -> 1.92 ms a start with the spinning, without this check).
        cpus >= 2 && runnable().is_some_and(|r| r <= cpus)
    })
}

/// The CPUs the calling thread may run on, and how many they are.
fn allowed_cpus() -> Option<(CpuSet, usize)> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let n = (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .count();
    Some((set, n))
}

/// How many processes (threads) are runnable now, this one included (`/proc/loadavg`).
fn runnable() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let field = text.split_whitespace().nth(3)?;
    field.split('/').next()?.parse().ok()
}

/// Pins the calling thread to the CPU it runs on; returns the affinity it had, or `None` when
/// it was not pinned (it may run on one CPU only anyway). A child forked meanwhile inherits
/// the pin.
pub fn pin_to_this_cpu() -> Option<CpuSet> {
    let (allowed, n) = allowed_cpus()?;
    if n < 2 {
        return None;
    }
    let mut one = CpuSet::new();
    one.set(nix::sched::sched_getcpu().ok()?).ok()?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).ok()?;
    Some(allowed)
}

/// The calling thread's affinity, and the same without the CPU it runs on now, when spinning
/// pays here ([`spinning_pays`]: at least two CPUs, no more processes runnable than CPUs).
/// The child of a fork that sets the second for itself ([`set_affinity`]) runs beside its
/// parent, not after it: a new process is often queued on its parent's CPU (or runs first
/// there, and the parent waits), while the other CPU idles.
pub fn elsewhere() -> Option<(CpuSet, CpuSet)> {
    if !spinning_pays() {
        return None;
    }
    let (allowed, _) = allowed_cpus()?;
    let mut others = allowed;
    others.unset(nix::sched::sched_getcpu().ok()?).ok()?;
    Some((allowed, others))
}

/// Sets the CPU affinity of the process `pid` (its main thread) to `mask`.
pub fn set_affinity_of(pid: libc::pid_t, mask: &CpuSet) -> io::Result<()> {
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), mask).map_err(io::Error::from)
}

/// Sets the calling thread's CPU affinity to `mask` (as [`pin_to_this_cpu`] returned it).
/// Async-signal-safe: one system call, errno kept.
pub fn set_affinity(mask: &CpuSet) -> io::Result<()> {
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), mask).map_err(io::Error::from)
}

/// Fork a child that enforces `setup.landlock`, takes back `setup.affinity`, reports its
/// pid, sets its parent-death
/// signal, clears its signal mask, ignores the signals this process found ignored at its
/// start and no other (see [`ignored_at_start`]) and execs `image`; returns its pid. The child makes only
/// async-signal-safe system calls on memory prepared before the fork, so this is sound in
/// any process.
///
/// The child is made with `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` makes it: it runs
/// in the caller's memory, on a stack of its own, and the caller sleeps until it has exec'd
/// or exited. No page table is copied (a plain fork copies every mapping of guard's image,
/// which the sandbox's init still is) and no page is copied on write afterwards. The child
/// writes nothing the caller reads but the kernel's errno slot, and the only signal handler
/// it could run before `execve` resets the handlers is the wake-up signal's, which does
/// nothing.
pub fn fork_exec(image: &ExecImage, setup: &ExecSetup<'_>) -> io::Result<libc::pid_t> {
    /// exec_child's deepest frame is a few hundred bytes; the rest is margin.
    const STACK: usize = 64 * 1024;
    extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` points at the pair below, alive on the caller's frame, which cannot
        // return before this child has exec'd or exited (CLONE_VFORK).
        let (image, setup) = unsafe { &*arg.cast::<(&ExecImage, &ExecSetup<'_>)>() };
        exec_child(image, setup)
    }
    // Allocated, not zeroed: a zeroed 64 KiB wrote all sixteen of its pages, each a page
    // fault (and a copy, in the init, whose pages are guard's until written), some 30 µs
    // of the command's start; the child touches the one or two at its top.
    let mut stack: Vec<std::mem::MaybeUninit<u8>> = Vec::with_capacity(STACK);
    // The stack grows down from its end, aligned to 16 bytes as the ABI asks.
    let top = stack.spare_capacity_mut().as_mut_ptr().wrapping_add(STACK);
    let top = top.wrapping_sub(top as usize % 16);
    let mut pair = (image, setup);
    // SAFETY: `child` runs on `stack`, which outlives it (the caller is suspended until the
    // child execs or exits), and reads `pair` only; it makes system calls only (see
    // exec_child) and never returns into the caller's frames.
    let pid = unsafe {
        libc::clone(
            child,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut pair as *mut (&ExecImage, &ExecSetup<'_>)).cast(),
        )
    };
    drop(stack);
    match pid {
        -1 => Err(io::Error::last_os_error()),
        child => Ok(child),
    }
}

fn send_tagged(sock: BorrowedFd<'_>, tag: u8, value: i32) {
    let mut msg = [tag, 0, 0, 0, 0];
    msg[1..].copy_from_slice(&value.to_le_bytes());
    // SAFETY: `msg` is a live stack buffer of the given length; send only reads it.
    unsafe { libc::send(sock.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The signals ignored when this process started (bit `n - 1` for signal `n`), noted by
/// [`note_ignored_signals`] before Rust's runtime ignores SIGPIPE for its own writes and
/// before guard or the C library install handlers (a handler replaces SIG_IGN, and `execve`
/// resets it to the default). An ignored signal stays ignored across `execve`: the commands
/// guard starts must find exactly these ignored, as they would bare. SIGPIPE matters most:
/// ignored, `yes | head -1` ends `yes` with EPIPE and a message, not quietly by the signal,
/// and a pipeline's status changes with it.
static IGNORED_AT_START: AtomicU64 = AtomicU64::new(0);

/// The kernel's `struct sigaction` for rt_sigaction(2) (x86_64 and arm64 alike). The C
/// library's sigaction refuses the two real-time signals it keeps for itself (32 and 33),
/// which a parent may still have left ignored: these go to the kernel directly.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

/// rt_sigaction(2) of `sig`: sets `new` when given, returns the action before.
fn kernel_sigaction(sig: libc::c_int, new: Option<&KernelSigaction>) -> Option<libc::sighandler_t> {
    let mut old = KernelSigaction::default();
    let new = new.map_or(std::ptr::null(), |n| n as *const KernelSigaction);
    // SAFETY: `new` is null or a live KernelSigaction the kernel only reads; `old` is a
    // writable one of the size the kernel writes; the mask size is the kernel's (8 bytes).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            new,
            &mut old as *mut KernelSigaction,
            std::mem::size_of::<u64>(),
        )
    };
    (rc == 0).then_some(old.handler)
}

/// Runs from the C library's start-up, before Rust's runtime and `main` (`.init_array`).
extern "C" fn note_ignored_signals() {
    let mut ignored = 0u64;
    for sig in 1..=64 {
        if kernel_sigaction(sig, None) == Some(libc::SIG_IGN) {
            ignored |= 1 << (sig - 1);
        }
    }
    IGNORED_AT_START.store(ignored, Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static NOTE_IGNORED_SIGNALS: extern "C" fn() = note_ignored_signals;

/// What Rust's runtime start did for guard, for the `main` of its own that `src/main.rs`
/// has instead: descriptors 0-2 open (on `/dev/null` where closed, so that no file guard
/// opens takes a standard stream's number and is written to as one), and SIGPIPE ignored (a
/// write to a closed pipe then fails with EPIPE, which guard handles, instead of killing it;
/// [`ignored_at_start`] was noted before). What it leaves out is the main thread's stack-guard
/// bookkeeping and the stack-overflow handler: `pthread_getattr_np` reading and parsing
/// `/proc/self/maps`, an alternate signal stack mapped for every thread, a dozen system
/// calls; 47 µs of a minimal program's 359 here. A stack overflow in guard is then a plain
/// SIGSEGV, without the runtime's message.
pub fn runtime_start() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    let closed: [bool; 3] = loop {
        // SAFETY: three pollfds the kernel writes `revents` of; no wait.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
        if rc >= 0 {
            break fds.map(|p| p.revents & libc::POLLNVAL != 0);
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            // poll refused (a resource limit): ask each descriptor instead.
            _ => {
                break [0, 1, 2].map(|fd| {
                    // SAFETY: F_GETFD on a number, no pointer.
                    let rc = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                    rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
                });
            }
        }
    };
    for (fd, closed) in closed.into_iter().enumerate() {
        // SAFETY: a NUL-terminated path; the lowest free number is `fd`, since the lower
        // ones are open by now. Left open for good, as a standard stream.
        if closed && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } != fd as i32 {
            std::process::abort();
        }
    }
    // SAFETY: setting a disposition, no handler of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// The signals ignored when this process started (see [`IGNORED_AT_START`]).
pub fn ignored_at_start() -> u64 {
    IGNORED_AT_START.load(Ordering::Relaxed)
}

/// The two ends of the make jobserver's pipe that guard inherited (`-1` where none): the
/// descriptors `MAKEFLAGS` or `CARGO_MAKEFLAGS` name in `--jobserver-auth=R,W` (or make's
/// older `--jobserver-fds=R,W`) that were open pipes when this process started, noted by
/// [`note_jobserver`] before anything of guard's could take their numbers. A recursive make
/// (`$(MAKE)` or a `+` recipe) passes them to the programs it starts; a `make -j8` whose recipe
/// runs `guard exec -- $(MAKE) -C sub` or `cargo build` under guard shares its job slots with
/// them only if the command gets them too (without, make says "jobserver unavailable: using
/// -j1"). A pipe reaches the process at its other end and nothing else: no file, no path.
static JOBSERVER_AT_START: [AtomicI32; 2] = [AtomicI32::new(-1), AtomicI32::new(-1)];

/// The descriptors `--jobserver-auth=R,W` / `--jobserver-fds=R,W` name in `flags` (the last
/// such option wins, as in make; a named FIFO, `fifo:PATH`, is none).
fn jobserver_fds(flags: &[u8]) -> Option<[i32; 2]> {
    let mut found = None;
    for word in flags.split(|&b| b == b' ') {
        let value = word
            .strip_prefix(b"--jobserver-auth=")
            .or_else(|| word.strip_prefix(b"--jobserver-fds="));
        if let Some(value) = value {
            found = parse_fd_pair(value);
        }
    }
    found
}

fn parse_fd_pair(value: &[u8]) -> Option<[i32; 2]> {
    let comma = value.iter().position(|&b| b == b',')?;
    let num = |s: &[u8]| -> Option<i32> {
        let s = std::str::from_utf8(s).ok()?;
        s.parse::<i32>().ok().filter(|&fd| fd > 2)
    };
    Some([num(&value[..comma])?, num(&value[comma + 1..])?])
}

/// Runs from the C library's start-up, before Rust's runtime and `main` (`.init_array`).
extern "C" fn note_jobserver() {
    for var in [c"MAKEFLAGS", c"CARGO_MAKEFLAGS"] {
        // SAFETY: getenv on a NUL-terminated name; the environment is not changed meanwhile
        // (no other thread exists yet).
        let value = unsafe { libc::getenv(var.as_ptr()) };
        if value.is_null() {
            continue;
        }
        // SAFETY: getenv returned a NUL-terminated string that lives as long as the
        // environment, which nothing changes here.
        let flags = unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes();
        let Some(fds) = jobserver_fds(flags) else {
            continue;
        };
        let is_pipe = |fd: i32| {
            nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
        };
        if fds.iter().all(|&fd| is_pipe(fd)) {
            for (slot, fd) in JOBSERVER_AT_START.iter().zip(fds) {
                slot.store(fd, Ordering::Relaxed);
            }
            return;
        }
    }
}

#[used]
#[link_section = ".init_array"]
static NOTE_JOBSERVER: extern "C" fn() = note_jobserver;

/// The make jobserver's pipe guard inherited (see [`JOBSERVER_AT_START`]): the descriptors a
/// command keeps, none if there was no such pipe.
pub fn jobserver_at_start() -> [Option<i32>; 2] {
    JOBSERVER_AT_START
        .each_ref()
        .map(|fd| Some(fd.load(Ordering::Relaxed)).filter(|&fd| fd >= 0))
}

/// Gives the calling process's signals the dispositions of [`ignored_at_start`] as far as
/// `execve` keeps them: those ignored at start are ignored, SIGPIPE is the default unless it
/// was ignored at start (Rust's runtime ignores it). Handlers need nothing: `execve` resets
/// them. System calls only, on no memory but the stack: sound between fork and exec.
fn restore_ignored_signals() {
    // SIG_IGN and SIG_DFL install no handler code: no flags, no mask, no restorer.
    let set = |sig: libc::c_int, handler: libc::sighandler_t| {
        kernel_sigaction(
            sig,
            Some(&KernelSigaction {
                handler,
                ..KernelSigaction::default()
            }),
        )
    };
    let ignored = ignored_at_start();
    if ignored & (1 << (libc::SIGPIPE - 1)) == 0 {
        set(libc::SIGPIPE, libc::SIG_DFL);
    }
    for sig in 1..=64 {
        if ignored & (1 << (sig - 1)) != 0 {
            set(sig, libc::SIG_IGN);
        }
    }
}

/// The child side of [`fork_exec`]: system calls only.
fn exec_child(image: &ExecImage, setup: &ExecSetup<'_>) -> ! {
    if let Some(ruleset) = setup.landlock {
        // SAFETY: integer arguments only: the ruleset descriptor and no flags.
        let rc =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
        if rc != 0 {
            send_tagged(setup.report, b'S', errno());
            exit_now(setup.exit_setup);
        }
    }
    if let Some(mask) = setup.affinity {
        if set_affinity(mask).is_err() {
            send_tagged(setup.report, b'C', errno());
            exit_now(setup.exit_setup);
        }
    }
    // SAFETY: getpid has no arguments and cannot fail.
    let pid = unsafe { libc::getpid() };
    send_tagged(setup.report, b'P', pid);
    // SAFETY: PR_SET_PDEATHSIG takes the signal number by value.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, setup.pdeathsig as libc::c_ulong) };
    // SAFETY: an all-zero sigset_t is the empty set on Linux; the kernel reads it and writes
    // nothing (no old set is asked for).
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is a valid, live sigset_t; the old mask pointer is null.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) };
    restore_ignored_signals();
    // SAFETY: `program` is NUL-terminated; `argv` and `envp` are null-terminated arrays of
    // pointers to NUL-terminated strings owned by `image`, alive for the call.
    unsafe {
        libc::execve(
            image.program.as_ptr(),
            image.argv.as_ptr(),
            image.envp.as_ptr(),
        )
    };
    let e = errno();
    send_tagged(setup.report, b'X', e);
    exit_now(if e == libc::ENOENT {
        setup.exit_not_found
    } else {
        setup.exit_not_executable
    })
}

/// pidfd_open(2) (Linux 5.3).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    owned_fd(rc)
}

/// `struct pidfd_info` as Linux 6.13 first defined it (`PIDFD_INFO_SIZE_VER0`, 64 bytes);
/// guard reads the parent only, which the kernel fills in whatever the mask asks for.
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ids: [u32; 8],
    exit_code: i32,
}

/// `PIDFD_GET_INFO`: `_IOWR(PIDFS_IOCTL_MAGIC (0xFF), 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<PidfdInfo>() as libc::c_ulong) << 16) | (0xFF << 8) | 11;

/// The parent of the process (or thread) behind `pidfd`, as it is now: PIDFD_GET_INFO
/// (Linux 6.13). ESRCH once the task is gone (reaped); ENOTTY or EINVAL from a kernel
/// without the ioctl.
pub fn pidfd_parent(pidfd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut info = PidfdInfo::default();
    // SAFETY: the argument is a valid, writable `struct pidfd_info` of the size the request
    // encodes; the kernel writes no more than that.
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO,
            &mut info as *mut PidfdInfo,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.ppid)
}

/// pidfd_getfd(2) (Linux 5.6): duplicate descriptor `fd` of the process behind `pidfd`.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    owned_fd(rc)
}

/// pidfd_send_signal(2) (Linux 5.1): signal the process behind `pidfd` (no pid reuse race).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: a null siginfo pointer is allowed and means "as kill(2) would".
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises this process's soft limit of open descriptors (RLIMIT_NOFILE) to its hard limit;
/// returns the soft limit now in force. A process forked before keeps its own.
pub fn raise_open_file_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit the kernel writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit the kernel reads; a soft limit up to the hard one
        // needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

/// close_range(2) (Linux 5.9): close every descriptor from `first` to `last` inclusive.
/// Async-signal-safe.
pub fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: closing descriptors the caller no longer needs; no memory arguments.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// openat2(2) (Linux 5.6) with `resolve` flags (RESOLVE_BENEATH, ...), read-only by default.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: u64,
    mode: u64,
    resolve: u64,
) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain old data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    // SAFETY: `path` is NUL-terminated and `how` is a valid open_how whose size we pass; the
    // kernel only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    owned_fd(rc)
}

/// The Landlock ABI version of the running kernel, `None` when Landlock is absent or disabled.
pub fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only returns
    // the ABI version; nothing is read or written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|v| *v > 0)
}

/// `_exit(2)`: leave the forked child without running the parent's atexit handlers or
/// destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user memory.
    unsafe { libc::_exit(code) }
}

/// `AT_FDCWD` as a borrowed descriptor, for *at calls that should start at our own cwd (or
/// that take an absolute path, where the descriptor is ignored).
pub fn at_fdcwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is not a real descriptor but a value every *at system call accepts; it is
    // never closed and BorrowedFd only excludes -1.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// Reads a `/proc` file whole. Those files say they are empty, so `std::fs::read` spends a
/// `statx` on the size and then reads 32, 32, 64, 128... bytes (eight reads for a 1.4 KB
/// `status`); this reads into 4 KiB at once: `openat`, one read, `close`. (`File::read_to_end`
/// is no help: it asks `statx` and `lseek` for a size first.) A read that returns less than
/// it asked for has reached the end: the files of /proc/PID are `seq_file`s, whose reads fill
/// the buffer until the end of the text, so no second read is made to see the end.
pub fn read_proc(path: impl AsRef<std::path::Path>) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        let room = buf.len() - len;
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) if n < room => {
                len += n;
                break;
            }
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// [`read_proc`] for a file of text (`status`, `stat`).
pub fn read_proc_text(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    String::from_utf8(read_proc(path)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The thread group (process) that thread `tid` belongs to, from its `/proc` status; ESRCH
/// when the status has no `Tgid:` line.
pub fn tgid_of(tid: u32) -> io::Result<u32> {
    read_proc_text(format!("/proc/{tid}/status"))?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:").and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// A pidfd for the thread group that thread `tid` belongs to: `pidfd_open` wants a thread
/// group leader (before Linux 6.9), and seccomp notifications carry thread ids.
pub fn pidfd_for_thread(tid: u32) -> io::Result<OwnedFd> {
    let tgid = libc::pid_t::try_from(tgid_of(tid)?)
        .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    pidfd_open(tgid)
}

/// A pidfd for the process that thread `tid` belongs to, cheaply: pidfd_open on the thread
/// itself works for a thread group leader (and for any thread since Linux 6.9 with
/// PIDFD_THREAD); otherwise through /proc, as [`pidfd_for_thread`].
pub fn pidfd_for_caller(tid: u32) -> io::Result<OwnedFd> {
    const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;
    let tid_t =
        libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    for flags in [0, PIDFD_THREAD] {
        // SAFETY: plain integer arguments; returns a new descriptor or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, tid_t, flags) };
        if rc >= 0 {
            return owned_fd(rc);
        }
    }
    pidfd_for_thread(tid)
}

/// The version of the GNU C library guard runs with (`gnu_get_libc_version`), as (major,
/// minor); `None` under another C library.
pub fn glibc_version() -> Option<(u32, u32)> {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: gnu_get_libc_version takes no arguments and returns a pointer to a static,
        // NUL-terminated string that lives as long as the process.
        let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        let mut parts = v.to_str().ok()?.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }
    #[cfg(not(target_env = "gnu"))]
    {
        None
    }
}

/// tgkill(2): send `sig` to thread `tid` of process `tgid`.
pub fn tgkill(tgid: u32, tid: u32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The signal that interrupts a thread blocked in a system call (see [`interrupt_thread`]):
/// the first real-time signal the C library leaves free, which nothing else in guard uses.
pub fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN()
}

/// Installs a handler that does nothing for [`wake_signal`], without SA_RESTART: a thread
/// it is sent to returns from a blocking system call with EINTR. A handler (not SIG_IGN,
/// whose delivery interrupts nothing) is reset to the default by execve, so the commands
/// guard starts never inherit it. Fails with EBUSY, changing nothing, when the signal already
/// has a handler of someone else's (a program that embeds guard and uses it).
pub fn install_wake_handler() -> io::Result<()> {
    claim_signal(wake_signal())
}

extern "C" fn nothing(_: libc::c_int) {}

/// [`install_wake_handler`] for signal `sig`.
fn claim_signal(sig: libc::c_int) -> io::Result<()> {
    let ours = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: a zeroed sigaction is a valid value for the kernel to fill in; a null new
    // action only reads the current one.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a writable sigaction; no new action is passed.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } < 0 {
        return Err(io::Error::last_os_error());
    }
    if old.sa_sigaction == ours {
        return Ok(());
    }
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
        return Err(io::Error::from_raw_os_error(libc::EBUSY));
    }
    // SAFETY: a zeroed sigaction is a valid value to fill in; the handler does nothing, so it
    // is async-signal-safe; sigaction reads the structure and writes no old action.
    let rc = unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ours;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        libc::sigaction(sig, &action, std::ptr::null_mut())
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unblocks [`wake_signal`] in the calling thread: a thread inherits its creator's signal
/// mask, and a program that embeds guard may block the signal where it starts a run.
pub fn accept_wake_signal() -> io::Result<()> {
    // SAFETY: a zeroed sigset_t is a valid value for sigemptyset to initialise; the set lives
    // on this frame and pthread_sigmask only reads it.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, wake_signal());
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Sends [`wake_signal`] to `thread` of this process (once [`install_wake_handler`] ran).
pub fn interrupt_thread(thread: libc::pthread_t) -> io::Result<()> {
    // SAFETY: `thread` is a live thread of this process (its JoinHandle is held by the
    // caller, so it has not been joined); the signal has a handler that does nothing.
    let rc = unsafe { libc::pthread_kill(thread, wake_signal()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Put `sig` back to its default disposition (so raising it ends the process the way it ended
/// the command).
pub fn reset_signal_to_default(sig: nix::sys::signal::Signal) -> nix::Result<()> {
    let default = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::SigDfl,
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the action is SIG_DFL, which installs no handler code, so no async-signal-safety
    // requirement applies.
    unsafe { nix::sys::signal::sigaction(sig, &default) }.map(drop)
}

/// Gives the calling thread the SCHED_IDLE policy: it runs only on CPU time nothing else
/// wants, and any other task that wakes on its CPU preempts it at once. Lowering one's own
/// policy needs no privilege.
pub fn become_idle_class() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 is the caller.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How a supervisor thread got the scheduler to run it soon after it wakes (see
/// [`favour_wakeups`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Favoured {
    /// Its nice lowered by [`FAVOURED_NICE`] (root, CAP_SYS_NICE, or an RLIMIT_NICE that
    /// allows it).
    Nice,
    /// The shortest time slice the scheduler grants, [`FAVOURED_SLICE_NS`] (Linux 6.12's
    /// EEVDF `sched_runtime` for SCHED_OTHER; any thread may ask it for itself).
    Slice,
    /// Neither was allowed: the thread runs as any other.
    Neither,
}

/// How much lower than guard's own nice a favoured supervisor thread's nice is (a guard started
/// at nice 10 favours its workers at nice 5: the user's choice of priority for the run holds).
pub const FAVOURED_NICE: i32 = -5;
/// The time slice of a favoured supervisor thread where it cannot have [`FAVOURED_NICE`]: the
/// kernel's minimum.
pub const FAVOURED_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` as sched_setattr(2) takes it (SCHED_ATTR_SIZE_VER0).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Asks the scheduler to run the calling thread, and not only the tasks it wakes, soon after
/// it is woken: its nice lowered by [`FAVOURED_NICE`] where that is allowed, else a time slice
/// of [`FAVOURED_SLICE_NS`] at its nice as it is. Threads it starts later inherit its nice
/// (the kernel copies it at clone); no process of the command does, as none is started by a
/// supervisor thread.
pub fn favour_wakeups() -> Favoured {
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // getpriority returns the nice itself (glibc undoes the kernel's 20 - nice); -1 is a nice
    // as well as the error value, and a thread can always read its own.
    // SAFETY: plain integer arguments on the calling thread's own id.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    let favoured = (nice + FAVOURED_NICE).max(-20);
    // SAFETY: as above.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, favoured) } == 0 {
        return Favoured::Nice;
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: FAVOURED_SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid sched_attr of the size it declares, alive for the call; pid 0
    // is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r == 0 {
        Favoured::Slice
    } else {
        Favoured::Neither
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_jobserver_fds_are_read_from_make_flags_as_make_reads_them() {
        assert_eq!(jobserver_fds(b"-j4 --jobserver-auth=3,4"), Some([3, 4]));
        assert_eq!(jobserver_fds(b"w -j -- --jobserver-fds=5,6"), Some([5, 6]));
        // The last option wins; a named FIFO or stdio is no pipe to keep.
        assert_eq!(
            jobserver_fds(b"--jobserver-auth=3,4 --jobserver-auth=7,8"),
            Some([7, 8])
        );
        assert_eq!(jobserver_fds(b"--jobserver-auth=fifo:/tmp/GMfifo1"), None);
        assert_eq!(jobserver_fds(b"--jobserver-auth=0,1"), None);
        assert_eq!(jobserver_fds(b"-j1"), None);
        assert_eq!(jobserver_fds(b"--jobserver-auth=3"), None);
    }
    use super::*;

    /// The test harness runs each test on a thread of its own, beside its main thread: the
    /// check says no, and the report names the threads, this one among them.
    #[test]
    fn a_process_with_threads_is_refused_and_its_threads_are_named() {
        let me = std::thread::Builder::new()
            .name("guard-t-seen".into())
            .spawn(|| {
                assert!(!single_threaded().expect("check"));
                threads_seen()
            })
            .expect("spawn")
            .join()
            .expect("join");
        let (count, names) = me.split_once(" threads: ").expect(&me);
        assert!(count.parse::<usize>().expect(&me) >= 2, "{me}");
        assert!(names.contains("guard-t-seen"), "{me}");
    }

    /// A thread that was joined is not another thread, even while the kernel is still ending
    /// it: two forked children (single-threaded, and each keeping a CPU busy) each spawn and
    /// join 20,000 threads and check right after each join. Asked once, the check said no
    /// after hundreds of those joins on this project's 2-CPU machine.
    #[test]
    fn a_thread_just_joined_is_not_counted() {
        const JOINS: usize = 20_000;
        let children: Vec<libc::pid_t> = (0..2)
            .map(|_| {
                // SAFETY: the child spawns and joins threads (glibc's fork leaves the
                // allocator usable in the child) and leaves with `_exit`, never returning to
                // the test harness.
                match unsafe { fork() }.expect("fork") {
                    Forked::Child => {
                        let refused = (0..JOINS)
                            .filter(|_| {
                                std::thread::spawn(|| ()).join().expect("join");
                                !single_threaded().unwrap_or(false)
                            })
                            .count();
                        // SAFETY: _exit ends the child without running the harness's code.
                        unsafe { libc::_exit(refused.min(255) as i32) }
                    }
                    Forked::Parent { child } => child,
                }
            })
            .collect();
        for child in children {
            let mut status = 0;
            // SAFETY: waits for this test's own child; `status` outlives the call.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert!(libc::WIFEXITED(status), "child status {status:#x}");
            assert_eq!(libc::WEXITSTATUS(status), 0, "joins refused (of {JOINS})");
        }
    }

    /// The pointer arrays `execve` gets name every string in order, each NUL-terminated, and
    /// end with NULL; an empty environment is just the NULL.
    #[test]
    fn an_exec_image_points_at_each_of_its_strings() {
        let c = |s: &str| CString::new(s).unwrap();
        let read = |ptrs: &[*const libc::c_char]| -> Vec<String> {
            assert!(ptrs.last().is_some_and(|p| p.is_null()), "ends with NULL");
            ptrs[..ptrs.len() - 1]
                .iter()
                .map(|&p| {
                    // SAFETY: the pointers point into the image, alive for this test.
                    unsafe { std::ffi::CStr::from_ptr(p) }
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
        };
        let image = ExecImage::new(
            c("/bin/sh"),
            vec![c("sh"), c("-c"), c(""), c("echo ok")],
            vec![c("A=1"), c("PATH=/usr/bin:/bin")],
        );
        assert_eq!(read(&image.argv), ["sh", "-c", "", "echo ok"]);
        assert_eq!(read(&image.envp), ["A=1", "PATH=/usr/bin:/bin"]);
        let bare = ExecImage::new(c("/bin/true"), vec![c("true")], vec![]);
        assert_eq!(read(&bare.argv), ["true"]);
        assert_eq!(read(&bare.envp), Vec::<String>::new());
    }

    #[test]
    fn a_favoured_thread_has_the_nice_or_the_slice_it_reports() {
        let before = std::fs::read_to_string("/proc/thread-self/sched").expect("sched");
        let prio_line = |text: &str| {
            text.lines()
                .find(|l| l.starts_with("prio"))
                .map(String::from)
        };
        let (favoured, own) = std::thread::spawn(|| {
            let favoured = favour_wakeups();
            let own = std::fs::read_to_string("/proc/thread-self/sched").expect("sched");
            (favoured, own)
        })
        .join()
        .expect("thread");
        let field = |name: &str| -> Option<u64> {
            own.lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse().ok())
        };
        match favoured {
            Favoured::Nice => assert_eq!(
                field("prio"),
                prio_line(&before)
                    .and_then(|l| l.split(':').nth(1)?.trim().parse::<i64>().ok())
                    .map(|p| (p + i64::from(FAVOURED_NICE)).max(100) as u64)
            ),
            Favoured::Slice => assert_eq!(field("se.slice"), Some(FAVOURED_SLICE_NS)),
            Favoured::Neither => {}
        }
        if nix::unistd::geteuid().is_root() {
            assert_eq!(favoured, Favoured::Nice, "root may lower its nice");
        }
        // The thread that started it is untouched.
        let after = std::fs::read_to_string("/proc/thread-self/sched").expect("sched");
        assert_eq!(prio_line(&before), prio_line(&after));
    }

    #[test]
    fn a_signal_with_someone_elses_handler_is_not_claimed() {
        extern "C" fn theirs(_: libc::c_int) {}
        let sig = libc::SIGRTMIN() + 7;
        let set = |handler: libc::sighandler_t| {
            // SAFETY: a zeroed sigaction with a handler that does nothing, or SIG_DFL.
            unsafe {
                let mut a: libc::sigaction = std::mem::zeroed();
                a.sa_sigaction = handler;
                libc::sigaction(sig, &a, std::ptr::null_mut())
            }
        };
        assert_eq!(
            set(theirs as extern "C" fn(libc::c_int) as libc::sighandler_t),
            0
        );
        let taken = claim_signal(sig).map_err(|e| e.raw_os_error());
        assert_eq!(
            taken,
            Err(Some(libc::EBUSY)),
            "someone else's handler stays"
        );
        assert_eq!(set(libc::SIG_DFL), 0);
        claim_signal(sig).expect("free: claimed");
        claim_signal(sig).expect("ours already: claimed again");
        assert_eq!(set(libc::SIG_DFL), 0);
    }

    #[test]
    fn a_thread_that_inherited_the_wake_signal_blocked_accepts_it_again() {
        use std::os::unix::thread::JoinHandleExt;
        install_wake_handler().expect("handler");
        let (r, w) = nix::unistd::pipe().expect("pipe");
        let blocked = std::thread::spawn(move || {
            // SAFETY: a sigset on this frame, initialised before use; the mask of this thread.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, wake_signal());
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            accept_wake_signal().expect("unblock");
            let mut b = [0u8; 1];
            nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&r), &mut b)
        });
        let started = std::time::Instant::now();
        while !blocked.is_finished() {
            interrupt_thread(blocked.as_pthread_t()).expect("pthread_kill");
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert!(
                started.elapsed().as_secs() < 30,
                "the read was never interrupted"
            );
        }
        assert_eq!(
            blocked.join().expect("thread"),
            Err(nix::errno::Errno::EINTR)
        );
        drop(w);
    }

    #[test]
    fn the_wake_signal_cuts_a_blocking_call_short() {
        use std::os::unix::thread::JoinHandleExt;
        install_wake_handler().expect("handler");
        let (r, w) = nix::unistd::pipe().expect("pipe");
        let blocked = std::thread::spawn(move || {
            let mut b = [0u8; 1];
            // Nothing is ever written: only the signal ends this read.
            nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&r), &mut b)
        });
        let started = std::time::Instant::now();
        while !blocked.is_finished() {
            interrupt_thread(blocked.as_pthread_t()).expect("pthread_kill");
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert!(
                started.elapsed().as_secs() < 30,
                "the read was never interrupted"
            );
        }
        let got = blocked.join().expect("thread");
        assert_eq!(got, Err(nix::errno::Errno::EINTR));
        drop(w);
    }

    #[test]
    fn read_proc_reads_a_proc_file_and_a_file_longer_than_its_first_read() {
        let status = read_proc_text("/proc/self/status").expect("status");
        assert!(status.starts_with("Name:\t"), "{status}");
        assert!(status.contains(&format!("\nPid:\t{}\n", std::process::id())));
        let dir = tempfile::tempdir().expect("tempdir");
        let long: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("long"), &long).expect("write");
        assert_eq!(read_proc(dir.path().join("long")).expect("read"), long);
        assert!(read_proc(dir.path().join("missing")).is_err());
    }
}
