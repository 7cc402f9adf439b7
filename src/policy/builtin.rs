//! The built-in profiles, embedded from `profiles/*.toml` at build time so the binary needs no
//! files at run time. `agent` is the default; `claude-code`, `codex`, `gemini` and `aider`
//! extend it for those agents.

/// Each built-in profile: its name, its TOML text, and the same parsed into JSON at build time
/// (build.rs, `builtin_profiles`), which the start reads instead of the commented TOML.
macro_rules! builtin {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../profiles/", $name, ".toml")),
            include_str!(concat!(env!("OUT_DIR"), "/profiles/", $name, ".json")),
        )
    };
}

const BUILTINS: &[(&str, &str, &str)] = &[
    builtin!("agent"),
    builtin!("aider"),
    builtin!("base"),
    builtin!("ci"),
    builtin!("claude-code"),
    builtin!("codex"),
    builtin!("gemini"),
    builtin!("observe"),
    builtin!("strict"),
];

const NAMES: &[&str] = &[
    "agent",
    "aider",
    "base",
    "ci",
    "claude-code",
    "codex",
    "gemini",
    "observe",
    "strict",
];

/// The digest of each built-in profile's chain (the profile, run on its own, and what it
/// extends), computed by build.rs with [`super::digest::of`] from the texts embedded above.
const CHAIN_DIGESTS: &[(&str, &str)] =
    include!(concat!(env!("OUT_DIR"), "/profiles/chain_digests.rs"));

/// The digest of the chain of the built-in profile `name` run on its own (the spec list
/// `[name]`), as [`super::chain::digest`] computes it.
pub fn chain_digest(name: &str) -> Option<&'static str> {
    CHAIN_DIGESTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, digest)| digest)
}

/// The names of the built-in profiles, sorted.
pub fn builtin_names() -> &'static [&'static str] {
    NAMES
}

/// The TOML text of a built-in profile.
pub fn builtin_source(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, text, _)| text)
}

/// A built-in profile's values as JSON: [`builtin_source`] parsed at build time.
pub fn builtin_values(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, _, json)| json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sources_agree() {
        let from_table: Vec<&str> = BUILTINS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(from_table, builtin_names());
        for name in builtin_names() {
            let text = builtin_source(name).unwrap();
            assert!(text.starts_with('#'), "{name} opens with a comment block");
            crate::policy::raw::parse(text).unwrap();
        }
        assert!(builtin_source("nope").is_none());
        assert!(builtin_values("nope").is_none());
    }

    /// What the start reads (the JSON made at build time) is what the TOML says.
    #[test]
    fn the_values_read_at_start_are_the_profiles_own() {
        for name in builtin_names() {
            let from_toml = crate::policy::raw::parse(builtin_source(name).unwrap()).unwrap();
            let from_json =
                crate::policy::raw::parse_values(builtin_values(name).unwrap()).unwrap();
            assert_eq!(format!("{from_toml:?}"), format!("{from_json:?}"), "{name}");
            assert!(
                format!("{from_json:?}").len() > 100,
                "{name}: {from_json:?}"
            );
        }
    }
}
