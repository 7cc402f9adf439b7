//! [`PolicyError`]: everything that can go wrong while loading a profile chain. Each variant
//! names the profile (built-in name or file path) and the entry at fault; messages are
//! lowercase, without a trailing period, with a `hint:` line where the user can act.

use std::path::PathBuf;

/// Why a profile chain cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A profile file could not be read.
    #[error("cannot read profile {}", path.display())]
    Read {
        /// The profile file.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: std::io::Error,
    },

    /// The line, the key, what was expected and what was found (see `diagnose`).
    #[error("invalid profile {profile}: {problem}")]
    Parse {
        /// The profile at fault (built-in name or file path).
        profile: String,
        /// What is wrong, where.
        problem: super::diagnose::Problem,
    },

    /// Two different rules of a chain share an id.
    #[error(
        "profile {profile}: rule id `{id}` is already used by a different rule in {first}\n\
         hint: give this rule its own id; to drop every inherited rule instead, add \
         `replace = [\"rule\"]`"
    )]
    DuplicateRule {
        /// The profile with the second rule.
        profile: String,
        /// The shared id.
        id: String,
        /// The profile with the first rule.
        first: String,
    },

    /// The profile is neither a built-in name nor a path.
    #[error(
        "unknown profile `{name}`\nhint: the built-in profiles are {builtins}; \
         a path must contain `/` or end in `.toml`"
    )]
    UnknownProfile {
        /// The name as given.
        name: String,
        /// The built-in profile names, for the hint.
        builtins: String,
    },

    /// The `extends` chain comes back to a profile already in it.
    #[error("profile `extends` cycle: {chain}\nhint: remove one of these `extends` lines")]
    Cycle {
        /// The profiles of the cycle in `extends` order, joined by ` -> `.
        chain: String,
    },

    /// An entry uses a `{variable}` that does not exist.
    #[error(
        "profile {profile}: unknown variable `{{{var}}}` in {field} entry `{entry}`\n\
         hint: the variables are {vars}",
        vars = super::paths::VARIABLES
    )]
    UnknownVariable {
        /// The profile at fault.
        profile: String,
        /// The key of the entry (`fs.write`, ...).
        field: String,
        /// The entry as written.
        entry: String,
        /// The unknown variable's name.
        var: String,
    },

    /// A variable used by an entry expands to bytes that are not UTF-8.
    #[error("profile {profile}: variable `{{{var}}}` is not valid UTF-8 (used in {field})")]
    VariableNotUtf8 {
        /// The profile at fault.
        profile: String,
        /// The key of the entry that uses it.
        field: String,
        /// The variable's name.
        var: String,
    },

    /// A path entry is relative after expansion.
    #[error(
        "profile {profile}: {field} entry `{entry}` is not an absolute path\n\
         hint: begin it with `/` or a variable such as {{workspace}}"
    )]
    NotAbsolute {
        /// The profile at fault.
        profile: String,
        /// The key of the entry.
        field: String,
        /// The entry as written.
        entry: String,
    },

    /// An entry is not a valid glob.
    #[error("profile {profile}: {field} entry `{entry}` is not a valid glob")]
    BadGlob {
        /// The profile at fault.
        profile: String,
        /// The key of the entry.
        field: String,
        /// The entry as written.
        entry: String,
        /// What the glob compiler found wrong.
        #[source]
        source: globset::Error,
    },

    /// An entry's value is out of range or malformed.
    #[error("profile {profile}: {field} entry `{entry}`: {why}")]
    BadValue {
        /// The profile at fault.
        profile: String,
        /// The key of the entry.
        field: String,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        why: String,
    },

    /// A `[[rule]]` is inconsistent (a reserved id, a condition its operations cannot have, ...).
    #[error("profile {profile}: rule `{id}`: {why}")]
    BadRule {
        /// The profile at fault.
        profile: String,
        /// The rule's id.
        id: String,
        /// What is wrong with it.
        why: String,
    },
}
