//! The learned profile as TOML: a header saying how it was learned and how to use it, then
//! only the lists and rules the command needed, each entry under a comment naming the first
//! call that needed it and what refused that call.

use std::fmt::Write as _;

use crate::policy::Op;

/// One entry of a list (a root, a connect target) with its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub text: String,
    /// The first call that needed it.
    pub by: String,
    /// What refused that call without it.
    pub refused_by: String,
}

/// An allow rule for a call a rule (or `protect`) refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AllowRule {
    pub id: String,
    pub when: Op,
    /// Path globs (literal paths, escaped), for a filesystem change.
    pub path: Vec<String>,
    /// argv elements (literal, escaped), for an exec.
    pub argv: Vec<String>,
    pub by: String,
    pub refused_by: String,
}

/// The profile before it is written.
#[derive(Debug, Clone, Default)]
pub(super) struct Draft {
    pub name: String,
    pub description: String,
    pub extends: Option<String>,
    /// Comment lines at the top.
    pub header: Vec<String>,
    pub read: Vec<Entry>,
    pub write: Vec<Entry>,
    pub connect: Vec<Entry>,
    /// Names DNS queries asked for (`net.resolve`).
    pub resolve: Vec<Entry>,
    pub rules: Vec<AllowRule>,
    /// Comment lines at the end: what was needed and not learned.
    pub not_learned: Vec<String>,
}

impl Draft {
    /// How many entries (roots, targets, rules) the profile adds.
    pub fn entries(&self) -> usize {
        self.read.len()
            + self.write.len()
            + self.connect.len()
            + self.resolve.len()
            + self.rules.len()
    }
}

/// A TOML string.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A comment line (no newline can end it early).
fn comment(s: &str) -> String {
    format!("# {}", s.replace(['\n', '\r'], " "))
}

fn list(out: &mut String, key: &str, entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    let _ = writeln!(out, "{key} = [");
    for e in entries {
        let _ = writeln!(
            out,
            "    {}",
            comment(&format!("{} (refused by {})", e.by, e.refused_by))
        );
        let _ = writeln!(out, "    {},", quote(&e.text));
    }
    let _ = writeln!(out, "]");
}

/// The profile's text.
pub(super) fn render(d: &Draft) -> String {
    let mut out = String::new();
    for line in &d.header {
        let _ = writeln!(out, "{}", comment(line));
    }
    out.push('\n');
    let _ = writeln!(out, "name = {}", quote(&d.name));
    if let Some(base) = &d.extends {
        let _ = writeln!(out, "extends = {}", quote(base));
    }
    let _ = writeln!(out, "description = {}", quote(&d.description));
    if !d.read.is_empty() || !d.write.is_empty() {
        out.push_str("\n[fs]\n");
        list(&mut out, "read", &d.read);
        list(&mut out, "write", &d.write);
    }
    if !d.connect.is_empty() || !d.resolve.is_empty() {
        out.push_str("\n[net]\n");
        list(&mut out, "connect", &d.connect);
        list(&mut out, "resolve", &d.resolve);
    }
    for r in &d.rules {
        out.push('\n');
        let _ = writeln!(
            out,
            "{}",
            comment(&format!("{} (refused by {})", r.by, r.refused_by))
        );
        out.push_str("[[rule]]\n");
        let _ = writeln!(out, "id = {}", quote(&r.id));
        let _ = writeln!(out, "when = {}", quote(r.when.as_str()));
        let items = |v: &[String]| v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ");
        if !r.path.is_empty() {
            let _ = writeln!(out, "path = [{}]", items(&r.path));
        }
        if !r.argv.is_empty() {
            let _ = writeln!(out, "argv = [{}]", items(&r.argv));
        }
        out.push_str("action = \"allow\"\n");
        let _ = writeln!(
            out,
            "reason = {}",
            quote(&format!(
                "learned: the command needed it ({} refused it)",
                r.refused_by
            ))
        );
    }
    if !d.not_learned.is_empty() {
        out.push('\n');
        for line in &d.not_learned {
            let _ = writeln!(out, "{}", comment(line));
        }
    }
    out
}

/// `text` as a glob that matches exactly it (`*`, `?`, `[`, `]`, `{`, `}`, `\` escaped).
pub(super) fn literal_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_stay_on_one_line_and_strings_are_quoted() {
        let d = Draft {
            name: "learned".into(),
            description: "from \"sh\"".into(),
            extends: Some("agent".into()),
            header: vec!["line one".into(), "two\nlines".into()],
            write: vec![Entry {
                text: "{home}/.cache/x".into(),
                by: "sh (pid 1): create /h/.cache/x\n# injected".into(),
                refused_by: "fs.write-roots".into(),
            }],
            ..Draft::default()
        };
        let text = render(&d);
        assert!(text.contains("# two lines\n"), "{text}");
        assert!(
            text.contains(
                "    # sh (pid 1): create /h/.cache/x # injected (refused by fs.write-roots)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("description = 'from \"sh\"'")
                || text.contains("description = \"from \\\"sh\\\"\""),
            "{text}"
        );
        let parsed: toml::Value = toml::from_str(&text).expect("valid TOML");
        assert_eq!(parsed["fs"]["write"][0].as_str(), Some("{home}/.cache/x"));
        assert!(parsed.get("net").is_none());
    }

    #[test]
    fn looked_up_names_go_to_net_resolve() {
        let d = Draft {
            name: "learned".into(),
            resolve: vec![Entry {
                text: "api.example.org".into(),
                by: "curl (pid 3): dns api.example.org".into(),
                refused_by: "net.dns".into(),
            }],
            ..Draft::default()
        };
        let parsed: toml::Value = toml::from_str(&render(&d)).expect("valid TOML");
        assert_eq!(
            parsed["net"]["resolve"][0].as_str(),
            Some("api.example.org")
        );
        assert!(parsed["net"].get("connect").is_none());
        assert_eq!(d.entries(), 1);
    }

    #[test]
    fn literal_globs_match_only_themselves() {
        let g = literal_glob("/w/a[1]*{x}?.txt");
        let m = globset::GlobBuilder::new(&g)
            .literal_separator(true)
            .build()
            .unwrap()
            .compile_matcher();
        assert!(m.is_match("/w/a[1]*{x}?.txt"));
        assert!(!m.is_match("/w/a1xx.txt"));
    }
}
