//! guard-probe: tries exactly one operation and prints the outcome, so tests can prove a denial
//! from inside the sandbox (after bubblewrap's `tests/try-syscall.c`).
//!
//! Usage: `guard-probe OP [ARGS...]`. Prints `ok` or `errno N NAME` on stdout and exits 0;
//! exits 2 on bad usage. Operations the kernel kills (foreign architectures) never print.
#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

mod attacks;
mod meta;
mod net;
mod watch;

fn c(s: &OsStr) -> CString {
    CString::new(s.as_bytes()).expect("no NUL in probe arguments")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOENT => "ENOENT",
        libc::ENOSYS => "ENOSYS",
        libc::EXDEV => "EXDEV",
        libc::EINVAL => "EINVAL",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EFAULT => "EFAULT",
        libc::EBADF => "EBADF",
        libc::EEXIST => "EEXIST",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "OTHER",
    }
}

fn report(rc: i64) {
    let mut out = std::io::stdout().lock();
    if rc < 0 {
        let e = errno();
        let _ = writeln!(out, "errno {e} {}", name(e));
    } else {
        let _ = writeln!(out, "ok");
    }
}

/// unlink(2) through the i386 `int 0x80` entry point (syscall 10 there).
#[cfg(target_arch = "x86_64")]
fn int80_unlink(path: &CString) -> i64 {
    // The pointer must fit in 32 bits for the compat entry point: copy the path into a
    // MAP_32BIT mapping.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return -1;
    }
    let bytes = path.as_bytes_with_nul();
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), page as *mut u8, bytes.len()) };
    let ret: i64;
    unsafe {
        // rbx is reserved by LLVM: swap the argument in and out around the trap.
        std::arch::asm!(
            "xchg rbx, {arg}",
            "int 0x80",
            "xchg rbx, {arg}",
            arg = inout(reg) page as u64 => _,
            inlateout("rax") 10i64 => ret,
        );
    }
    if ret < 0 {
        // int 0x80 returns -errno in eax.
        let e = -(ret as i32);
        println!("errno {e} {}", name(e));
        std::process::exit(0);
    }
    ret
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Multi-step attacks (tests/it/attacks.rs) print their own summary line.
    if let Some(line) = attacks::dispatch(&args) {
        println!("{line}");
        return;
    }
    // SAFETY (test helper): each operation is one system call on its own arguments.
    if let Some(rc) = unsafe { meta::dispatch(&args) } {
        report(rc);
        return;
    }
    if let Some(line) = net::dispatch(&args) {
        println!("{line}");
        return;
    }
    if let Some(line) = watch::dispatch(&args) {
        println!("{line}");
        return;
    }
    let a = |i: usize| {
        args.get(i)
            .map(OsString::as_os_str)
            .unwrap_or(OsStr::new(""))
    };
    let s = |i: usize| a(i).to_string_lossy().into_owned();
    let rc: i64 = unsafe {
        match s(0).as_str() {
            "unlink" => libc::unlink(c(a(1)).as_ptr()) as i64,
            "rmdir" => libc::rmdir(c(a(1)).as_ptr()) as i64,
            "mkdir" => libc::mkdir(c(a(1)).as_ptr(), 0o755) as i64,
            // `create-mode PATH OCTAL` and `mkdir-mode PATH OCTAL`: a new entry of that mode,
            // which the umask then shapes.
            "create-mode" | "mkdir-mode" => {
                let mode = u32::from_str_radix(&s(2), 8).unwrap_or(0o644);
                if s(0) == "mkdir-mode" {
                    libc::mkdir(c(a(1)).as_ptr(), mode) as i64
                } else {
                    let fd = libc::open(
                        c(a(1)).as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                        mode,
                    );
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    fd.min(0) as i64
                }
            }
            "rename" => libc::rename(c(a(1)).as_ptr(), c(a(2)).as_ptr()) as i64,
            "exchange" => libc::renameat2(
                libc::AT_FDCWD,
                c(a(1)).as_ptr(),
                libc::AT_FDCWD,
                c(a(2)).as_ptr(),
                libc::RENAME_EXCHANGE,
            ) as i64,
            "link" => libc::link(c(a(1)).as_ptr(), c(a(2)).as_ptr()) as i64,
            "symlink" => libc::symlink(c(a(1)).as_ptr(), c(a(2)).as_ptr()) as i64,
            "chmod" => libc::chmod(c(a(1)).as_ptr(), 0o600) as i64,
            "truncate" => libc::truncate(c(a(1)).as_ptr(), 0) as i64,
            "write" => {
                let fd = libc::open(
                    c(a(1)).as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    0o644,
                );
                if fd >= 0 {
                    let data = a(2).as_bytes();
                    libc::write(fd, data.as_ptr().cast(), data.len());
                    libc::close(fd);
                }
                fd as i64
            }
            "read" => {
                let fd = libc::open(c(a(1)).as_ptr(), libc::O_RDONLY);
                if fd >= 0 {
                    libc::close(fd);
                }
                fd as i64
            }
            "connect" => {
                let addr: std::net::SocketAddrV4 = s(1).parse().expect("ipv4:port");
                let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                let sa = libc::sockaddr_in {
                    sin_family: libc::AF_INET as u16,
                    sin_port: addr.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*addr.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                libc::connect(
                    s,
                    (&sa as *const libc::sockaddr_in).cast(),
                    std::mem::size_of_val(&sa) as u32,
                ) as i64
            }
            // exec PATH ARGV0 ARGS...: execv(2); prints only when it fails (the program
            // it runs prints for itself, e.g. `/bin/echo ok`).
            "exec" => {
                let argv: Vec<CString> = args[2..].iter().map(|x| c(x)).collect();
                let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|x| x.as_ptr()).collect();
                ptrs.push(std::ptr::null());
                libc::execv(c(a(1)).as_ptr(), ptrs.as_ptr()) as i64
            }
            "io_uring_setup" => {
                let mut params = [0u8; 120];
                libc::syscall(libc::SYS_io_uring_setup, 4, params.as_mut_ptr()) as i64
            }
            "ptrace" => libc::ptrace(libc::PTRACE_ATTACH, libc::getppid(), 0, 0) as i64,
            "open_by_handle_at" => {
                let mut handle = [0u8; 128];
                libc::syscall(
                    libc::SYS_open_by_handle_at,
                    libc::AT_FDCWD,
                    handle.as_mut_ptr(),
                    libc::O_RDONLY,
                ) as i64
            }
            "userfaultfd" => libc::syscall(libc::SYS_userfaultfd, 0) as i64,
            "bpf" => libc::syscall(libc::SYS_bpf, 0, 0, 0) as i64,
            "perf_event_open" => libc::syscall(libc::SYS_perf_event_open, 0, 0, -1, -1, 0) as i64,
            "process_vm_writev" => {
                let data = [0u8; 8];
                let local = libc::iovec {
                    iov_base: data.as_ptr() as *mut _,
                    iov_len: 8,
                };
                let remote = libc::iovec {
                    iov_base: data.as_ptr() as *mut _,
                    iov_len: 8,
                };
                libc::syscall(
                    libc::SYS_process_vm_writev,
                    libc::getppid(),
                    &local,
                    1,
                    &remote,
                    1,
                    0,
                ) as i64
            }
            "setns" => {
                let fd = libc::open(c(OsStr::new("/proc/self/ns/uts")).as_ptr(), libc::O_RDONLY);
                libc::setns(fd, 0) as i64
            }
            "unshare" => libc::unshare(libc::CLONE_NEWUSER) as i64,
            "mount" => libc::mount(
                c(OsStr::new("none")).as_ptr(),
                c(OsStr::new("/mnt")).as_ptr(),
                c(OsStr::new("tmpfs")).as_ptr(),
                0,
                std::ptr::null(),
            ) as i64,
            "seccomp-listener" => {
                let f = libc::sock_filter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                };
                let prog = libc::sock_fprog {
                    len: 1,
                    filter: &f as *const _ as *mut _,
                };
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                libc::syscall(
                    libc::SYS_seccomp,
                    1,
                    libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                    &prog,
                ) as i64
            }
            "x32-getpid" => libc::syscall(0x4000_0000 | libc::SYS_getpid) as i64,
            #[cfg(target_arch = "x86_64")]
            "int80-unlink" => int80_unlink(&c(a(1))),
            "threads" => {
                // N threads, each creating and deleting its own file M times: many judged calls
                // in flight at once from one process.
                let n: usize = s(1).parse().unwrap_or(16);
                let m: usize = s(2).parse().unwrap_or(100);
                let handles: Vec<_> = (0..n)
                    .map(|t| {
                        std::thread::spawn(move || {
                            let mut failures = 0usize;
                            let name = CString::new(format!("thread-{t}")).expect("no NUL");
                            for _ in 0..m {
                                let fd = libc::open(
                                    name.as_ptr(),
                                    libc::O_WRONLY | libc::O_CREAT,
                                    0o644,
                                );
                                if fd < 0 {
                                    failures += 1;
                                    continue;
                                }
                                libc::close(fd);
                                if libc::unlink(name.as_ptr()) != 0 {
                                    failures += 1;
                                }
                            }
                            failures
                        })
                    })
                    .collect();
                let failures: usize = handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(usize::MAX))
                    .sum();
                if failures > 0 {
                    println!("failures {failures}");
                }
                0
            }
            "cwd-threads" => {
                // Two threads of one process share their working directory: the main thread
                // moves between `a` and `b` (chdir, and fchdir every third time) N times, and
                // after each move both threads create a file relative to it: `w-I` by the
                // other thread (which made `w-0` before the first move), then `m-I` by the
                // mover.
                let n: usize = s(1).parse().unwrap_or(10);
                let (go_tx, go_rx) = std::sync::mpsc::channel::<usize>();
                let (done_tx, done_rx) = std::sync::mpsc::channel::<i64>();
                let create = |name: String| {
                    let name = CString::new(name).expect("no NUL");
                    let fd = libc::open(name.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644);
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    i64::from(fd.min(0))
                };
                let other = std::thread::spawn(move || {
                    let _ = done_tx.send(create("w-0".into()));
                    while let Ok(i) = go_rx.recv() {
                        let _ = done_tx.send(create(format!("w-{i}")));
                    }
                });
                let mut rc = done_rx.recv().unwrap_or(-1);
                let dirs = [c(OsStr::new("a")), c(OsStr::new("b"))];
                let fds = dirs
                    .each_ref()
                    .map(|d| libc::open(d.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY));
                for i in 1..=n {
                    let to = i % 2;
                    let moved = if i % 3 == 0 {
                        libc::fchdir(fds[to])
                    } else {
                        // `a` and `b` are siblings: the first move is from their parent.
                        let path = if i == 1 {
                            ["a", "b"][to].to_string()
                        } else {
                            format!("../{}", ["a", "b"][to])
                        };
                        libc::chdir(CString::new(path).expect("no NUL").as_ptr())
                    };
                    rc = rc.min(i64::from(moved));
                    // The other thread first, before the mover makes a call of its own.
                    let _ = go_tx.send(i);
                    rc = rc.min(done_rx.recv().unwrap_or(-1));
                    rc = rc.min(create(format!("m-{i}")));
                }
                drop(go_tx);
                let _ = other.join();
                rc
            }
            "sleep-then-write" => {
                // For kill tests: wait, then try to change a file every 50 ms for N tries.
                let tries: u32 = s(2).parse().unwrap_or(100);
                let mut last = 0i64;
                for _ in 0..tries {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    let fd = libc::open(
                        c(a(1)).as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
                        0o644,
                    );
                    if fd >= 0 {
                        libc::write(fd, b"x".as_ptr().cast(), 1);
                        libc::close(fd);
                    }
                    last = fd as i64;
                }
                last
            }
            "mmap-write" => {
                // Rewrite a file in place through a shared mapping: every byte becomes the
                // pattern (repeated), then msync. No write(2) touches the file.
                let pattern = if a(2).is_empty() {
                    b"mmap".as_slice()
                } else {
                    a(2).as_bytes()
                };
                let fd = libc::open(c(a(1)).as_ptr(), libc::O_RDWR);
                if fd < 0 {
                    report(-1);
                    std::process::exit(0);
                }
                let mut st: libc::stat = std::mem::zeroed();
                if libc::fstat(fd, &mut st) != 0 || st.st_size <= 0 {
                    report(-1);
                    std::process::exit(0);
                }
                let len = st.st_size as usize;
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                );
                libc::close(fd);
                if map == libc::MAP_FAILED {
                    report(-1);
                    std::process::exit(0);
                }
                let bytes = std::slice::from_raw_parts_mut(map.cast::<u8>(), len);
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = pattern[i % pattern.len()];
                }
                let rc = libc::msync(map, len, libc::MS_SYNC);
                libc::munmap(map, len);
                rc as i64
            }
            other => {
                eprintln!("guard-probe: unknown operation {other:?}");
                std::process::exit(2);
            }
        }
    };
    report(rc);
}
