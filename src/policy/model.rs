//! The validated policy model and the request/verdict types that `decide` works on.
//!
//! Everything downstream of profile parsing (confine, supervisor, audit) sees only these types:
//! raw TOML never leaves `policy/`. A `Policy` is immutable once built.

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::GlobSet;

use super::argv::ArgvPattern;
use super::net::NetMatcher;

/// The values that `{workspace}`, `{home}`, `{tmp}` and `{state}` expand to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vars {
    pub workspace: PathBuf,
    /// `None` when the user has no home (the `ci` profile may also choose to ignore it).
    pub home: Option<PathBuf>,
    pub tmp: PathBuf,
    pub state: PathBuf,
}

/// Whether the kernel boundary is applied at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Landlock + static seccomp filter + judged calls (the normal case).
    Enforce,
    /// No Landlock, no deny list: every judged call is allowed and recorded (`observe` profile).
    Observe,
}

/// The filesystem part of a policy, with variables expanded and paths absolute and normalised.
#[derive(Debug, Clone)]
pub struct FsPolicy {
    /// Landlock read + execute roots.
    pub read: Vec<PathBuf>,
    /// Landlock write roots (they are readable too).
    pub write: Vec<PathBuf>,
    /// Glob patterns (absolute, expanded) whose existing entries may not be mutated.
    pub protect: Vec<String>,
    /// Compiled form of `protect`.
    pub protect_set: GlobSet,
    /// The literal directory prefixes of the `protect` patterns (e.g. `/ws/.git/hooks` for
    /// `/ws/.git/hooks/**`): deleting or renaming one of these, or an ancestor, is refused too.
    pub protect_anchors: Vec<PathBuf>,
    /// Absolute path globs inside the read or write roots that Landlock must not grant
    /// (root-only secrets such as `/etc/shadow`): a root holding one is granted entry by entry.
    pub hide: Vec<String>,
    /// Set-user-id and set-group-id bits may be set (refused by default).
    pub allow_setid: bool,
}

/// One entry of `net.connect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetTarget {
    /// An IP network (a single address is a /32 or /128), with an optional port.
    Cidr {
        addr: IpAddr,
        prefix: u8,
        port: Option<u16>,
    },
    /// Any address, one port (`*:443`).
    AnyHost { port: u16 },
    /// A host name resolved when the run starts (`crates.io:443`); `addrs` is filled in by the
    /// caller before the run (policy does no network I/O); unresolved names match nothing.
    Host {
        name: String,
        port: Option<u16>,
        addrs: Vec<IpAddr>,
    },
    /// A unix socket path glob (absolute, expanded).
    UnixPath(String),
    /// An abstract unix socket name glob, written `@name` in profiles (without the `@` here).
    Abstract(String),
}

#[derive(Debug, Clone)]
pub struct NetPolicy {
    pub connect: Vec<NetTarget>,
    /// TCP ports that may be bound; `None` means any port.
    pub bind: Option<Vec<u16>>,
    /// Add the nameservers of /etc/resolv.conf (port 53) to `connect` at run start.
    pub dns: bool,
    /// Compiled unix-path and abstract-name globs of `connect`; rebuild it with
    /// [`NetMatcher::new`] after adding `UnixPath`/`Abstract` targets (IP targets need nothing).
    pub connect_matcher: NetMatcher,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnDeny {
    /// Just fail the call with its errno.
    Errno,
    /// Kill the offending command's subtree and restore the checkpoint taken when it started.
    Rollback,
    /// End the whole run and restore the run's start.
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    Keep,
    Rollback,
}

#[derive(Debug, Clone)]
pub struct TransactionPolicy {
    pub on_deny: OnDeny,
    pub on_failure: OnFailure,
    /// Globs relative to the workspace that are not journaled.
    pub exclude: Vec<String>,
    /// Files larger than this are not copied as pre-images.
    pub max_preimage_bytes: u64,
    /// A write to a file above the cap: written unprotected and reported, or denied.
    pub oversize: Oversize,
    /// fsync the journal at every entry, for power-loss safety.
    pub fsync: bool,
    /// What a command that deletes much of the workspace meets.
    pub mass_delete: MassDelete,
}

/// `transaction.mass-delete`: when one command has deleted at least `min_entries` entries of
/// the workspace that existed when it started, and at least `share` of the workspace's
/// entries, the delete that crosses the line gets `action` (`allow` turns it off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MassDelete {
    pub action: Action,
    pub min_entries: u64,
    /// A fraction, 0 to 1.
    pub share: f64,
}

impl Default for MassDelete {
    fn default() -> Self {
        MassDelete {
            action: Action::Allow,
            min_entries: 20,
            share: 0.5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Oversize {
    Record,
    Deny,
}

/// Environment sanitisation: a variable passes if it matches `keep` and not `drop`; then `set`
/// is applied.
#[derive(Debug, Clone)]
pub struct EnvPolicy {
    pub keep: Vec<String>,
    pub drop: Vec<String>,
    /// Exact names passed even though a `drop` pattern matches them (a `keep` one must still).
    pub allow: Vec<String>,
    pub set: Vec<(String, String)>,
}

/// The kind of judged operation; the profile's `when` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Exec,
    Delete,
    Rename,
    Write,
    Create,
    Link,
    Chmod,
    Connect,
}

impl Op {
    pub const ALL: [Op; 8] = [
        Op::Exec,
        Op::Delete,
        Op::Rename,
        Op::Write,
        Op::Create,
        Op::Link,
        Op::Chmod,
        Op::Connect,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Exec => "exec",
            Op::Delete => "delete",
            Op::Rename => "rename",
            Op::Write => "write",
            Op::Create => "create",
            Op::Link => "link",
            Op::Chmod => "chmod",
            Op::Connect => "connect",
        }
    }

    /// Operations that mutate the filesystem (judged against write roots and `protect`).
    pub fn is_fs_mutation(self) -> bool {
        !matches!(self, Op::Exec | Op::Connect)
    }
}

/// What a rule (or the built-in defaults) decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Allow,
    Deny,
    /// Allowed, but a checkpoint is taken first (the journal gives it its effect).
    Risky,
    /// Denied, and the whole run is ended.
    Kill,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Risky => "risky",
            Action::Kill => "kill",
        }
    }
}

/// One `[[rule]]`, validated and compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Never one of guard's own ids (see [`RuleId::reserved`]): profile loading refuses those.
    pub id: Arc<str>,
    pub when: Vec<Op>,
    /// Absolute path globs (expanded); the rule matches if any path of the request matches.
    /// Empty: no path condition.
    pub path: Vec<String>,
    pub path_set: Option<GlobSet>,
    /// argv patterns: one glob per argument, `**` matches any number of arguments. Elements that
    /// begin with `/` after expansion are matched against the argument normalised as a path
    /// relative to the caller's cwd. Empty: no argv condition.
    pub argv: Vec<String>,
    /// Compiled form of `argv` (`None` only for hand-built rules; such a rule never matches).
    pub argv_pattern: Option<ArgvPattern>,
    /// Connect targets; empty: no address condition.
    pub addr: Vec<NetTarget>,
    /// Compiled unix-path and abstract-name globs of `addr`.
    pub addr_matcher: NetMatcher,
    pub action: Action,
    /// errno returned on deny/kill (EPERM unless the rule says otherwise).
    pub errno: i32,
    pub reason: Option<String>,
}

/// A fully resolved, validated profile.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    /// The most derived `description` of the chain.
    pub description: Option<String>,
    /// The chain of profiles this was built from, most derived first (names or file paths).
    pub sources: Vec<String>,
    /// sha256 (hex) over the source texts of the chain; identifies the policy in the audit log.
    pub digest: String,
    pub mode: Mode,
    pub fs: FsPolicy,
    pub net: NetPolicy,
    pub transaction: TransactionPolicy,
    pub env: EnvPolicy,
    /// How git's own files and pushes are judged.
    pub git: super::git::GitPolicy,
    pub rules: Vec<Rule>,
    pub vars: Vars,
}

/// A decoded network address of a connect call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetAddr {
    Inet(std::net::SocketAddr),
    Unix(PathBuf),
    Abstract(Vec<u8>),
    /// AF_UNSPEC (disconnects a datagram socket) or an unnamed unix address.
    Unspecified,
    /// Another address family (netlink, packet, ...), by number.
    Other(u16),
}

/// One judged call, decoded by the supervisor.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub op: Op,
    /// The target, absolute and normalised as the caller sees it (for rename/link: the source).
    pub path: Option<&'a Path>,
    /// The second path of rename/link/symlink (the new name).
    pub path2: Option<&'a Path>,
    /// True when the target (or an ancestor of it) was created by this run: `protect` guards
    /// what existed before the run, not what the run made itself.
    pub fresh: bool,
    /// True when the call makes a new directory entry: `path` of a create, `path2` of a
    /// rename or link whose destination does not exist yet. A new entry is judged by the
    /// directory it lands in (see `decide`).
    pub creates: bool,
    /// exec: the argument vector as the caller passed it.
    pub argv: &'a [OsString],
    /// exec: the resolved executable.
    pub exe: Option<&'a Path>,
    /// exec: the program has no file reachable by path (an anonymous memfd, a deleted file run
    /// through its descriptor). Landlock's execute right does not cover these.
    pub exe_anonymous: bool,
    /// The caller's working directory (argv path arguments are resolved against it).
    pub cwd: Option<&'a Path>,
    /// connect: the decoded address.
    pub addr: Option<&'a NetAddr>,
    /// open: the target is one of the caller's own pipes, reached through its /proc/PID/fd
    /// (`> /dev/stdout` into a pipe, a jobserver): no file is reached, so no filesystem rule
    /// applies.
    pub reopens_own_pipe: bool,
    /// The call would leave a set-user-id or set-group-id file (or file capabilities) behind:
    /// a chmod or create mode with those bits, an xattr `security.capability`.
    pub sets_id: bool,
    /// What the supervisor found about git's metadata this call touches (see `policy::git`).
    pub git: &'a [super::git::GitFacts],
    /// A metadata call through a descriptor whose object has no name anywhere (a pipe, a
    /// socket, a memfd, an unlinked file): no path rule applies (set-id bits still do).
    pub unnamed: bool,
}

impl<'a> Request<'a> {
    /// A request with only the operation set; fill in the rest with struct update syntax.
    pub fn new(op: Op) -> Self {
        Request {
            op,
            path: None,
            path2: None,
            fresh: false,
            creates: false,
            argv: &[],
            exe: None,
            exe_anonymous: false,
            cwd: None,
            addr: None,
            reopens_own_pipe: false,
            sets_id: false,
            git: &[],
            unnamed: false,
        }
    }
}

/// The answer for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// errno to return for deny/kill; 0 for allow/risky.
    pub errno: i32,
    /// The rule that decided.
    pub rule: RuleId,
    pub reason: Option<String>,
}

/// What decided a verdict: one of guard's own rules, or a profile's `[[rule]]`. Behaviour
/// depends on which (on-deny reacts to some built-in rules and not to others); the audit log
/// shows [`RuleId::as_str`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleId {
    Builtin(Builtin),
    /// A profile rule, by its `id`.
    Profile(Arc<str>),
}

/// guard's own rules. Their ids (and the prefixes in [`RuleId::RESERVED_PREFIXES`]) are refused
/// as profile rule ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// A filesystem change judged against the write roots (Landlock's boundary).
    WriteRoots,
    /// A change to a protected path, or to an ancestor of one.
    Protect,
    /// An exec of a program with no file behind it (memfd, a deleted file).
    ExecAnonymous,
    /// A connect judged against `net.connect`.
    Connect,
    /// An exec no rule matched, or a request missing what its operation needs.
    Default,
    /// Observe mode: everything is allowed.
    Observe,
    /// A path that does not resolve: the call fails with the kernel's own errno.
    Resolve,
    /// guard could not read or make sense of the call: refused (fail closed).
    Decode,
    /// An open of the caller's own pipe through /proc/PID/fd.
    FdReopen,
    /// A set-user-id or set-group-id bit (or file capabilities) refused.
    SetId,
    /// A repository's config judged by content.
    GitConfig,
    /// An executable in a repository's hooks directory.
    GitHook,
    /// A push that deletes or force-updates remote refs.
    GitPush,
    /// One command deleting much of the workspace.
    MassDelete,
}

impl Builtin {
    pub const ALL: [Builtin; 14] = [
        Builtin::WriteRoots,
        Builtin::Protect,
        Builtin::ExecAnonymous,
        Builtin::Connect,
        Builtin::Default,
        Builtin::Observe,
        Builtin::Resolve,
        Builtin::Decode,
        Builtin::FdReopen,
        Builtin::SetId,
        Builtin::GitConfig,
        Builtin::GitHook,
        Builtin::GitPush,
        Builtin::MassDelete,
    ];

    /// The id in the audit log (a stable wire format: docs/audit-format.md).
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::WriteRoots => "fs.write-roots",
            Builtin::Protect => "fs.protect",
            Builtin::ExecAnonymous => "fs.exec-anonymous",
            Builtin::Connect => "net.connect",
            Builtin::Default => "default",
            Builtin::Observe => "observe",
            Builtin::Resolve => "resolve",
            Builtin::Decode => "decode",
            Builtin::FdReopen => "fd-reopen",
            Builtin::SetId => "fs.setid",
            Builtin::GitConfig => "git.config",
            Builtin::GitHook => "git.hook",
            Builtin::GitPush => "git.push",
            Builtin::MassDelete => "fs.mass-delete",
        }
    }
}

impl RuleId {
    /// Prefixes of rule ids that guard keeps for itself.
    pub const RESERVED_PREFIXES: [&'static str; 4] = ["fs.", "net.", "guard.", "git."];

    /// The id as the audit log shows it.
    pub fn as_str(&self) -> &str {
        match self {
            RuleId::Builtin(b) => b.as_str(),
            RuleId::Profile(id) => id,
        }
    }

    /// Whether `id` is one of guard's own ids or starts with a reserved prefix: a profile rule
    /// so named could be mistaken for guard's own in the audit log.
    pub fn reserved(id: &str) -> bool {
        Builtin::ALL.iter().any(|b| b.as_str() == id)
            || Self::RESERVED_PREFIXES.iter().any(|p| id.starts_with(p))
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
