//! The Landlock ruleset of a run, computed from the [`Policy`] in the parent.
//!
//! [`plan`] takes the kernel's Landlock ABI and the cap of the run's options from the one
//! feature probe ([`Features`]), creates the ruleset and a [`LandlockReport`] that says
//! honestly what is enforced at that ABI and what is not, and why (the reasons are the
//! features' statuses), and leaves the rules as [`Grants`]: each root opened (`O_PATH`,
//! missing ones are skipped and reported), a root that holds a hidden path granted entry by
//! entry. A run adds them after its fork, two processes at once ([`Grants::split_off`]);
//! [`prepare`] adds them all at once. The child only has to `restrict_self()`. This module
//! never confines the calling process.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    PathFdError, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};

use super::features::{Feature, Features};
use super::hide::Place;
use super::ConfineError;
use crate::policy::{Mode, NetTarget, Policy};

pub use super::features::GUARD_MAX_ABI;

/// A ruleset ready for the child, and what it enforces.
#[derive(Debug)]
pub struct Prepared {
    /// `None` when nothing is to be enforced (observe mode, or no Landlock in this kernel).
    pub ruleset: Option<RulesetCreated>,
    /// What it enforces and what it had to drop.
    pub report: LandlockReport,
}

/// What the ruleset enforces at the effective ABI, and every right it had to drop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LandlockReport {
    /// The kernel's Landlock ABI (0: none), as probed.
    pub kernel_abi: u8,
    /// The ABI the ruleset uses; `None` when Landlock is not used.
    pub abi: Option<u8>,
    /// One line per enforced restriction.
    pub enforced: Vec<String>,
    /// `(feature, reason)` for each restriction the policy asks for but this run lacks.
    pub degraded: Vec<(String, String)>,
    /// Roots of the policy that do not exist (nothing to grant there).
    pub skipped_paths: Vec<PathBuf>,
}

/// Computes and creates the ruleset for `policy` with every rule (see the module
/// documentation).
pub fn prepare(policy: &Policy, features: &Features) -> Result<Prepared, ConfineError> {
    let mut plan = plan(policy, features)?;
    let mut hidden = 0;
    if let (Some(ruleset), Some(grants)) = (plan.ruleset.as_mut(), plan.grants.take()) {
        hidden = grants.grant(ruleset, &mut plan.report)?;
    }
    plan.note_hidden(hidden);
    Ok(Prepared {
        ruleset: plan.ruleset,
        report: plan.report,
    })
}

/// Computes and creates the ruleset for `policy`, and what it enforces, but leaves its rules
/// to add ([`Grants`]): a run adds them while its child sets itself up (`run/spawn.rs`).
pub fn plan(policy: &Policy, features: &Features) -> Result<Plan, ConfineError> {
    let mut report = LandlockReport {
        kernel_abi: features.kernel_landlock_abi,
        ..LandlockReport::default()
    };
    if policy.mode == Mode::Observe {
        report.degraded.push((
            "landlock".into(),
            "observe mode: no landlock ruleset, nothing is enforced by the kernel".into(),
        ));
        return Ok(Plan {
            ruleset: None,
            report,
            grants: None,
            hidden_line: 0,
        });
    }
    let Some(v) = features.landlock_abi else {
        let reason = features.status(Feature::Landlock).describe(Some(
            "the filesystem and network roots are not enforced by the kernel",
        ));
        report.degraded.push(("landlock".into(), reason));
        return Ok(Plan {
            ruleset: None,
            report,
            grants: None,
            hidden_line: 0,
        });
    };
    report.abi = Some(v);
    let why = |f: Feature| features.status(f).describe(None);
    let abi = ABI::from(i32::from(v));

    // Filesystem.
    let handled_fs = AccessFs::from_all(abi);
    let mut read_access = AccessFs::from_read(abi);
    if features.available(Feature::LandlockFsResolveUnix) {
        // Pathname unix sockets stay reachable under the roots; the supervisor judges connect.
        read_access |= AccessFs::ResolveUnix;
    }
    let write_access = handled_fs;
    report.enforced.push(format!(
        "fs: read+execute only under {} read root(s), write only under {} write root(s){}",
        policy.fs.read.len(),
        policy.fs.write.len(),
        match policy.fs.list.len() {
            0 => String::new(),
            n => format!(", directories listable under {n} list root(s)"),
        }
    ));
    for feature in [
        Feature::LandlockFsRefer,
        Feature::LandlockFsTruncate,
        Feature::LandlockFsIoctlDev,
        Feature::LandlockFsResolveUnix,
    ] {
        let status = features.status(feature);
        if status.is_available() {
            let need = feature.landlock_abi().unwrap_or(1);
            report
                .enforced
                .push(format!("{} (abi {need})", feature.name()));
        } else {
            report.degraded.push((
                feature.name().into(),
                status.describe(Some(feature.without())),
            ));
        }
    }

    // Network (TCP).
    let net = net_plan(policy);
    let mut handled_net = BitFlags::<AccessNet>::EMPTY;
    let mut ports: BTreeMap<u16, BitFlags<AccessNet>> = BTreeMap::new();
    match &net.connect {
        Some(allowed) if features.available(Feature::LandlockNetConnect) => {
            handled_net |= AccessNet::ConnectTcp;
            for &p in allowed {
                *ports.entry(p).or_default() |= AccessNet::ConnectTcp;
            }
            report.enforced.push(if allowed.is_empty() {
                "landlock-net-connect (abi 4): every tcp connect is refused".into()
            } else {
                format!("landlock-net-connect (abi 4): tcp connect only to ports {allowed:?}")
            });
        }
        Some(_) => report.degraded.push((
            Feature::LandlockNetConnect.name().into(),
            features
                .status(Feature::LandlockNetConnect)
                .describe(Some(Feature::LandlockNetConnect.without())),
        )),
        None => report.degraded.push((
            "landlock-net-connect".into(),
            "a net.connect entry allows any port: connect is judged by the supervisor only".into(),
        )),
    }
    match &bind_ports(policy) {
        None => {}
        Some(allowed) if features.available(Feature::LandlockNetBind) => {
            handled_net |= AccessNet::BindTcp;
            for &p in allowed.iter() {
                *ports.entry(p).or_default() |= AccessNet::BindTcp;
            }
            report.enforced.push(if allowed.is_empty() {
                "landlock-net-bind (abi 4): every tcp bind is refused".into()
            } else {
                format!("landlock-net-bind (abi 4): tcp bind only to ports {allowed:?}")
            });
        }
        Some(_) => report.degraded.push((
            Feature::LandlockNetBind.name().into(),
            features
                .status(Feature::LandlockNetBind)
                .describe(Some(Feature::LandlockNetBind.without())),
        )),
    }

    // Scopes.
    let scopes = if features.available(Feature::LandlockScopeSignal) {
        report.enforced.push(
            "landlock-scope-signal (abi 6): no signals to processes outside the sandbox".into(),
        );
        let mut line =
            "landlock-scope-abstract-unix (abi 6): no connects to abstract unix sockets \
                        outside the sandbox"
                .to_string();
        if policy
            .net
            .connect
            .iter()
            .any(|t| matches!(t, NetTarget::Abstract(_)))
        {
            line.push_str(" (net.connect `@name` entries reach only sockets made inside it)");
        }
        report.enforced.push(line);
        Scope::from_all(ABI::V6)
    } else {
        for feature in [
            Feature::LandlockScopeSignal,
            Feature::LandlockScopeAbstractUnix,
        ] {
            report.degraded.push((feature.name().into(), why(feature)));
        }
        BitFlags::EMPTY
    };

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled_fs)
        .map_err(ConfineError::Ruleset)?;
    if !handled_net.is_empty() {
        ruleset = ruleset
            .handle_access(handled_net)
            .map_err(ConfineError::Ruleset)?;
    }
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(ConfineError::Ruleset)?;
    }
    let created = ruleset.create().map_err(ConfineError::Ruleset)?;

    // Each root is added as it is opened (its descriptor closed with the rule), so a profile
    // needs one descriptor at a time whatever its size: the `fs.hide` expansion alone makes
    // hundreds of rules, more than a low `ulimit -n` allows open at once. A root that holds a
    // hidden path is granted entry by entry around it (see `hide.rs`).
    let hidden = super::hide::Hidden::new(&policy.fs.hide, super::hide::Reach::of_this_thread());
    // List roots grant one right and are never expanded: `/` must be a rule of its own for
    // `/` itself to be opened.
    let mut roots = Vec::new();
    let mut listed = Vec::new();
    for (path, list) in fs_roots(policy) {
        match list {
            RootList::Read => roots.push((path.to_path_buf(), read_access)),
            RootList::Write => roots.push((path.to_path_buf(), write_access)),
            RootList::List => listed.push(path.to_path_buf()),
        }
    }
    // The count of hidden paths comes once every share is granted (`note_hidden`).
    let hidden_line = report.enforced.len();
    if hidden.left_to_permissions > 0 {
        report.enforced.push(format!(
            "fs: {} fs.hide pattern(s) left to file permissions: guard's user, which the \
             command runs as, without capabilities, can reach nothing they match",
            hidden.left_to_permissions
        ));
    }
    let unix_dirs = if features.available(Feature::LandlockFsResolveUnix) {
        // Unix sockets that net.connect names outside the roots stay reachable by path.
        unix_socket_dirs(policy)
    } else {
        Vec::new()
    };
    Ok(Plan {
        ruleset: Some(created),
        report,
        grants: Some(Grants {
            roots,
            listed,
            hidden: Arc::new(hidden),
            file_access: AccessFs::from_file(abi),
            unix_dirs,
            ports,
        }),
        hidden_line,
    })
}

/// The rules of a [`Plan`]'s ruleset, not yet added: the filesystem roots (`fs.hide`
/// expanding some entry by entry), the directories of the unix sockets `net.connect` names,
/// and the TCP ports.
#[derive(Debug)]
pub struct Grants {
    roots: Vec<(PathBuf, BitFlags<AccessFs>)>,
    /// `fs.list` roots: the right to read directories, beneath each.
    listed: Vec<PathBuf>,
    hidden: Arc<super::hide::Hidden>,
    file_access: BitFlags<AccessFs>,
    unix_dirs: Vec<PathBuf>,
    ports: BTreeMap<u16, BitFlags<AccessNet>>,
}

/// One root that `fs.hide` expands entry by entry, split off a [`Plan`]'s grants
/// ([`Grants::split_off`]) for a second process to grant to the same ruleset meanwhile.
#[derive(Debug, Clone)]
pub struct Share {
    root: PathBuf,
    access: BitFlags<AccessFs>,
    hidden: Arc<super::hide::Hidden>,
    file_access: BitFlags<AccessFs>,
}

/// What a [`Share`] granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGranted {
    /// Entries of the root left out as hidden.
    pub hidden: u32,
    /// The root did not exist.
    pub missing: bool,
}

impl Grants {
    /// Takes the first root that `fs.hide` expands entry by entry out of these grants (for a
    /// root guard, `/etc`: some 150 rules), or `None` when no root is expanded.
    pub fn split_off(&mut self) -> Option<Share> {
        let i = self
            .roots
            .iter()
            .position(|(root, _)| self.hidden.expands(root))?;
        let (root, access) = self.roots.remove(i);
        Some(Share {
            root,
            access,
            hidden: Arc::clone(&self.hidden),
            file_access: self.file_access,
        })
    }

    /// Adds every rule to `created`; roots that do not exist go to `report`'s skipped paths.
    /// Returns how many hidden paths the roots' expansion left out.
    pub fn grant(
        self,
        created: &mut RulesetCreated,
        report: &mut LandlockReport,
    ) -> Result<usize, ConfineError> {
        let mut hid = 0;
        for (root, access) in &self.roots {
            let granted = grant_root(created, &self.hidden, root, *access, self.file_access)?;
            hid += granted.hidden as usize;
            if granted.missing {
                report.skipped_paths.push(root.clone());
            }
        }
        for root in self.listed {
            match open_root(&root)? {
                Some(fd) => add_path_rule(created, fd, AccessFs::ReadDir.into(), &root)?,
                None => report.skipped_paths.push(root),
            }
        }
        for dir in self.unix_dirs {
            if let Some(fd) = open_root(&dir)? {
                created
                    .add_rule(PathBeneath::new(fd, AccessFs::ResolveUnix))
                    .map_err(|source| ConfineError::AddRule { path: dir, source })?;
            }
        }
        for (port, access) in self.ports {
            created
                .add_rule(NetPort::new(port, access))
                .map_err(ConfineError::Ruleset)?;
        }
        Ok(hid)
    }
}

impl Share {
    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Adds the root's rules to `created`, a descriptor of the ruleset the share was split
    /// from (rules may be added through any of them, from any process, until it is enforced).
    pub fn grant(&self, created: &mut RulesetCreated) -> Result<ShareGranted, ConfineError> {
        grant_root(
            created,
            &self.hidden,
            &self.root,
            self.access,
            self.file_access,
        )
    }
}

/// A created ruleset with its rules still to add, and the report of what it enforces; see
/// [`plan`].
#[derive(Debug)]
pub struct Plan {
    /// `None` when nothing is to be enforced (observe mode, or no Landlock in this kernel).
    pub ruleset: Option<RulesetCreated>,
    /// What it enforces and what it had to drop, but for the hidden paths ([`Plan::note_hidden`]).
    pub report: LandlockReport,
    /// The rules to add (with a ruleset).
    pub grants: Option<Grants>,
    hidden_line: usize,
}

impl Plan {
    /// Completes the report with how many hidden paths every share of the grants left out.
    pub fn note_hidden(&mut self, hidden: usize) {
        if hidden > 0 {
            self.report.enforced.insert(
                self.hidden_line,
                format!("fs: {hidden} path(s) inside the roots hidden (fs.hide), to root as well"),
            );
        }
    }
}

/// Grants `root` with `access` to `created`, around what `hidden` hides.
fn grant_root(
    created: &mut RulesetCreated,
    hidden: &super::hide::Hidden,
    root: &Path,
    access: BitFlags<AccessFs>,
    file_access: BitFlags<AccessFs>,
) -> Result<ShareGranted, ConfineError> {
    // The entries of an expanded root (hundreds) go to the ruleset's descriptor directly:
    // their types are known from the listing, so the crate's `fstat` per rule is not needed.
    let entries_fd: Option<OwnedFd> = if hidden.expands(root) {
        created.try_clone().ok().and_then(Into::into)
    } else {
        None
    };
    let mut missing = false;
    let mut add = |place: Place<'_>, access: BitFlags<AccessFs>| match place {
        Place::Root(root) => match open_root(root)? {
            Some(fd) => add_path_rule(created, fd, access, root),
            None => {
                missing = true;
                Ok(())
            }
        },
        Place::Open(fd, path, is_dir) => match &entries_fd {
            Some(ruleset) => add_entry_rule(ruleset.as_fd(), fd, path, is_dir, access, file_access),
            None => add_path_rule(created, fd, access, path),
        },
    };
    let hid = hidden.grant(root, access, &mut add)?;
    Ok(ShareGranted {
        hidden: u32::try_from(hid).unwrap_or(u32::MAX),
        missing,
    })
}

/// Adds the rule granting `access` beneath the entry `fd` of an expanded root (opened at
/// `path`, which errors name) to `ruleset` directly: its type is known from the listing, so
/// the crate's `fstat` per rule is not needed. A file takes only the rights that apply to
/// files, as the crate does.
fn add_entry_rule(
    ruleset: BorrowedFd<'_>,
    fd: OwnedFd,
    path: &Path,
    is_dir: bool,
    access: BitFlags<AccessFs>,
    file_access: BitFlags<AccessFs>,
) -> Result<(), ConfineError> {
    let access = if is_dir { access } else { access & file_access };
    crate::sys::fs::landlock_add_path_rule(ruleset, fd.as_fd(), access.bits()).map_err(|source| {
        ConfineError::AddEntryRule {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Adds the rule granting `access` beneath `fd` (opened at `path`, which errors name).
fn add_path_rule(
    created: &mut RulesetCreated,
    fd: impl AsFd,
    access: BitFlags<AccessFs>,
    path: &Path,
) -> Result<(), ConfineError> {
    created
        .add_rule(PathBeneath::new(fd, access))
        .map(drop)
        .map_err(|source| ConfineError::AddRule {
            path: path.to_path_buf(),
            source,
        })
}

/// The profile list a filesystem root comes from: `fs.read` roots grant reading and
/// executing, `fs.write` roots every right the ABI handles, `fs.list` roots the reading of
/// directories alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootList {
    /// `fs.read`.
    Read,
    /// `fs.write`.
    Write,
    /// `fs.list`.
    List,
}

impl RootList {
    /// The profile key.
    pub fn key(self) -> &'static str {
        match self {
            RootList::Read => "fs.read",
            RootList::Write => "fs.write",
            RootList::List => "fs.list",
        }
    }
}

/// The filesystem roots the ruleset of `policy` is built from, in order, with their list.
pub fn fs_roots(policy: &Policy) -> impl Iterator<Item = (&Path, RootList)> {
    let read = policy.fs.read.iter().map(|p| (p.as_path(), RootList::Read));
    let write = policy
        .fs
        .write
        .iter()
        .map(|p| (p.as_path(), RootList::Write));
    let list = policy.fs.list.iter().map(|p| (p.as_path(), RootList::List));
    read.chain(write).chain(list)
}

/// The right an access of a file needs from the ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Open a file for reading its content.
    Read,
    /// Open a directory for reading its entries (what `fs.list` grants too).
    List,
    /// Run it (execve, and the interpreter or loader the kernel opens for it).
    Execute,
    /// Open for writing, create, remove or rename entries.
    Write,
}

/// What the ruleset [`prepare`] builds for a policy says about one access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsGrant {
    /// Landlock does not stand here: observe mode, or no Landlock in this kernel (why).
    NotEnforced(String),
    /// The right is granted beneath this root, from this list.
    Granted {
        /// The root as the profile lists it.
        root: PathBuf,
        /// Its list.
        list: RootList,
    },
    /// No root grants it: the kernel refuses the call with EACCES.
    Refused,
    /// A root holds it but `fs.hide` takes it out: the kernel refuses the call with EACCES.
    Hidden,
}

/// Whether the ruleset of `policy` (as [`prepare`] builds it with `features`) grants `need` on
/// `path`, an absolute path with every symlink resolved (Landlock sees the file reached, not
/// the name used). A root grants what lies beneath the directory it resolves to; roots that
/// do not exist are skipped, as [`prepare`] skips them.
pub fn grants(policy: &Policy, features: &Features, path: &Path, need: Need) -> FsGrant {
    if policy.mode == Mode::Observe {
        return FsGrant::NotEnforced("observe mode: no landlock ruleset".into());
    }
    if features.landlock_abi.is_none() {
        return FsGrant::NotEnforced(
            features
                .status(Feature::Landlock)
                .describe(Some("the filesystem roots are not enforced by the kernel")),
        );
    }
    let holding: Vec<_> = granting(policy, need)
        .filter(|(_, real, _)| path.starts_with(real))
        .collect();
    // A list root is granted whole, `fs.hide` or not.
    if let Some((root, _, list)) = holding.iter().find(|(_, _, l)| *l == RootList::List) {
        return FsGrant::Granted {
            root: root.to_path_buf(),
            list: *list,
        };
    }
    if super::hide::Hidden::new(&policy.fs.hide, super::hide::Reach::Anyone).hides(path) {
        return FsGrant::Hidden;
    }
    match holding.into_iter().next() {
        Some((root, _, list)) => FsGrant::Granted {
            root: root.to_path_buf(),
            list,
        },
        None => FsGrant::Refused,
    }
}

/// The roots of `policy` whose rights include `need`, each with the directory it resolves to
/// (what Landlock grants beneath) and its list; roots that do not exist are skipped, as
/// [`prepare`] skips them. [`grants`] (`guard explain`) uses these; a run's check of the
/// programs it execs resolves the roots only when it needs to (`supervisor::explain`).
pub fn granting(policy: &Policy, need: Need) -> impl Iterator<Item = (&Path, PathBuf, RootList)> {
    fs_roots(policy)
        .filter(move |(_, list)| match need {
            Need::Write => *list == RootList::Write,
            Need::Read | Need::Execute => *list != RootList::List,
            Need::List => true,
        })
        .filter_map(|(root, list)| Some((root, std::fs::canonicalize(root).ok()?, list)))
}

/// Opens a root with `O_PATH`; `None` when it does not exist.
fn open_root(path: &Path) -> Result<Option<PathFd>, ConfineError> {
    match PathFd::new(path) {
        Ok(fd) => Ok(Some(fd)),
        Err(PathFdError::OpenCall { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(PathFdError::OpenCall { source, .. }) => Err(ConfineError::OpenRoot {
            path: path.to_path_buf(),
            source,
        }),
        Err(other) => Err(ConfineError::OpenRoot {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, other),
        }),
    }
}

/// The deepest literal directory of each `net.connect` unix socket glob (`/run/user/*/bus` ->
/// `/run/user`, `/run/docker.sock` -> `/run`).
fn unix_socket_dirs(policy: &Policy) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for target in &policy.net.connect {
        let NetTarget::UnixPath(glob) = target else {
            continue;
        };
        let literal: PathBuf = Path::new(glob)
            .components()
            .take_while(|c| {
                !c.as_os_str()
                    .as_encoded_bytes()
                    .iter()
                    .any(|b| b"*?[{\\".contains(b))
            })
            .collect();
        let dir = if literal.as_os_str().len() == glob.len() {
            literal.parent().map(Path::to_path_buf)
        } else {
            Some(literal)
        };
        if let Some(dir) = dir.filter(|d| d.is_absolute() && !dirs.contains(d)) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The TCP ports `net.bind` allows, as Landlock can express them (it knows ports, not
/// addresses: the supervisor judges the address of every bind and listen); `None` when some
/// entry allows any port.
fn bind_ports(policy: &Policy) -> Option<Vec<u16>> {
    let mut ports = policy.net.bind.clone()?;
    for t in &policy.net.bind_addrs {
        match t {
            NetTarget::Cidr { port: Some(p), .. } | NetTarget::AnyHost { port: p } => {
                ports.push(*p)
            }
            _ => return None,
        }
    }
    ports.sort_unstable();
    ports.dedup();
    Some(ports)
}

/// The TCP side of the policy, as Landlock can express it.
struct NetPlan {
    /// `Some(ports)`: TCP connect allowed to exactly these ports (empty: none);
    /// `None`: some entry allows any port, Landlock cannot narrow connect.
    connect: Option<Vec<u16>>,
}

fn net_plan(policy: &Policy) -> NetPlan {
    let mut ports = Vec::new();
    for target in &policy.net.connect {
        let port = match target {
            NetTarget::Cidr { port, .. } | NetTarget::Host { port, .. } => *port,
            NetTarget::AnyHost { port } => Some(*port),
            // Not TCP: judged by the supervisor (and by the fs/scope rights).
            NetTarget::UnixPath(_) | NetTarget::Abstract(_) => continue,
        };
        match port {
            Some(p) => ports.push(p),
            None => return NetPlan { connect: None },
        }
    }
    if policy.net.dns {
        // Nameservers are added to net.connect at run start; DNS falls back to TCP port 53.
        ports.push(53);
    }
    ports.sort_unstable();
    ports.dedup();
    NetPlan {
        connect: Some(ports),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::features::{Kernel, Options};
    use crate::policy::{
        EnvPolicy, FsPolicy, NetPolicy, OnDeny, OnFailure, TransactionPolicy, Vars,
    };

    fn policy(read: Vec<PathBuf>, write: Vec<PathBuf>, connect: Vec<NetTarget>) -> Policy {
        Policy {
            name: "test".into(),
            description: None,
            sources: vec!["test".into()],
            digest: String::new(),
            mode: Mode::Enforce,
            fs: FsPolicy {
                read,
                write,
                list: Vec::new(),
                shared: Vec::new(),
                protect: Vec::new(),
                protect_set: Default::default(),
                protect_anchors: Vec::new(),
                hide: Vec::new(),
                allow_setid: false,
            },
            net: NetPolicy {
                connect_matcher: crate::policy::NetMatcher::new(&connect),
                connect,
                bind: None,
                bind_addrs: Vec::new(),
                resolve: Vec::new(),
                dns: false,
            },
            transaction: TransactionPolicy {
                on_deny: OnDeny::Errno,
                on_failure: OnFailure::Keep,
                exclude: Vec::new(),
                max_preimage_bytes: 0,
                oversize: crate::policy::Oversize::Record,
                fsync: false,
                mass_delete: Default::default(),
            },
            env: EnvPolicy {
                keep: Vec::new(),
                drop: Vec::new(),
                allow: Vec::new(),
                set: Vec::new(),
            },
            git: Default::default(),
            rules: Vec::new(),
            vars: Vars {
                workspace: "/ws".into(),
                home: None,
                tmp: "/tmp".into(),
                state: "/state".into(),
            },
            home: Default::default(),
            report: Default::default(),
            guard_files: Vec::new(),
        }
    }

    /// [`prepare`] as on a kernel with Landlock ABI `kernel_abi`, capped at `max_abi`.
    fn prepare_at(
        policy: &Policy,
        kernel_abi: u8,
        max_abi: Option<u8>,
    ) -> Result<Prepared, ConfineError> {
        let mut kernel = Kernel::probe();
        kernel.landlock_abi = kernel_abi;
        let options = Options {
            max_landlock_abi: max_abi,
            ..Options::default()
        };
        prepare(policy, &Features::of_kernel(&kernel, &options))
    }

    fn prepare_here(policy: &Policy) -> Result<Prepared, ConfineError> {
        prepare(
            policy,
            &Features::of_kernel(&Kernel::probe(), &Options::default()),
        )
    }

    fn degraded(report: &LandlockReport) -> Vec<&str> {
        report.degraded.iter().map(|(f, _)| f.as_str()).collect()
    }

    fn reason<'a>(report: &'a LandlockReport, feature: &str) -> &'a str {
        report
            .degraded
            .iter()
            .find(|(f, _)| f == feature)
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{feature} not degraded: {report:?}"))
    }

    #[test]
    fn abi_1_degrades_refer_truncate_net_and_scopes() {
        let p = policy(vec!["/usr".into()], vec![std::env::temp_dir()], Vec::new());
        let report = prepare_at(&p, 9, Some(1)).unwrap().report;
        assert_eq!(report.abi, Some(1));
        for feature in [
            "landlock-fs-refer",
            "landlock-fs-truncate",
            "landlock-fs-ioctl-dev",
            "landlock-net-connect",
            "landlock-scope-signal",
            "landlock-scope-abstract-unix",
        ] {
            let why = reason(&report, feature);
            assert!(why.contains("capped at abi 1"), "{feature}: {why}");
        }
        assert!(
            !degraded(&report).contains(&"landlock-net-bind"),
            "bind not asked for"
        );
    }

    #[test]
    fn old_kernels_are_named_as_the_reason() {
        let p = policy(vec![], vec![], Vec::new());
        let report = prepare_at(&p, 3, None).unwrap().report;
        assert_eq!(report.abi, Some(3));
        assert!(reason(&report, "landlock-net-connect").contains("this kernel has abi 3"));
        assert!(!degraded(&report).contains(&"landlock-fs-truncate"));
    }

    #[test]
    fn full_abi_degrades_nothing_and_denies_all_connects_without_entries() {
        let p = policy(vec![], vec![], Vec::new());
        let report = prepare_at(&p, 9, None).unwrap().report;
        assert_eq!(report.abi, Some(GUARD_MAX_ABI));
        assert!(report.degraded.is_empty(), "{report:?}");
        assert!(report
            .enforced
            .iter()
            .any(|e| e.contains("every tcp connect is refused")));
    }

    #[test]
    fn connect_ports_are_enforced_only_when_every_entry_names_one() {
        let with_ports = vec![
            NetTarget::AnyHost { port: 443 },
            NetTarget::Cidr {
                addr: "127.0.0.1".parse().unwrap(),
                prefix: 8,
                port: Some(8080),
            },
            NetTarget::UnixPath("/run/foo.sock".into()),
        ];
        let report = prepare_at(&policy(vec![], vec![], with_ports.clone()), 6, None)
            .unwrap()
            .report;
        assert!(
            report.enforced.iter().any(|e| e.contains("[443, 8080]")),
            "{report:?}"
        );

        let mut any_port = with_ports;
        any_port.push(NetTarget::Host {
            name: "example.org".into(),
            port: None,
            addrs: Vec::new(),
        });
        let report = prepare_at(&policy(vec![], vec![], any_port), 6, None)
            .unwrap()
            .report;
        assert!(reason(&report, "landlock-net-connect").contains("any port"));
    }

    #[test]
    fn bind_is_handled_only_when_the_policy_lists_ports() {
        let mut p = policy(vec![], vec![], Vec::new());
        p.net.bind = Some(Vec::new());
        let report = prepare_at(&p, 4, None).unwrap().report;
        assert!(report.enforced.iter().any(|e| e.contains("every tcp bind")));
        let report = prepare_at(&p, 3, None).unwrap().report;
        assert!(reason(&report, "landlock-net-bind").contains("needs landlock abi 4"));
        // Addresses with a port add their port; one without a port leaves bind unhandled.
        p.net.bind = Some(vec![8080]);
        p.net.bind_addrs = vec![NetTarget::Cidr {
            addr: "0.0.0.0".parse().unwrap(),
            prefix: 32,
            port: Some(9000),
        }];
        let report = prepare_at(&p, 4, None).unwrap().report;
        assert!(
            report.enforced.iter().any(|e| e.contains("[8080, 9000]")),
            "{report:?}"
        );
        p.net.bind_addrs.push(NetTarget::Cidr {
            addr: "10.0.0.0".parse().unwrap(),
            prefix: 8,
            port: None,
        });
        let report = prepare_at(&p, 4, None).unwrap().report;
        assert!(!report.enforced.iter().any(|e| e.contains("tcp bind")));
    }

    #[test]
    fn missing_roots_are_skipped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("does-not-exist");
        let p = policy(
            vec![dir.path().to_path_buf(), missing.clone()],
            vec![missing.join("deeper")],
            Vec::new(),
        );
        let prepared = prepare_here(&p).unwrap();
        assert_eq!(
            prepared.report.skipped_paths,
            vec![missing.clone(), missing.join("deeper")]
        );
        assert_eq!(prepared.report.kernel_abi, Kernel::probe().landlock_abi);
    }

    #[test]
    fn unix_socket_globs_give_their_literal_directory() {
        let p = policy(
            vec![],
            vec![],
            vec![
                NetTarget::UnixPath("/run/docker.sock".into()),
                NetTarget::UnixPath("/run/user/*/bus".into()),
                NetTarget::UnixPath("/run/x.sock".into()),
            ],
        );
        assert_eq!(
            unix_socket_dirs(&p),
            vec![PathBuf::from("/run"), PathBuf::from("/run/user")]
        );
    }

    #[test]
    fn observe_mode_builds_nothing_and_says_so() {
        let mut p = policy(vec!["/usr".into()], vec![], Vec::new());
        p.mode = Mode::Observe;
        let prepared = prepare_here(&p).unwrap();
        assert!(prepared.ruleset.is_none());
        assert_eq!(prepared.report.abi, None);
        assert!(reason(&prepared.report, "landlock").contains("observe mode"));
    }

    #[test]
    fn no_landlock_is_reported_with_a_hint() {
        let p = policy(vec!["/usr".into()], vec![], Vec::new());
        let prepared = prepare_at(&p, 0, None).unwrap();
        assert!(prepared.ruleset.is_none());
        assert!(reason(&prepared.report, "landlock").contains("hint:"));
    }

    #[test]
    fn grants_follows_the_roots_prepare_opens() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let (read, write) = (base.join("r"), base.join("w"));
        std::fs::create_dir_all(&read).unwrap();
        std::fs::create_dir_all(&write).unwrap();
        std::os::unix::fs::symlink(&read, base.join("link-to-r")).unwrap();
        let p = policy(
            vec![base.join("link-to-r"), base.join("missing")],
            vec![write.clone()],
            Vec::new(),
        );
        let kernel = Kernel {
            landlock_abi: 6,
            ..Kernel::probe()
        };
        let features = Features::of_kernel(&kernel, &Options::default());
        let granted = |path: &Path, need| grants(&p, &features, path, need);
        // A root is the directory it resolves to.
        assert_eq!(
            granted(&read.join("f"), Need::Read),
            FsGrant::Granted {
                root: base.join("link-to-r"),
                list: RootList::Read
            }
        );
        assert_eq!(
            granted(&read.join("f"), Need::Execute),
            granted(&read.join("f"), Need::Read)
        );
        assert_eq!(granted(&read.join("f"), Need::Write), FsGrant::Refused);
        assert!(matches!(
            granted(&write.join("f"), Need::Read),
            FsGrant::Granted {
                list: RootList::Write,
                ..
            }
        ));
        assert_eq!(
            granted(&base.join("rr"), Need::Read),
            FsGrant::Refused,
            "component-wise"
        );
        let mut observe = p.clone();
        observe.mode = Mode::Observe;
        assert!(matches!(
            grants(&observe, &features, &base.join("x"), Need::Write),
            FsGrant::NotEnforced(_)
        ));
        let none = Features::of_kernel(
            &Kernel {
                landlock_abi: 0,
                ..Kernel::probe()
            },
            &Options::default(),
        );
        assert!(matches!(
            grants(&p, &none, &base.join("x"), Need::Read),
            FsGrant::NotEnforced(_)
        ));
    }

    /// Creates a real ruleset on this kernel (it is never applied to the test process).
    #[test]
    fn a_ruleset_is_created_when_the_kernel_has_landlock() {
        let abi = Kernel::probe().landlock_abi;
        eprintln!("landlock abi of this kernel: {abi}");
        let p = policy(vec!["/usr".into()], vec![std::env::temp_dir()], Vec::new());
        let prepared = prepare_here(&p).unwrap();
        assert_eq!(prepared.ruleset.is_some(), abi > 0);
        assert_eq!(
            prepared.report.abi,
            (abi > 0).then_some(abi.min(GUARD_MAX_ABI))
        );
    }
}
