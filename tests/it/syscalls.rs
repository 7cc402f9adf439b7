//! The static seccomp filter: foreign entry points are killed, calls no agent needs fail.

use crate::util::{probe_result, Workspace};

#[cfg(target_arch = "x86_64")]
const SIGSYS: i32 = 31;

#[test]
#[cfg(target_arch = "x86_64")]
fn i386_int80_unlink_is_killed_and_the_file_survives() {
    let w = Workspace::new();
    let victim = w.write("victim.txt", "still here\n");
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "int80-unlink", &victim.display().to_string()]);
    assert_eq!(
        out.code(),
        128 + SIGSYS,
        "int 0x80 must kill the process: {}",
        out.stdout()
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("intact"),
        "still here\n"
    );
}

#[test]
#[cfg(target_arch = "x86_64")]
fn x32_syscall_numbers_are_killed() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "x32-getpid"]);
    assert_eq!(
        out.code(),
        128 + SIGSYS,
        "x32 call must kill: {}",
        out.stdout()
    );
}

#[test]
fn calls_no_agent_needs_fail_with_eperm() {
    let w = Workspace::new();
    for op in [
        "io_uring_setup",
        "ptrace",
        "open_by_handle_at",
        "userfaultfd",
        "bpf",
        "perf_event_open",
        "unshare",
        "setns",
        "process_vm_writev",
        "mount",
        "seccomp-listener",
    ] {
        let out = w.exec(&["agent"]).run(&[&w.probe(), op]);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{op} must be refused");
    }
}

#[test]
fn the_same_calls_work_without_guard_where_the_kernel_allows_them() {
    // Guards against a probe that fails for reasons of its own: unshare(CLONE_NEWUSER) and
    // io_uring_setup succeed here outside the sandbox (when the kernel allows them).
    let probe = &crate::util::bins().probe;
    let out = std::process::Command::new(probe)
        .arg("io_uring_setup")
        .output()
        .expect("probe");
    let r = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if r != "ok" {
        eprintln!("skip: io_uring_setup is not available outside guard here ({r})");
    }
}

#[test]
fn signals_to_processes_outside_the_sandbox_are_refused() {
    // Landlock ABI 6 signal scoping: same uid, yet the sandbox cannot signal out.
    let w = Workspace::new();
    let mut outside = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let pid = outside.id().to_string();
    let out = w
        .exec(&["agent"])
        .run(&["sh", "-c", &format!("kill -TERM {pid} 2>&1; echo rc=$?")]);
    assert!(
        out.stdout().contains("rc=1"),
        "kill must fail: {}",
        out.stdout()
    );
    assert!(
        outside.try_wait().expect("try_wait").is_none(),
        "the outside process is alive"
    );
    outside.kill().expect("kill sleep");
    let _ = outside.wait();
}
