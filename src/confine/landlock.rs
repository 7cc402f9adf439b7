//! The Landlock ruleset of a run, computed from the [`Policy`] in the parent before the fork.
//!
//! [`prepare`] probes the kernel's Landlock ABI, caps it (`max_abi`, so the degraded paths can be
//! exercised on a new kernel), opens the roots (`O_PATH`, missing ones are skipped and reported)
//! and returns a created ruleset that the child only has to `restrict_self()`, together with a
//! [`LandlockReport`] that says honestly what is enforced at that ABI and what is not, and why.
//! This module never confines the calling process.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    PathFdError, RestrictSelf, RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, Scope, ABI,
};

use super::ConfineError;
use crate::policy::{Mode, NetTarget, Policy};

/// The highest Landlock ABI whose rights guard has vetted; newer kernels are used at this ABI.
pub const GUARD_MAX_ABI: u8 = 9;

/// A ruleset ready for the child, and what it enforces.
#[derive(Debug)]
pub struct Prepared {
    /// `None` when nothing is to be enforced (observe mode, or no Landlock in this kernel).
    pub ruleset: Option<RulesetCreated>,
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

/// Probes the highest Landlock ABI of the running kernel that this crate knows (0: none).
///
/// Asks for one feature of each ABI with `CompatLevel::HardRequirement`, which fails without a
/// syscall when the kernel lacks it (the crate queries the version once per builder).
pub fn probe_abi() -> u8 {
    let fs = |a: BitFlags<AccessFs>| {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(a)
            .is_ok()
    };
    let restrict_self =
        |probe: fn(RestrictSelf) -> Result<RestrictSelf, landlock::RulesetError>| {
            probe(RestrictSelf::default().set_compatibility(CompatLevel::HardRequirement)).is_ok()
        };
    let probes: [(u8, bool); 9] = [
        (9, fs(AccessFs::ResolveUnix.into())),
        (8, restrict_self(|r| r.all_threads(true))),
        (7, restrict_self(|r| r.log_subdomains(false))),
        (
            6,
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .scope(Scope::Signal)
                .is_ok(),
        ),
        (5, fs(AccessFs::IoctlDev.into())),
        (
            4,
            Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::ConnectTcp)
                .is_ok(),
        ),
        (3, fs(AccessFs::Truncate.into())),
        (2, fs(AccessFs::Refer.into())),
        (1, fs(AccessFs::Execute.into())),
    ];
    probes
        .into_iter()
        .find_map(|(v, ok)| ok.then_some(v))
        .unwrap_or(0)
}

/// Computes and creates the ruleset for `policy` (see the module documentation).
pub fn prepare(policy: &Policy, max_abi: Option<u8>) -> Result<Prepared, ConfineError> {
    let kernel_abi = if policy.mode == Mode::Observe {
        0
    } else {
        probe_abi()
    };
    prepare_at(policy, kernel_abi, max_abi)
}

/// [`prepare`] with the kernel ABI given: the plan is computed for `min(kernel_abi, max_abi)`.
fn prepare_at(
    policy: &Policy,
    kernel_abi: u8,
    max_abi: Option<u8>,
) -> Result<Prepared, ConfineError> {
    let mut report = LandlockReport {
        kernel_abi,
        ..LandlockReport::default()
    };
    if policy.mode == Mode::Observe {
        report.degraded.push((
            "landlock".into(),
            "observe mode: no landlock ruleset, nothing is enforced by the kernel".into(),
        ));
        return Ok(Prepared {
            ruleset: None,
            report,
        });
    }
    let cap = max_abi.unwrap_or(GUARD_MAX_ABI).min(GUARD_MAX_ABI);
    let v = kernel_abi.min(cap);
    if v == 0 {
        let reason = if kernel_abi == 0 {
            "this kernel has no landlock (abi 0): the filesystem and network roots are not \
             enforced by the kernel\nhint: enable landlock (CONFIG_SECURITY_LANDLOCK, `lsm=` boot \
             parameter)"
        } else {
            "landlock disabled by max_abi = 0: the roots are not enforced by the kernel"
        };
        report.degraded.push(("landlock".into(), reason.into()));
        return Ok(Prepared {
            ruleset: None,
            report,
        });
    }
    report.abi = Some(v);
    let why = |need: u8| {
        if kernel_abi >= need {
            format!("needs landlock abi {need}; capped at abi {v} by max_abi")
        } else {
            format!("needs landlock abi {need}; this kernel has abi {kernel_abi}")
        }
    };
    let abi = ABI::from(i32::from(v));

    // Filesystem.
    let handled_fs = AccessFs::from_all(abi);
    let mut read_access = AccessFs::from_read(abi);
    if v >= 9 {
        // Pathname unix sockets stay reachable under the roots; the supervisor judges connect.
        read_access |= AccessFs::ResolveUnix;
    }
    let write_access = handled_fs;
    report.enforced.push(format!(
        "fs: read+execute only under {} read root(s), write only under {} write root(s)",
        policy.fs.read.len(),
        policy.fs.write.len()
    ));
    for (need, feature, effect) in [
        (
            2,
            "landlock-fs-refer",
            "renaming or linking across directories is refused everywhere",
        ),
        (
            3,
            "landlock-fs-truncate",
            "truncation is not restricted by landlock",
        ),
        (
            5,
            "landlock-fs-ioctl-dev",
            "device ioctls are not restricted by landlock",
        ),
        (
            9,
            "landlock-fs-resolve-unix",
            "connecting to pathname unix sockets is not restricted by landlock",
        ),
    ] {
        if v < need {
            report
                .degraded
                .push((feature.into(), format!("{}: {effect}", why(need))));
        } else {
            report.enforced.push(format!("{feature} (abi {need})"));
        }
    }

    // Network (TCP).
    let net = net_plan(policy);
    let mut handled_net = BitFlags::<AccessNet>::EMPTY;
    let mut ports: BTreeMap<u16, BitFlags<AccessNet>> = BTreeMap::new();
    match &net.connect {
        Some(allowed) if v >= 4 => {
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
            "landlock-net-connect".into(),
            format!("{}: tcp connect is judged by the supervisor only", why(4)),
        )),
        None => report.degraded.push((
            "landlock-net-connect".into(),
            "a net.connect entry allows any port: connect is judged by the supervisor only".into(),
        )),
    }
    match &policy.net.bind {
        None => {}
        Some(allowed) if v >= 4 => {
            handled_net |= AccessNet::BindTcp;
            for &p in allowed {
                *ports.entry(p).or_default() |= AccessNet::BindTcp;
            }
            report.enforced.push(if allowed.is_empty() {
                "landlock-net-bind (abi 4): every tcp bind is refused".into()
            } else {
                format!("landlock-net-bind (abi 4): tcp bind only to ports {allowed:?}")
            });
        }
        Some(_) => report.degraded.push((
            "landlock-net-bind".into(),
            format!("{}: tcp bind is not restricted", why(4)),
        )),
    }

    // Scopes.
    let scopes = if v >= 6 {
        report.enforced.push(
            "landlock-scope-signal (abi 6): no signals to processes outside the sandbox".into(),
        );
        report.enforced.push(
            "landlock-scope-abstract-unix (abi 6): no connects to abstract unix sockets outside \
             the sandbox"
                .into(),
        );
        Scope::from_all(ABI::V6)
    } else {
        for feature in ["landlock-scope-signal", "landlock-scope-abstract-unix"] {
            report.degraded.push((feature.into(), why(6)));
        }
        BitFlags::EMPTY
    };

    // Open the roots before creating anything, so a missing root costs nothing.
    let mut roots: Vec<(PathFd, &Path, BitFlags<AccessFs>)> = Vec::new();
    for (paths, access) in [
        (&policy.fs.read, read_access),
        (&policy.fs.write, write_access),
    ] {
        for path in paths {
            match open_root(path)? {
                Some(fd) => roots.push((fd, path, access)),
                None => report.skipped_paths.push(path.clone()),
            }
        }
    }

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
    let mut created = ruleset.create().map_err(ConfineError::Ruleset)?;
    for (fd, path, access) in roots {
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|source| ConfineError::AddRule {
                path: path.to_path_buf(),
                source,
            })?;
    }
    for (port, access) in ports {
        created = created
            .add_rule(NetPort::new(port, access))
            .map_err(ConfineError::Ruleset)?;
    }
    Ok(Prepared {
        ruleset: Some(created),
        report,
    })
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
