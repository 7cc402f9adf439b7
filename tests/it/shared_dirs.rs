//! `/dev/shm` under the built-in profiles (`fs.shared`): a program may make its POSIX
//! semaphores and shared memory there and use them as bare (Python's multiprocessing is the
//! common case: its locks, queues and pools failed under every profile before), while another
//! process's file there stays as it is; and a thread may name itself through
//! `/proc/PID/comm` as bare. Each as root and as the unprivileged user.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fidelity;
use crate::util::{Out, Workspace, AS_UNPRIVILEGED, UNPRIV_USER};

/// The system's interpreter (every user may run it), if there is one.
fn python() -> Option<PathBuf> {
    let p = Path::new("/usr/bin/python3");
    p.exists().then(|| p.to_path_buf())
}

/// `argv` run bare as the workspace's user, with the credentials guard leaves it (a root
/// one without capabilities).
fn bare(w: &Workspace, argv: &[&str]) -> Out {
    if w.unprivileged {
        let argv: Vec<&str> = AS_UNPRIVILEGED.iter().chain(argv).copied().collect();
        return fidelity::run_bare(&fidelity::args(argv), &w.ws, true);
    }
    fidelity::run_bare(&fidelity::args(argv), &w.ws, false)
}

/// The Python script `text`, written to `file` in the workspace, run with `args` bare and under
/// each of `profiles`: the same output, exit status 0 and no refusal. Returns the output.
fn same_as_bare(
    w: &Workspace,
    py: &str,
    (file, text): (&str, &str),
    args: &[&str],
    profiles: &[&str],
) -> String {
    let script = w.write(file, text).display().to_string();
    let argv: Vec<&str> = [py, script.as_str()]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let want = bare(w, &argv);
    want.expect_code(0);
    for profile in profiles {
        let out = w.exec(&[profile]).run(&argv);
        assert_eq!(
            (out.code(), out.stdout()),
            (0, want.stdout()),
            "{profile}, unprivileged: {}; stderr:\n{}",
            w.unprivileged,
            out.stderr()
        );
        assert!(w.refusals().is_empty(), "{profile}: {:?}", w.refusals());
    }
    want.stdout()
}

/// A name in /dev/shm no other test uses.
fn shm_name(what: &str) -> PathBuf {
    let n = std::process::id();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Path::new("/dev/shm").join(format!("guard-it-{what}-{n}-{t}"))
}

/// A file "another process" made in /dev/shm, owned by the workspace's user (so that only
/// guard, not the kernel, stands between the command and it).
fn outside_file(w: &Workspace, what: &str, content: &str) -> PathBuf {
    let p = shm_name(what);
    std::fs::write(&p, content).expect("write /dev/shm file");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    if w.unprivileged {
        let ok = Command::new("chown")
            .arg(format!("{UNPRIV_USER}:"))
            .arg(&p)
            .status()
            .expect("chown");
        assert!(ok.success());
    }
    p
}

const MULTIPROCESSING: &str = r#"
import multiprocessing as mp, concurrent.futures as cf, sys
from multiprocessing import shared_memory
def main():
    print('lock', mp.Lock().acquire())
    q = mp.Queue(); q.put(3); print('queue', q.get())
    with mp.Pool(2) as p: print('pool', p.map(abs, [-1, -2, -3]))
    with cf.ProcessPoolExecutor(2) as ex: print('executor', list(ex.map(abs, [-4, -5])))
    s = shared_memory.SharedMemory(create=True, size=64); s.buf[0] = 7
    t = shared_memory.SharedMemory(s.name); print('shared memory', t.buf[0])
    t.close(); s.close(); s.unlink()
    for m in sys.argv[1:]:
        c = mp.get_context(m)
        with c.Pool(2) as p: print(m, p.map(abs, [-6]))
if __name__ == '__main__':
    main()
"#;

/// Python's multiprocessing (locks, queues, pools, `ProcessPoolExecutor`, shared memory, the
/// spawn and forkserver start methods) gives what it gives bare under `agent` and `ci`: before
/// `fs.shared`, `multiprocessing.Lock()` failed with EACCES under every profile. `strict`
/// takes /dev/shm back, on purpose.
#[test]
fn python_multiprocessing_runs_as_bare_under_agent_and_ci() {
    let Some(py) = python() else {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    };
    let py = py.display().to_string();
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let script = ("mp.py", MULTIPROCESSING);
        let methods = ["spawn", "forkserver"];
        let out = same_as_bare(&w, &py, script, &methods, &["agent", "ci"]);
        assert!(out.contains("forkserver [6]"), "{out}");
        // strict takes /dev/shm back: a lock is refused there, and says so.
        let out = w.exec(&["strict"]).run(&[
            py.as_str(),
            "-c",
            "import multiprocessing as mp\ntry: mp.Lock()\nexcept PermissionError: print('refused')",
        ]);
        assert_eq!(out.stdout(), "refused\n", "{}", out.stderr());
        let refusals = w.refusals();
        assert!(
            refusals.iter().any(|r| r["rule"] == "fs.write-roots"
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/dev/shm/"))),
            "{refusals:#?}"
        );
    }
}

/// Another process's file in /dev/shm stays byte for byte as it was, whatever the command
/// tries (write, append, truncate, remove, rename, link, mode, times, and a symlink of its own
/// that points there), each refused with EACCES by rule `fs.shared` naming the file; the
/// command's own files there it may write, rename, link and remove, as bare.
#[test]
fn another_processes_file_in_dev_shm_stays_as_it_is() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let theirs = outside_file(&w, "theirs", "their bytes\n");
        let before = std::fs::metadata(&theirs).expect("stat");
        let mine = shm_name("mine");
        let link = shm_name("sl");
        let script = format!(
            "t={t}; m={m}; s={s}
             try() {{ if \"$@\" 2>/dev/null; then echo \"done: $*\"; else echo \"refused: $1\"; fi; }}
             try sh -c \"echo x > $t\"
             try sh -c \"echo x >> $t\"
             try truncate -s 0 $t
             try rm -f $t
             try mv $t $m
             try ln $t $m
             try chmod 600 $t
             try touch -d 2001-01-01 $t
             ln -s $t $s && try sh -c \"echo x > $s\"; rm -f $s
             echo one > $m && echo two >> $m && mv $m $m.2 && ln $m.2 $m && chmod 600 $m && cat $m && rm $m $m.2 && echo own ok",
            t = theirs.display(),
            m = mine.display(),
            s = link.display(),
        );
        let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
        let got = std::fs::read_to_string(&theirs);
        let after = std::fs::metadata(&theirs);
        let _ = std::fs::remove_file(&theirs);
        assert_eq!(
            out.stdout(),
            "refused: sh\nrefused: sh\nrefused: truncate\nrefused: rm\nrefused: mv\n\
             refused: ln\nrefused: chmod\nrefused: touch\nrefused: sh\none\ntwo\nown ok\n",
            "unprivileged: {}; stderr:\n{}",
            w.unprivileged,
            out.stderr()
        );
        assert_eq!(got.expect("their file is there"), "their bytes\n");
        let after = after.expect("stat");
        assert_eq!(
            (after.ino(), after.mode(), after.mtime(), after.size()),
            (before.ino(), before.mode(), before.mtime(), before.size())
        );
        assert!(!mine.exists() && !link.exists());
        let refusals = w.refusals();
        // Nine commands, ten calls: touch opens the file for writing before it sets times.
        assert_eq!(refusals.len(), 10, "{refusals:#?}");
        for r in &refusals {
            assert_eq!(r["rule"], "fs.shared", "{r}");
            assert_eq!(r["errno"], "EACCES", "{r}");
            assert!(r.to_string().contains(&theirs.display().to_string()), "{r}");
        }
        // The command's own changes there were judged and allowed by the same rule.
        let allowed = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "allow" && d["rule"] == "fs.shared")
            .count();
        assert!(allowed >= 7, "allowed by fs.shared: {allowed}");
    }
}

/// What the run made is known by identity, not by name: once another process removes the
/// run's file and makes its own under the same name, the command may not write it.
#[test]
fn a_name_the_run_made_that_changes_hands_is_not_the_runs() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let name = shm_name("handover");
        let go = w.ws.join("go");
        let script = format!(
            "echo mine > {n}; while [ ! -e {go} ]; do sleep 0.02; done
             if echo again > {n}; then echo written; else echo refused; fi",
            n = name.display(),
            go = go.display(),
        );
        let mut g = w.exec(&["agent"]);
        g.cmd.args(["--", "sh", "-c", &script]);
        g.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = g.cmd.spawn().expect("spawn guard");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::read_to_string(&name).ok().as_deref() != Some("mine\n") {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = Out(child.wait_with_output().expect("wait"));
                panic!("the run never made {name:?}; stderr:\n{}", out.stderr());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::remove_file(&name).expect("remove the run's file");
        std::fs::write(&name, "theirs\n").expect("make ours");
        if w.unprivileged {
            let ok = Command::new("chown")
                .arg(format!("{UNPRIV_USER}:"))
                .arg(&name)
                .status()
                .expect("chown");
            assert!(ok.success());
        }
        std::fs::write(&go, "").expect("go");
        let out = Out(child.wait_with_output().expect("wait"));
        let got = std::fs::read_to_string(&name);
        let _ = std::fs::remove_file(&name);
        assert_eq!(
            out.stdout(),
            "refused\n",
            "unprivileged: {}; stderr:\n{}",
            w.unprivileged,
            out.stderr()
        );
        assert_eq!(got.expect("their file"), "theirs\n");
    }
}

const THREAD_NAMES: &str = r#"
import ctypes, os, subprocess, threading
open('/proc/self/comm', 'w').write('renamed')
print('self', open('/proc/self/comm').read().strip())
t = threading.Thread(target=lambda: __import__('time').sleep(1)); t.start()
libc = ctypes.CDLL(None)
print('thread', libc.pthread_setname_np(ctypes.c_ulong(t.ident), b'worker'))
print('thread name', open(f'/proc/self/task/{t.native_id}/comm').read().strip())
t.join()
p = subprocess.Popen(['sleep', '5'])
try:
    with open(f'/proc/{p.pid}/comm', 'w') as f:
        f.write('other')
    print('other: written')
except OSError as e:
    print('other:', os.strerror(e.errno))
p.kill(); p.wait()
"#;

/// A thread may name itself, or another thread of its process, through `/proc/.../comm` (glibc's
/// `pthread_setname_np` for another thread does); another process's name it may not, with the
/// kernel's EINVAL, as bare.
#[test]
fn threads_name_themselves_through_proc_as_bare() {
    let Some(py) = python() else {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    };
    let py = py.display().to_string();
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let out = same_as_bare(&w, &py, ("names.py", THREAD_NAMES), &[], &["agent"]);
        assert_eq!(
            out,
            "self renamed\nthread 0\nthread name worker\nother: Invalid argument\n"
        );
        let named = w
            .decisions()
            .into_iter()
            .filter(|d| d["rule"] == "fs.thread-name" && d["verdict"] == "allow")
            .count();
        assert_eq!(named, 3, "{:#?}", w.decisions());
    }
}

const NAMELESS: &str = r#"
import ctypes, os
name = f'/dev/shm/guard-it-nameless-{os.getpid()}'
fd = os.open('/dev/shm', os.O_TMPFILE | os.O_RDWR, 0o600)
os.write(fd, b'nameless\n')
os.setxattr(fd, 'user.a', b'v')
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
if libc.linkat(AT_FDCWD, f'/proc/self/fd/{fd}'.encode(), AT_FDCWD, name.encode(), AT_SYMLINK_FOLLOW):
    raise OSError(ctypes.get_errno(), 'linkat')
print(open(name).read().strip(), os.getxattr(name, 'user.a'))
os.unlink(name)
print('gone', not os.path.exists(name))
"#;

/// A file made with O_TMPFILE in /dev/shm (the tempfile crate's `tempfile_in` does it: xattr
/// 1.6.1's `test_large` failed under guard) is the run's: it may be written, given extended
/// attributes, linked to a name there and removed, as bare.
#[test]
fn a_nameless_file_made_in_dev_shm_is_the_runs() {
    let Some(py) = python() else {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    };
    let py = py.display().to_string();
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let out = same_as_bare(&w, &py, ("nameless.py", NAMELESS), &[], &["agent"]);
        assert_eq!(out, "nameless b'v'\ngone True\n");
    }
}

/// With ADDFD switched off (`GUARD_NO_ADDFD`, what a kernel before 5.9 gives), a write-open is
/// continued once judged, and Landlock, which grants nothing in /dev/shm, refuses it: a
/// multiprocessing lock fails with EACCES, closed rather than open. The degraded path.
#[test]
fn without_addfd_write_opens_in_dev_shm_fail_closed() {
    let Some(py) = python() else {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    };
    let py = py.display().to_string();
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let out = w.exec(&["agent"]).env("GUARD_NO_ADDFD", "1").run(&[
            py.as_str(),
            "-c",
            "import multiprocessing as mp\ntry: mp.Lock()\nexcept PermissionError: print('refused')",
        ]);
        assert_eq!(
            out.stdout(),
            "refused\n",
            "unprivileged: {}; stderr:\n{}",
            w.unprivileged,
            out.stderr()
        );
    }
}
