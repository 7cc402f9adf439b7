//! Resolution: a loaded chain of raw profiles -> one validated, compiled [`Policy`].
//!
//! Merge semantics, applied from the base of the chain to the most derived profile (and, for
//! several specs, from the leftmost to the rightmost):
//! - lists (`fs.read`, `fs.write`, `fs.protect`, `net.connect`, `transaction.exclude`,
//!   `env.keep`, `env.drop`) are appended to the parent's, exact duplicates removed;
//! - scalars (`mode`, `net.dns`, `net.bind` as a whole, `transaction.on-deny`, `on-failure`,
//!   `max-preimage-size`, `name`) override the parent's when the child sets them;
//! - `env.set` merges key by key, the child winning;
//! - rules: the child's rules come before the parent's, and the first matching rule wins, so a
//!   child can always override a parent's rule;
//! - `replace = ["env.keep", "rule", ...]` makes the profile replace the named inherited lists
//!   instead of appending to them (the only way for a child to narrow a list).
//!
//! Variables are expanded per entry. When there is no home, every entry that uses `{home}` is
//! dropped silently (a rule whose `argv` uses it, or whose `path`/`addr` list loses all its
//! entries, is dropped whole rather than becoming unconditional). Unknown variables are errors.
//! Defaults when no profile says otherwise: enforce, no bind ports, no DNS, `on-deny = errno`,
//! `on-failure = keep`, 64 MiB pre-images, every environment variable kept.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::argv::ArgvPattern;
use super::chain::{self, Spec, Unit};
use super::errno;
use super::error::PolicyError;
use super::model::*;
use super::net::{self, NetMatcher};
use super::paths::{self, glob_anchor, normalize, normalize_glob, Expand, ExpandError};
use super::raw::{RawMode, RawOnDeny, RawOnFailure, RawPort, RawRule, RawSize};

const DEFAULT_MAX_PREIMAGE: u64 = 64 << 20;
const REPLACEABLE: &[&str] = &[
    "fs.read",
    "fs.write",
    "fs.protect",
    "net.connect",
    "transaction.exclude",
    "env.keep",
    "env.drop",
    "env.set",
    "rule",
];

/// Loads and resolves the profiles named by `specs` (built-in names or paths), layered left to
/// right. No spec at all means the default profile, `agent`.
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

/// Loads one profile file (always taken as a path, whatever its name) for
/// `guard profile check FILE`.
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
    protect: Vec<String>,
    connect: Vec<NetTarget>,
    bind: Option<Vec<u16>>,
    dns: bool,
    on_deny: OnDeny,
    on_failure: OnFailure,
    exclude: Vec<String>,
    max_preimage_bytes: u64,
    keep: Option<Vec<String>>,
    drop: Vec<String>,
    set: Vec<(String, String)>,
    rules: Vec<Rule>,
}

fn resolve(specs: &[String], units: &[Unit], vars: &Vars) -> Result<Policy, PolicyError> {
    let mut acc = Acc {
        name: String::new(),
        description: None,
        mode: Mode::Enforce,
        read: Vec::new(),
        write: Vec::new(),
        protect: Vec::new(),
        connect: Vec::new(),
        bind: Some(Vec::new()),
        dns: false,
        on_deny: OnDeny::Errno,
        on_failure: OnFailure::Keep,
        exclude: Vec::new(),
        max_preimage_bytes: DEFAULT_MAX_PREIMAGE,
        keep: None,
        drop: Vec::new(),
        set: Vec::new(),
        rules: Vec::new(),
    };
    for unit in units {
        apply(&mut acc, unit, vars)?;
    }

    let protect_set = glob_set(&acc.protect).expect("protect globs were compiled one by one");
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
            protect: acc.protect,
            protect_set,
            protect_anchors,
        },
        net: NetPolicy {
            connect: acc.connect,
            bind: acc.bind,
            dns: acc.dns,
            connect_matcher,
        },
        transaction: TransactionPolicy {
            on_deny: acc.on_deny,
            on_failure: acc.on_failure,
            exclude: acc.exclude,
            max_preimage_bytes: acc.max_preimage_bytes,
        },
        env: EnvPolicy {
            keep: acc.keep.unwrap_or_else(|| vec!["*".to_string()]),
            drop: acc.drop,
            set: acc.set,
        },
        rules: acc.rules,
        vars: vars.clone(),
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
            "fs.protect" => acc.protect.clear(),
            "net.connect" => acc.connect.clear(),
            "transaction.exclude" => acc.exclude.clear(),
            "env.keep" => acc.keep = Some(Vec::new()),
            "env.drop" => acc.drop.clear(),
            "env.set" => acc.set.clear(),
            "rule" => acc.rules.clear(),
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

    acc.name = raw
        .name
        .clone()
        .unwrap_or_else(|| unit.default_name.clone());
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
            push_unique(&mut acc.read, p);
        }
    }
    for entry in &raw.fs.write {
        if let Some(p) = cx.abs_path("fs.write", entry)? {
            push_unique(&mut acc.write, p);
        }
    }
    for entry in &raw.fs.protect {
        if let Some(g) = cx.abs_glob("fs.protect", entry)? {
            push_unique(&mut acc.protect, g);
        }
    }

    for entry in &raw.net.connect {
        if let Some(targets) = cx.net_target("net.connect", entry)? {
            for t in targets {
                push_unique(&mut acc.connect, t);
            }
        }
    }
    if let Some(bind) = &raw.net.bind {
        acc.bind = cx.bind(bind)?;
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

    let env = &raw.env;
    for entry in &env.keep {
        cx.glob("env.keep", entry, false)?;
        push_unique(acc.keep.get_or_insert_with(Vec::new), entry.clone());
    }
    for entry in &env.drop {
        cx.glob("env.drop", entry, false)?;
        push_unique(&mut acc.drop, entry.clone());
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

    let mut rules = Vec::with_capacity(raw.rule.len() + acc.rules.len());
    for rule in &raw.rule {
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

fn glob_set(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(GlobBuilder::new(p).literal_separator(true).build()?);
    }
    b.build()
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

    fn bind(&self, entries: &[RawPort]) -> Result<Option<Vec<u16>>, PolicyError> {
        let mut ports = Vec::new();
        for entry in entries {
            let (text, number) = match entry {
                RawPort::Number(n) => (n.to_string(), Some(*n)),
                RawPort::Text(t) if t == "*" => return Ok(None),
                RawPort::Text(t) => (t.clone(), t.parse::<i64>().ok()),
            };
            match number
                .and_then(|n| u16::try_from(n).ok())
                .filter(|&p| p != 0)
            {
                Some(p) => push_unique(&mut ports, p),
                None => {
                    return Err(self.bad_value(
                        "net.bind",
                        &text,
                        "not a port (1-65535)\nhint: use port numbers, or \"*\" for any".into(),
                    ))
                }
            }
        }
        Ok(Some(ports))
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
        let argv_pattern = if argv.is_empty() {
            None
        } else {
            Some(
                ArgvPattern::compile(&argv).map_err(|(entry, source)| PolicyError::BadGlob {
                    profile: self.profile.to_string(),
                    field: field.clone(),
                    entry,
                    source,
                })?,
            )
        };

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
        if !addr.is_empty() && !when.contains(&Op::Connect) {
            return Err(bad(
                "`addr` applies only to connect\nhint: add \"connect\" to `when`",
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

        let path_set = if path.is_empty() {
            None
        } else {
            Some(glob_set(&path).expect("path globs were compiled one by one"))
        };
        let addr_matcher = NetMatcher::new(&addr);
        Ok(Some(Rule {
            id: raw.id.clone(),
            when,
            path,
            path_set,
            argv,
            argv_pattern,
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
