//! [`decide`]: the pure judgement of one trapped call against a [`Policy`]. No I/O, no
//! allocation beyond the verdict, never panics, and fails closed on malformed requests.
//!
//! Order: re-opening the caller's own pipe is allowed (no file is reached); observe mode allows
//! everything; then the profile's rules, first match wins; then the
//! built-in defaults: a filesystem mutation must stay under the write roots (EACCES) and may
//! not touch a protected path or delete/rename an ancestor of one unless the run created it
//! (EPERM); exec is allowed (Landlock's execute right is the boundary); connect (and a send
//! naming its destination) must reach a `net.connect` target (EACCES); bind and listen must use
//! a loopback address on a `net.bind` port, or a `net.bind` address (EACCES); a DNS query must
//! ask for a name that a host entry of `net.connect` or `net.resolve` covers (EACCES).
//! Netlink addresses (messages to the kernel) are allowed. A request missing what its
//! operation needs is denied (EPERM).
//!
//! Requests carry absolute, normalised paths (the supervisor's job); `fresh` must be true only
//! when every path of the request was created by this run.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::model::*;

/// Judges one request.
pub fn decide(policy: &Policy, req: &Request) -> Verdict {
    if req.reopens_own_pipe {
        return allow(
            Builtin::FdReopen,
            Some("re-opening the caller's own pipe or socket"),
        );
    }
    if policy.mode == Mode::Observe {
        return allow(Builtin::Observe, None);
    }
    if let (Op::Connect | Op::Dns, Some(NetAddr::Inet(to))) = (req.op, req.addr) {
        if let Some(local) = loopback_for(to) {
            // The kernel connects (and sends) to the unspecified address on this machine,
            // over loopback: judged as where it goes, so a rule on loopback covers it too.
            let to = NetAddr::Inet(local);
            return decide(
                policy,
                &Request {
                    addr: Some(&to),
                    ..*req
                },
            );
        }
    }
    if let (Op::Dns, Some(_)) = (req.op, req.addr) {
        // A query goes to a nameserver: the nameserver must be one the program may reach.
        let to_server = decide(
            policy,
            &Request {
                name: None,
                ..Request::new(Op::Connect)
            }
            .with_addr(req.addr),
        );
        if !matches!(to_server.action, Action::Allow | Action::Risky) {
            return to_server;
        }
    }
    if let Some(rule) = policy.rules.iter().find(|r| rule_matches(r, req)) {
        let errno = match rule.action {
            Action::Allow | Action::Risky => 0,
            Action::Deny | Action::Kill => rule.errno,
        };
        return Verdict {
            action: rule.action,
            errno,
            rule: RuleId::Profile(rule.id.clone()),
            reason: rule.reason.clone(),
        };
    }
    match req.op {
        Op::Exec => decide_exec(policy, req),
        Op::Connect => decide_connect(policy, req),
        Op::Bind => decide_bind(policy, req),
        Op::Dns => decide_dns(policy, req),
        _ => decide_fs(policy, req),
    }
}

fn allow(rule: Builtin, reason: Option<&str>) -> Verdict {
    Verdict {
        action: Action::Allow,
        errno: 0,
        rule: RuleId::Builtin(rule),
        reason: reason.map(str::to_string),
    }
}

fn deny(errno: i32, rule: Builtin, reason: &str) -> Verdict {
    Verdict {
        action: Action::Deny,
        errno,
        rule: RuleId::Builtin(rule),
        reason: Some(reason.to_string()),
    }
}

fn deny_because(errno: i32, rule: Builtin, reason: String) -> Verdict {
    Verdict {
        action: Action::Deny,
        errno,
        rule: RuleId::Builtin(rule),
        reason: Some(reason),
    }
}

fn malformed(what: &str) -> Verdict {
    deny(libc::EPERM, Builtin::Default, what)
}

fn rule_matches(rule: &Rule, req: &Request) -> bool {
    if !rule.when.contains(&req.op) {
        return false;
    }
    if !rule.path.is_empty() {
        let Some(set) = rule.path_set() else {
            return false;
        };
        let exe = if req.op == Op::Exec { req.exe } else { None };
        let hit = [req.path, req.path2, exe]
            .into_iter()
            .flatten()
            .any(|p| rule.path_anchors.iter().any(|a| is_within(p, a)) && set.is_match(p));
        if !hit {
            return false;
        }
    }
    if !rule.argv.is_empty() {
        let Some(pattern) = rule.argv_pattern() else {
            return false;
        };
        if req.op != Op::Exec || !pattern.matches(req.argv, req.exe, req.cwd) {
            return false;
        }
    }
    if !rule.addr.is_empty() {
        let Some(addr) = req.addr else {
            return false;
        };
        if !req.op.is_net() || !rule.addr_matcher.matches(&rule.addr, addr) {
            return false;
        }
    }
    true
}

fn decide_fs(policy: &Policy, req: &Request) -> Verdict {
    if req.unnamed && req.op == Op::Chmod {
        if req.sets_id && !policy.fs.allow_setid {
            return deny(
                libc::EPERM,
                Builtin::SetId,
                "a set-user-id or set-group-id file (or file capabilities)",
            );
        }
        return allow(
            Builtin::WriteRoots,
            Some("an object with no name (pipe, socket, memfd, unlinked file)"),
        );
    }
    let Some(path) = req.path else {
        return malformed("request without a path");
    };
    if matches!(req.op, Op::Rename | Op::Link) && req.path2.is_none() {
        return malformed("rename or link without a second path");
    }
    let paths = [Some(path), req.path2];
    let present = || paths.iter().flatten().copied();

    // A name the call makes: a new entry is judged by the directory it lands in.
    let new_entry = match (req.creates, req.op) {
        (true, Op::Create) => Some(path),
        (true, Op::Rename | Op::Link) => req.path2,
        _ => None,
    };
    let under_roots = |p: &Path| policy.fs.write.iter().any(|root| is_within(p, root));
    // Beneath a shared directory (not the directory itself, unless a nameless file is made
    // in it): a new entry may be made there, and what the run made there changed
    // (`Request::own_shared`).
    let in_shared = |p: &Path| {
        policy
            .fs
            .shared
            .iter()
            .any(|root| (p != root || req.nameless) && is_within(p, root))
    };
    let mut shared = false;
    if !present().all(under_roots) {
        if req.op == Op::Write && !req.creates && present().all(is_thread_name) {
            return allow(
                Builtin::ThreadName,
                Some("a thread's name: the kernel lets the writer rename only its own threads"),
            );
        }
        if !present().all(|p| under_roots(p) || in_shared(p)) {
            return deny(
                libc::EACCES,
                Builtin::WriteRoots,
                "path outside the write roots",
            );
        }
        // A new name, or a new file with none, needs nothing; any other entry there must be
        // the run's.
        let new = new_entry.or(req.nameless.then_some(path));
        let needs_own = present().any(|p| !under_roots(p) && Some(p) != new);
        if needs_own && !req.own_shared {
            return deny(
                libc::EACCES,
                Builtin::Shared,
                "an entry of a shared directory that this run did not make",
            );
        }
        shared = true;
    }

    // guard's own configuration, new or old: an agent that edits the profile it runs under
    // escapes it on the next run.
    let moves_ancestor_of = |p: &Path| {
        matches!(req.op, Op::Delete | Op::Rename)
            && policy.guard_files.iter().any(|g| is_within(g, p))
    };
    if present().any(|p| is_guard_file(policy, p) || moves_ancestor_of(p)) {
        return deny(
            libc::EPERM,
            Builtin::GuardConfig,
            "guard's own configuration",
        );
    }

    if !req.fresh {
        // Every path a protect glob matches lies within that glob's anchor (its literal
        // prefix), so the anchors are a cheap filter in front of the glob set.
        let protected = |p: &Path| {
            policy.fs.protect_anchors.iter().any(|a| is_within(p, a))
                && policy.fs.protect_set().is_match(p)
        };
        // A new entry is judged by the directory it lands in: a name that matches `protect`
        // may found a new protected tree (`git init` making `.git`), but may not be added
        // inside a protected directory (a new hook in an existing `.git/hooks`).
        let refused = |p: &Path| {
            if Some(p) == new_entry {
                protected(p) && p.parent().is_some_and(protected)
            } else {
                protected(p)
            }
        };
        if present().any(refused) {
            return deny(libc::EPERM, Builtin::Protect, "protected path");
        }
        // Deleting or renaming (either end) an ancestor of a protected path would take the
        // protected entries with it.
        let moves_ancestor = match req.op {
            Op::Delete => is_anchor_or_ancestor(policy, path),
            Op::Rename => present().any(|p| is_anchor_or_ancestor(policy, p)),
            _ => false,
        };
        if moves_ancestor {
            return deny(
                libc::EPERM,
                Builtin::Protect,
                "protected path (or an ancestor of one)",
            );
        }
    }
    if req.sets_id && !policy.fs.allow_setid {
        return deny(
            libc::EPERM,
            Builtin::SetId,
            "a set-user-id or set-group-id file (or file capabilities)",
        );
    }
    if let Some(v) = decide_git(policy, req) {
        return v;
    }
    if shared {
        return allow(
            Builtin::Shared,
            Some("a new entry of a shared directory, or one this run made"),
        );
    }
    allow(Builtin::WriteRoots, None)
}

/// `/proc/PID/comm` or `/proc/PID/task/TID/comm`: a thread's name. A write through it renames
/// the thread only when the writer is in the same thread group (the kernel checks the writer at
/// `write(2)`, and fails anyone else's write with EINVAL), so opening one gives nothing that
/// `prctl(PR_SET_NAME)`, never judged, does not.
pub fn is_thread_name(p: &Path) -> bool {
    let number = |c: &std::ffi::OsStr| {
        let b = c.as_bytes();
        !b.is_empty() && b.iter().all(u8::is_ascii_digit)
    };
    let parts: Vec<_> = p.iter().collect();
    match parts.as_slice() {
        [root, proc, pid, comm] => {
            *root == "/" && *proc == "proc" && number(pid) && *comm == "comm"
        }
        [root, proc, pid, task, tid, comm] => {
            *root == "/"
                && *proc == "proc"
                && number(pid)
                && *task == "task"
                && number(tid)
                && *comm == "comm"
        }
        _ => false,
    }
}

/// The judgement of what a call does to git's own files (see `policy::git`).
fn decide_git(policy: &Policy, req: &Request) -> Option<Verdict> {
    use super::git::{keys, GitFacts};
    let refuse = |rule, reason: String| Some(deny_because(libc::EPERM, rule, reason));
    for fact in req.git {
        match fact {
            GitFacts::Config { git_dir, old, new } => match new {
                Err(e) => {
                    return refuse(
                        Builtin::GitConfig,
                        format!("the new config is not one git would read as guard reads it: {e}"),
                    )
                }
                Ok(new) => {
                    if let Some(why) = keys::judge(&policy.git, &policy.fs.write, git_dir, old, new)
                    {
                        return refuse(Builtin::GitConfig, why);
                    }
                }
            },
            GitFacts::Unjudgeable(why) => return refuse(Builtin::GitConfig, (*why).to_string()),
            GitFacts::Hook { name } if policy.git.refuse_hooks => {
                return refuse(
                    Builtin::GitHook,
                    format!(
                        "`{}` would be a hook: git runs it outside the sandbox",
                        name.to_string_lossy()
                    ),
                )
            }
            GitFacts::Redirect { target } => {
                if !policy.fs.write.iter().any(|r| is_within(target, r)) {
                    return refuse(
                        Builtin::GitConfig,
                        format!(
                            "a .git file or link sends git outside the write roots ({})",
                            target.display()
                        ),
                    );
                }
            }
            GitFacts::Hook { .. } | GitFacts::Exec(_) => {}
        }
    }
    None
}

/// A file named `.guard.toml` anywhere, a profile file the policy was built from, or anything
/// inside the user's configuration directory.
fn is_guard_file(policy: &Policy, path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.as_bytes() == WORKSPACE_CONFIG.as_bytes())
        || policy.guard_files.iter().any(|g| is_within(path, g))
}

fn is_anchor_or_ancestor(policy: &Policy, path: &Path) -> bool {
    policy.fs.protect_anchors.iter().any(|a| is_within(a, path))
}

/// Component-wise `path.starts_with(root)` for normalised paths, on bytes (`/ws2` is not
/// within `/ws`). Several times faster than `Path::starts_with`, which parses components.
fn is_within(path: &Path, root: &Path) -> bool {
    let (p, r) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    match p.strip_prefix(r) {
        Some(rest) => rest.is_empty() || rest.first() == Some(&b'/') || r.ends_with(b"/"),
        None => false,
    }
}

/// An exec is allowed by default (argv rules decided above): Landlock's execute right is the
/// boundary for files. What it does not cover is refused here: a program with no file behind
/// it (memfd_create + fexecve, a deleted file run through its descriptor).
///
/// A git push that deletes or force-updates remote refs is refused too (`policy::git::push`),
/// judged with the config the supervisor read for it, or with none (`guard explain`).
fn decide_exec(policy: &Policy, req: &Request) -> Verdict {
    if req.exe_anonymous {
        return deny(
            libc::EACCES,
            Builtin::ExecAnonymous,
            "the program is not a file on disk (memfd or deleted)",
        );
    }
    if policy.git.refuse_destructive_push {
        let none = super::git::GitExec::default();
        let facts = req
            .git
            .iter()
            .find_map(|f| match f {
                super::git::GitFacts::Exec(e) => Some(e),
                _ => None,
            })
            .unwrap_or(&none);
        if let Some(why) = super::git::push::judge(req.argv, req.exe, facts) {
            return deny_because(libc::EPERM, Builtin::GitPush, why);
        }
    }
    allow(Builtin::Default, None)
}

fn decide_connect(policy: &Policy, req: &Request) -> Verdict {
    let Some(addr) = req.addr else {
        return malformed("connect without an address");
    };
    if *addr == NetAddr::Unspecified {
        return allow(Builtin::Connect, None);
    }
    if *addr == NetAddr::Other(libc::AF_NETLINK as u16) {
        return allow(Builtin::Connect, Some(NETLINK));
    }
    if policy
        .net
        .connect_matcher
        .matches(&policy.net.connect, addr)
    {
        allow(Builtin::Connect, None)
    } else {
        deny(libc::EACCES, Builtin::Connect, "address not in net.connect")
    }
}

const NETLINK: &str = "netlink messages stay on this machine";

/// Where a connect or send to `to` goes when `to` is the unspecified address: Linux routes
/// `0.0.0.0` (and `::ffff:0.0.0.0`) to `127.0.0.1` and `::` to `::1`, the same port.
fn loopback_for(to: &std::net::SocketAddr) -> Option<std::net::SocketAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    let ip = match to.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified()) => {
            IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped())
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, to.port()))
}

/// A bind (or listen) of `req.addr`: a `net.bind` address; or loopback on a `net.bind` port;
/// or the wildcard address on such a port, which the supervisor then fences so that only
/// loopback peers reach the socket ([`Policy::bind_fence`]). Unix sockets are bound where
/// Landlock's make-socket right allows (the write roots); other families that reach beyond
/// the machine (packet, vsock, ...) are refused.
fn decide_bind(policy: &Policy, req: &Request) -> Verdict {
    let Some(addr) = req.addr else {
        return malformed("bind without an address");
    };
    match addr {
        NetAddr::Inet(sa) => {
            let port_ok = policy
                .net
                .bind
                .as_ref()
                .is_none_or(|ports| ports.contains(&sa.port()));
            let local = super::net::is_loopback(sa.ip()) || sa.ip().is_unspecified();
            if super::net::matches_inet(&policy.net.bind_addrs, sa) {
                allow(Builtin::Bind, None)
            } else if local && port_ok {
                allow(
                    Builtin::Bind,
                    sa.ip()
                        .is_unspecified()
                        .then_some("every address: only loopback peers reach it"),
                )
            } else if local {
                deny(libc::EACCES, Builtin::Bind, "port not in net.bind")
            } else {
                deny(
                    libc::EACCES,
                    Builtin::Bind,
                    "only loopback may be bound unless net.bind lists the address",
                )
            }
        }
        NetAddr::Unix(_) | NetAddr::Abstract(_) | NetAddr::Unspecified => {
            allow(Builtin::Bind, Some("unix socket"))
        }
        NetAddr::Other(f) if i32::from(*f) == libc::AF_NETLINK => {
            allow(Builtin::Bind, Some(NETLINK))
        }
        NetAddr::Other(_) => deny(libc::EACCES, Builtin::Bind, "address family not allowed"),
    }
}

/// A DNS query for `req.name`: allowed when a host entry of `net.connect` or an entry of
/// `net.resolve` covers the name. The nameserver itself was judged as a connect.
fn decide_dns(policy: &Policy, req: &Request) -> Verdict {
    let Some(name) = req.name else {
        return deny(libc::EACCES, Builtin::Dns, "not a DNS query guard can read");
    };
    if policy.allows_name(name) {
        allow(Builtin::Dns, None)
    } else {
        deny(
            libc::EACCES,
            Builtin::Dns,
            "name not covered by a host of net.connect or net.resolve",
        )
    }
}

impl Policy {
    /// Compiles the matchers of `fs.protect` and of every rule now ([`FsPolicy::protect_set`],
    /// [`Rule::path_set`], [`Rule::argv_pattern`]), rather than on the first call each one
    /// judges. A run does this after the fork, while the child confines itself, so the first
    /// judged calls do not wait for it. An argv element with glob syntax is parsed here but
    /// compiles its regex on its first match (tens of microseconds, once per run, on the
    /// supervisor's thread): most are never reached, since their program element does not
    /// match.
    pub fn compile_matchers(&self) {
        self.fs.protect_set();
        for rule in &self.rules {
            rule.path_set();
            rule.argv_pattern();
        }
    }

    /// Whether a socket bound to `sa` must be fenced to loopback peers: the wildcard address,
    /// allowed because its port is a `net.bind` port on loopback, not because `net.bind`
    /// lists it. Not in observe mode.
    pub fn bind_fence(&self, sa: &std::net::SocketAddr) -> bool {
        self.mode == Mode::Enforce
            && sa.ip().is_unspecified()
            && !super::net::matches_inet(&self.net.bind_addrs, sa)
    }

    /// Whether a DNS query may ask for `name` (lowercase, without the final dot).
    pub fn allows_name(&self, name: &str) -> bool {
        let hosts = self.net.connect.iter().filter_map(|t| match t {
            NetTarget::Host { name, .. } => Some(name.as_str()),
            _ => None,
        });
        hosts
            .chain(self.net.resolve.iter().map(String::as_str))
            .any(|pattern| super::net::name_matches(pattern, name))
    }

    /// Whether a path matters to `protect`: it matches a protect pattern, or is a protect
    /// anchor or an ancestor of one. The supervisor remembers the paths the run creates that
    /// are protect-relevant, to answer `Request::fresh`; everything beneath such a path is
    /// fresh too, so the set stays small.
    pub fn is_protect_relevant(&self, path: &Path) -> bool {
        self.fs.protect_set().is_match(path)
            || self.fs.protect_anchors.iter().any(|a| is_within(a, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::load;
    use std::ffi::OsString;
    use std::net::SocketAddr;
    use std::path::PathBuf;

    fn vars() -> Vars {
        Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/tmp/guard-run".into(),
            state: "/var/guard".into(),
        }
    }

    fn agent() -> Policy {
        load(&["agent".into()], &vars()).unwrap()
    }

    fn fs(policy: &Policy, op: Op, path: &str) -> Verdict {
        let p = PathBuf::from(path);
        decide(
            policy,
            &Request {
                path: Some(&p),
                ..Request::new(op)
            },
        )
    }

    fn exec_in(policy: &Policy, cwd: &str, cmdline: &str) -> Verdict {
        let argv: Vec<OsString> = cmdline.split_whitespace().map(OsString::from).collect();
        let cwd = PathBuf::from(cwd);
        // The program as the supervisor resolves it: a system binary.
        let name = argv.first().map(PathBuf::from).unwrap_or_default();
        let exe = PathBuf::from("/usr/bin").join(name.file_name().unwrap_or_default());
        decide(
            policy,
            &Request {
                argv: &argv,
                cwd: Some(&cwd),
                exe: Some(&exe),
                ..Request::new(Op::Exec)
            },
        )
    }

    #[test]
    fn exec_of_a_program_with_no_file_behind_it_is_refused() {
        let p = agent();
        let argv = [OsString::from("x")];
        let exe = PathBuf::from("/memfd:payload (deleted)");
        for (anonymous, action) in [(true, Action::Deny), (false, Action::Allow)] {
            let v = decide(
                &p,
                &Request {
                    argv: &argv,
                    exe: Some(&exe),
                    exe_anonymous: anonymous,
                    ..Request::new(Op::Exec)
                },
            );
            assert_eq!(v.action, action);
        }
    }

    fn connect(policy: &Policy, addr: &NetAddr) -> Verdict {
        decide(
            policy,
            &Request {
                addr: Some(addr),
                ..Request::new(Op::Connect)
            },
        )
    }

    fn inet(s: &str) -> NetAddr {
        NetAddr::Inet(s.parse::<SocketAddr>().unwrap())
    }

    #[test]
    fn guard_configuration_is_never_changed_from_inside() {
        let mut p = agent();
        p.guard_files = vec!["/ws/.guard.toml".into(), "/home/u/.config/guard".into()];
        for (op, path) in [
            (Op::Write, "/ws/.guard.toml"),
            (Op::Create, "/ws/sub/.guard.toml"),
            (Op::Delete, "/ws/.guard.toml"),
            (Op::Chmod, "/ws/.guard.toml"),
            (Op::Create, "/home/u/.config/guard/config.toml"),
        ] {
            let v = fs(&p, op, path);
            // Outside the write roots the boundary answers first; inside, the rule does.
            if path.starts_with("/ws") {
                assert_eq!(
                    (v.action, v.errno, v.rule.as_str()),
                    (Action::Deny, libc::EPERM, "fs.guard-config"),
                    "{op:?} {path}"
                );
            } else {
                assert_eq!(v.action, Action::Deny, "{op:?} {path}");
            }
        }
        let (from, to) = (
            PathBuf::from("/ws/x.toml"),
            PathBuf::from("/ws/.guard.toml"),
        );
        let v = decide(
            &p,
            &Request {
                path: Some(&from),
                path2: Some(&to),
                creates: true,
                fresh: true,
                ..Request::new(Op::Rename)
            },
        );
        assert_eq!(
            v.rule.as_str(),
            "fs.guard-config",
            "renamed over, even when fresh"
        );
        assert_eq!(fs(&p, Op::Write, "/ws/guard.toml").action, Action::Allow);
        // An ancestor of a configuration file in use cannot be moved away.
        let mut p2 = agent();
        p2.guard_files = vec!["/ws/sub/.guard.toml".into()];
        assert_eq!(
            fs(&p2, Op::Delete, "/ws/sub").rule.as_str(),
            "fs.guard-config"
        );
    }

    #[test]
    fn write_roots() {
        let p = agent();
        let v = fs(&p, Op::Write, "/etc/passwd");
        assert_eq!(
            (v.action, v.errno, v.rule.as_str()),
            (Action::Deny, libc::EACCES, "fs.write-roots")
        );
        let v = fs(&p, Op::Write, "/ws2/x");
        assert_eq!(v.errno, libc::EACCES, "component-wise prefix");
        let v = fs(&p, Op::Create, "/ws/src/main.rs");
        assert_eq!(
            (v.action, v.rule.as_str()),
            (Action::Allow, "fs.write-roots")
        );
        assert_eq!(fs(&p, Op::Write, "/tmp/guard-run/x").action, Action::Allow);
        assert_eq!(fs(&p, Op::Write, "relative/x").action, Action::Deny);
    }

    #[test]
    fn shared_directories_take_new_entries_and_changes_to_the_runs_own() {
        for p in [agent(), load(&["ci".into()], &vars()).unwrap()] {
            let shm = PathBuf::from("/dev/shm/sem.x");
            let ws = PathBuf::from("/ws/x");
            let etc = PathBuf::from("/etc/x");
            let judge = |op, creates, own_shared, path2: Option<&PathBuf>| {
                let v = decide(
                    &p,
                    &Request {
                        path: Some(&shm),
                        path2: path2.map(PathBuf::as_path),
                        creates,
                        own_shared,
                        ..Request::new(op)
                    },
                );
                (v.action, v.errno, v.rule.as_str().to_string())
            };
            let allowed = (Action::Allow, 0, "fs.shared".to_string());
            let refused = (Action::Deny, libc::EACCES, "fs.shared".to_string());
            assert_eq!(judge(Op::Create, true, false, None), allowed, "a new entry");
            for op in [Op::Write, Op::Delete, Op::Chmod, Op::Create] {
                assert_eq!(
                    judge(op, false, false, None),
                    refused,
                    "{op:?}: not the run's"
                );
                assert_eq!(judge(op, false, true, None), allowed, "{op:?}: the run's");
            }
            let new = PathBuf::from("/dev/shm/new");
            assert_eq!(
                judge(Op::Link, true, false, Some(&new)),
                refused,
                "their file"
            );
            assert_eq!(
                judge(Op::Link, true, true, Some(&new)),
                allowed,
                "the run's"
            );
            assert_eq!(judge(Op::Rename, true, true, Some(&ws)), allowed);
            // Beyond the write roots the other end decides, whoever made the first.
            let beyond = (Action::Deny, libc::EACCES, "fs.write-roots".to_string());
            assert_eq!(judge(Op::Rename, true, true, Some(&etc)), beyond);
            // The directory itself is the machine's, and a name that merely starts the same
            // is no part of it.
            assert_eq!(
                fs(&p, Op::Chmod, "/dev/shm").rule.as_str(),
                "fs.write-roots"
            );
            assert_eq!(
                fs(&p, Op::Create, "/dev/shmx/a").rule.as_str(),
                "fs.write-roots"
            );
            // ... but a file with no name may be made in the directory itself (O_TMPFILE).
            let root = PathBuf::from("/dev/shm");
            let nameless = |nameless| {
                let v = decide(
                    &p,
                    &Request {
                        path: Some(&root),
                        nameless,
                        ..Request::new(Op::Write)
                    },
                );
                (v.action, v.rule.as_str().to_string())
            };
            assert_eq!(nameless(true), (Action::Allow, "fs.shared".to_string()));
            assert_eq!(
                nameless(false),
                (Action::Deny, "fs.write-roots".to_string())
            );
        }
    }

    #[test]
    fn a_threads_name_may_be_opened_for_writing_and_nothing_else_in_proc() {
        let p = agent();
        for path in ["/proc/12/comm", "/proc/12/task/13/comm"] {
            let v = fs(&p, Op::Write, path);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Allow, "fs.thread-name")
            );
            assert_eq!(fs(&p, Op::Delete, path).action, Action::Deny, "{path}");
            assert_eq!(fs(&p, Op::Chmod, path).action, Action::Deny, "{path}");
        }
        for path in [
            "/proc/12/oom_score_adj",
            "/proc/self/comm",
            "/proc/12/task/13/x/comm",
            "/proc/1x/comm",
            "/proc/12/task/comm",
            "/sys/12/comm",
        ] {
            let v = fs(&p, Op::Write, path);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Deny, "fs.write-roots"),
                "{path}"
            );
        }
    }

    #[test]
    fn protect_and_fresh() {
        let p = agent();
        let v = fs(&p, Op::Write, "/ws/.git/hooks/pre-push");
        assert_eq!(
            (v.action, v.errno, v.rule.as_str()),
            (Action::Deny, libc::EPERM, "fs.protect")
        );
        assert!(v.reason.unwrap().contains("protected path"));
        // The config is judged by content (the supervisor's facts), not by its path.
        assert_eq!(fs(&p, Op::Write, "/ws/.git/config").action, Action::Allow);
        assert_eq!(
            fs(&p, Op::Create, "/ws/.git/hooks/pre-commit").errno,
            libc::EPERM
        );
        assert_eq!(fs(&p, Op::Delete, "/ws/.git/hooks").errno, libc::EPERM);
        let cfg = PathBuf::from("/ws/.git/hooks/pre-push");
        let fresh = decide(
            &p,
            &Request {
                path: Some(&cfg),
                fresh: true,
                ..Request::new(Op::Write)
            },
        );
        assert_eq!(fresh.action, Action::Allow);
        // Ordinary git internals stay writable.
        assert_eq!(fs(&p, Op::Write, "/ws/.git/index").action, Action::Allow);
    }

    #[test]
    fn set_id_bits_are_refused_unless_allowed() {
        let mut p = agent();
        let f = PathBuf::from("/ws/x");
        let req = |unnamed: bool| Request {
            path: (!unnamed).then_some(f.as_path()),
            sets_id: true,
            unnamed,
            ..Request::new(Op::Chmod)
        };
        for unnamed in [false, true] {
            let v = decide(&p, &req(unnamed));
            assert_eq!(
                (v.action, v.errno, v.rule.as_str()),
                (Action::Deny, libc::EPERM, "fs.setid")
            );
        }
        assert_eq!(
            decide(
                &p,
                &Request {
                    sets_id: false,
                    ..req(true)
                }
            )
            .action,
            Action::Allow
        );
        p.fs.allow_setid = true;
        assert_eq!(decide(&p, &req(false)).action, Action::Allow);
        // Outside the write roots the boundary answers first.
        let out = PathBuf::from("/etc/x");
        let v = decide(
            &agent(),
            &Request {
                path: Some(&out),
                ..req(false)
            },
        );
        assert_eq!(v.rule.as_str(), "fs.write-roots");
    }

    #[test]
    fn git_facts_are_judged() {
        use crate::policy::git::{config::parse, GitFacts};
        let p = agent();
        let path = PathBuf::from("/ws/new/.git/config");
        let judge = |facts: &[GitFacts]| {
            decide(
                &p,
                &Request {
                    path: Some(&path),
                    git: facts,
                    ..Request::new(Op::Create)
                },
            )
        };
        let config = |text: &str| GitFacts::Config {
            git_dir: "/ws/new/.git".into(),
            old: Vec::new(),
            new: parse(text.as_bytes()),
        };
        let renamed = |facts: &[GitFacts]| {
            let from = PathBuf::from("/ws/new/.git/config.lock");
            decide(
                &p,
                &Request {
                    path: Some(&from),
                    path2: Some(&path),
                    git: facts,
                    ..Request::new(Op::Rename)
                },
            )
        };
        let v = renamed(&[config("[core]\n\tfsmonitor = touch x\n")]);
        assert_eq!((v.action, v.rule.as_str()), (Action::Deny, "git.config"));
        assert!(v.reason.unwrap().contains("core.fsmonitor"));
        assert_eq!(
            renamed(&[config("[user]\nname = x\n")]).action,
            Action::Allow
        );
        let v = renamed(&[config("[core\n")]);
        assert_eq!(v.action, Action::Deny, "unreadable content is refused");
        let v = judge(&[GitFacts::Hook {
            name: "pre-commit".into(),
        }]);
        assert_eq!((v.action, v.rule.as_str()), (Action::Deny, "git.hook"));
        let v = judge(&[GitFacts::Unjudgeable("in place")]);
        assert_eq!((v.action, v.rule.as_str()), (Action::Deny, "git.config"));
        let v = judge(&[GitFacts::Redirect {
            target: "/home/u/other/.git".into(),
        }]);
        assert_eq!(v.action, Action::Deny);
        let v = judge(&[GitFacts::Redirect {
            target: "/ws/evil.git".into(),
        }]);
        assert_eq!(v.action, Action::Allow, "judged where it lands");
    }

    #[test]
    fn renaming_or_deleting_an_anchor_ancestor_is_refused() {
        let p = agent();
        let (git, old) = (PathBuf::from("/ws/.git"), PathBuf::from("/ws/old-git"));
        let v = decide(
            &p,
            &Request {
                path: Some(&git),
                path2: Some(&old),
                ..Request::new(Op::Rename)
            },
        );
        assert_eq!((v.action, v.rule.as_str()), (Action::Deny, "fs.protect"));
        let v = decide(
            &p,
            &Request {
                path: Some(&old),
                path2: Some(&git),
                ..Request::new(Op::Rename)
            },
        );
        assert_eq!(v.action, Action::Deny, "replacing .git is refused too");
        assert_eq!(fs(&p, Op::Delete, "/ws/.git").action, Action::Deny);
        assert_eq!(fs(&p, Op::Delete, "/ws").action, Action::Deny);
        assert_eq!(fs(&p, Op::Delete, "/ws/.gitignore").action, Action::Allow);
        // .git itself is protected: its mode cannot change either.
        assert_eq!(fs(&p, Op::Chmod, "/ws/.git").action, Action::Deny);
        assert_eq!(fs(&p, Op::Chmod, "/ws/src").action, Action::Allow);
    }

    #[test]
    fn force_push_in_every_spelling() {
        let p = agent();
        for cmd in [
            "git push --force",
            "git push origin main --force",
            "git push --force-with-lease",
            "git push --force-with-lease=main:abc123 origin main",
            "git push --force-with-lease=origin/main",
            "git push -f",
            "git push -f origin main",
            "git push -uf origin main",
            "git push -fu origin main",
            "git push origin +main",
            "git push origin +HEAD:refs/heads/main",
            "git -C dir push -f",
            "git -c push.default=current push --force",
            "/usr/bin/git push --mirror",
        ] {
            // strict has no argv rules: base's git.push alone refuses every spelling.
            let strict = load(&["strict".into()], &vars()).unwrap();
            let v = exec_in(&strict, "/ws", cmd);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Deny, "git.push"),
                "strict: {cmd}"
            );
            let v = exec_in(&p, "/ws", cmd);
            assert_eq!(v.action, Action::Deny, "{cmd}");
            // agent's argv rules come first where they match (they name the command); git.push
            // catches the rest.
            let rule = v.rule.as_str();
            assert!(
                rule == "git.push" || rule.starts_with("no-force-push"),
                "{cmd}: {rule}"
            );
            assert_eq!(v.errno, libc::EPERM);
        }
        for cmd in [
            "git push origin main",
            "git push -u origin feature",
            "git push --follow-tags",
            "git commit -m -f",
            "git commit -m +main",
            "git status",
        ] {
            let v = exec_in(&p, "/ws", cmd);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Allow, "default"),
                "{cmd}"
            );
        }
    }

    #[test]
    fn rm_of_workspace_or_home() {
        let p = agent();
        for (cwd, cmd) in [
            ("/ws", "rm -rf ."),
            ("/ws", "rm -rf ./"),
            ("/ws/src", "rm -rf .."),
            ("/", "rm -rf /ws/"),
            ("/", "rm -rf /ws"),
            ("/", "rm -r -f /ws"),
            ("/", "rm -fr /ws"),
            ("/", "rm -R /ws"),
            ("/", "rm /ws -rf"),
            ("/", "rm -v /ws --recursive"),
            ("/", "rm --recursive /home/u"),
            ("/home/u", "rm -rf ."),
            ("/", "/bin/rm -rf /home/u/"),
        ] {
            let v = exec_in(&p, cwd, cmd);
            assert_eq!(v.action, Action::Deny, "{cmd} in {cwd}");
            assert!(v.rule.as_str().starts_with("no-rm-"), "{cmd}: {}", v.rule);
        }
        for (cwd, cmd) in [
            ("/ws", "rm -rf build"),
            ("/ws", "rm -rf target ./node_modules"),
            ("/ws", "rm -f ."),
            ("/", "rm -rf /ws2"),
            ("/home/u", "rm -rf .cache/x"),
        ] {
            assert_eq!(
                exec_in(&p, cwd, cmd).action,
                Action::Allow,
                "{cmd} in {cwd}"
            );
        }
    }

    #[test]
    fn connect_defaults() {
        let p = agent();
        let v = connect(&p, &inet("127.0.0.1:8080"));
        assert_eq!((v.action, v.rule.as_str()), (Action::Allow, "net.connect"));
        assert_eq!(connect(&p, &inet("[::1]:8080")).action, Action::Allow);
        // The unspecified address is where Linux sends it: loopback.
        for to in ["0.0.0.0:8080", "[::]:8080", "[::ffff:0.0.0.0]:8080"] {
            assert_eq!(connect(&p, &inet(to)).action, Action::Allow, "{to}");
            let strict = load(&["strict".into()], &vars()).unwrap();
            assert_eq!(connect(&strict, &inet(to)).action, Action::Deny, "{to}");
        }
        let v = connect(&p, &inet("8.8.8.8:53"));
        assert_eq!((v.action, v.errno), (Action::Deny, libc::EACCES));
        assert_eq!(v.reason.as_deref(), Some("address not in net.connect"));
        assert!(
            p.net.dns,
            "the supervisor adds the nameservers at run start"
        );
        assert_eq!(connect(&p, &NetAddr::Unspecified).action, Action::Allow);
        // Netlink stays in the kernel; vsock (40) reaches the hypervisor's host.
        let v = connect(&p, &NetAddr::Other(libc::AF_NETLINK as u16));
        assert_eq!((v.action, v.rule.as_str()), (Action::Allow, "net.connect"));
        assert_eq!(connect(&p, &NetAddr::Other(40)).action, Action::Deny);

        // Host targets match once the caller has resolved them; and nameservers once added.
        let mut p = agent();
        for t in &mut p.net.connect {
            if let NetTarget::Host { name, addrs, .. } = t {
                if name == "crates.io" {
                    addrs.push("1.2.3.4".parse().unwrap());
                }
            }
        }
        p.net.connect.push(NetTarget::Cidr {
            addr: "8.8.8.8".parse().unwrap(),
            prefix: 32,
            port: Some(53),
        });
        assert_eq!(connect(&p, &inet("1.2.3.4:443")).action, Action::Allow);
        assert_eq!(connect(&p, &inet("1.2.3.4:80")).action, Action::Deny);
        assert_eq!(connect(&p, &inet("8.8.8.8:53")).action, Action::Allow);
    }

    #[test]
    fn unix_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(
            &file,
            "extends = \"agent\"\n[net]\nconnect = [\"/run/user/*/bus\", \"{tmp}/*.sock\", \"@dbus-*\"]\n",
        )
        .unwrap();
        let p = crate::policy::check(&file, &vars()).unwrap();
        let ok = |a: NetAddr| connect(&p, &a).action == Action::Allow;
        assert!(ok(NetAddr::Unix("/run/user/1000/bus".into())));
        assert!(ok(NetAddr::Unix("/tmp/guard-run/x.sock".into())));
        assert!(!ok(NetAddr::Unix("/run/user/1000/x/bus".into())));
        assert!(!ok(NetAddr::Unix("/var/run/docker.sock".into())));
        assert!(ok(NetAddr::Abstract(b"dbus-123".to_vec())));
        assert!(!ok(NetAddr::Abstract(b"other".to_vec())));
    }

    #[test]
    fn malformed_requests_fail_closed() {
        let p = agent();
        for op in [Op::Write, Op::Delete, Op::Create, Op::Chmod, Op::Connect] {
            let v = decide(&p, &Request::new(op));
            assert_eq!(
                (v.action, v.errno, v.rule.as_str()),
                (Action::Deny, libc::EPERM, "default")
            );
        }
        let a = PathBuf::from("/ws/a");
        let v = decide(
            &p,
            &Request {
                path: Some(&a),
                ..Request::new(Op::Rename)
            },
        );
        assert_eq!(v.action, Action::Deny);
    }

    #[test]
    fn observe_allows_everything() {
        let p = load(&["observe".into()], &vars()).unwrap();
        for v in [
            fs(&p, Op::Write, "/etc/passwd"),
            fs(&p, Op::Delete, "/"),
            exec_in(&p, "/ws", "git push --force"),
            connect(&p, &inet("8.8.8.8:53")),
            decide(&p, &Request::new(Op::Delete)),
        ] {
            assert_eq!(
                (v.action, v.errno, v.rule.as_str()),
                (Action::Allow, 0, "observe")
            );
        }
    }

    #[test]
    fn within_is_component_wise() {
        let w = |p: &str, r: &str| is_within(Path::new(p), Path::new(r));
        assert!(w("/ws", "/ws") && w("/ws/a", "/ws") && w("/ws", "/") && w("/", "/"));
        assert!(!w("/ws2", "/ws") && !w("/w", "/ws") && !w("/", "/ws"));
    }

    #[test]
    fn protect_relevance() {
        let p = agent();
        for path in [
            "/ws",
            "/ws/.git",
            "/ws/.git/hooks",
            "/ws/.git/hooks/x/y",
            "/",
        ] {
            assert!(p.is_protect_relevant(Path::new(path)), "{path}");
        }
        for path in [
            "/ws/src",
            "/ws/.git/index",
            "/ws/.git/config",
            "/ws/.git/configx",
            "/other",
        ] {
            assert!(!p.is_protect_relevant(Path::new(path)), "{path}");
        }
    }

    fn net(policy: &Policy, op: Op, addr: &NetAddr, name: Option<&str>) -> Verdict {
        decide(
            policy,
            &Request {
                addr: Some(addr),
                name,
                ..Request::new(op)
            },
        )
    }

    #[test]
    fn bind_is_loopback_only_unless_net_bind_lists_the_address() {
        let p = agent();
        let bind = |a: &str| net(&p, Op::Bind, &inet(a), None);
        for ok in [
            "127.0.0.1:8000",
            "127.0.0.1:0",
            "[::1]:9000",
            "[::ffff:127.0.0.1]:80",
        ] {
            let v = bind(ok);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Allow, "net.bind"),
                "{ok}"
            );
            assert!(!p.bind_fence(&ok.parse().unwrap()));
        }
        // The wildcard address is allowed, fenced: only loopback peers reach the socket.
        for fenced in ["0.0.0.0:8000", "0.0.0.0:0", "[::]:8000"] {
            assert_eq!(bind(fenced).action, Action::Allow, "{fenced}");
            assert!(p.bind_fence(&fenced.parse().unwrap()), "{fenced}");
        }
        for refused in ["10.1.2.3:53", "192.0.2.1:8000", "[fd00::1]:80"] {
            let v = bind(refused);
            assert_eq!(
                (v.action, v.errno),
                (Action::Deny, libc::EACCES),
                "{refused}"
            );
            assert_eq!(v.rule.as_str(), "net.bind");
        }
        let unix = net(&p, Op::Bind, &NetAddr::Unix("/ws/s.sock".into()), None);
        assert_eq!(unix.action, Action::Allow);
        assert_eq!(
            net(&p, Op::Bind, &NetAddr::Other(17), None).action,
            Action::Deny,
            "AF_PACKET"
        );

        let dir = tempfile::tempdir().unwrap();
        let layer = dir.path().join("b.toml");
        std::fs::write(
            &layer,
            "extends = \"agent\"\n[net]\nbind = [8080, \"0.0.0.0:9000\", \"[::]:9000\"]\n",
        )
        .unwrap();
        let p = load(&[layer.display().to_string()], &vars()).unwrap();
        let bind = |a: &str| net(&p, Op::Bind, &inet(a), None).action;
        assert_eq!(bind("127.0.0.1:8080"), Action::Allow);
        assert_eq!(bind("127.0.0.1:8081"), Action::Deny, "only the listed port");
        assert_eq!(bind("0.0.0.0:9000"), Action::Allow);
        assert!(
            !p.bind_fence(&"0.0.0.0:9000".parse().unwrap()),
            "listed: not fenced"
        );
        assert_eq!(bind("[::]:9000"), Action::Allow);
        assert_eq!(bind("0.0.0.0:8080"), Action::Allow, "fenced");
        assert!(p.bind_fence(&"0.0.0.0:8080".parse().unwrap()));
        assert_eq!(bind("0.0.0.0:8081"), Action::Deny, "not a listed port");
        assert_eq!(
            bind("192.0.2.1:8080"),
            Action::Deny,
            "a port alone is loopback only"
        );

        let strict = load(&["strict".into()], &vars()).unwrap();
        for a in ["127.0.0.1:8000", "0.0.0.0:0"] {
            assert_eq!(
                net(&strict, Op::Bind, &inet(a), None).action,
                Action::Deny,
                "{a}"
            );
        }
    }

    #[test]
    fn dns_queries_are_judged_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let layer = dir.path().join("d.toml");
        std::fs::write(
            &layer,
            "extends = \"agent\"\n[net]\nconnect = [\"*.example.test:443\"]\n\
             resolve = [\"*.corp.test\", \"exact.test\"]\n",
        )
        .unwrap();
        let mut p = load(&[layer.display().to_string()], &vars()).unwrap();
        // What the supervisor adds for `dns = true`: the nameservers of /etc/resolv.conf.
        p.net.connect.push(NetTarget::Cidr {
            addr: "10.0.0.53".parse().unwrap(),
            prefix: 32,
            port: Some(53),
        });
        let other = net(&p, Op::Dns, &inet("10.9.9.9:53"), Some("crates.io"));
        assert_eq!(
            (other.action, other.rule.as_str()),
            (Action::Deny, "net.connect"),
            "a nameserver the profile does not reach"
        );
        let ns = inet("10.0.0.53:53");
        let dns = |name: &str| net(&p, Op::Dns, &ns, Some(name));
        for ok in [
            "crates.io",
            "github.com",
            "api.example.test",
            "a.b.corp.test",
            "exact.test",
        ] {
            let v = dns(ok);
            assert_eq!(
                (v.action, v.rule.as_str()),
                (Action::Allow, "net.dns"),
                "{ok}"
            );
        }
        for refused in [
            "sk-abc123.evil.test",
            "example.test",
            "corp.test",
            "crates.io.evil.test",
            "",
        ] {
            let v = dns(refused);
            assert_eq!(
                (v.action, v.errno),
                (Action::Deny, libc::EACCES),
                "{refused}"
            );
        }
        let v = net(&p, Op::Dns, &ns, None);
        assert_eq!(v.action, Action::Deny, "an unreadable query");
    }
}
