//! Turns a profile's TOML or schema error into words a profile author knows: the line, the key
//! (as a path: `rule[0].when`, `fs.read[2]`), what was expected and what was found, and the
//! line itself with a caret. The toml crate gives a byte span and serde's message; the key is
//! found by walking the document (toml_edit keeps spans) to the innermost key or value that
//! holds the span. Promises: never panics, whatever the text; falls back to the plain message.

use std::fmt;
use std::ops::Range;

use toml_edit::{ImDocument, Item, TableLike, Value};

/// A profile error, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the error, when the parser located it.
    pub line: Option<usize>,
    /// The key the error is about, as a path.
    pub key: Option<String>,
    /// What was wrong, in plain words.
    pub message: String,
    /// The line quoted with a caret under the error, when located.
    pub snippet: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}, ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(snippet) = &self.snippet {
            write!(f, "\n{snippet}")?;
        }
        Ok(())
    }
}

/// Locates and rewords `error`, raised while parsing `text`.
pub fn describe(text: &str, error: &toml::de::Error) -> Problem {
    let message = plain_words(error.message().trim());
    let Some(span) = error.span().filter(|s| s.start <= text.len()) else {
        return Problem {
            line: None,
            key: None,
            message,
            snippet: None,
        };
    };
    let line = text[..span.start].matches('\n').count() + 1;
    Problem {
        line: Some(line),
        key: key_at(text, span.start),
        message,
        snippet: Some(snippet(text, &span, line)),
    }
}

/// Rewrites serde's phrasing: `invalid type: X, expected Y` becomes `expected Y, found X`;
/// serde's "variant" and "field" become "value" and "key".
fn plain_words(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return format!("expected {expected}, found {found}");
        }
    }
    message
        .replace("unknown variant", "unknown value")
        .replace("unknown field", "unknown key")
        .replace("missing field", "missing key")
}

/// The path of the innermost key or value whose span holds `offset`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let doc = ImDocument::parse(text).ok()?;
    in_table(doc.as_table(), "", offset)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn holds(span: Option<Range<usize>>, offset: usize) -> bool {
    span.is_some_and(|s| s.contains(&offset))
}

fn in_table(table: &dyn TableLike, prefix: &str, offset: usize) -> Option<String> {
    for (name, item) in table.iter() {
        let path = join(prefix, name);
        if holds(table.key(name).and_then(|k| k.span()), offset) {
            return Some(path);
        }
        if let Some(found) = in_item(item, &path, offset) {
            return Some(found);
        }
    }
    None
}

fn in_item(item: &Item, path: &str, offset: usize) -> Option<String> {
    match item {
        Item::None => None,
        Item::Value(v) => in_value(v, path, offset),
        Item::Table(t) => {
            in_table(t, path, offset).or_else(|| holds(t.span(), offset).then(|| path.to_owned()))
        }
        Item::ArrayOfTables(a) => a.iter().enumerate().find_map(|(i, t)| {
            let path = format!("{path}[{i}]");
            in_table(t, &path, offset).or_else(|| holds(t.span(), offset).then_some(path))
        }),
    }
}

fn in_value(value: &Value, path: &str, offset: usize) -> Option<String> {
    if !holds(value.span(), offset) {
        return None;
    }
    let inner = match value {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| in_value(v, &format!("{path}[{i}]"), offset)),
        Value::InlineTable(t) => in_table(t, path, offset),
        _ => None,
    };
    Some(inner.unwrap_or_else(|| path.to_owned()))
}

/// `  6 | when = 5` and a caret line under the span (cut at the end of the line).
fn snippet(text: &str, span: &Range<usize>, line: usize) -> String {
    let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i);
    let quoted = &text[start..end];
    let column = text[start..span.start].chars().count();
    let width = text[span.start..span.end.clamp(span.start, end)]
        .chars()
        .count()
        .max(1);
    let number = line.to_string();
    let pad = " ".repeat(number.len());
    format!(
        "  {number} | {quoted}\n  {pad} | {}{}",
        " ".repeat(column),
        "^".repeat(width)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(text: &str) -> Problem {
        let error = crate::policy::raw::parse(text).expect_err("invalid");
        describe(text, &error)
    }

    #[test]
    fn a_wrong_type_names_line_key_expected_and_found() {
        let p = problem("name = \"x\"\n\n[[rule]]\nid = \"r\"\nwhen = 5\naction = \"deny\"\n");
        assert_eq!(p.line, Some(5));
        assert_eq!(p.key.as_deref(), Some("rule[0].when"));
        assert!(
            p.message.starts_with("expected an operation (exec, delete, rename, write, create, link, chmod, connect) or a list of them, found integer `5`"),
            "{}",
            p.message
        );
        assert_eq!(p.snippet.as_deref(), Some("  5 | when = 5\n    |        ^"));
        assert!(!p.to_string().contains("untagged"), "{p}");
    }

    #[test]
    fn list_elements_and_sizes_are_named() {
        let p = problem("[fs]\nread = [\"/usr\", 5]\n");
        assert_eq!(p.key.as_deref(), Some("fs.read[1]"));
        assert_eq!(p.message, "expected a string, found integer `5`");
        let p = problem("[net]\nbind = [true]\n");
        assert_eq!(p.key.as_deref(), Some("net.bind[0]"));
        assert!(
            p.message
                .starts_with("expected a port number, \"*\" or an address"),
            "{}",
            p.message
        );
        let p = problem("[transaction]\nmax-preimage-size = [1]\n");
        assert_eq!(p.key.as_deref(), Some("transaction.max-preimage-size"));
        assert!(p.message.contains("a size"), "{}", p.message);
    }

    #[test]
    fn unknown_keys_and_values_in_plain_words() {
        let p = problem("[fs]\nwirte = [\"/x\"]\n");
        assert_eq!((p.line, p.key.as_deref()), (Some(2), Some("fs.wirte")));
        assert!(
            p.message.starts_with("unknown key `wirte`"),
            "{}",
            p.message
        );
        let p = problem("[transaction]\non-deny = \"explode\"\n");
        assert_eq!(p.key.as_deref(), Some("transaction.on-deny"));
        assert!(
            p.message
                .starts_with("unknown value `explode`, expected one of"),
            "{}",
            p.message
        );
        let p = problem("[[rule]]\nwhen = \"exec\"\naction = \"deny\"\n");
        assert!(p.message.contains("missing key `id`"), "{}", p.message);
        assert_eq!(p.key.as_deref(), Some("rule[0]"));
    }

    #[test]
    fn syntax_errors_keep_the_line() {
        let p = problem("name = \"x\"\n[fs\n");
        assert_eq!(p.line, Some(2));
        assert_eq!(p.key, None);
    }
}
