//! Benchmarks of `decide()` on the default `agent` profile: the supervisor calls it once per
//! trapped system call, so it must stay in the sub-microsecond range.

use std::ffi::OsString;
use std::hint::black_box;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use guard::policy::{decide, load, NetAddr, Op, Request, Vars};

fn bench_decide(c: &mut Criterion) {
    let vars = Vars {
        workspace: "/home/u/project".into(),
        home: Some("/home/u".into()),
        tmp: "/tmp/guard-run".into(),
        state: "/home/u/.local/state/guard".into(),
    };
    let policy = load(&["agent".to_string()], &vars).expect("the agent profile loads");

    let inside = PathBuf::from("/home/u/project/src/main.rs");
    let outside = PathBuf::from("/etc/passwd");
    let argv: Vec<OsString> = ["git", "push", "origin", "main"]
        .map(OsString::from)
        .to_vec();
    let exe = PathBuf::from("/usr/bin/git");
    let cwd = PathBuf::from("/home/u/project");
    let addr = NetAddr::Inet(
        "127.0.0.1:8080"
            .parse::<SocketAddr>()
            .expect("valid address"),
    );

    let mut group = c.benchmark_group("decide");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(30);
    // Once per run, before the command starts: parse, layer and compile the profile.
    group.bench_function("load the agent profile", |b| {
        b.iter(|| load(black_box(&["agent".to_string()]), &vars).expect("loads"))
    });
    group.bench_function("write in workspace", |b| {
        let req = Request {
            path: Some(&inside),
            ..Request::new(Op::Write)
        };
        b.iter(|| decide(black_box(&policy), black_box(&req)))
    });
    group.bench_function("write outside", |b| {
        let req = Request {
            path: Some(&outside),
            ..Request::new(Op::Write)
        };
        b.iter(|| decide(black_box(&policy), black_box(&req)))
    });
    group.bench_function("exec git push origin main", |b| {
        let req = Request {
            argv: &argv,
            exe: Some(&exe),
            cwd: Some(&cwd),
            ..Request::new(Op::Exec)
        };
        b.iter(|| decide(black_box(&policy), black_box(&req)))
    });
    group.bench_function("connect 127.0.0.1:8080", |b| {
        let req = Request {
            addr: Some(&addr),
            ..Request::new(Op::Connect)
        };
        b.iter(|| decide(black_box(&policy), black_box(&req)))
    });
    group.finish();
}

criterion_group!(benches, bench_decide);
criterion_main!(benches);
