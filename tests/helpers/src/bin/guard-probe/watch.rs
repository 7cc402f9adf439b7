//! What an inotify watcher sees when a directory is removed (tests/it/fidelity_names.rs):
//! the kernel tells a watch of the directory `IN_DELETE_SELF` when its last reference goes,
//! which bare is the removal itself.
//!
//! - `watch-rmdir DIR`: makes DIR, watches it, makes and deletes `DIR/f` (a path through DIR,
//!   as a build's or a test's temporary directory is used), removes DIR;
//! - `watch-replace DIR`: the same, but DIR is replaced by a rename of an empty `DIR.new`
//!   over it.
//!
//! Both print `deleted` when the watch saw IN_DELETE_SELF within two seconds of the removal,
//! `no event` otherwise, or the failing step and its errno.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

fn cs(bytes: &[u8]) -> CString {
    CString::new(bytes).expect("no NUL in probe arguments")
}

fn step(what: &str, rc: i32) -> Result<(), String> {
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("{what}: errno {}", e.raw_os_error().unwrap_or(0)));
    }
    Ok(())
}

/// Runs a watch operation; `None` when `args` names none.
pub fn dispatch(args: &[OsString]) -> Option<String> {
    let op = args.first()?.to_str()?;
    let replace = match op {
        "watch-rmdir" => false,
        "watch-replace" => true,
        _ => return None,
    };
    let dir = args.get(1)?.as_bytes().to_vec();
    Some(match watch(&dir, replace) {
        Ok(true) => "deleted".to_owned(),
        Ok(false) => "no event".to_owned(),
        Err(e) => e,
    })
}

fn watch(dir: &[u8], replace: bool) -> Result<bool, String> {
    let d = cs(dir);
    let f = cs(&[dir, b"/f"].concat());
    let new = cs(&[dir, b".new"].concat());
    // SAFETY: each call takes NUL-terminated paths that live across it, or plain integers.
    unsafe {
        step("mkdir", libc::mkdir(d.as_ptr(), 0o755))?;
        let ino = libc::inotify_init1(libc::IN_CLOEXEC);
        step("inotify_init1", ino)?;
        step(
            "inotify_add_watch",
            libc::inotify_add_watch(ino, d.as_ptr(), libc::IN_DELETE_SELF),
        )?;
        let fd = libc::open(
            f.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        );
        step("create", fd)?;
        libc::close(fd);
        step("unlink", libc::unlink(f.as_ptr()))?;
        if replace {
            step("mkdir new", libc::mkdir(new.as_ptr(), 0o755))?;
            step("rename", libc::rename(new.as_ptr(), d.as_ptr()))?;
        } else {
            step("rmdir", libc::rmdir(d.as_ptr()))?;
        }
        let mut poll = libc::pollfd {
            fd: ino,
            events: libc::POLLIN,
            revents: 0,
        };
        step("poll", libc::poll(&mut poll, 1, 2000))?;
        if poll.revents & libc::POLLIN == 0 {
            return Ok(false);
        }
        let mut buf = [0u8; 4096];
        let n = libc::read(ino, buf.as_mut_ptr().cast(), buf.len());
        step("read", n as i32)?;
        // struct inotify_event: wd (i32), mask (u32), cookie, len, name.
        let mask = u32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        Ok(mask & libc::IN_DELETE_SELF != 0)
    }
}
