//! What a recorded run needed that a policy does not grant: each decision of the audit log
//! judged again, by the functions a run judges with, against the policy the command is to run
//! under. The supervisor's refusals come from [`policy::decide`] on the request the decision
//! records; Landlock's from [`landlock::grants`] for every path the command read and every
//! program it executed (with the interpreter or loader the kernel opened for it). The first call that needed something is kept with it, for the comments.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::audit::Decision;
use crate::confine::landlock::{self, FsGrant};
use crate::confine::Features;
use crate::policy::{self, Action, NetAddr, Op, Policy, Request};

/// Something the command needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Need {
    /// Reading beneath a read (or write) root: the path, and whether it is a directory.
    Read { path: PathBuf, dir: bool },
    /// Executing a program.
    Execute { path: PathBuf },
    /// Changing entries beneath a write root: the paths changed.
    Write { paths: Vec<PathBuf> },
    /// Connecting to an address.
    Connect { addr: NetAddr, text: String },
    /// Looking a name up through a nameserver guard judges (`net.resolve`).
    Resolve { name: String },
    /// Binding an address the base refuses: not learned, as a profile's `net.bind` replaces
    /// the inherited list rather than adding to it.
    Bind { text: String },
    /// A filesystem change a rule (or `protect`) refused: an allow rule for it.
    AllowFs { op: Op, paths: Vec<PathBuf> },
    /// An exec a rule refused: an allow rule for this command line.
    AllowExec {
        argv: Vec<OsString>,
        cwd: Option<PathBuf>,
    },
}

/// A need, with the call that first had it and the rule that refused it.
#[derive(Debug, Clone)]
pub(super) struct Needed {
    pub need: Need,
    /// `cargo (pid 12): read /root/.rustup/settings.toml`.
    pub by: String,
    /// The rule that refused it (`fs.read` for Landlock's read roots).
    pub refused_by: String,
}

/// The needs of `calls` (a run's decisions, in order) that `policy` does not grant, with the
/// Landlock plan of `features`.
pub(super) fn needs(policy: &Policy, features: &Features, calls: &[Decision]) -> Vec<Needed> {
    let mut out: Vec<Needed> = Vec::new();
    let mut seen_exe: HashSet<PathBuf> = HashSet::new();
    // What the run created that `protect` cares about (see `Request::fresh`).
    let mut created: HashSet<PathBuf> = HashSet::new();
    let mut push = |need: Need, by: &str, refused_by: String| {
        if !out.iter().any(|n| n.need == need) {
            out.push(Needed {
                need,
                by: by.to_string(),
                refused_by,
            });
        }
    };
    for d in calls {
        // A call that failed with the kernel's own answer (a path that does not resolve, a
        // mkdir of a name that exists) fails the same whatever a profile grants.
        if d.verdict == crate::audit::Verdict::Error {
            continue;
        }
        let by = describe(d);
        let path = d.path.as_ref().map(|p| PathBuf::from(p.clone()));
        let path2 = d.path2.as_ref().map(|p| PathBuf::from(p.clone()));
        match d.op.as_str() {
            "read" => {
                let Some(path) = path else { continue };
                let dir = path.is_dir();
                let need = if dir {
                    landlock::Need::List
                } else {
                    landlock::Need::Read
                };
                if refused(policy, features, &path, need) {
                    push(Need::Read { path, dir }, &by, "fs.read".into());
                }
            }
            "exec" => {
                let Some(exe) = d.exe.as_ref().map(|e| PathBuf::from(e.clone())) else {
                    continue;
                };
                // The program, and the interpreter or loader the kernel opens for it: execute
                // rights. A program that is not there (a PATH search trying each directory)
                // fails with ENOENT whatever the roots.
                if exe.exists() && seen_exe.insert(exe.clone()) {
                    let loader = interpreter(&exe).and_then(|i| std::fs::canonicalize(i).ok());
                    for program in std::iter::once(exe.clone()).chain(loader) {
                        if refused(policy, features, &program, landlock::Need::Execute) {
                            push(Need::Execute { path: program }, &by, "fs.read".into());
                        }
                    }
                }
                let argv: Vec<OsString> = d
                    .argv
                    .iter()
                    .flatten()
                    .map(|a| a.clone().into_os_string())
                    .collect();
                let cwd = d.cwd.as_ref().map(|c| PathBuf::from(c.clone()));
                let req = Request {
                    argv: &argv,
                    exe: Some(&exe),
                    cwd: cwd.as_deref(),
                    ..Request::new(Op::Exec)
                };
                let v = policy::decide(policy, &req);
                if matches!(v.action, Action::Deny | Action::Kill) {
                    push(Need::AllowExec { argv, cwd }, &by, v.rule.to_string());
                }
            }
            "connect" => {
                let Some(text) = d.addr.clone() else { continue };
                let Some(addr) = parse_addr(&text) else {
                    continue;
                };
                let req = Request {
                    addr: Some(&addr),
                    ..Request::new(Op::Connect)
                };
                let v = policy::decide(policy, &req);
                if matches!(v.action, Action::Deny | Action::Kill) {
                    push(Need::Connect { addr, text }, &by, v.rule.to_string());
                }
            }
            "dns" => {
                let (Some(name), Some(text)) = (d.name.clone(), d.addr.clone()) else {
                    continue;
                };
                let Some(server) = parse_addr(&text) else {
                    continue;
                };
                let req = Request {
                    addr: Some(&server),
                    name: Some(&name),
                    ..Request::new(Op::Dns)
                };
                let v = policy::decide(policy, &req);
                match (v.action, &v.rule) {
                    (
                        Action::Deny | Action::Kill,
                        policy::RuleId::Builtin(policy::Builtin::Dns),
                    ) => {
                        push(Need::Resolve { name }, &by, v.rule.to_string());
                    }
                    (
                        Action::Deny | Action::Kill,
                        policy::RuleId::Builtin(policy::Builtin::Connect),
                    ) => {
                        push(
                            Need::Connect { addr: server, text },
                            &by,
                            v.rule.to_string(),
                        );
                    }
                    _ => {}
                }
            }
            "bind" => {
                let Some(text) = d.addr.clone() else { continue };
                let Some(addr) = parse_addr(&text) else {
                    continue;
                };
                let req = Request {
                    addr: Some(&addr),
                    ..Request::new(Op::Bind)
                };
                let v = policy::decide(policy, &req);
                if matches!(v.action, Action::Deny | Action::Kill) {
                    push(Need::Bind { text }, &by, v.rule.to_string());
                }
            }
            op => {
                let Ok(op) = serde_json::from_value::<Op>(serde_json::Value::from(op)) else {
                    continue;
                };
                let Some(path) = path else { continue };
                if is_own_pipe(&path) {
                    // The caller re-opened its own pipe (a jobserver, `> /dev/stdout`): a run
                    // allows it whatever the roots (`Request::reopens_own_pipe`).
                    continue;
                }
                let paths: Vec<PathBuf> = [Some(path.clone()), path2.clone()]
                    .into_iter()
                    .flatten()
                    .collect();
                let fresh = !created.is_empty()
                    && paths
                        .iter()
                        .all(|p| p.ancestors().any(|a| created.contains(a)));
                let req = Request {
                    path: Some(&path),
                    path2: path2.as_deref(),
                    fresh,
                    creates: op == Op::Create,
                    ..Request::new(op)
                };
                let v = policy::decide(policy, &req);
                match (v.action, &v.rule) {
                    (
                        Action::Deny | Action::Kill,
                        policy::RuleId::Builtin(policy::Builtin::WriteRoots),
                    ) => {
                        push(Need::Write { paths }, &by, v.rule.to_string());
                    }
                    (Action::Deny | Action::Kill, _) => {
                        push(Need::AllowFs { op, paths }, &by, v.rule.to_string());
                    }
                    _ => {}
                }
                if op == Op::Create && policy.is_protect_relevant(&path) {
                    created.insert(path);
                }
            }
        }
    }
    out
}

/// A path the supervisor records for a re-open of the caller's own pipe: the resolve stage
/// names those `/proc/PID/fd/N` (any other descriptor resolves to the file it refers to).
fn is_own_pipe(path: &Path) -> bool {
    let mut c = path.components().skip(1);
    c.next().is_some_and(|p| p.as_os_str() == "proc")
        && c.next().is_some()
        && c.next().is_some_and(|f| f.as_os_str() == "fd")
        && c.next().is_some()
        && c.next().is_none()
}

fn refused(policy: &Policy, features: &Features, path: &Path, need: landlock::Need) -> bool {
    landlock::grants(policy, features, path, need) == FsGrant::Refused
}

/// `comm (pid N): op target`, for the comment above an entry.
fn describe(d: &Decision) -> String {
    let comm = d.comm.display();
    let target = match d.op.as_str() {
        "exec" => d
            .argv
            .iter()
            .flatten()
            .map(|a| a.display())
            .collect::<Vec<_>>()
            .join(" "),
        "connect" | "bind" => d.addr.clone().unwrap_or_default(),
        "dns" => d.name.clone().unwrap_or_default(),
        _ => {
            let mut t = d.path.as_ref().map(|p| p.display()).unwrap_or_default();
            if let Some(p2) = &d.path2 {
                t.push_str(&format!(" -> {}", p2.display()));
            }
            t
        }
    };
    let mut s = format!("{comm} (pid {}): {} {target}", d.pid, d.op);
    if s.chars().count() > 160 {
        s = s.chars().take(157).collect::<String>() + "...";
    }
    s
}

/// A connect's address as the audit log writes it.
fn parse_addr(text: &str) -> Option<NetAddr> {
    if let Ok(sa) = text.parse::<std::net::SocketAddr>() {
        return Some(NetAddr::Inet(sa));
    }
    if text.starts_with('/') {
        return Some(NetAddr::Unix(text.into()));
    }
    if let Some(name) = text.strip_prefix('@') {
        return Some(NetAddr::Abstract(name.as_bytes().to_vec()));
    }
    None
}

/// The program the kernel runs `exe` with: a script's `#!` interpreter, or an ELF program's
/// dynamic loader (PT_INTERP). Landlock checks the execute right on it too.
pub(super) fn interpreter(exe: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(exe).ok()?.read(&mut head).ok()?;
    head.truncate(n);
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next()?;
        let text = std::str::from_utf8(line).ok()?;
        return text.split_whitespace().next().map(PathBuf::from);
    }
    elf_interpreter(&head)
}

/// PT_INTERP of a 64-bit little-endian ELF header block (the program headers must lie in it).
fn elf_interpreter(head: &[u8]) -> Option<PathBuf> {
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(head.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? == PT_INTERP {
            let off = usize::try_from(u64_at(ph + 8)?).ok()?;
            let len = usize::try_from(u64_at(ph + 32)?).ok()?;
            let bytes = head.get(off..off + len)?;
            let name = bytes.split(|&b| b == 0).next()?;
            return Some(PathBuf::from(std::str::from_utf8(name).ok()?));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(v: serde_json::Value) -> Decision {
        let mut base = serde_json::json!({
            "v": 2, "type": "decision", "time": "2026-12-02T00:00:00Z", "run": "r", "seq": 1,
            "pid": 7, "comm": "curl", "syscall": "relay", "verdict": "allow", "rule": "observe",
            "latency_us": 1,
        });
        for (k, x) in v.as_object().expect("object") {
            base[k] = x.clone();
        }
        serde_json::from_value(base).expect("a decision")
    }

    /// The `agent` profile for a workspace `/ws`, and this kernel's Landlock plan.
    fn agent() -> (Policy, Features) {
        let vars = crate::policy::Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/tmp/guard-run".into(),
            state: "/var/guard".into(),
        };
        let policy = crate::policy::load(&["agent".into()], &vars).expect("agent");
        let features = Features::of_kernel(
            &crate::confine::features::Kernel::probe(),
            &crate::confine::features::Options::default(),
        );
        (policy, features)
    }

    #[test]
    fn a_refused_lookup_is_a_name_to_resolve_and_a_refused_bind_is_noted() {
        let (policy, features) = agent();
        let calls = [
            // A name agent lists (crates.io), one it does not, and a bind off loopback.
            decision(
                serde_json::json!({"op": "dns", "addr": "127.0.0.53:53", "name": "crates.io"}),
            ),
            decision(
                serde_json::json!({"op": "dns", "addr": "127.0.0.53:53", "name": "api.example.org"}),
            ),
            decision(
                serde_json::json!({"op": "bind", "syscall": "bind", "addr": "192.0.2.1:8080"}),
            ),
        ];
        // The nameserver is on loopback, which agent lets the command reach.
        let needs: Vec<Need> = needs(&policy, &features, &calls)
            .into_iter()
            .map(|n| n.need)
            .collect();
        assert_eq!(
            needs,
            vec![
                Need::Resolve {
                    name: "api.example.org".into()
                },
                Need::Bind {
                    text: "192.0.2.1:8080".into()
                }
            ]
        );
    }

    #[test]
    fn a_call_that_failed_with_the_kernels_answer_needs_nothing() {
        let (policy, features) = agent();
        let failed = |op: &str, path: &str, errno: &str| {
            decision(serde_json::json!({
                "op": op, "syscall": "mkdir", "path": path, "verdict": "error",
                "errno": errno, "rule": "resolve",
            }))
        };
        // `mkdir -p /usr/local` and a create in a directory that is not there, both outside
        // agent's write roots: the kernel refuses them whatever the roots.
        let calls = [
            failed("create", "/usr/local", "EEXIST"),
            failed("create", "/opt/missing/f", "ENOENT"),
        ];
        assert!(needs(&policy, &features, &calls).is_empty());
        // The same call that succeeded is a need.
        let made = decision(serde_json::json!({
            "op": "create", "syscall": "mkdir", "path": "/opt/made",
        }));
        assert_eq!(needs(&policy, &features, &[made]).len(), 1);
    }

    #[test]
    fn own_pipes_are_recognised_by_their_proc_path() {
        assert!(is_own_pipe(Path::new("/proc/123/fd/7")));
        for p in [
            "/proc/123/fd",
            "/proc/123/fd/7/x",
            "/proc/123/status",
            "/tmp/proc/1/fd/2",
        ] {
            assert!(!is_own_pipe(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn the_loader_of_a_system_program_and_the_interpreter_of_a_script() {
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        if let Some(loader) = interpreter(&sh) {
            assert!(loader.is_absolute(), "{loader:?}");
            assert!(loader.to_string_lossy().contains("ld"), "{loader:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/usr/bin/env python3 -u\nprint(1)\n").unwrap();
        assert_eq!(interpreter(&script), Some(PathBuf::from("/usr/bin/env")));
        std::fs::write(&script, "plain text").unwrap();
        assert_eq!(interpreter(&script), None);
    }
}
