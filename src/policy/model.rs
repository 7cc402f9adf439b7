//! The validated policy model and the request/verdict types that `decide` works on.
//!
//! Everything downstream of profile parsing (confine, supervisor, audit) sees only these types:
//! raw TOML never leaves `policy/`. A `Policy` is immutable once built.

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::globs::PathSet;

use super::argv::ArgvPattern;
use super::net::NetMatcher;

/// The values that `{workspace}`, `{home}`, `{tmp}` and `{state}` expand to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vars {
    /// `{workspace}`: the absolute workspace path.
    pub workspace: PathBuf,
    /// `None` when the user has no home (the `ci` profile may also choose to ignore it).
    pub home: Option<PathBuf>,
    /// `{tmp}`: the run's private temporary directory.
    pub tmp: PathBuf,
    /// `{state}`: guard's state directory (runs, journals).
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
    /// Landlock list roots: every directory beneath may be opened and its entries listed (the
    /// right to read a directory, and no other), so that a program walking up from its
    /// workspace, or listing `/`, sees the names it sees bare; no file beneath becomes readable.
    /// `fs.hide` does not apply to them: a hidden directory's names are listable, its files not.
    pub list: Vec<PathBuf>,
    /// Shared directories (`/dev/shm`): world-shared places where the command may make new
    /// entries and change only the entries it made (the supervisor performs every such call;
    /// Landlock grants nothing here). Another process's file there stays as it is.
    pub shared: Vec<PathBuf>,
    /// Glob patterns (absolute, expanded) whose existing entries may not be mutated.
    pub protect: Vec<String>,
    /// Compiled form of `protect`, made on first use (see [`FsPolicy::protect_set`]); a
    /// policy built by hand leaves it empty.
    pub protect_set: OnceLock<PathSet>,
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
        /// The network address.
        addr: IpAddr,
        /// The prefix length in bits (32 or 128 for a single address).
        prefix: u8,
        /// The port; `None` for any port.
        port: Option<u16>,
    },
    /// Any address, one port (`*:443`).
    AnyHost {
        /// The port allowed on every address.
        port: u16,
    },
    /// A host name (`crates.io:443`), or every name under a domain (`*.github.com:443`, stored
    /// as `*.github.com`). `addrs` are the addresses the supervisor learned for it: resolved
    /// when the run starts (not for a wildcard) and from every DNS answer guard judged for a
    /// name it covers (policy does no network I/O); a name with no address matches nothing.
    Host {
        /// The name, lowercase; `*.domain` for a wildcard.
        name: String,
        /// The port; `None` for any port.
        port: Option<u16>,
        /// The addresses learned for the name so far.
        addrs: Vec<IpAddr>,
    },
    /// A unix socket path glob (absolute, expanded).
    UnixPath(String),
    /// An abstract unix socket name glob, written `@name` in profiles (without the `@` here).
    Abstract(String),
}

/// The network part of a policy (`[net]`).
#[derive(Debug, Clone)]
pub struct NetPolicy {
    /// Where `connect` and every send that names a destination may go; anything else is refused.
    pub connect: Vec<NetTarget>,
    /// Ports that may be bound on a loopback address (`127.0.0.0/8`, `::1`), TCP or UDP;
    /// `None` means any port.
    pub bind: Option<Vec<u16>>,
    /// Other addresses that may be bound (`0.0.0.0:8080`, `10.0.0.0/8`): `net.bind` entries
    /// written in `net.connect` syntax.
    pub bind_addrs: Vec<NetTarget>,
    /// Names a DNS query may ask for besides the host names of `connect` (`net.resolve`):
    /// exact names, `*.domain` for every name under it, `*` for any.
    pub resolve: Vec<String>,
    /// Add the nameservers of /etc/resolv.conf (port 53) to `connect` at run start.
    pub dns: bool,
    /// Compiled unix-path and abstract-name globs of `connect`; rebuild it with
    /// [`NetMatcher::new`] after adding `UnixPath`/`Abstract` targets (IP targets need nothing).
    pub connect_matcher: NetMatcher,
}

/// What a policy denial does besides failing the call (`transaction.on-deny`).
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

/// What happens to the workspace when the command exits non-zero (`transaction.on-failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// The changes stay.
    Keep,
    /// The workspace is rolled back to the run's start.
    Rollback,
}

/// The journal's part of a policy (`[transaction]`).
#[derive(Debug, Clone)]
pub struct TransactionPolicy {
    /// What a denial does.
    pub on_deny: OnDeny,
    /// What a non-zero exit does.
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
    /// What the delete that crosses the line gets.
    pub action: Action,
    /// The fewest entries deleted that can cross it.
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

/// What happens to a write to a file too large to save before it changes
/// (`transaction.oversize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Oversize {
    /// The write goes ahead without a saved copy; the audit log and a rollback say so.
    Record,
    /// The write is refused with EFBIG.
    Deny,
}

/// Environment sanitisation: a variable passes if it matches `keep` and not `drop`; then `set`
/// is applied.
#[derive(Debug, Clone)]
pub struct EnvPolicy {
    /// Name globs of the variables that may pass.
    pub keep: Vec<String>,
    /// Name globs of the variables removed even when `keep` matches them.
    pub drop: Vec<String>,
    /// Exact names passed even though a `drop` pattern matches them (a `keep` one must still).
    pub allow: Vec<String>,
    /// `(name, value)` pairs set in the command's environment after filtering.
    pub set: Vec<(String, String)>,
}

/// The command's home directory: the user's, or a private one of the run's own; and the
/// variables that point tools at what they need under the user's home either way.
#[derive(Debug, Clone, Default)]
pub struct HomePolicy {
    /// The command gets an empty HOME of its own (`{tmp}/home`, with the XDG directories
    /// inside it) instead of the user's.
    pub private: bool,
    /// `(variable, directory)`: set the variable to the directory when the directory exists and
    /// the variable is not set already (`RUSTUP_HOME = "{home}/.rustup"`).
    pub locate: Vec<(String, PathBuf)>,
    /// `(variable, file)`: when the file exists, the variable points at a copy of it without
    /// its credential lines (`NPM_CONFIG_USERCONFIG = "{home}/.npmrc"`).
    pub redact: Vec<(String, PathBuf)>,
}

/// Where explanations of refused calls go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Denials {
    /// One line on the refused process's own stderr.
    #[default]
    Stderr,
    /// Nowhere (the audit log still has every refusal).
    None,
}

/// What guard tells the command about its refusals.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReportPolicy {
    /// Where the explanation of a refused call goes.
    pub denials: Denials,
}

/// The kind of judged operation; the profile's `when` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Running a program (execve, execveat).
    Exec,
    /// Removing a file or directory (unlink, rmdir).
    Delete,
    /// Renaming or moving an entry.
    Rename,
    /// Opening an existing file for writing, or truncating it.
    Write,
    /// Making a new file, directory, device or symlink.
    Create,
    /// Making a hard link.
    Link,
    /// Changing mode, owner, times or other metadata.
    Chmod,
    /// connect, and a send that names its destination (sendto, sendmsg, sendmmsg).
    Connect,
    /// bind, and listen (which binds the wildcard address when the socket is not bound).
    Bind,
    /// A DNS query, judged by the name it asks for.
    Dns,
}

impl Op {
    /// Every operation, in declaration order.
    pub const ALL: [Op; 10] = [
        Op::Exec,
        Op::Delete,
        Op::Rename,
        Op::Write,
        Op::Create,
        Op::Link,
        Op::Chmod,
        Op::Connect,
        Op::Bind,
        Op::Dns,
    ];

    /// The operation's name in profiles and the audit log (`exec`, `delete`, ...).
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
            Op::Bind => "bind",
            Op::Dns => "dns",
        }
    }

    /// Operations that mutate the filesystem (judged against write roots and `protect`).
    pub fn is_fs_mutation(self) -> bool {
        !matches!(self, Op::Exec | Op::Connect | Op::Bind | Op::Dns)
    }

    /// Operations judged by a network address (a rule's `addr` condition applies to them).
    pub fn is_net(self) -> bool {
        matches!(self, Op::Connect | Op::Bind | Op::Dns)
    }
}

/// What a rule (or the built-in defaults) decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The call is performed.
    Allow,
    /// The call fails with the verdict's errno.
    Deny,
    /// Allowed, but a checkpoint is taken first (the journal gives it its effect).
    Risky,
    /// Denied, and the whole run is ended.
    Kill,
}

impl Action {
    /// The action's name in profiles and the audit log (`allow`, `deny`, `risky`, `kill`).
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
    /// The operations the rule applies to (`when`); never empty.
    pub when: Vec<Op>,
    /// Absolute path globs (expanded); the rule matches if any path of the request matches.
    /// Empty: no path condition.
    pub path: Vec<String>,
    /// Compiled form of `path`, made on first use: see [`Rule::path_set`].
    pub(crate) path_set: OnceLock<PathSet>,
    /// The literal directory prefix of each `path` glob (`/home/u/.cargo/bin` for
    /// `/home/u/.cargo/bin/**`): every path a glob matches lies within its anchor, so a path
    /// within none of them is not matched without running the glob set.
    pub(crate) path_anchors: Vec<PathBuf>,
    /// argv patterns: one glob per argument, `**` matches any number of arguments. Elements that
    /// begin with `/` after expansion are matched against the argument normalised as a path
    /// relative to the caller's cwd. Empty: no argv condition.
    pub argv: Vec<String>,
    /// Compiled form of `argv`, made on first use: see [`Rule::argv_pattern`].
    pub(crate) argv_pattern: OnceLock<ArgvPattern>,
    /// Connect targets; empty: no address condition.
    pub addr: Vec<NetTarget>,
    /// Compiled unix-path and abstract-name globs of `addr`.
    pub addr_matcher: NetMatcher,
    /// What the rule decides when it matches.
    pub action: Action,
    /// errno returned on deny/kill (EPERM unless the rule says otherwise).
    pub errno: i32,
    /// Why, as the rule states it (shown in explanations and the audit log).
    pub reason: Option<String>,
}

impl FsPolicy {
    /// The compiled `protect` globs, made on first use like a rule's matchers (see
    /// [`Rule::path_set`]); the globs were checked one by one when the profile was loaded.
    pub fn protect_set(&self) -> &PathSet {
        self.protect_set.get_or_init(|| {
            PathSet::new(&self.protect).expect("protect globs were checked one by one")
        })
    }
}

impl Rule {
    /// The compiled `path` globs (`None` when the rule has no path condition). A pattern with
    /// more than `*` and `**` compiles into a regex set (tens of microseconds), so a run
    /// compiles every rule's while it prepares the child ([`Policy::compile_matchers`]); the
    /// globs were checked one by one when the profile was loaded.
    pub fn path_set(&self) -> Option<&PathSet> {
        if self.path.is_empty() {
            return None;
        }
        Some(
            self.path_set.get_or_init(|| {
                PathSet::new(&self.path).expect("path globs were checked one by one")
            }),
        )
    }

    /// The compiled `argv` pattern (`None` when the rule has no argv condition), compiled on
    /// first use like [`Rule::path_set`]; its elements were checked when the profile was
    /// loaded.
    pub fn argv_pattern(&self) -> Option<&ArgvPattern> {
        if self.argv.is_empty() {
            return None;
        }
        Some(
            self.argv_pattern
                .get_or_init(|| ArgvPattern::compile(&self.argv)),
        )
    }
}

/// A fully resolved, validated profile.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The profile's name, or the path of its file.
    pub name: String,
    /// The most derived `description` of the chain.
    pub description: Option<String>,
    /// The chain of profiles this was built from, most derived first (names or file paths).
    pub sources: Vec<String>,
    /// sha256 (hex) over the source texts of the chain; identifies the policy in the audit log.
    pub digest: String,
    /// Whether guard enforces the policy or only observes.
    pub mode: Mode,
    /// Read and write roots, protected paths.
    pub fs: FsPolicy,
    /// Where the command may connect, bind and resolve.
    pub net: NetPolicy,
    /// What the journal does with denials, failures and large files.
    pub transaction: TransactionPolicy,
    /// Which environment variables the command sees.
    pub env: EnvPolicy,
    /// How git's own files and pushes are judged.
    pub git: super::git::GitPolicy,
    /// The profile's `[[rule]]`s, in the order they are tried (the first match decides).
    pub rules: Vec<Rule>,
    /// What the variables of the profile expanded to.
    pub vars: Vars,
    /// Whose home directory the command gets.
    pub home: HomePolicy,
    /// What guard tells the command about its refusals.
    pub report: ReportPolicy,
    /// guard's own configuration: every profile file the policy was built from (absolute) and
    /// the user's configuration directory. The command may not change, move or remove them or
    /// their ancestors, nor create any file named `.guard.toml` (see `decide`).
    pub guard_files: Vec<PathBuf>,
}

/// The file name of a workspace's configuration, found by walking up from the workspace.
pub const WORKSPACE_CONFIG: &str = ".guard.toml";

/// A decoded network address of a connect call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetAddr {
    /// An IPv4 or IPv6 address and port.
    Inet(std::net::SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
    /// An abstract unix socket name (without the leading NUL).
    Abstract(Vec<u8>),
    /// AF_UNSPEC (disconnects a datagram socket) or an unnamed unix address.
    Unspecified,
    /// Another address family (netlink, packet, ...), by number.
    Other(u16),
}

/// One judged call, decoded by the supervisor.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The judged operation.
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
    /// connect, send: the destination; bind, listen: the local address; dns: the nameserver.
    pub addr: Option<&'a NetAddr>,
    /// dns: the name the query asks for (lowercase, without the final dot).
    pub name: Option<&'a str>,
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
    /// Every target of the call that lies in a shared directory (`fs.shared`) and is there
    /// already is an entry this run made (new names need nothing). The supervisor finds it
    /// out only when asked: after a verdict of `fs.shared`.
    pub own_shared: bool,
    /// An open with O_TMPFILE: a new file with no name, made in the directory `path`.
    pub nameless: bool,
}

impl<'a> Request<'a> {
    /// This request with `addr` as its address.
    pub fn with_addr(self, addr: Option<&'a NetAddr>) -> Self {
        Request { addr, ..self }
    }

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
            name: None,
            reopens_own_pipe: false,
            sets_id: false,
            git: &[],
            unnamed: false,
            own_shared: false,
            nameless: false,
        }
    }
}

/// The answer for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What to do with the call.
    pub action: Action,
    /// errno to return for deny/kill; 0 for allow/risky.
    pub errno: i32,
    /// The rule that decided.
    pub rule: RuleId,
    /// The rule's stated reason, if any.
    pub reason: Option<String>,
}

/// What decided a verdict: one of guard's own rules, or a profile's `[[rule]]`. Behaviour
/// depends on which (on-deny reacts to some built-in rules and not to others); the audit log
/// shows [`RuleId::as_str`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleId {
    /// One of guard's own rules.
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
    /// A connect, or a send naming its destination, judged against `net.connect`.
    Connect,
    /// A bind or listen judged against `net.bind`.
    Bind,
    /// A DNS query judged by its name against the host names of `net.connect` and `net.resolve`.
    Dns,
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
    /// A change to guard's own configuration (a profile file in use, any `.guard.toml`, the
    /// user's configuration directory), or to an ancestor of one.
    GuardConfig,
    /// A change in a shared directory (`fs.shared`): new entries are allowed, and changes to
    /// the entries this run made there; anything else there is refused.
    Shared,
    /// A write-open of a thread's name (`/proc/PID/comm`, `/proc/PID/task/TID/comm`): the
    /// kernel lets a write through it rename only the writer's own threads, as `prctl` does.
    ThreadName,
}

impl Builtin {
    /// Every built-in rule.
    pub const ALL: [Builtin; 19] = [
        Builtin::WriteRoots,
        Builtin::Protect,
        Builtin::ExecAnonymous,
        Builtin::Connect,
        Builtin::Bind,
        Builtin::Dns,
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
        Builtin::GuardConfig,
        Builtin::Shared,
        Builtin::ThreadName,
    ];

    /// The id in the audit log (a stable wire format: docs/audit-format.md).
    pub fn as_str(self) -> &'static str {
        match self {
            Builtin::WriteRoots => "fs.write-roots",
            Builtin::Protect => "fs.protect",
            Builtin::ExecAnonymous => "fs.exec-anonymous",
            Builtin::Connect => "net.connect",
            Builtin::Bind => "net.bind",
            Builtin::Dns => "net.dns",
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
            Builtin::GuardConfig => "fs.guard-config",
            Builtin::Shared => "fs.shared",
            Builtin::ThreadName => "fs.thread-name",
        }
    }
}

impl Verdict {
    /// The call failed with the kernel's own answer before any rule applied (its path does not
    /// resolve): an outcome, not a refusal.
    pub fn is_kernel_error(&self) -> bool {
        self.rule == RuleId::Builtin(Builtin::Resolve)
    }

    /// The call was refused by policy (denied or killed; not a kernel error).
    pub fn is_refusal(&self) -> bool {
        matches!(self.action, Action::Deny | Action::Kill) && !self.is_kernel_error()
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
