//! [`PolicyError`]: everything that can go wrong while loading a profile chain. Each variant
//! names the profile (built-in name or file path) and the entry at fault; messages are
//! lowercase, without a trailing period, with a `hint:` line where the user can act.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read profile {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The line, the key, what was expected and what was found (see `diagnose`).
    #[error("invalid profile {profile}: {problem}")]
    Parse {
        profile: String,
        problem: super::diagnose::Problem,
    },

    #[error(
        "profile {profile}: rule id `{id}` is already used by a different rule in {first}\n\
         hint: give this rule its own id; to drop every inherited rule instead, add \
         `replace = [\"rule\"]`"
    )]
    DuplicateRule {
        profile: String,
        id: String,
        first: String,
    },

    #[error(
        "unknown profile `{name}`\nhint: the built-in profiles are {builtins}; \
         a path must contain `/` or end in `.toml`"
    )]
    UnknownProfile { name: String, builtins: String },

    #[error("profile `extends` cycle: {chain}\nhint: remove one of these `extends` lines")]
    Cycle { chain: String },

    #[error(
        "profile {profile}: unknown variable `{{{var}}}` in {field} entry `{entry}`\n\
         hint: the variables are {vars}",
        vars = super::paths::VARIABLES
    )]
    UnknownVariable {
        profile: String,
        field: String,
        entry: String,
        var: String,
    },

    #[error("profile {profile}: variable `{{{var}}}` is not valid UTF-8 (used in {field})")]
    VariableNotUtf8 {
        profile: String,
        field: String,
        var: String,
    },

    #[error(
        "profile {profile}: {field} entry `{entry}` is not an absolute path\n\
         hint: begin it with `/` or a variable such as {{workspace}}"
    )]
    NotAbsolute {
        profile: String,
        field: String,
        entry: String,
    },

    #[error("profile {profile}: {field} entry `{entry}` is not a valid glob")]
    BadGlob {
        profile: String,
        field: String,
        entry: String,
        #[source]
        source: globset::Error,
    },

    #[error("profile {profile}: {field} entry `{entry}`: {why}")]
    BadValue {
        profile: String,
        field: String,
        entry: String,
        why: String,
    },

    #[error("profile {profile}: rule `{id}`: {why}")]
    BadRule {
        profile: String,
        id: String,
        why: String,
    },
}
