//! Attack operations for `tests/it/attacks.rs`: races that rewrite a path argument (or a
//! socket address, or a descriptor) from a second thread while the main thread makes the call,
//! and one-shot escapes. Each prints one summary line and exits 0.
//!
//! `race OP N ALLOWED TARGET [EXTRA]` prints
//! `race OP attempts=N ok=K [NAME=count ...]`: K calls succeeded (mostly on ALLOWED), the rest
//! failed with the named errnos. Whether TARGET changed is for the test to check.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn cs(b: &[u8]) -> CString {
    CString::new(b).expect("no NUL in probe arguments")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn ename(e: i32) -> String {
    let n = match e {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOENT => "ENOENT",
        libc::EEXIST => "EEXIST",
        libc::EFAULT => "EFAULT",
        libc::EINVAL => "EINVAL",
        libc::ELOOP => "ELOOP",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EXDEV => "EXDEV",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ENXIO => "ENXIO",
        libc::ENOSYS => "ENOSYS",
        libc::EBADF => "EBADF",
        libc::ESRCH => "ESRCH",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::EIO => "EIO",
        _ => return format!("E{e}"),
    };
    n.to_string()
}

/// Tallies the outcomes of many calls.
#[derive(Default)]
struct Tally {
    ok: usize,
    errs: BTreeMap<String, usize>,
}

impl Tally {
    fn add(&mut self, rc: i64) {
        if rc < 0 {
            *self.errs.entry(ename(errno())).or_default() += 1;
        } else {
            self.ok += 1;
        }
    }

    fn line(&self, head: &str) -> String {
        let mut s = format!("{head} ok={}", self.ok);
        for (k, v) in &self.errs {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

/// A heap buffer a second thread keeps rewriting between two contents, byte by byte with
/// volatile writes (so the compiler keeps every store).
struct Flipper {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    buf: *mut u8,
}

impl Flipper {
    fn start(a: Vec<u8>, b: Vec<u8>) -> Flipper {
        let len = a.len().max(b.len()) + 1;
        let buf = Box::leak(vec![0u8; len].into_boxed_slice()).as_mut_ptr();
        unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), buf, a.len()) };
        let stop = Arc::new(AtomicBool::new(false));
        let (s, addr) = (Arc::clone(&stop), buf as usize);
        let handle = std::thread::spawn(move || {
            let p = addr as *mut u8;
            let put = |src: &[u8]| {
                for (i, &byte) in src.iter().chain(std::iter::once(&0u8)).enumerate() {
                    unsafe { std::ptr::write_volatile(p.add(i), byte) };
                }
            };
            while !s.load(Ordering::Relaxed) {
                put(&b);
                for _ in 0..400 {
                    std::hint::spin_loop();
                }
                put(&a);
                for _ in 0..400 {
                    std::hint::spin_loop();
                }
            }
        });
        Flipper {
            stop,
            handle: Some(handle),
            buf,
        }
    }

    fn ptr(&self) -> *const libc::c_char {
        self.buf as *const libc::c_char
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

unsafe fn touch(p: &CString) {
    let fd = libc::open(
        p.as_ptr(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
        0o644,
    );
    if fd >= 0 {
        libc::close(fd);
    }
}

/// `race OP N ALLOWED TARGET [EXTRA]`.
unsafe fn race(args: &[OsString]) -> String {
    let op = args[1].to_string_lossy().into_owned();
    let n: usize = args[2].to_string_lossy().parse().expect("attempt count");
    let (a, t) = (args[3].as_bytes().to_vec(), args[4].as_bytes().to_vec());
    let extra = cs(args.get(5).map(|x| x.as_bytes()).unwrap_or(b"extra"));
    let allowed = cs(&a);
    if op == "connect" {
        return race_connect(n, &args[3], &args[4]);
    }
    if op == "sendto" {
        return race_sendto(n, &args[3], &args[4]);
    }
    if op == "sendmsg" {
        return race_sendmsg(n, &args[3], &args[4]);
    }
    let f = Flipper::start(a, t);
    let mut tally = Tally::default();
    if op == "link" {
        touch(&extra);
    }
    if op == "write" || op == "chmod" {
        touch(&allowed);
    }
    for _ in 0..n {
        let rc = match op.as_str() {
            "unlink" => {
                touch(&allowed);
                libc::unlink(f.ptr()) as i64
            }
            "rename-src" => {
                touch(&allowed);
                libc::rename(f.ptr(), extra.as_ptr()) as i64
            }
            "rename-dst" => {
                touch(&extra);
                libc::rename(extra.as_ptr(), f.ptr()) as i64
            }
            "write" => {
                let fd = libc::open(f.ptr(), libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"PWNED".as_ptr().cast(), 5);
                    libc::close(fd);
                }
                fd as i64
            }
            "link" => {
                let rc = libc::link(extra.as_ptr(), f.ptr()) as i64;
                if rc == 0 {
                    libc::unlink(allowed.as_ptr());
                }
                rc
            }
            "chmod" => libc::chmod(f.ptr(), 0o600) as i64,
            other => {
                eprintln!("guard-probe: unknown race {other:?}");
                std::process::exit(2);
            }
        };
        tally.add(rc);
    }
    drop(f);
    tally.line(&format!("race {op} attempts={n}"))
}

fn sockaddr(s: &OsStr) -> libc::sockaddr_in {
    let addr: std::net::SocketAddrV4 = s.to_string_lossy().parse().expect("ipv4:port");
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Flip a sockaddr_in's port between ALLOWED's and TARGET's while connecting to it.
unsafe fn race_connect(n: usize, allowed: &OsStr, target: &OsStr) -> String {
    let (a, t) = (sockaddr(allowed), sockaddr(target));
    let size = std::mem::size_of::<libc::sockaddr_in>();
    let bytes = |s: &libc::sockaddr_in| {
        std::slice::from_raw_parts((s as *const libc::sockaddr_in).cast::<u8>(), size).to_vec()
    };
    // The flipper writes a trailing NUL: harmless past the 16 bytes connect is told about.
    let f = Flipper::start(bytes(&a), bytes(&t));
    let mut tally = Tally::default();
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    for _ in 0..n {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        // Reset on close: no TIME_WAIT pile-up over thousands of attempts.
        libc::setsockopt(
            s,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as u32,
        );
        let rc = libc::connect(s, f.ptr().cast(), size as u32) as i64;
        tally.add(rc);
        libc::close(s);
    }
    drop(f);
    tally.line(&format!("race connect attempts={n}"))
}

/// The bytes of a `sockaddr_in`.
fn sin_bytes(s: &libc::sockaddr_in) -> Vec<u8> {
    let size = std::mem::size_of::<libc::sockaddr_in>();
    unsafe { std::slice::from_raw_parts((s as *const libc::sockaddr_in).cast::<u8>(), size) }
        .to_vec()
}

/// Flip a UDP destination's port between ALLOWED's and TARGET's while sending to it.
unsafe fn race_sendto(n: usize, allowed: &OsStr, target: &OsStr) -> String {
    let (a, t) = (sockaddr(allowed), sockaddr(target));
    let f = Flipper::start(sin_bytes(&a), sin_bytes(&t));
    let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    let mut tally = Tally::default();
    for _ in 0..n {
        let rc = libc::sendto(
            s,
            b"race".as_ptr().cast(),
            4,
            0,
            f.ptr().cast(),
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        ) as i64;
        tally.add(rc);
    }
    drop(f);
    libc::close(s);
    tally.line(&format!("race sendto attempts={n}"))
}

/// sendmsg on descriptor 200 while one thread flips the header's `msg_name` between NULL and
/// TARGET (and its port between ALLOWED's and TARGET's), and another swaps descriptor 200
/// between a UDP socket connected to ALLOWED and an unconnected one.
unsafe fn race_sendmsg(n: usize, allowed: &OsStr, target: &OsStr) -> String {
    let (a, t) = (sockaddr(allowed), sockaddr(target));
    // The destination bytes flip between the two ports.
    let dest = Flipper::start(sin_bytes(&a), sin_bytes(&t));
    let connected = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    let size = std::mem::size_of::<libc::sockaddr_in>() as u32;
    libc::connect(connected, (&a as *const libc::sockaddr_in).cast(), size);
    let loose = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    libc::dup2(connected, 200);
    let payload = b"race";
    let iov = Box::leak(Box::new(libc::iovec {
        iov_base: payload.as_ptr() as *mut _,
        iov_len: 4,
    }));
    let hdr: &'static mut libc::msghdr = Box::leak(Box::new(std::mem::zeroed()));
    hdr.msg_iov = iov;
    hdr.msg_iovlen = 1;
    hdr.msg_namelen = size;
    let (hdr_addr, dest_addr) = (hdr as *mut libc::msghdr as usize, dest.ptr() as usize);
    let stop = Arc::new(AtomicBool::new(false));
    let s1 = Arc::clone(&stop);
    let names = std::thread::spawn(move || {
        let field = unsafe { std::ptr::addr_of_mut!((*(hdr_addr as *mut libc::msghdr)).msg_name) };
        while !s1.load(Ordering::Relaxed) {
            unsafe { std::ptr::write_volatile(field, std::ptr::null_mut()) };
            std::hint::spin_loop();
            unsafe { std::ptr::write_volatile(field, dest_addr as *mut libc::c_void) };
            std::hint::spin_loop();
        }
    });
    let s2 = Arc::clone(&stop);
    let swaps = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            unsafe { libc::dup2(loose, 200) };
            unsafe { libc::dup2(connected, 200) };
        }
    });
    let mut tally = Tally::default();
    for _ in 0..n {
        let rc = libc::sendmsg(200, hdr as *const libc::msghdr, 0) as i64;
        tally.add(rc);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = names.join();
    let _ = swaps.join();
    drop(dest);
    tally.line(&format!("race sendmsg attempts={n}"))
}

/// `fdrace N TARGET`: descriptor 200 flips between a pipe and TARGET (opened read-only) while
/// the main thread opens `/proc/self/fd/200` for writing with O_TRUNC. `regular=K` counts
/// opens that handed back a regular file.
unsafe fn fdrace(args: &[OsString]) -> String {
    let n: usize = args[1].to_string_lossy().parse().expect("attempt count");
    let target = cs(args[2].as_bytes());
    let tfd = libc::open(target.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if tfd < 0 {
        return format!("fdrace cannot open target: {}", ename(errno()));
    }
    let mut p = [0i32; 2];
    libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC);
    libc::dup2(p[1], 200);
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let (w, t) = (p[1], tfd);
    let h = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            libc::dup2(t, 200);
            libc::dup2(w, 200);
        }
    });
    let path = cs(b"/proc/self/fd/200");
    let mut tally = Tally::default();
    let mut regular = 0usize;
    for _ in 0..n {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
        );
        tally.add(fd as i64);
        if fd >= 0 {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG {
                regular += 1;
                libc::write(fd, b"PWNED".as_ptr().cast(), 5);
            }
            libc::close(fd);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = h.join();
    tally.line(&format!("fdrace attempts={n} regular={regular}"))
}

/// `symrace N DIRNAME LINKTARGET`: a second thread keeps exchanging DIRNAME (a real directory)
/// with a symlink to LINKTARGET (renameat2 RENAME_EXCHANGE) while the main thread creates
/// `DIRNAME/config` and writes PWNED into it.
unsafe fn symrace(args: &[OsString]) -> String {
    let n: usize = args[1].to_string_lossy().parse().expect("attempt count");
    let dir = args[2].as_bytes().to_vec();
    let alt = [dir.as_slice(), b"-alt"].concat();
    let (cdir, calt) = (cs(&dir), cs(&alt));
    libc::mkdir(cdir.as_ptr(), 0o755);
    libc::symlink(cs(args[3].as_bytes()).as_ptr(), calt.as_ptr());
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let (d2, a2) = (cdir.clone(), calt.clone());
    let h = std::thread::spawn(move || {
        let mut flips = 0usize;
        while !s.load(Ordering::Relaxed) {
            let rc = libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                d2.as_ptr(),
                libc::AT_FDCWD,
                a2.as_ptr(),
                libc::RENAME_EXCHANGE,
            );
            if rc == 0 {
                flips += 1;
            }
        }
        flips
    });
    let file = cs(&[dir.as_slice(), b"/config"].concat());
    let mut tally = Tally::default();
    for _ in 0..n {
        let fd = libc::open(
            file.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o644,
        );
        tally.add(fd as i64);
        if fd >= 0 {
            libc::write(fd, b"PWNED".as_ptr().cast(), 5);
            libc::close(fd);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = h.join().unwrap_or(0);
    tally.line(&format!("symrace attempts={n} flips={flips}"))
}

/// `unterminated`: a path that runs into an unmapped page without a NUL, to unlink and to
/// open for writing. Prints two results.
unsafe fn unterminated() -> String {
    let page = 4096usize;
    let base = libc::mmap(
        std::ptr::null_mut(),
        2 * page,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    ) as *mut u8;
    std::ptr::write_bytes(base, b'a', page);
    libc::munmap(base.add(page).cast(), page);
    let p = base.add(page - 10) as *const libc::c_char;
    let mut out = String::new();
    for (what, rc) in [
        ("unlink", libc::unlink(p) as i64),
        (
            "open",
            libc::open(p, libc::O_WRONLY | libc::O_CREAT, 0o644) as i64,
        ),
        ("mkdir", libc::mkdir(p, 0o755) as i64),
    ] {
        let r = if rc < 0 { ename(errno()) } else { "ok".into() };
        out.push_str(&format!("{what}={r} "));
    }
    out.trim_end().to_string()
}

/// `deep N REL`: descend N levels of 200-byte directory names (so the absolute path passes
/// PATH_MAX), then write through REL (relative to the deepest directory).
unsafe fn deep(args: &[OsString]) -> String {
    let n: usize = args[1].to_string_lossy().parse().expect("depth");
    let name = cs(&[b'd'; 200]);
    for _ in 0..n {
        libc::mkdir(name.as_ptr(), 0o755);
        if libc::chdir(name.as_ptr()) != 0 {
            return format!("deep chdir {}", ename(errno()));
        }
    }
    let rel = cs(args[2].as_bytes());
    let fd = libc::open(
        rel.as_ptr(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        0o644,
    );
    if fd < 0 {
        return format!("deep write {}", ename(errno()));
    }
    libc::write(fd, b"PWNED".as_ptr().cast(), 5);
    libc::close(fd);
    "deep write ok".into()
}

/// `memfd-exec`: copy this probe into a memfd and execveat it (AT_EMPTY_PATH); the copy would
/// print MEMFD-RAN.
unsafe fn memfd_exec() -> String {
    let exe = match std::fs::read("/proc/self/exe") {
        Ok(b) => b,
        Err(e) => return format!("memfd-exec cannot read self: {e}"),
    };
    let fd = libc::memfd_create(cs(b"x").as_ptr(), 0);
    if fd < 0 {
        return format!("memfd-exec memfd_create {}", ename(errno()));
    }
    libc::write(fd, exe.as_ptr().cast(), exe.len());
    let argv = [cs(b"probe"), cs(b"echo"), cs(b"MEMFD-RAN")];
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    libc::syscall(
        libc::SYS_execveat,
        fd,
        cs(b"").as_ptr(),
        ptrs.as_ptr(),
        envp.as_ptr(),
        libc::AT_EMPTY_PATH,
    );
    format!("memfd-exec {}", ename(errno()))
}

/// `poke-mem PID`: open /proc/PID/mem for writing and write over the start of its stack
/// mapping (when the open succeeded).
unsafe fn poke_mem(pid: &OsStr) -> String {
    let path = cs(format!("/proc/{}/mem", pid.to_string_lossy()).as_bytes());
    let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if fd < 0 {
        return format!("poke-mem open {}", ename(errno()));
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", pid.to_string_lossy()))
        .unwrap_or_default();
    let addr = maps
        .lines()
        .find(|l| l.ends_with("[heap]") || l.ends_with("[stack]"))
        .and_then(|l| l.split('-').next())
        .and_then(|a| u64::from_str_radix(a, 16).ok())
        .unwrap_or(0);
    let rc = libc::pwrite(fd, [0u8; 64].as_ptr().cast(), 64, addr as i64);
    if rc < 0 {
        format!("poke-mem opened write {}", ename(errno()))
    } else {
        "poke-mem opened write ok".into()
    }
}

/// `flood THREADS CALLS`: THREADS threads each unlink a missing file CALLS times.
unsafe fn flood(args: &[OsString]) -> String {
    let t: usize = args[1].to_string_lossy().parse().expect("threads");
    let m: usize = args[2].to_string_lossy().parse().expect("calls");
    let handles: Vec<_> = (0..t)
        .map(|i| {
            std::thread::spawn(move || {
                let name = cs(format!("missing-{i}").as_bytes());
                let mut tally = Tally::default();
                for _ in 0..m {
                    tally.add(libc::unlink(name.as_ptr()) as i64);
                }
                tally
            })
        })
        .collect();
    let mut all = Tally::default();
    for h in handles {
        let Ok(one) = h.join() else {
            return "flood a thread panicked".into();
        };
        all.ok += one.ok;
        for (k, v) in one.errs {
            *all.errs.entry(k).or_default() += v;
        }
    }
    all.line(&format!("flood calls={}", t * m))
}

/// `steal-parent-pipes [PID]`: reopen every pipe of PID (default: the parent) through
/// /proc/PID/fd/N for writing and write one byte into each, then try a workspace write.
unsafe fn steal_parent_pipes(args: &[OsString]) -> String {
    // The target process: the pid given (guard, above the sandbox's init), else the parent.
    let ppid = args
        .get(1)
        .and_then(|a| a.to_string_lossy().parse::<i32>().ok())
        .unwrap_or_else(|| libc::getppid());
    let mut opened = 0usize;
    for n in 3..128 {
        let path = cs(format!("/proc/{ppid}/fd/{n}").as_bytes());
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            opened += 1;
            libc::write(fd, b"x".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = cs(b"after-steal.txt");
    let fd = libc::open(
        after.as_ptr(),
        libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
        0o644,
    );
    let r = if fd < 0 { ename(errno()) } else { "ok".into() };
    format!("steal opened={opened} after={r}")
}

/// `tiocsti`: push a command into the controlling terminal's input queue.
unsafe fn tiocsti() -> String {
    let fd = libc::open(cs(b"/dev/tty").as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    let fd = if fd < 0 {
        if libc::isatty(0) == 1 {
            0
        } else {
            return format!("tiocsti no-tty {}", ename(errno()));
        }
    } else {
        fd
    };
    let mut pushed = 0usize;
    for b in b"echo PWNED\n" {
        if libc::ioctl(fd, libc::TIOCSTI, b as *const u8) == 0 {
            pushed += 1;
        } else {
            return format!("tiocsti pushed={pushed} {}", ename(errno()));
        }
    }
    format!("tiocsti pushed={pushed}")
}

/// Runs an attack operation, if `args[0]` names one; the result is printed by the caller.
pub fn dispatch(args: &[OsString]) -> Option<String> {
    let op = args.first()?.to_string_lossy().into_owned();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let line = unsafe {
        match op.as_str() {
            "race" => race(args),
            "fdrace" => fdrace(args),
            "symrace" => symrace(args),
            "unterminated" => unterminated(),
            "deep" => deep(args),
            "memfd-exec" => memfd_exec(),
            "poke-mem" => poke_mem(&arg(1)),
            "ptrace-attach" => {
                let pid: i32 = arg(1).to_string_lossy().parse().expect("pid");
                let rc = libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0);
                let r = if rc < 0 { ename(errno()) } else { "ok".into() };
                format!("ptrace-attach {r}")
            }
            "kill" => {
                let pid: i32 = arg(1).to_string_lossy().parse().expect("pid");
                let rc = libc::kill(pid, libc::SIGKILL);
                let r = if rc < 0 { ename(errno()) } else { "ok".into() };
                format!("kill {r}")
            }
            "flood" => flood(args),
            "steal-parent-pipes" => steal_parent_pipes(args),
            "tiocsti" => tiocsti(),
            "echo" => args[1..]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            _ => return None,
        }
    };
    Some(line)
}
