//! Resolution: a loaded chain of raw profiles -> one validated, compiled [`Policy`].
//!
//! Merge semantics, applied from the base of the chain to the most derived profile (and, for
//! several specs, from the leftmost to the rightmost):
//! - lists (`fs.read`, `fs.write`, `fs.list`, `fs.shared`, `fs.protect`, `net.connect`, `net.resolve`,
//!   `transaction.exclude`,
//!   `env.keep`, `env.drop`, `env.allow`) are appended to the parent's, exact duplicates removed;
//! - scalars (`mode`, `net.dns`, `net.bind` as a whole (its ports and its addresses), `transaction.on-deny`, `on-failure`,
//!   `max-preimage-size`, `name`) override the parent's when the child sets them;
//! - `env.set` merges key by key, the child winning;
//! - rules: the child's rules come before the parent's, and the first matching rule wins, so a
//!   child can always override a parent's rule; every rule has its own id (a different rule
//!   under an id already taken in the chain is an error; the very same rule twice is kept once);
//! - `replace = ["env.keep", "rule", ...]` makes the profile replace the named inherited lists
//!   instead of appending to them (the only way for a child to narrow a list).
//!
//! Variables are expanded per entry. When there is no home, every entry that uses `{home}` is
//! dropped silently (a rule whose `argv` uses it, or whose `path`/`addr` list loses all its
//! entries, is dropped whole rather than becoming unconditional). Unknown variables are errors.
//! Defaults when no profile says otherwise: enforce, no bind ports, no DNS, `on-deny = errno`,
//! `on-failure = keep`, 64 MiB pre-images, every environment variable kept.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use globset::GlobBuilder;

use super::argv::ArgvPattern;
use super::chain::{self, Spec, Unit};
use super::errno;
use super::error::PolicyError;
use super::git::{GitPolicy, KeySet};
use super::model::*;
use super::net::{self, NetMatcher};
use super::paths::{self, glob_anchor, normalize, normalize_glob, Expand, ExpandError};
use super::raw::{
    RawDenials, RawMode, RawOnDeny, RawOnFailure, RawOversize, RawPort, RawRule, RawSize,
};

const DEFAULT_MAX_PREIMAGE: u64 = 64 << 20;
const REPLACEABLE: &[&str] = &[
    "fs.read",
    "fs.write",
    "fs.list",
    "fs.shared",
    "fs.protect",
    "fs.hide",
    "net.connect",
    "net.resolve",
    "transaction.exclude",
    "env.keep",
    "env.drop",
    "env.allow",
    "env.set",
    "git.refuse-keys",
    "git.allow-keys",
    "home.locate",
    "home.redact",
    "rule",
];

/// Loads and resolves the profiles named by `specs` (built-in names or paths), layered left to
/// right. No spec at all means the default profile, `agent`.
///
/// # Errors
///
/// [`PolicyError`] naming the profile and the entry at fault: a profile that cannot be
/// found, read or parsed, an `extends` cycle, an invalid entry or rule.
pub fn load(specs: &[String], vars: &Vars) -> Result<Policy, PolicyError> {
    let specs: Vec<String> = if specs.is_empty() {
        vec!["agent".to_string()]
    } else {
        specs.to_vec()
    };
    let parsed: Vec<Spec> = specs.iter().map(|s| Spec::classify(s, None)).collect();
    let units = chain::load_all(&parsed)?;
    resolve(&specs, &units, vars)
}

/// Loads the profiles of a run that also found configuration files without a flag (`config`:
/// the user's `config.toml`, then the workspace's `.guard.toml`, as found; each taken as a
/// path). The layers, later ones winning where they set the same scalar:
/// 1. the default profile, `agent`, when no profile is named and no configuration file
///    `extends` one;
/// 2. the configuration files, in the order given;
/// 3. the named profiles (`-p`), in order.
///
/// So with `-p`, what the named profiles' chains set wins over the files (which still add to
/// the lists); without it, the files refine the default.
///
/// # Errors
///
/// As [`load`], for the files as for the named profiles.
pub fn load_layers(
    specs: &[String],
    config: &[PathBuf],
    vars: &Vars,
) -> Result<Policy, PolicyError> {
    let config_specs: Vec<String> = config.iter().map(|p| p.display().to_string()).collect();
    let config_parsed: Vec<Spec> = config.iter().map(|p| Spec::Path(p.clone())).collect();
    let mut all_specs = Vec::new();
    let mut parsed = Vec::new();
    if specs.is_empty() {
        let config_units = chain::load_all(&config_parsed)?;
        if !config_units.iter().any(Unit::extends) {
            all_specs.push("agent".to_string());
            parsed.push(Spec::Builtin("agent".to_string()));
        }
    }
    all_specs.extend(config_specs);
    parsed.extend(config_parsed);
    for s in specs {
        all_specs.push(s.clone());
        parsed.push(Spec::classify(s, None));
    }
    let mut units = chain::load_all(&parsed)?;
    let config: Vec<PathBuf> = config
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    for unit in &mut units {
        unit.config = unit.file().is_some_and(|f| config.contains(f));
    }
    resolve(&all_specs, &units, vars)
}

/// Loads one profile file (always taken as a path, whatever its name) for
/// `guard profile check FILE`.
///
/// # Errors
///
/// As [`load`].
pub fn check(path: &Path, vars: &Vars) -> Result<Policy, PolicyError> {
    let spec = path.display().to_string();
    let units = chain::load_all(&[Spec::Path(path.to_path_buf())])?;
    resolve(&[spec], &units, vars)
}

/// The policy under construction.
struct Acc {
    name: String,
    description: Option<String>,
    mode: Mode,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    list: Vec<PathBuf>,
    shared: Vec<PathBuf>,
    protect: Vec<String>,
    hide: Vec<String>,
    allow_setid: bool,
    connect: Vec<NetTarget>,
    bind: Option<Vec<u16>>,
    bind_addrs: Vec<NetTarget>,
    resolve: Vec<String>,
    dns: bool,
    on_deny: OnDeny,
    on_failure: OnFailure,
    exclude: Vec<String>,
    max_preimage_bytes: u64,
    oversize: Oversize,
    fsync: bool,
    mass_delete: MassDelete,
    keep: Option<Vec<String>>,
    drop: Vec<String>,
    allow: Vec<String>,
    set: Vec<(String, String)>,
    refuse_keys: Vec<String>,
    allow_keys: Vec<String>,
    refuse_hooks: bool,
    refuse_destructive_push: bool,
    home: HomePolicy,
    denials: Denials,
    rules: Vec<Rule>,
    /// Every rule id seen so far: the profile that defined it, and the rule as written.
    rule_ids: Vec<(String, String, RawRule)>,
}

fn resolve(specs: &[String], units: &[Unit], vars: &Vars) -> Result<Policy, PolicyError> {
    let mut acc = Acc {
        name: String::new(),
        description: None,
        mode: Mode::Enforce,
        read: Vec::new(),
        write: Vec::new(),
        list: Vec::new(),
        shared: Vec::new(),
        protect: Vec::new(),
        hide: Vec::new(),
        allow_setid: false,
        connect: Vec::new(),
        bind: Some(Vec::new()),
        bind_addrs: Vec::new(),
        resolve: Vec::new(),
        dns: false,
        on_deny: OnDeny::Errno,
        on_failure: OnFailure::Keep,
        exclude: Vec::new(),
        max_preimage_bytes: DEFAULT_MAX_PREIMAGE,
        oversize: Oversize::Record,
        fsync: false,
        mass_delete: MassDelete::default(),
        keep: None,
        drop: Vec::new(),
        allow: Vec::new(),
        set: Vec::new(),
        refuse_keys: Vec::new(),
        allow_keys: Vec::new(),
        refuse_hooks: true,
        refuse_destructive_push: true,
        home: HomePolicy::default(),
        denials: Denials::default(),
        rules: Vec::new(),
        rule_ids: Vec::new(),
    };
    for unit in units {
        apply(&mut acc, unit, vars)?;
    }

    let mut protect_anchors: Vec<PathBuf> = Vec::new();
    for pattern in &acc.protect {
        push_unique(&mut protect_anchors, glob_anchor(pattern));
    }
    let connect_matcher = NetMatcher::new(&acc.connect);
    Ok(Policy {
        name: acc.name,
        description: acc.description,
        sources: units.iter().rev().map(|u| u.display.clone()).collect(),
        digest: chain::digest(specs, units),
        mode: acc.mode,
        fs: FsPolicy {
            read: acc.read,
            write: acc.write,
            list: acc.list,
            shared: acc.shared,
            protect: acc.protect,
            protect_set: OnceLock::new(),
            protect_anchors,
            hide: acc.hide,
            allow_setid: acc.allow_setid,
        },
        net: NetPolicy {
            connect: acc.connect,
            bind: acc.bind,
            bind_addrs: acc.bind_addrs,
            resolve: acc.resolve,
            dns: acc.dns,
            connect_matcher,
        },
        transaction: TransactionPolicy {
            on_deny: acc.on_deny,
            on_failure: acc.on_failure,
            exclude: acc.exclude,
            max_preimage_bytes: acc.max_preimage_bytes,
            oversize: acc.oversize,
            fsync: acc.fsync,
            mass_delete: acc.mass_delete,
        },
        env: EnvPolicy {
            keep: acc.keep.unwrap_or_else(|| vec!["*".to_string()]),
            drop: acc.drop,
            allow: acc.allow,
            set: acc.set,
        },
        git: GitPolicy {
            refuse_set: KeySet::new(&acc.refuse_keys),
            allow_set: KeySet::new(&acc.allow_keys),
            refuse_keys: acc.refuse_keys,
            allow_keys: acc.allow_keys,
            refuse_hooks: acc.refuse_hooks,
            refuse_destructive_push: acc.refuse_destructive_push,
        },
        rules: acc.rules,
        vars: vars.clone(),
        home: acc.home,
        report: ReportPolicy {
            denials: acc.denials,
        },
        guard_files: units.iter().filter_map(|u| u.file().cloned()).collect(),
    })
}

/// Layers one profile on top of `acc`.
fn apply(acc: &mut Acc, unit: &Unit, vars: &Vars) -> Result<(), PolicyError> {
    let raw = &unit.raw;
    let cx = Cx {
        profile: &unit.display,
        vars,
    };
    for name in &raw.replace {
        match name.as_str() {
            "fs.read" => acc.read.clear(),
            "fs.write" => acc.write.clear(),
            "fs.list" => acc.list.clear(),
            "fs.shared" => acc.shared.clear(),
            "fs.protect" => acc.protect.clear(),
            "fs.hide" => acc.hide.clear(),
            "git.refuse-keys" => acc.refuse_keys.clear(),
            "git.allow-keys" => acc.allow_keys.clear(),
            "net.connect" => acc.connect.clear(),
            "transaction.exclude" => acc.exclude.clear(),
            "env.keep" => acc.keep = Some(Vec::new()),
            "env.drop" => acc.drop.clear(),
            "env.allow" => acc.allow.clear(),
            "env.set" => acc.set.clear(),
            "home.locate" => acc.home.locate.clear(),
            "home.redact" => acc.home.redact.clear(),
            "rule" => {
                acc.rules.clear();
                acc.rule_ids.clear();
            }
            other => {
                return Err(cx.bad_value(
                    "replace",
                    other,
                    format!(
                        "not a replaceable list\nhint: one of {}",
                        REPLACEABLE.join(", ")
                    ),
                ))
            }
        }
    }

    acc.name = match (&raw.name, unit.config) {
        (Some(name), _) => name.clone(),
        (None, true) if !acc.name.is_empty() => acc.name.clone(),
        (None, _) => unit.default_name.clone(),
    };
    if let Some(d) = &raw.description {
        acc.description = Some(d.clone());
    }
    if let Some(mode) = raw.mode {
        acc.mode = match mode {
            RawMode::Enforce => Mode::Enforce,
            RawMode::Observe => Mode::Observe,
        };
    }

    for entry in &raw.fs.read {
        if let Some(p) = cx.abs_path("fs.read", entry)? {
            push_unique_path(&mut acc.read, p);
        }
    }
    for entry in &raw.fs.write {
        if let Some(p) = cx.abs_path("fs.write", entry)? {
            push_unique_path(&mut acc.write, p);
        }
    }
    for entry in &raw.fs.list {
        if let Some(p) = cx.abs_path("fs.list", entry)? {
            push_unique_path(&mut acc.list, p);
        }
    }
    for entry in &raw.fs.shared {
        if let Some(p) = cx.abs_path("fs.shared", entry)? {
            push_unique_path(&mut acc.shared, p);
        }
    }
    for entry in &raw.fs.protect {
        if let Some(g) = cx.abs_glob("fs.protect", entry)? {
            push_unique(&mut acc.protect, g);
        }
    }

    for entry in &raw.fs.hide {
        if let Some(g) = cx.abs_glob("fs.hide", entry)? {
            push_unique(&mut acc.hide, g);
        }
    }
    if let Some(a) = raw.fs.allow_setid {
        acc.allow_setid = a;
    }

    for entry in &raw.net.connect {
        if let Some(targets) = cx.net_target("net.connect", entry)? {
            for t in targets {
                push_unique(&mut acc.connect, t);
            }
        }
    }
    if let Some(bind) = &raw.net.bind {
        (acc.bind, acc.bind_addrs) = cx.bind(bind)?;
    }
    for entry in &raw.net.resolve {
        let name = net::parse_name(entry).map_err(|why| cx.bad_value("net.resolve", entry, why))?;
        push_unique(&mut acc.resolve, name);
    }
    if let Some(dns) = raw.net.dns {
        acc.dns = dns;
    }

    let tx = &raw.transaction;
    if let Some(d) = tx.on_deny {
        acc.on_deny = match d {
            RawOnDeny::Errno => OnDeny::Errno,
            RawOnDeny::Rollback => OnDeny::Rollback,
            RawOnDeny::Kill => OnDeny::Kill,
        };
    }
    if let Some(f) = tx.on_failure {
        acc.on_failure = match f {
            RawOnFailure::Keep => OnFailure::Keep,
            RawOnFailure::Rollback => OnFailure::Rollback,
        };
    }
    for entry in &tx.exclude {
        if entry.starts_with('/') {
            return Err(cx.bad_value(
                "transaction.exclude",
                entry,
                "must be relative to the workspace\nhint: write `target/**`, not `/ws/target/**`"
                    .into(),
            ));
        }
        cx.glob("transaction.exclude", entry, true)?;
        push_unique(&mut acc.exclude, entry.clone());
    }
    if let Some(size) = &tx.max_preimage_size {
        acc.max_preimage_bytes = cx.size(size)?;
    }
    if let Some(o) = tx.oversize {
        acc.oversize = match o {
            RawOversize::Record => Oversize::Record,
            RawOversize::Deny => Oversize::Deny,
        };
    }
    if let Some(f) = tx.fsync {
        acc.fsync = f;
    }
    if let Some(m) = &tx.mass_delete {
        if let Some(a) = m.action {
            acc.mass_delete.action = a;
        }
        if let Some(n) = m.min_entries {
            acc.mass_delete.min_entries = n;
        }
        if let Some(share) = m.share {
            if !(0.0..=1.0).contains(&share) {
                return Err(cx.bad_value(
                    "transaction.mass-delete.share",
                    &share.to_string(),
                    "not a share of the workspace\nhint: a number from 0 to 1, e.g. 0.5".into(),
                ));
            }
            acc.mass_delete.share = share;
        }
    }

    let git = &raw.git;
    for entry in &git.refuse_keys {
        cx.git_key("git.refuse-keys", entry)?;
        push_unique(&mut acc.refuse_keys, entry.clone());
    }
    for entry in &git.allow_keys {
        cx.git_key("git.allow-keys", entry)?;
        push_unique(&mut acc.allow_keys, entry.clone());
    }
    if let Some(b) = git.refuse_hooks {
        acc.refuse_hooks = b;
    }
    if let Some(b) = git.refuse_destructive_push {
        acc.refuse_destructive_push = b;
    }

    let env = &raw.env;
    for entry in &env.keep {
        cx.glob("env.keep", entry, false)?;
        push_unique(acc.keep.get_or_insert_with(Vec::new), entry.clone());
    }
    for entry in &env.drop {
        cx.glob("env.drop", entry, false)?;
        push_unique(&mut acc.drop, entry.clone());
    }
    for name in &env.allow {
        if name.is_empty() || name.contains(['=', '\0', '*', '?', '[', '{']) {
            return Err(cx.bad_value(
                "env.allow",
                name,
                "not a variable name (allow takes exact names, not patterns)".into(),
            ));
        }
        push_unique(&mut acc.allow, name.clone());
    }
    for (key, value) in &env.set {
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            return Err(cx.bad_value("env.set", key, "not a valid variable".into()));
        }
        let Some(value) = cx.expand("env.set", value, Expand::Plain)? else {
            continue;
        };
        acc.set.retain(|(k, _)| k != key);
        acc.set.push((key.clone(), value));
    }

    let home = &raw.home;
    if let Some(private) = home.private {
        acc.home.private = private;
    }
    for (field, from, to) in [
        ("home.locate", &home.locate, &mut acc.home.locate),
        ("home.redact", &home.redact, &mut acc.home.redact),
    ] {
        for (var, entry) in from {
            if var.is_empty() || var.contains(['=', '\0']) {
                return Err(cx.bad_value(field, var, "not a valid variable name".into()));
            }
            let Some(path) = cx.abs_path(field, entry)? else {
                continue;
            };
            to.retain(|(v, _)| v != var);
            to.push((var.clone(), path));
        }
    }
    if let Some(d) = raw.report.denials {
        acc.denials = match d {
            RawDenials::Stderr => Denials::Stderr,
            RawDenials::None => Denials::None,
        };
    }

    let mut rules = Vec::with_capacity(raw.rule.len() + acc.rules.len());
    for rule in &raw.rule {
        // An id names one rule. The same rule arriving twice (two built-ins that share it,
        // layered with -p) is kept once; a different rule under a taken id is refused, since
        // the first to match would silently take the other's place.
        match acc.rule_ids.iter().find(|(id, _, _)| *id == rule.id) {
            Some((_, _, seen)) if seen == rule => continue,
            Some((_, first, _)) => {
                return Err(PolicyError::DuplicateRule {
                    profile: unit.display.clone(),
                    id: rule.id.clone(),
                    first: first.clone(),
                })
            }
            None => acc
                .rule_ids
                .push((rule.id.clone(), unit.display.clone(), rule.clone())),
        }
        if let Some(r) = cx.rule(rule)? {
            rules.push(r);
        }
    }
    rules.append(&mut acc.rules);
    acc.rules = rules;
    Ok(())
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// [`push_unique`] for normalized paths, compared byte for byte (a `Path` compares component
/// by component, several times slower, and the layering compares every root with every
/// other at each start).
fn push_unique_path(list: &mut Vec<PathBuf>, item: PathBuf) {
    if !list.iter().any(|p| p.as_os_str() == item.as_os_str()) {
        list.push(item);
    }
}

/// Whether `pattern` has no glob syntax but `*`: it then compiles whatever it holds, and
/// checking it by building the glob (a parse and a regex translation each) is skipped.
fn plain(pattern: &str) -> bool {
    !super::globs::other_syntax(pattern.as_bytes())
}

/// The context of one profile's entries, for expansion and error messages.
struct Cx<'a> {
    profile: &'a str,
    vars: &'a Vars,
}

impl Cx<'_> {
    fn bad_value(&self, field: &str, entry: &str, why: String) -> PolicyError {
        PolicyError::BadValue {
            profile: self.profile.to_string(),
            field: field.to_string(),
            entry: entry.to_string(),
            why,
        }
    }

    fn expand(
        &self,
        field: &str,
        entry: &str,
        kind: Expand,
    ) -> Result<Option<String>, PolicyError> {
        paths::expand(entry, self.vars, kind).map_err(|e| match e {
            ExpandError::Unknown(var) => PolicyError::UnknownVariable {
                profile: self.profile.to_string(),
                field: field.to_string(),
                entry: entry.to_string(),
                var,
            },
            ExpandError::NotUtf8(var) => PolicyError::VariableNotUtf8 {
                profile: self.profile.to_string(),
                field: field.to_string(),
                var: var.to_string(),
            },
        })
    }

    fn not_absolute(&self, field: &str, entry: &str) -> PolicyError {
        PolicyError::NotAbsolute {
            profile: self.profile.to_string(),
            field: field.to_string(),
            entry: entry.to_string(),
        }
    }

    fn abs_path(&self, field: &str, entry: &str) -> Result<Option<PathBuf>, PolicyError> {
        let Some(text) = self.expand(field, entry, Expand::Plain)? else {
            return Ok(None);
        };
        if !text.starts_with('/') {
            return Err(self.not_absolute(field, entry));
        }
        Ok(Some(normalize(Path::new(&text))))
    }

    fn glob(&self, field: &str, pattern: &str, literal_separator: bool) -> Result<(), PolicyError> {
        if plain(pattern) {
            return Ok(());
        }
        GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .build()
            .map(drop)
            .map_err(|source| PolicyError::BadGlob {
                profile: self.profile.to_string(),
                field: field.to_string(),
                entry: pattern.to_string(),
                source,
            })
    }

    fn git_key(&self, field: &str, pattern: &str) -> Result<(), PolicyError> {
        if !pattern.contains('.') {
            return Err(self.bad_value(
                field,
                pattern,
                "not a git config key\nhint: keys are `section.name` or `section.subsection.name`, e.g. `core.hooksPath` or `alias.*`".into(),
            ));
        }
        if plain(pattern) {
            return Ok(());
        }
        GlobBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map(drop)
            .map_err(|source| PolicyError::BadGlob {
                profile: self.profile.to_string(),
                field: field.to_string(),
                entry: pattern.to_string(),
                source,
            })
    }

    fn abs_glob(&self, field: &str, entry: &str) -> Result<Option<String>, PolicyError> {
        let Some(text) = self.expand(field, entry, Expand::Glob)? else {
            return Ok(None);
        };
        if !text.starts_with('/') {
            return Err(self.not_absolute(field, entry));
        }
        let text = normalize_glob(&text);
        self.glob(field, &text, true)?;
        Ok(Some(text))
    }

    fn net_target(&self, field: &str, entry: &str) -> Result<Option<Vec<NetTarget>>, PolicyError> {
        let Some(text) = self.expand(field, entry, Expand::Glob)? else {
            return Ok(None);
        };
        let text = if text.starts_with('/') {
            normalize_glob(&text)
        } else {
            text
        };
        net::parse_target(&text)
            .map(Some)
            .map_err(|why| self.bad_value(field, entry, why))
    }

    /// `net.bind`: ports (on loopback; `"*"` for any port there) and addresses in `net.connect`
    /// syntax (`0.0.0.0:8080`, `10.0.0.0/8`, `[::]:8080`).
    fn bind(&self, entries: &[RawPort]) -> Result<(Option<Vec<u16>>, Vec<NetTarget>), PolicyError> {
        let mut ports = Some(Vec::new());
        let mut addrs = Vec::new();
        let hint = "not a port (1-65535) or an address\nhint: use port numbers (bound on \
                    loopback), \"*\" for any port on loopback, or addresses such as \
                    \"0.0.0.0:8080\"";
        for entry in entries {
            let (text, number) = match entry {
                RawPort::Number(n) => (n.to_string(), Some(*n)),
                RawPort::Text(t) if t == "*" => {
                    ports = None;
                    continue;
                }
                RawPort::Text(t) => (t.clone(), t.parse::<i64>().ok()),
            };
            if number.is_none() && !text.is_empty() {
                let Some(targets) = self.net_target("net.bind", &text)? else {
                    continue;
                };
                for t in targets {
                    if !matches!(t, NetTarget::Cidr { .. } | NetTarget::AnyHost { .. }) {
                        return Err(self.bad_value("net.bind", &text, hint.into()));
                    }
                    push_unique(&mut addrs, t);
                }
                continue;
            }
            match number
                .and_then(|n| u16::try_from(n).ok())
                .filter(|&p| p != 0)
            {
                Some(p) => {
                    if let Some(ports) = &mut ports {
                        push_unique(ports, p);
                    }
                }
                None => return Err(self.bad_value("net.bind", &text, hint.into())),
            }
        }
        Ok((ports, addrs))
    }

    fn size(&self, size: &RawSize) -> Result<u64, PolicyError> {
        let bad = |text: &str| {
            self.bad_value(
                "transaction.max-preimage-size",
                text,
                "not a size\nhint: bytes as an integer, or a number with B, KiB, MiB, GiB, KB, MB or GB"
                    .into(),
            )
        };
        match size {
            RawSize::Bytes(n) => u64::try_from(*n).map_err(|_| bad(&n.to_string())),
            RawSize::Text(text) => parse_size(text).ok_or_else(|| bad(text)),
        }
    }

    /// Validates and compiles one rule; `None` when it uses `{home}` and there is none.
    fn rule(&self, raw: &RawRule) -> Result<Option<Rule>, PolicyError> {
        let bad = |why: &str| PolicyError::BadRule {
            profile: self.profile.to_string(),
            id: raw.id.clone(),
            why: why.to_string(),
        };
        if raw.id.trim().is_empty() {
            return Err(bad("the id is empty"));
        }
        if RuleId::reserved(&raw.id) {
            return Err(bad(&format!(
                "the id is reserved for guard's own rules (the built-in ids, and ids beginning \
                 with {})\nhint: choose an id of your own, e.g. `my-{}`",
                RuleId::RESERVED_PREFIXES
                    .map(|p| format!("`{p}`"))
                    .join(", "),
                raw.id.replace('.', "-"),
            )));
        }
        let mut when: Vec<Op> = Vec::new();
        for op in raw.when.clone().into_vec() {
            push_unique(&mut when, op);
        }
        if when.is_empty() {
            return Err(bad("`when` names no operation"));
        }

        let field = format!("rule `{}` path", raw.id);
        let raw_paths = raw.path.clone().map(|p| p.into_vec()).unwrap_or_default();
        let mut path = Vec::new();
        for entry in &raw_paths {
            if let Some(g) = self.abs_glob(&field, entry)? {
                push_unique(&mut path, g);
            }
        }
        if path.is_empty() && !raw_paths.is_empty() {
            return Ok(None);
        }

        let field = format!("rule `{}` argv", raw.id);
        let mut argv = Vec::with_capacity(raw.argv.len());
        for entry in &raw.argv {
            let Some(text) = self.expand(&field, entry, Expand::Glob)? else {
                return Ok(None);
            };
            argv.push(if text.starts_with('/') {
                normalize_glob(&text)
            } else {
                text
            });
        }
        if !argv.is_empty() && !when.contains(&Op::Exec) {
            return Err(bad(
                "`argv` applies only to exec\nhint: add \"exec\" to `when`",
            ));
        }
        ArgvPattern::check(&argv).map_err(|(entry, source)| PolicyError::BadGlob {
            profile: self.profile.to_string(),
            field: field.clone(),
            entry,
            source,
        })?;

        let field = format!("rule `{}` addr", raw.id);
        let mut addr = Vec::new();
        for entry in &raw.addr {
            if let Some(targets) = self.net_target(&field, entry)? {
                addr.extend(targets);
            }
        }
        if addr.is_empty() && !raw.addr.is_empty() {
            return Ok(None);
        }
        if !addr.is_empty() && !when.iter().any(|op| op.is_net()) {
            return Err(bad(
                "`addr` applies only to connect, bind and dns\nhint: add \"connect\" to `when`",
            ));
        }

        let errno = match (&raw.errno, raw.action) {
            (None, _) => libc::EPERM,
            (Some(_), Action::Allow | Action::Risky) => {
                return Err(bad("`errno` applies only to deny and kill"))
            }
            (Some(name), _) => errno::by_name(name).ok_or_else(|| {
                bad(&format!(
                    "unknown errno `{name}`\nhint: one of {}",
                    errno::names()
                ))
            })?,
        };

        let addr_matcher = NetMatcher::new(&addr);
        Ok(Some(Rule {
            id: raw.id.as_str().into(),
            when,
            path_anchors: path.iter().map(|g| glob_anchor(g)).collect(),
            path,
            path_set: OnceLock::new(),
            argv,
            argv_pattern: OnceLock::new(),
            addr,
            addr_matcher,
            action: raw.action,
            errno,
            reason: raw.reason.clone(),
        }))
    }
}

/// `"64MiB"`, `"1 GB"`, `"512"`, `"4KiB"` -> bytes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::decide;
    use std::ffi::OsString;

    /// `plain` lets patterns whose only syntax is `*` through unchecked: the glob parser
    /// must accept every shape of them, as a path glob and as a git key glob.
    #[test]
    fn star_only_patterns_always_compile() {
        for p in [
            "***", "a***b", "/x/**a", "/x/a**", "**/**", "/**/", "*.*", "alias.*", "**",
        ] {
            assert!(plain(p));
            for separator in [true, false] {
                assert!(
                    GlobBuilder::new(p)
                        .literal_separator(separator)
                        .case_insensitive(!separator)
                        .build()
                        .is_ok(),
                    "{p}"
                );
            }
        }
        assert!(!plain("/x/{a,b}") && !plain("/x/[ab]") && !plain("a?") && !plain("a\\*"));
    }

    fn vars() -> Vars {
        Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/t".into(),
            state: "/s".into(),
        }
    }

    /// Writes profile files into a temporary directory.
    fn files(list: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in list {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn spec(dir: &tempfile::TempDir, name: &str) -> String {
        dir.path().join(name).display().to_string()
    }

    #[test]
    fn merge_order_lists_scalars_rules() {
        let dir = files(&[
            (
                "parent.toml",
                r#"
name = "parent"
[fs]
read = ["/usr"]
write = ["{workspace}"]
[net]
dns = true
bind = [8080]
[env]
set = { A = "parent", B = "parent" }
[[rule]]
id = "parent-rule"
when = "exec"
argv = ["ls", "**"]
action = "deny"
"#,
            ),
            (
                "child.toml",
                r#"
extends = "parent.toml"
mode = "observe"
[fs]
read = ["/opt", "/usr"]
[net]
dns = false
[env]
set = { B = "child" }
[[rule]]
id = "child-rule"
when = "exec"
argv = ["ls", "**"]
action = "allow"
"#,
            ),
        ]);
        let p = load(&[spec(&dir, "child.toml")], &vars()).unwrap();
        assert_eq!(
            p.name, "child",
            "name defaults to the file stem of the most derived"
        );
        assert_eq!(p.read_paths(), ["/usr", "/opt"]);
        assert_eq!(p.mode, Mode::Observe);
        assert!(!p.net.dns);
        assert_eq!(
            p.net.bind,
            Some(vec![8080]),
            "bind is inherited when the child is silent"
        );
        assert_eq!(
            p.env.set,
            [
                ("A".to_string(), "parent".to_string()),
                ("B".to_string(), "child".to_string())
            ]
        );
        let ids: Vec<_> = p.rules.iter().map(|r| &*r.id).collect();
        assert_eq!(ids, ["child-rule", "parent-rule"]);
        assert_eq!(p.sources.len(), 2);
        assert!(p.sources[0].ends_with("child.toml"));
    }

    impl Policy {
        fn read_paths(&self) -> Vec<String> {
            self.fs
                .read
                .iter()
                .map(|p| p.display().to_string())
                .collect()
        }
    }

    #[test]
    fn specs_layer_left_to_right() {
        let dir = files(&[(
            "extra.toml",
            "[fs]\nwrite = [\"/data\"]\n[[rule]]\nid = \"x\"\nwhen = \"delete\"\naction = \"risky\"\n",
        )]);
        let p = load(&["agent".into(), spec(&dir, "extra.toml")], &vars()).unwrap();
        assert_eq!(&*p.rules[0].id, "x", "later specs act as children");
        assert!(p.fs.write.contains(&PathBuf::from("/data")));
        assert!(p.fs.write.contains(&PathBuf::from("/ws")));
        assert_eq!(
            p.sources.first().map(String::as_str),
            Some(spec(&dir, "extra.toml").as_str())
        );
        assert_eq!(&p.sources[1..], ["agent", "base"]);
    }

    #[test]
    fn unknown_key_error_names_key_line_and_file() {
        let dir = files(&[(
            "bad.toml",
            "extends = \"agent\"\n\n[fs]\nwirte = [\"/x\"]\n",
        )]);
        let err = load(&[spec(&dir, "bad.toml")], &vars()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, PolicyError::Parse { .. }));
        assert!(msg.contains("wirte"), "{msg}");
        assert!(msg.contains("line 4"), "{msg}");
        assert!(msg.contains("bad.toml"), "{msg}");
    }

    #[test]
    fn variable_errors_and_missing_home() {
        let dir = files(&[("v.toml", "[fs]\nread = [\"{foo}/x\"]\n")]);
        let msg = check(&dir.path().join("v.toml"), &vars())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("unknown variable `{foo}`"), "{msg}");
        assert!(msg.contains("hint:"), "{msg}");

        let dir = files(&[("rel.toml", "[fs]\nwrite = [\"build\"]\n")]);
        let msg = check(&dir.path().join("rel.toml"), &vars())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not an absolute path"), "{msg}");

        let no_home = Vars {
            home: None,
            ..vars()
        };
        let p = load(&["agent".into()], &no_home).unwrap();
        assert!(p.fs.read.iter().all(|r| !r.starts_with("/home")));
        assert!(p.rules.iter().all(|r| !r.id.starts_with("no-rm-home")));
        assert!(p.rules.iter().any(|r| &*r.id == "no-rm-workspace"));
    }

    #[test]
    fn a_rule_id_names_one_rule() {
        let dir = files(&[
            (
                "shadow.toml",
                "extends = \"ci\"\n[[rule]]\nid = \"no-rm-workspace\"\nwhen = \"exec\"\nargv = [\"rm\", \"**\"]\naction = \"allow\"\n",
            ),
            (
                "twice.toml",
                "[[rule]]\nid = \"a\"\nwhen = \"exec\"\naction = \"deny\"\n[[rule]]\nid = \"a\"\nwhen = \"delete\"\naction = \"deny\"\n",
            ),
            (
                "replaced.toml",
                "extends = \"ci\"\nreplace = [\"rule\"]\n[[rule]]\nid = \"no-rm-workspace\"\nwhen = \"exec\"\naction = \"deny\"\n",
            ),
        ]);
        let err = load(&[spec(&dir, "shadow.toml")], &vars()).unwrap_err();
        assert!(
            matches!(err, PolicyError::DuplicateRule { ref id, ref first, .. } if id == "no-rm-workspace" && first == "ci"),
            "{err}"
        );
        assert!(err.to_string().contains("hint:"), "{err}");
        let err = load(&[spec(&dir, "twice.toml")], &vars()).unwrap_err();
        assert!(matches!(err, PolicyError::DuplicateRule { .. }), "{err}");
        let p = load(&[spec(&dir, "replaced.toml")], &vars())
            .expect("replace drops the inherited rules");
        assert_eq!(p.rules.len(), 1);
        // agent and ci share their rm rules word for word: layered, each is kept once.
        let p = load(&["agent".into(), "ci".into()], &vars()).expect("agent + ci");
        let ids: Vec<&str> = p.rules.iter().map(|r| &*r.id).collect();
        assert_eq!(
            ids.iter().filter(|i| **i == "no-rm-workspace").count(),
            1,
            "{ids:?}"
        );
    }

    #[test]
    fn rule_validation() {
        let cases = [
            (
                "when = \"delete\"\nargv = [\"x\"]\naction = \"deny\"",
                "only to exec",
            ),
            (
                "when = \"exec\"\naddr = [\"1.2.3.4\"]\naction = \"deny\"",
                "only to connect",
            ),
            (
                "when = \"exec\"\naction = \"deny\"\nerrno = \"EWHAT\"",
                "unknown errno",
            ),
            (
                "when = \"exec\"\naction = \"allow\"\nerrno = \"EPERM\"",
                "only to deny",
            ),
            ("when = []\naction = \"deny\"", "no operation"),
            (
                "when = \"connect\"\naddr = [\"300.0.0.1\"]\naction = \"deny\"",
                "300.0.0.1",
            ),
            // The matchers compile after the fork, but a glob that cannot is refused here.
            (
                "when = \"exec\"\nargv = [\"git\", \"push\", \"--force[\"]\naction = \"deny\"",
                "--force[",
            ),
            (
                "when = \"delete\"\npath = [\"/srv/[z-a]\"]\naction = \"deny\"",
                "/srv/[z-a]",
            ),
        ];
        for (body, want) in cases {
            let dir = files(&[("r.toml", &format!("[[rule]]\nid = \"r\"\n{body}\n"))]);
            let msg = check(&dir.path().join("r.toml"), &vars())
                .unwrap_err()
                .to_string();
            assert!(msg.contains(want), "{body}: {msg}");
        }
    }

    #[test]
    fn guards_own_rule_ids_are_refused() {
        for id in [
            "fs.write-roots",
            "fs.protect",
            "fs.anything",
            "net.connect",
            "net.x",
            "guard.mine",
            "default",
            "observe",
            "resolve",
            "decode",
            "fd-reopen",
        ] {
            let body = format!("[[rule]]\nid = \"{id}\"\nwhen = \"delete\"\naction = \"allow\"\n");
            let dir = files(&[("r.toml", &body)]);
            let msg = check(&dir.path().join("r.toml"), &vars())
                .unwrap_err()
                .to_string();
            assert!(msg.contains(&format!("rule `{id}`")), "{msg}");
            assert!(msg.contains("reserved") && msg.contains("hint:"), "{msg}");
        }
        // Look-alikes that are not reserved stay usable.
        for id in ["fsx", "defaults", "my-fs.write-roots", "network"] {
            let body = format!("[[rule]]\nid = \"{id}\"\nwhen = \"delete\"\naction = \"allow\"\n");
            let dir = files(&[("r.toml", &body)]);
            let p = check(&dir.path().join("r.toml"), &vars()).unwrap();
            assert_eq!(&*p.rules[0].id, id);
        }
    }

    #[test]
    fn a_profile_rule_decides_as_a_profile_rule() {
        // The verdict names its origin by type: a profile rule is never taken for a built-in
        // one, whatever its id.
        let dir = files(&[(
            "p.toml",
            "[fs]\nwrite = [\"/data\"]\n[[rule]]\nid = \"writes\"\nwhen = \"write\"\naction = \"deny\"\n",
        )]);
        let p = check(&dir.path().join("p.toml"), &vars()).unwrap();
        let path = PathBuf::from("/data/x");
        let v = decide(
            &p,
            &Request {
                path: Some(&path),
                ..Request::new(Op::Write)
            },
        );
        assert_eq!(v.rule, RuleId::Profile("writes".into()));
    }

    #[test]
    fn a_rule_path_is_matched_only_within_its_globs_anchors() {
        // The anchors filter in front of the glob set: what a glob matches is still matched
        // (a glob in the first component anchors at `/`), and a sibling that merely shares
        // the anchor's bytes (`/data/keys2`) is not within it.
        let dir = files(&[(
            "p.toml",
            r#"
[fs]
write = ["/"]
[[rule]]
id = "keys"
when = "delete"
path = ["/data/keys/**", "/*/secret.txt", "/srv/exact"]
action = "deny"
"#,
        )]);
        let p = check(&dir.path().join("p.toml"), &vars()).unwrap();
        assert_eq!(
            p.rules[0].path_anchors,
            ["/data/keys", "/", "/srv/exact"].map(PathBuf::from)
        );
        let rule_of = |path: &str| {
            let path = PathBuf::from(path);
            decide(
                &p,
                &Request {
                    path: Some(&path),
                    ..Request::new(Op::Delete)
                },
            )
            .rule
        };
        let cases = [
            ("/data/keys/a", true),
            ("/data/keys/a/b", true),
            ("/home/secret.txt", true),
            ("/srv/exact", true),
            ("/data/keys2/a", false),
            ("/data/key", false),
            ("/home/u/secret.txt", false),
            ("/srv/exact2", false),
        ];
        for (path, hit) in cases {
            assert_eq!(
                rule_of(path) == RuleId::Profile("keys".into()),
                hit,
                "{path}"
            );
        }
    }

    #[test]
    fn rule_path_and_addr_conditions() {
        let dir = files(&[(
            "r.toml",
            r#"
extends = "agent"
[[rule]]
id = "no-secrets"
when = ["write", "delete"]
path = "{workspace}/secrets/**"
action = "deny"
errno = "EROFS"
[[rule]]
id = "no-lan"
when = "connect"
addr = ["10.0.0.0/8"]
action = "kill"
"#,
        )]);
        let p = check(&dir.path().join("r.toml"), &vars()).unwrap();
        let s = PathBuf::from("/ws/secrets/a/b");
        let v = decide(
            &p,
            &Request {
                path: Some(&s),
                ..Request::new(Op::Write)
            },
        );
        assert_eq!(
            (v.action, v.errno, v.rule.as_str()),
            (Action::Deny, libc::EROFS, "no-secrets")
        );
        let v = decide(
            &p,
            &Request {
                path: Some(&s),
                ..Request::new(Op::Create)
            },
        );
        assert_eq!(
            v.rule,
            RuleId::Builtin(Builtin::WriteRoots),
            "create is not in `when`"
        );
        let lan = NetAddr::Inet("10.1.2.3:22".parse().unwrap());
        let v = decide(
            &p,
            &Request {
                addr: Some(&lan),
                ..Request::new(Op::Connect)
            },
        );
        assert_eq!((v.action, v.rule.as_str()), (Action::Kill, "no-lan"));
        let argv = [OsString::from("ls")];
        let v = decide(
            &p,
            &Request {
                argv: &argv,
                ..Request::new(Op::Exec)
            },
        );
        assert_eq!(v.rule, RuleId::Builtin(Builtin::Default));
    }

    #[test]
    fn matchers_compile_on_first_use_or_when_asked() {
        let p = load(&["agent".to_string()], &vars()).expect("agent");
        let with_argv = p
            .rules
            .iter()
            .find(|r| !r.argv.is_empty())
            .expect("an argv rule");
        let with_path = p
            .rules
            .iter()
            .find(|r| !r.path.is_empty())
            .expect("a path rule");
        assert!(with_argv.argv_pattern.get().is_none() && with_path.path_set.get().is_none());
        assert!(p.fs.protect_set.get().is_none());
        // The first judged exec compiles what it needs, and matches as before.
        let argv = ["git", "push", "--force"].map(OsString::from);
        let v = decide(
            &p,
            &Request {
                argv: &argv,
                ..Request::new(Op::Exec)
            },
        );
        assert_eq!(v.action, Action::Deny, "{v:?}");
        assert!(with_argv.argv_pattern.get().is_some());
        p.compile_matchers();
        assert!(p.fs.protect_set.get().is_some());
        assert!(p
            .rules
            .iter()
            .all(|r| r.path.is_empty() == r.path_set.get().is_none()
                && r.argv.is_empty() == r.argv_pattern.get().is_none()));
    }

    /// Every built-in profile that confines hides the consoles', serial lines' and input devices' input and
    /// the watchdogs from a root command, and none hides a device programs use every day (the
    /// command's own terminal above all, which the console patterns sit next to).
    #[test]
    fn builtin_profiles_hide_the_consoles_and_keep_the_everyday_devices() {
        for name in crate::policy::builtin_names() {
            let p = load(&[name.to_string()], &vars()).unwrap();
            if p.mode == Mode::Observe {
                // No Landlock ruleset at all: nothing is hidden, nothing granted.
                assert!(p.fs.hide.is_empty(), "{name}");
                continue;
            }
            let set = crate::policy::PathSet::new(&p.fs.hide).expect("compiles");
            let hides = |path: &str| Path::new(path).ancestors().any(|a| set.is_match(a));
            for hidden in [
                "/dev/tty0",
                "/dev/tty1",
                "/dev/tty9",
                "/dev/tty10",
                "/dev/tty63",
                "/dev/ttyS0",
                "/dev/ttyS31",
                "/dev/console",
                "/dev/input/event0",
                "/dev/input",
                "/dev/hidraw0",
                "/dev/watchdog",
                "/dev/watchdog0",
                "/dev/vcs1",
                "/dev/vda",
                "/etc/shadow",
            ] {
                assert!(hides(hidden), "{name} must hide {hidden}");
            }
            for everyday in [
                "/dev/tty",
                "/dev/null",
                "/dev/zero",
                "/dev/full",
                "/dev/random",
                "/dev/urandom",
                "/dev/ptmx",
                "/dev/pts",
                "/dev/pts/0",
                "/dev/pts/ptmx",
                "/dev/fd",
                "/dev/stdin",
                "/dev/shm",
                "/dev/fuse",
                "/dev/kvm",
                "/dev/net/tun",
                "/dev/ttyUSB0",
                "/dev/ttyACM0",
                "/etc/passwd",
            ] {
                assert!(!hides(everyday), "{name} must not hide {everyday}");
            }
        }
    }

    #[test]
    fn builtin_profiles_resolve() {
        for name in crate::policy::builtin_names() {
            let p = load(&[name.to_string()], &vars()).unwrap();
            assert_eq!(p.name, *name);
            assert_eq!(p.digest.len(), 64);
        }
        let strict = load(&["strict".into()], &vars()).unwrap();
        assert!(!strict.env.keep.contains(&"*".to_string()));
        assert!(strict.env.keep.contains(&"PATH".to_string()));
        assert!(strict.env.drop.contains(&"AWS_*".to_string()));
        assert_eq!(strict.net.bind, Some(vec![]));
        assert!(strict.net.connect.is_empty() && !strict.net.dns);

        let ci = load(&["ci".into()], &vars()).unwrap();
        // Under the home directory, ci reads the toolchains and cargo's home, nothing else.
        let toolchains = [
            ".cargo/bin",
            ".rustup",
            ".pyenv",
            ".nvm",
            ".local/bin",
            ".local/lib",
            ".local/share/pipx",
            ".local/share/uv",
            ".cargo",
        ]
        .map(|t| PathBuf::from("/home/u").join(t));
        for r in ci.fs.read.iter().filter(|r| r.starts_with("/home/u")) {
            assert!(toolchains.contains(r), "{}", r.display());
        }
        assert!(ci.home.private && strict.home.private);
        assert!(ci.net.dns);
        let agent = load(&[], &vars()).unwrap();
        assert_eq!(agent.name, "agent", "agent is the default");
        assert_eq!(agent.net.bind, None);
        assert_eq!(
            agent.transaction.exclude,
            ["target/**", "node_modules/**", ".venv/**"]
        );
        assert_eq!(agent.transaction.max_preimage_bytes, 64 << 20);
        assert!(agent.env.keep == ["*"]);
        assert!(agent
            .fs
            .protect
            .contains(&"/ws/**/.git/**/hooks/**".to_string()));
        assert!(agent
            .fs
            .protect_set()
            .is_match("/ws/sub/repo/.git/hooks/pre-commit"));
        assert!(
            !agent.fs.protect_set().is_match("/ws/sub/repo/.git/config"),
            "judged by content instead"
        );
        assert!(agent.fs.hide.contains(&"/etc/shadow".to_string()));
        assert_eq!(agent.transaction.mass_delete.action, Action::Risky);
        assert_eq!(strict.transaction.mass_delete.action, Action::Deny);
        assert!(agent.git.refuse_set.is_match("core.hookspath"));
        for secret in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "HF_TOKEN",
            "SLACK_BOT_TOKEN",
            "DATABASE_URL",
            "CI_JOB_TOKEN",
            "PYPI_API_TOKEN",
            "GH_ENTERPRISE_TOKEN",
        ] {
            assert!(
                agent.env.drop.iter().any(|p| globset::Glob::new(p)
                    .unwrap()
                    .compile_matcher()
                    .is_match(secret)),
                "{secret}"
            );
        }
        assert!(agent.fs.protect_anchors.contains(&PathBuf::from("/ws")));
        assert!(!agent.fs.read.contains(&PathBuf::from("/home/u")));
        assert!(!agent.home.private);
        assert_eq!(
            agent.home.redact,
            [(
                "NPM_CONFIG_USERCONFIG".to_string(),
                PathBuf::from("/home/u/.npmrc")
            )]
        );
        for p in [&agent, &ci, &strict] {
            assert!(
                p.home.locate.iter().any(|(v, _)| v == "RUSTUP_HOME"),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn sizes_and_bind() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1 GB"), Some(1_000_000_000));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size("99999999999999999999GiB"), None);
        let dir = files(&[("b.toml", "[net]\nbind = [70000]\n")]);
        let msg = check(&dir.path().join("b.toml"), &vars())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("70000") && msg.contains("hint:"), "{msg}");
        let dir = files(&[("r.toml", "replace = [\"fs.nope\"]\n")]);
        let msg = check(&dir.path().join("r.toml"), &vars())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("fs.nope"), "{msg}");
    }

    #[test]
    fn check_reads_paths_without_slash_or_extension() {
        let dir = files(&[("myprofile", "name = \"mine\"\n")]);
        let p = check(&dir.path().join("myprofile"), &vars()).unwrap();
        assert_eq!(p.name, "mine");
        let err = check(&dir.path().join("missing"), &vars()).unwrap_err();
        assert!(err.to_string().starts_with("cannot read profile"), "{err}");
    }
}
