//! The built-in profiles, embedded from `profiles/*.toml` at build time so the binary needs no
//! files at run time. `agent` is the default; `claude-code`, `codex`, `gemini` and `aider`
//! extend it for those agents.

const BUILTINS: &[(&str, &str)] = &[
    ("agent", include_str!("../../profiles/agent.toml")),
    ("aider", include_str!("../../profiles/aider.toml")),
    ("base", include_str!("../../profiles/base.toml")),
    ("ci", include_str!("../../profiles/ci.toml")),
    (
        "claude-code",
        include_str!("../../profiles/claude-code.toml"),
    ),
    ("codex", include_str!("../../profiles/codex.toml")),
    ("gemini", include_str!("../../profiles/gemini.toml")),
    ("observe", include_str!("../../profiles/observe.toml")),
    ("strict", include_str!("../../profiles/strict.toml")),
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
