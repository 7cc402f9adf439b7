//! Metadata operations for the tests of descriptors and set-id bits (tests/it/metadata.rs):
//! one call each, through a descriptor or a path, printing `ok` or `errno N NAME` like the
//! probe's other one-shot operations. Modes are octal.
//!
//! - `fchmod PATH MODE`, `fchown PATH UID GID`, `fsetxattr PATH NAME VALUE`,
//!   `fremovexattr PATH NAME`, `futimens PATH`: the plain descriptor forms, on PATH opened
//!   read-only;
//! - `fchmodat-empty`, `fchownat-empty`, `utimensat-empty`: the `*at(fd, "", AT_EMPTY_PATH)`
//!   forms, on PATH opened O_PATH;
//! - `chmod-mode PATH MODE`, `creat-mode PATH MODE`, `mknod-mode PATH MODE`,
//!   `setxattr PATH NAME VALUE`, `utimes PATH`: the path forms;
//! - `fdmeta-race N ALLOWED TARGET`: a second thread keeps moving descriptor 200 between
//!   ALLOWED and TARGET while the main thread fchmods it to 0777 N times; prints
//!   `fdmeta-race attempts=N ok=K ...`.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn cs(a: &OsString) -> CString {
    CString::new(a.as_bytes()).expect("no NUL in probe arguments")
}

fn mode(a: &OsString) -> u32 {
    u32::from_str_radix(&a.to_string_lossy(), 8).expect("an octal mode")
}

fn id(a: &OsString) -> u32 {
    a.to_string_lossy().parse::<i64>().expect("an id") as u32
}

/// Runs a metadata operation; `None` when `args` names none. The result is the return value
/// (negative: errno is set).
pub unsafe fn dispatch(args: &[OsString]) -> Option<i64> {
    let op = args.first()?.to_string_lossy().into_owned();
    let a = |i: usize| args.get(i).cloned().unwrap_or_default();
    let open = |flags: i32| libc::open(cs(&a(1)).as_ptr(), flags | libc::O_CLOEXEC);
    let times = [libc::timespec {
        tv_sec: 1_000_000,
        tv_nsec: 0,
    }; 2];
    let empty = c"".as_ptr();
    let with_fd = |flags: i32, f: &dyn Fn(i32) -> i64| {
        let fd = open(flags);
        if fd < 0 {
            return fd as i64;
        }
        let rc = f(fd);
        let e = std::io::Error::last_os_error();
        libc::close(fd);
        if rc < 0 {
            // close must not hide the call's errno.
            *libc::__errno_location() = e.raw_os_error().unwrap_or(0);
        }
        rc
    };
    let rc = match op.as_str() {
        "fchmod" => with_fd(libc::O_RDONLY, &|fd| libc::fchmod(fd, mode(&a(2))) as i64),
        "fchown" => with_fd(libc::O_RDONLY, &|fd| {
            libc::fchown(fd, id(&a(2)), id(&a(3))) as i64
        }),
        "fsetxattr" => with_fd(libc::O_RDONLY, &|fd| {
            let v = a(3);
            libc::fsetxattr(
                fd,
                cs(&a(2)).as_ptr(),
                v.as_bytes().as_ptr().cast(),
                v.len(),
                0,
            ) as i64
        }),
        "fremovexattr" => with_fd(libc::O_RDONLY, &|fd| {
            libc::fremovexattr(fd, cs(&a(2)).as_ptr()) as i64
        }),
        "futimens" => with_fd(libc::O_RDONLY, &|fd| {
            libc::syscall(
                libc::SYS_utimensat,
                fd,
                std::ptr::null::<u8>(),
                times.as_ptr(),
                0,
            )
        }),
        "fchmodat-empty" => with_fd(libc::O_PATH, &|fd| {
            libc::syscall(
                // 452 on every architecture (numbers from 424 on are shared); libc names it
                // on x86_64 only.
                452,
                fd,
                empty,
                mode(&a(2)),
                libc::AT_EMPTY_PATH,
            )
        }),
        "fchownat-empty" => with_fd(libc::O_PATH, &|fd| {
            libc::fchownat(fd, empty, id(&a(2)), id(&a(3)), libc::AT_EMPTY_PATH) as i64
        }),
        "utimensat-empty" => with_fd(libc::O_PATH, &|fd| {
            libc::syscall(
                libc::SYS_utimensat,
                fd,
                empty,
                times.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        }),
        "chmod-mode" => libc::chmod(cs(&a(1)).as_ptr(), mode(&a(2))) as i64,
        "creat-mode" => {
            // The umask must not be what removes the bits.
            libc::umask(0);
            let fd = libc::open(
                cs(&a(1)).as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                mode(&a(2)),
            );
            if fd >= 0 {
                libc::close(fd);
            }
            fd as i64
        }
        "mknod-mode" => {
            libc::umask(0);
            libc::mknod(cs(&a(1)).as_ptr(), libc::S_IFREG | mode(&a(2)), 0) as i64
        }
        "setxattr" => {
            let v = a(3);
            libc::setxattr(
                cs(&a(1)).as_ptr(),
                cs(&a(2)).as_ptr(),
                v.as_bytes().as_ptr().cast(),
                v.len(),
                0,
            ) as i64
        }
        "utimes" => libc::utimensat(libc::AT_FDCWD, cs(&a(1)).as_ptr(), times.as_ptr(), 0) as i64,
        "fdmeta-race" => {
            println!("{}", fdmeta_race(args));
            std::process::exit(0);
        }
        _ => return None,
    };
    Some(rc)
}

unsafe fn fdmeta_race(args: &[OsString]) -> String {
    let n: usize = args[1].to_string_lossy().parse().expect("attempt count");
    let allowed = libc::open(cs(&args[2]).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    let target = libc::open(cs(&args[3]).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
    if allowed < 0 || target < 0 {
        return "fdmeta-race cannot open its files".into();
    }
    libc::dup2(allowed, 200);
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            libc::dup2(target, 200);
            libc::dup2(allowed, 200);
        }
    });
    let (mut ok, mut failed) = (0usize, 0usize);
    for _ in 0..n {
        if libc::fchmod(200, 0o777) == 0 {
            ok += 1;
        } else {
            failed += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = h.join();
    format!("fdmeta-race attempts={n} ok={ok} failed={failed}")
}
