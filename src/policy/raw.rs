//! The TOML schema of a profile file, exactly as written: serde structs with
//! `deny_unknown_fields` and kebab-case keys. Nothing here is validated beyond TOML types;
//! `resolve` turns a chain of these into a [`Policy`](super::Policy). Every field is optional
//! so that a child profile says only what it changes.

use std::collections::BTreeMap;
use std::fmt;

use serde::{de, Deserialize};

use super::model::{Action, Op};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawProfile {
    pub name: Option<String>,
    /// A built-in name or a path (relative to the extending file).
    pub extends: Option<String>,
    pub description: Option<String>,
    pub mode: Option<RawMode>,
    /// Inherited lists this profile replaces instead of appending to (`env.keep`, `rule`, ...).
    #[serde(default)]
    pub replace: Vec<String>,
    #[serde(default)]
    pub fs: RawFs,
    #[serde(default)]
    pub net: RawNet,
    #[serde(default)]
    pub transaction: RawTransaction,
    #[serde(default)]
    pub env: RawEnv,
    #[serde(default)]
    pub git: RawGit,
    #[serde(default)]
    pub home: RawHome,
    #[serde(default)]
    pub report: RawReport,
    #[serde(default)]
    pub rule: Vec<RawRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawHome {
    /// The command gets an empty HOME of its own instead of the user's.
    pub private: Option<bool>,
    /// Variable = directory: set when the directory exists and the variable is unset.
    #[serde(default)]
    pub locate: BTreeMap<String, String>,
    /// Variable = file: the variable points at a copy of the file without credential lines.
    #[serde(default)]
    pub redact: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawReport {
    pub denials: Option<RawDenials>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawDenials {
    Stderr,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawMode {
    Enforce,
    Observe,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawFs {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    /// Directories that may be opened and listed, and every directory beneath, without their
    /// files becoming readable.
    #[serde(default)]
    pub list: Vec<String>,
    /// Directories shared with processes outside the sandbox, where the command may make new
    /// entries and change only the ones it made.
    #[serde(default)]
    pub shared: Vec<String>,
    #[serde(default)]
    pub protect: Vec<String>,
    /// Paths inside the roots that Landlock must not grant (globs).
    #[serde(default)]
    pub hide: Vec<String>,
    /// Allow set-user-id and set-group-id bits.
    pub allow_setid: Option<bool>,
}

/// `[git]`: how repositories' config, hooks and pushes are judged.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawGit {
    #[serde(default)]
    pub refuse_keys: Vec<String>,
    #[serde(default)]
    pub allow_keys: Vec<String>,
    pub refuse_hooks: Option<bool>,
    pub refuse_destructive_push: Option<bool>,
}

/// `transaction.mass-delete`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawMassDelete {
    pub action: Option<Action>,
    pub min_entries: Option<u64>,
    pub share: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawNet {
    #[serde(default)]
    pub connect: Vec<String>,
    /// Replaces the inherited value when present: port numbers (on loopback), `"*"` (any port
    /// on loopback), addresses in `connect` syntax; `[]` = none.
    pub bind: Option<Vec<RawPort>>,
    pub dns: Option<bool>,
    /// Names DNS queries may ask for besides the host names of `connect`.
    #[serde(default)]
    pub resolve: Vec<String>,
}

/// A bind entry: a port number, or a string (`"*"`, digits, or an address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawPort {
    Number(i64),
    Text(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawOnDeny {
    Errno,
    Rollback,
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawOnFailure {
    Keep,
    Rollback,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawTransaction {
    pub on_deny: Option<RawOnDeny>,
    pub on_failure: Option<RawOnFailure>,
    #[serde(default)]
    pub exclude: Vec<String>,
    pub max_preimage_size: Option<RawSize>,
    /// What happens to a write to a file above `max-preimage-size`: `record` (written without a
    /// saved copy, reported) or `deny`.
    pub oversize: Option<RawOversize>,
    /// fsync the journal at every entry (power-loss safety; slower).
    pub fsync: Option<bool>,
    pub mass_delete: Option<RawMassDelete>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RawOversize {
    Record,
    Deny,
}

/// A size: bytes as an integer, or a string with a unit (`"64MiB"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawSize {
    Bytes(i64),
    Text(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawEnv {
    #[serde(default)]
    pub keep: Vec<String>,
    #[serde(default)]
    pub drop: Vec<String>,
    /// Exact variable names passed even though a `drop` pattern matches them.
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RawRule {
    pub id: String,
    pub when: OneOrMany<Op>,
    #[serde(default)]
    pub path: Option<OneOrMany<String>>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub addr: Vec<String>,
    pub action: Action,
    pub errno: Option<String>,
    pub reason: Option<String>,
}

/// A value written either alone or as a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// How an error message names what a [`OneOrMany`] of this type expects.
pub trait Expected {
    const ONE_OR_MANY: &'static str;
}

impl Expected for Op {
    const ONE_OR_MANY: &'static str =
        "an operation (exec, delete, rename, write, create, link, chmod, connect) or a list of them";
}

impl Expected for String {
    const ONE_OR_MANY: &'static str = "a string or a list of strings";
}

// The schema's either-or values are read by hand rather than with `#[serde(untagged)]`, whose
// only error is "data did not match any variant": these say what was expected.

impl<'de, T: Deserialize<'de> + Expected> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Expected> de::Visitor<'de> for Visit<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::ONE_OR_MANY)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::deserialize(de::value::StrDeserializer::<E>::new(s)).map(OneOrMany::One)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(OneOrMany::Many)
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// Reads an integer or a string, as `RawPort` and `RawSize` are written.
struct NumberOrText<T> {
    expecting: &'static str,
    number: fn(i64) -> T,
    text: fn(String) -> T,
}

impl<T> de::Visitor<'_> for NumberOrText<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        Ok((self.number)(n))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        i64::try_from(n)
            .map(self.number)
            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(n), &self))
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        Ok((self.text)(s.to_owned()))
    }
}

impl<'de> Deserialize<'de> for RawPort {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a port number, \"*\" or an address",
            number: RawPort::Number,
            text: RawPort::Text,
        })
    }
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrText {
            expecting: "a size in bytes or a string such as \"64MiB\"",
            number: RawSize::Bytes,
            text: RawSize::Text,
        })
    }
}

impl<T> OneOrMany<T> {
    pub fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(t) => vec![t],
            OneOrMany::Many(v) => v,
        }
    }
}

/// Parses one profile text.
pub fn parse(text: &str) -> Result<RawProfile, toml::de::Error> {
    toml::from_str(text)
}

/// A built-in profile from its JSON form ([`super::builtin::builtin_values`]).
pub fn parse_values(json: &str) -> Result<RawProfile, serde_json::Error> {
    serde_json::from_str(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_schema_parses() {
        let text = r#"
name = "x"
extends = "base"
description = "d"
mode = "enforce"
replace = ["env.keep"]
[fs]
read = ["/usr"]
write = ["{workspace}"]
protect = ["{workspace}/.git/config"]
[net]
connect = ["127.0.0.0/8", "*:443"]
bind = [8080, "3000"]
dns = true
[transaction]
on-deny = "rollback"
on-failure = "keep"
exclude = ["target/**"]
max-preimage-size = "64MiB"
[env]
keep = ["*"]
drop = ["AWS_*"]
set = { FOO = "bar" }
[home]
private = true
locate = { RUSTUP_HOME = "{home}/.rustup" }
redact = { NPM_CONFIG_USERCONFIG = "{home}/.npmrc" }
[report]
denials = "none"
[[rule]]
id = "r"
when = ["exec", "delete"]
path = "{workspace}/secrets/**"
argv = ["git", "**"]
action = "deny"
errno = "EACCES"
reason = "why"
"#;
        let p = parse(text).unwrap();
        assert_eq!(
            p.rule[0].when.clone().into_vec(),
            vec![Op::Exec, Op::Delete]
        );
        assert_eq!(p.net.bind.unwrap().len(), 2);
        assert_eq!(
            p.transaction.max_preimage_size,
            Some(RawSize::Text("64MiB".into()))
        );
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let err = parse("[fs]\nwirte = [\"/x\"]\n").unwrap_err().to_string();
        assert!(err.contains("wirte"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }
}
