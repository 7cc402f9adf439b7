//! Benchmarks of the supervisor's work per judged call, without the kernel's round trip: a
//! notification made up here (this process as the caller, the path in this process's memory)
//! goes through decode, read (process_vm_readv of our own memory), resolve (the real walk of a
//! real workspace, through /proc/PID), decide + react (the `agent` profile) and record (the
//! decision's facts handed to the writer thread, which builds the audit event from them), as
//! `supervisor::handle` takes it. Each prefix of the stages is timed for `unlinkat` of a missing
//! name, so the differences say what each stage costs; the other calls are timed whole. Not measured here: receiving and answering the
//! notification, the id check, the caller's credentials, performing the call, the journal.

use std::ffi::CString;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use guard::audit::{encode, Event};
use guard::policy::{load, Vars};
use guard::supervisor::hotpath::{PerCall, Reached, Stage};
use guard::sys::Notif;

/// A notification of system call `nr` by this process with arguments `args`.
fn notif(nr: i64, args: [u64; 6]) -> Notif {
    Notif {
        id: 1,
        pid: std::process::id(),
        nr: i32::try_from(nr).expect("a small syscall number"),
        arch: 0,
        ip: 0,
        args,
    }
}

fn bench_per_call(c: &mut Criterion) {
    let ws = tempfile::tempdir().expect("a temporary workspace");
    let root = ws.path().canonicalize().expect("the workspace's real path");
    std::fs::write(root.join("existing"), b"x").expect("a file in the workspace");
    let vars = Vars {
        workspace: root.clone(),
        home: std::env::var_os("HOME").map(Into::into),
        tmp: std::env::temp_dir(),
        state: root.join(".state"),
    };
    let policy = load(&["agent".to_string()], &vars).expect("the agent profile loads");
    let mut per_call = PerCall::new(Arc::new(policy), std::process::id());

    let path = |name: &str| {
        CString::new(root.join(name).into_os_string().into_encoded_bytes()).expect("no NUL")
    };
    let (missing, existing, fresh) = (path("missing"), path("existing"), path("not-yet"));
    let fdcwd = libc::AT_FDCWD as u64;
    let unlink = |p: &CString| notif(libc::SYS_unlinkat, [fdcwd, p.as_ptr() as u64, 0, 0, 0, 0]);
    let open = |p: &CString, flags: i32| {
        notif(
            libc::SYS_openat,
            [fdcwd, p.as_ptr() as u64, flags as u64, 0o644, 0, 0],
        )
    };
    let unlink_missing = unlink(&missing);
    let calls = [
        ("unlinkat missing name", unlink_missing),
        ("unlinkat existing file", unlink(&existing)),
        (
            "openat O_WRONLY|O_CREAT existing file",
            open(&existing, libc::O_WRONLY | libc::O_CREAT),
        ),
        (
            "openat O_CREAT|O_EXCL new name",
            open(&fresh, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL),
        ),
    ];
    // Every call is judged (none passes unjudged) and makes an audit event.
    for (what, n) in &calls {
        assert!(
            matches!(per_call.run(n, Stage::Record), Reached::Event(_)),
            "{what} makes no audit event"
        );
    }

    let mut group = c.benchmark_group("per-call");
    group
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(30);
    for (stage, name) in [
        (Stage::Decode, "unlinkat missing name: decode"),
        (Stage::Read, "unlinkat missing name: + read"),
        (Stage::Resolve, "unlinkat missing name: + resolve"),
        (Stage::Decide, "unlinkat missing name: + decide"),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| per_call.run(black_box(&unlink_missing), stage))
        });
    }
    for (what, n) in &calls {
        group.bench_function(format!("{what}: + record (whole)"), |b| {
            b.iter(|| per_call.run(black_box(n), Stage::Record))
        });
    }
    // The audit writer thread's share: the decision's facts to an event, and the event to its
    // JSON line.
    group.bench_function("audit line of a decision (writer thread)", |b| {
        b.iter_batched(
            || match per_call.run(&unlink_missing, Stage::Record) {
                Reached::Event(build) => build,
                _ => panic!("unlinkat of a missing name makes an audit event"),
            },
            |build| {
                let event = Event::Decision(build());
                encode(black_box(&event), "20261202T000000.000000Z-bench")
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_per_call);
criterion_main!(benches);
