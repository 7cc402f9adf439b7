//! guard-callloop: makes the same system call N times in a loop and prints the mean cost per
//! call, so `benches/compare.sh` can measure what guard's supervisor adds to one judged call.
//!
//! Usage: `guard-callloop OP N`, run in a directory the caller may write (the workspace).
//! Prints one line `OP N NS_PER_CALL` on stdout and exits 0; exits 1 when a call does not
//! behave as expected (so a denial is never timed as if it were the allowed path), 2 on bad
//! usage.
//!
//! Operations:
//! - `unlink-missing`: unlinkat(AT_FDCWD, a missing name, 0): trapped and judged by guard,
//!   allowed; the kernel answers ENOENT.
//! - `open-write`: openat(O_WRONLY|O_CREAT) of one file in a fresh directory
//!   `guard-callloop-PID/`, then close: the open is trapped and judged (close is not).
//! - `open-read`: openat(O_RDONLY) of the same file, then close: never trapped, for contrast.
//! - `getpid`: the raw getpid system call, never trapped: the baseline.
//! - `umask`: umask(2), setting 077 and 022 in turn: trapped, and let through by guard at
//!   once, unjudged (it notes the mask after answering): the floor of a trapped call.
//! - `prepare`: creates the N files (plus the warm-up's) that `unlink-existing` deletes, in
//!   `guard-callloop-files/` (run it before `guard exec`, so they exist before the run).
//! - `unlink-existing`: unlinks the files `prepare` made one by one: under guard each unlinkat
//!   is trapped, and guard moves the file into its journal's store.
//! - `unlink-made`: creates N files (plus the warm-up's) in a fresh directory
//!   `guard-callloop-PID/`, outside the timed part, then unlinks them one by one: under guard
//!   each unlinkat is trapped; files made since the checkpoint are deleted without a copy.
//! - `create-new`: openat(O_WRONLY|O_CREAT|O_EXCL) of N new names in a fresh directory
//!   `guard-callloop-PID/`, then close: guard journals each new name and creates the file.
//! - `sendmsg-connected`: sendmsg of 16 bytes without a destination on a UDP socket connected
//!   to another of its own on 127.0.0.1 (set up before the clock starts): trapped always
//!   (BPF cannot see `msg_name`), and guard performs it on a duplicate of the socket.
//! - `send-connected`: the same datagram with send() (a sendto without a destination): never
//!   trapped, for contrast.
//!
//! Every operation that makes files makes them in its fresh directory (in the cwd, so that under
//! guard they are in the workspace and journaled) and leaves it behind: under guard, removing it
//! would be journaled too. The caller removes it.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::hint::black_box;
use std::process::exit;
use std::time::Instant;

const MISSING: &CStr = c"guard-callloop-missing";
/// The file of `open-write` and `open-read`, in the scratch directory.
static FILE: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn fail(op: &str, what: &str) -> ! {
    eprintln!(
        "guard-callloop: {op}: {what}: {}",
        std::io::Error::last_os_error()
    );
    exit(1)
}

fn unlink_missing() -> Result<(), &'static str> {
    let rc = unsafe { libc::unlinkat(libc::AT_FDCWD, MISSING.as_ptr(), 0) };
    if rc == 0 {
        return Err("the missing file existed");
    }
    if errno() != libc::ENOENT {
        return Err("unlinkat did not fail with ENOENT");
    }
    Ok(())
}

fn open_close(flags: i32) -> Result<(), &'static str> {
    let fd = unsafe {
        libc::openat(
            libc::AT_FDCWD,
            FILE.get().expect("the file's name is set first").as_ptr(),
            flags | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err("openat failed");
    }
    unsafe { libc::close(fd) };
    Ok(())
}

/// The name of file `i` in the directory of the numbered loops.
fn numbered(dir: &str, i: u32) -> std::ffi::CString {
    std::ffi::CString::new(format!("{dir}/f{i}")).expect("no NUL in the name")
}

fn create(path: &CStr) -> Result<(), &'static str> {
    let fd = unsafe {
        libc::openat(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err("openat(O_CREAT|O_EXCL) of a new name failed");
    }
    unsafe { libc::close(fd) };
    Ok(())
}

fn unlink(path: &CStr) -> Result<(), &'static str> {
    if unsafe { libc::unlinkat(libc::AT_FDCWD, path.as_ptr(), 0) } != 0 {
        return Err("unlinkat of an existing file failed");
    }
    Ok(())
}

/// Create the fresh directory `guard-callloop-PID` in the cwd and return its name.
fn scratch_dir(op: &str) -> String {
    let dir = format!("guard-callloop-{}", std::process::id());
    let cdir = std::ffi::CString::new(dir.clone()).expect("no NUL in the name");
    if unsafe { libc::mkdir(cdir.as_ptr(), 0o755) } != 0 {
        fail(op, "mkdir");
    }
    dir
}

/// The directory of the files `prepare` makes for `unlink-existing`.
const PREPARED: &str = "guard-callloop-files";

/// How many calls the numbered loops make before the clock starts.
fn warm_up(n: u32) -> u32 {
    (n / 20).max(10)
}

/// `prepare`: the files `unlink-existing` deletes, in a directory of their own.
fn prepare(n: u32) {
    let cdir = std::ffi::CString::new(PREPARED).expect("no NUL in the name");
    if unsafe { libc::mkdir(cdir.as_ptr(), 0o755) } != 0 {
        fail("prepare", "mkdir guard-callloop-files");
    }
    for i in 0..warm_up(n) + n {
        if let Err(what) = create(&numbered(PREPARED, i)) {
            fail("prepare", what);
        }
    }
}

/// `unlink-existing`, `unlink-made` and `create-new`: each call works on its own name, so the
/// loop cannot reuse `call()`.
fn numbered_loop(op: &str, n: u32) -> f64 {
    let dir = if op == "unlink-existing" {
        if !std::path::Path::new(PREPARED).is_dir() {
            eprintln!("guard-callloop: unlink-existing: run `guard-callloop prepare {n}` first");
            exit(2);
        }
        PREPARED.to_string()
    } else {
        scratch_dir(op)
    };
    let warm = warm_up(n);
    let total = warm + n;
    let names: Vec<_> = (0..total).map(|i| numbered(&dir, i)).collect();
    let step: fn(&CStr) -> Result<(), &'static str> = match op {
        "unlink-existing" => unlink,
        "unlink-made" => {
            // The files to unlink, created before the clock starts.
            for name in &names {
                if let Err(what) = create(name) {
                    fail(op, what);
                }
            }
            unlink
        }
        _ => create,
    };
    for name in &names[..warm as usize] {
        if let Err(what) = step(name) {
            fail(op, what);
        }
    }
    let start = Instant::now();
    for name in &names[warm as usize..] {
        if let Err(what) = step(name) {
            fail(op, what);
        }
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

/// The connected UDP socket of `sendmsg-connected` and `send-connected`.
static SOCK: std::sync::OnceLock<i32> = std::sync::OnceLock::new();

/// A UDP socket on 127.0.0.1 and another connected to it (a full receive buffer drops
/// datagrams; the sender never blocks).
fn connected_udp(op: &str) -> i32 {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|_| fail(op, "bind"));
    let to = rx
        .local_addr()
        .unwrap_or_else(|_| fail(op, "local address"));
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|_| fail(op, "bind"));
    tx.connect(to).unwrap_or_else(|_| fail(op, "connect"));
    std::mem::forget(rx);
    use std::os::fd::IntoRawFd;
    tx.into_raw_fd()
}

fn sendmsg_connected() -> Result<(), &'static str> {
    let payload = [7u8; 16];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    let fd = *SOCK.get().expect("the socket is set first");
    if unsafe { libc::sendmsg(fd, &h, 0) } != 16 {
        return Err("sendmsg did not send 16 bytes");
    }
    Ok(())
}

fn send_connected() -> Result<(), &'static str> {
    let payload = [7u8; 16];
    let fd = *SOCK.get().expect("the socket is set first");
    if unsafe { libc::send(fd, payload.as_ptr().cast(), 16, 0) } != 16 {
        return Err("send did not send 16 bytes");
    }
    Ok(())
}

fn umask() -> Result<(), &'static str> {
    static FLIP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let tight = FLIP.fetch_xor(true, std::sync::atomic::Ordering::Relaxed);
    let mask = if tight { 0o077 } else { 0o022 };
    // Each call returns the mask the one before set (the first, the inherited one).
    black_box(unsafe { libc::umask(mask) });
    Ok(())
}

fn getpid() -> Result<(), &'static str> {
    // The raw system call: no libc caching can hide it.
    black_box(unsafe { libc::syscall(libc::SYS_getpid) });
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!(
            "usage: guard-callloop unlink-missing|open-write|open-read|getpid|umask|prepare|unlink-existing|unlink-made|create-new|sendmsg-connected|send-connected N"
        );
        exit(2);
    }
    let op = args[1].as_str();
    let Ok(n) = args[2].parse::<u32>() else {
        eprintln!("guard-callloop: N must be a positive integer");
        exit(2);
    };
    if n == 0 {
        eprintln!("guard-callloop: N must be a positive integer");
        exit(2);
    }
    if op == "prepare" {
        prepare(n);
        return;
    }
    if matches!(op, "unlink-existing" | "unlink-made" | "create-new") {
        let ns = numbered_loop(op, n);
        println!("{op} {n} {ns:.1}");
        return;
    }
    let call: fn() -> Result<(), &'static str> = match op {
        "unlink-missing" => unlink_missing,
        "open-write" => || open_close(libc::O_WRONLY | libc::O_CREAT),
        "open-read" => || open_close(libc::O_RDONLY),
        "getpid" => getpid,
        "umask" => umask,
        "sendmsg-connected" => sendmsg_connected,
        "send-connected" => send_connected,
        _ => {
            eprintln!("guard-callloop: unknown operation {op}");
            exit(2);
        }
    };
    if op.ends_with("-connected") {
        SOCK.set(connected_udp(op)).expect("set once");
    }
    if op.starts_with("open-") {
        let file = format!("{}/file", scratch_dir(op));
        let file = std::ffi::CString::new(file).expect("no NUL in the name");
        FILE.set(file).expect("set once");
    }
    if op == "open-read" {
        // The file must exist; creating it is one judged call, outside the timed loop.
        if let Err(what) = open_close(libc::O_WRONLY | libc::O_CREAT) {
            fail(op, what);
        }
    }
    // Warm up: fault in the code and the dentries, let the supervisor's thread get scheduled.
    for _ in 0..(n / 20).max(10) {
        if let Err(what) = call() {
            fail(op, what);
        }
    }
    let start = Instant::now();
    for _ in 0..n {
        if let Err(what) = call() {
            fail(op, what);
        }
    }
    let elapsed = start.elapsed();
    let ns = elapsed.as_nanos() as f64 / f64::from(n);
    println!("{op} {n} {ns:.1}");
}
