//! The built-in profiles, embedded from `profiles/*.toml` at build time so the binary needs no
//! files at run time. `agent` is the default.

const BUILTINS: &[(&str, &str)] = &[
    ("agent", include_str!("../../profiles/agent.toml")),
    ("base", include_str!("../../profiles/base.toml")),
    ("ci", include_str!("../../profiles/ci.toml")),
    ("observe", include_str!("../../profiles/observe.toml")),
    ("strict", include_str!("../../profiles/strict.toml")),
];

const NAMES: &[&str] = &["agent", "base", "ci", "observe", "strict"];

/// The names of the built-in profiles, sorted.
pub fn builtin_names() -> &'static [&'static str] {
    NAMES
}

/// The TOML text of a built-in profile.
pub fn builtin_source(name: &str) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sources_agree() {
        let from_table: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
        assert_eq!(from_table, builtin_names());
        for name in builtin_names() {
            let text = builtin_source(name).unwrap();
            assert!(text.starts_with('#'), "{name} opens with a comment block");
            crate::policy::raw::parse(text).unwrap();
        }
        assert!(builtin_source("nope").is_none());
    }
}
