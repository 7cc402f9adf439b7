//! A reader of git's configuration file format, written to see exactly the entries git itself
//! would see: sections (`[core]`), subsections (`[remote "origin"]`, and the old
//! `[branch.main]` form), variables with or without a value, quoting, the escapes git knows,
//! comments, line continuations, CRLF line ends and a leading UTF-8 byte order mark.
//!
//! guard judges a repository's config by these entries, so a disagreement with git is a hole:
//! the reader follows git's own rules character by character (a backslash in a subsection
//! keeps the next character, whitespace runs inside a value become one space per character,
//! an unknown escape or an unterminated quote is an error, a key or value is cut at a NUL the
//! way git's C strings cut it). Anything git would reject is an error here too, and the
//! judgement refuses what it cannot read. The tests compare the reader with `git config
//! --list` on tricky inputs.

use std::fmt;

/// One `key = value` line as git sees it. The key is `section[.subsection].name`, with the
/// section and the name lowercased (git's keys are case-insensitive there) and the subsection
/// as written (case-sensitive). A variable written without `=` has no value (git reads it as
/// boolean true).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// `section[.subsection].name`.
    pub key: String,
    /// The value, `None` for a variable written without `=`.
    pub value: Option<String>,
}

impl Entry {
    /// The section (lowercase).
    pub fn section(&self) -> &str {
        self.key.split('.').next().unwrap_or_default()
    }

    /// The variable name (lowercase): what follows the last dot.
    pub fn name(&self) -> &str {
        self.key.rsplit('.').next().unwrap_or_default()
    }

    /// The subsection, if any: everything between the first and the last dot.
    pub fn subsection(&self) -> Option<&str> {
        let first = self.key.find('.')?;
        let last = self.key.rfind('.')?;
        (last > first).then(|| &self.key[first + 1..last])
    }
}

/// Why a text is not a config file git would read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line of the problem.
    pub line: usize,
    /// What is wrong with it.
    pub what: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad config line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

/// git's `isspace`: only these four (not \v or \f).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// The end of input reads as a newline, once, and then sets `eof` (as git's reader does).
const EOF: Option<u8> = None;

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
    eof: bool,
}

impl Reader<'_> {
    /// The next character, CRLF read as LF; the end of input reads as `\n` with `eof` set.
    fn next(&mut self) -> u8 {
        let c = self.raw();
        let c = match c {
            Some(b'\r') => {
                if self.text.get(self.pos) == Some(&b'\n') {
                    self.pos += 1;
                    Some(b'\n')
                } else {
                    Some(b'\r')
                }
            }
            other => other,
        };
        match c {
            Some(b'\n') => {
                self.line += 1;
                b'\n'
            }
            Some(c) => c,
            EOF => {
                self.eof = true;
                b'\n'
            }
        }
    }

    fn raw(&mut self) -> Option<u8> {
        let c = self.text.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn error(&self, what: &'static str) -> ParseError {
        ParseError {
            line: self.line.max(1),
            what,
        }
    }
}

/// The bytes up to the first NUL, as git's C strings see them, as text (git's keys are ASCII;
/// values may hold any bytes, kept losslessly where they are UTF-8 and replaced otherwise).
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Parse a config file's text into its entries, in order.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, ParseError> {
    let mut r = Reader {
        text,
        pos: 0,
        line: 1,
        eof: false,
    };
    if text.starts_with(b"\xef\xbb\xbf") {
        r.pos = 3;
    }
    let mut entries = Vec::new();
    // The current section stem, with its trailing dot; empty before the first header (git
    // reads a variable there as a key without a section, which no setting is).
    let mut stem: Vec<u8> = Vec::new();
    let mut comment = false;
    loop {
        let c = r.next();
        if c == b'\n' {
            if r.eof {
                return Ok(entries);
            }
            comment = false;
            continue;
        }
        if comment || is_space(c) {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        if c == b'[' {
            stem = section_header(&mut r)?;
            stem.push(b'.');
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(r.error("a variable name must start with a letter"));
        }
        let mut key = stem.clone();
        key.push(c.to_ascii_lowercase());
        let value = variable(&mut r, &mut key)?;
        entries.push(Entry {
            key: c_string(&key),
            value: value.map(|v| c_string(&v)),
        });
    }
}

/// After `[`: the section name, lowercased, and `.subsection` if there is one.
fn section_header(r: &mut Reader<'_>) -> Result<Vec<u8>, ParseError> {
    let mut name = Vec::new();
    loop {
        let c = r.next();
        if r.eof {
            return Err(r.error("an unterminated section header"));
        }
        if c == b']' {
            break;
        }
        if is_space(c) {
            subsection(r, &mut name, c)?;
            break;
        }
        if !is_key_char(c) && c != b'.' {
            return Err(r.error("a bad character in a section name"));
        }
        name.push(c.to_ascii_lowercase());
    }
    if name.is_empty() {
        return Err(r.error("an empty section name"));
    }
    Ok(name)
}

/// `[section "subsection"]` after the space: the quoted subsection, where a backslash keeps
/// the character after it, then `]`.
fn subsection(r: &mut Reader<'_>, name: &mut Vec<u8>, first: u8) -> Result<(), ParseError> {
    let mut c = first;
    loop {
        if c == b'\n' {
            return Err(r.error("an incomplete section header"));
        }
        c = r.next();
        if !is_space(c) {
            break;
        }
    }
    if c != b'"' {
        return Err(r.error("a subsection must be quoted"));
    }
    name.push(b'.');
    loop {
        let mut c = r.next();
        if c == b'\n' {
            return Err(r.error("an incomplete section header"));
        }
        if c == b'"' {
            break;
        }
        if c == b'\\' {
            c = r.next();
            if c == b'\n' {
                return Err(r.error("an incomplete section header"));
            }
        }
        name.push(c);
    }
    if r.next() != b']' {
        return Err(r.error("a section header must end after the subsection"));
    }
    Ok(())
}

/// The rest of a variable's name (appended to `key`, lowercased) and its value: `None` when
/// the line ends after the name.
fn variable(r: &mut Reader<'_>, key: &mut Vec<u8>) -> Result<Option<Vec<u8>>, ParseError> {
    let mut c;
    loop {
        c = r.next();
        if r.eof || !is_key_char(c) {
            break;
        }
        key.push(c.to_ascii_lowercase());
    }
    while c == b' ' || c == b'\t' {
        c = r.next();
    }
    if c == b'\n' {
        return Ok(None);
    }
    if c != b'=' {
        return Err(r.error("a variable name must be followed by `=` or the end of the line"));
    }
    value(r).map(Some)
}

/// A value after `=`, up to the end of its (possibly continued) line. Whitespace inside the
/// value is kept as written, whitespace at its end (outside quotes) is dropped, as git 2.45
/// and later read it (older versions turned each inner whitespace character into a space).
fn value(r: &mut Reader<'_>) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    let (mut quote, mut comment) = (false, false);
    // Where trailing whitespace started (0: none pending).
    let mut trim = 0usize;
    loop {
        let c = r.next();
        if c == b'\n' {
            if quote {
                return Err(r.error("an unterminated quote"));
            }
            if trim > 0 {
                out.truncate(trim);
            }
            return Ok(out);
        }
        if comment {
            continue;
        }
        if is_space(c) && !quote {
            if trim == 0 {
                trim = out.len();
            }
            if !out.is_empty() {
                out.push(c);
            }
            continue;
        }
        if !quote && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        trim = 0;
        if c == b'\\' {
            let e = r.next();
            let escaped = match e {
                b'\n' => continue,
                b't' => b'\t',
                b'b' => 8,
                b'n' => b'\n',
                b'\\' | b'"' => e,
                _ => return Err(r.error("an unknown escape sequence")),
            };
            out.push(escaped);
            continue;
        }
        if c == b'"' {
            quote = !quote;
            continue;
        }
        out.push(c);
    }
}

/// Whether git reads `value` as a boolean (and then which): what `git config --type=bool`
/// accepts, a missing value being true.
pub fn as_bool(value: Option<&str>) -> Option<bool> {
    let Some(v) = value else {
        return Some(true);
    };
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        other => other.parse::<i64>().ok().map(|n| n != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(text: &str) -> Vec<(String, Option<String>)> {
        parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .into_iter()
            .map(|e| (e.key, e.value))
            .collect()
    }

    fn one(text: &str) -> (String, Option<String>) {
        let mut v = kv(text);
        assert_eq!(v.len(), 1, "{text:?}: {v:?}");
        v.remove(0)
    }

    fn some(k: &str, v: &str) -> (String, Option<String>) {
        (k.to_string(), Some(v.to_string()))
    }

    #[test]
    fn sections_subsections_and_case() {
        assert_eq!(
            kv("[Core]\n\tFileMode = true\n[remote \"Origin\"]\n\tURL = x\n"),
            [
                some("core.filemode", "true"),
                some("remote.Origin.url", "x")
            ]
        );
        // The old dotted form lowercases the subsection too.
        assert_eq!(
            one("[Branch.Main]\nremote = o\n"),
            some("branch.main.remote", "o")
        );
        // A variable on the header's own line.
        assert_eq!(one("[core] fsmonitor = x"), some("core.fsmonitor", "x"));
        assert_eq!(one("[core]fsmonitor=x"), some("core.fsmonitor", "x"));
        // Subsection escapes keep the next character.
        assert_eq!(
            one("[a \"b\\\"c\\\\d\\e\"]\nk = v\n"),
            some("a.b\"c\\de.k", "v")
        );
    }

    #[test]
    fn values_quotes_escapes_and_comments() {
        assert_eq!(one("[a]\nk = \"  x  \" # c\n"), some("a.k", "  x  "));
        assert_eq!(one("[a]\nk = x ; c\n"), some("a.k", "x"));
        assert_eq!(one("[a]\nk = \"x;y#z\"\n"), some("a.k", "x;y#z"));
        assert_eq!(
            one("[a]\nk = a\\tb\\nc\\\\d\\\"e\n"),
            some("a.k", "a\tb\nc\\d\"e")
        );
        // A continuation keeps the space before it and the one after it.
        assert_eq!(one("[a]\nk = one \\\n two\n"), some("a.k", "one  two"));
        // Whitespace inside a value is kept; trailing whitespace goes.
        assert_eq!(one("[a]\nk = a \t b   \n"), some("a.k", "a \t b"));
        assert_eq!(one("[a]\nk\n"), ("a.k".to_string(), None));
        assert_eq!(one("[a]\nk =\n"), some("a.k", ""));
        assert_eq!(one("\u{feff}[a]\r\nk = v\r\n"), some("a.k", "v"));
        assert_eq!(one("[a]\nk = v"), some("a.k", "v"));
        // Quotes may open and close anywhere.
        assert_eq!(one("[a]\nk = a\"b c\"d\n"), some("a.k", "ab cd"));
        // A NUL ends the value as git's C strings end it.
        assert_eq!(one("[a]\nk = safe\0evil\n"), some("a.k", "safe"));
    }

    #[test]
    fn what_git_rejects_is_rejected() {
        for bad in [
            "[a]\nk = \"open\n",
            "[a]\nk = \\q\n",
            "[a\n",
            "[]\n",
            "[a \"b]\n",
            "[a b]\n",
            "[a \"b\" ]\n",
            "[a]\n1k = v\n",
            "[a]\nk v\n",
            "[a]\nk_x = v\n",
            "[a!]\n",
            "[a]\n\0\n",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} must be an error");
        }
    }

    #[test]
    fn entry_parts() {
        let e = Entry {
            key: "url.https://x.org/.insteadof".into(),
            value: None,
        };
        assert_eq!(e.section(), "url");
        assert_eq!(e.name(), "insteadof");
        assert_eq!(e.subsection(), Some("https://x.org/"));
        let e = Entry {
            key: "core.bare".into(),
            value: None,
        };
        assert_eq!(e.subsection(), None);
    }

    #[test]
    fn booleans() {
        for (v, b) in [
            (None, Some(true)),
            (Some("TRUE"), Some(true)),
            (Some("off"), Some(false)),
            (Some(""), Some(false)),
            (Some("2"), Some(true)),
            (Some("0"), Some(false)),
            (Some("/bin/hook"), None),
        ] {
            assert_eq!(as_bool(v), b, "{v:?}");
        }
    }

    /// The reader against git itself (`git config --list -z -f FILE`), on inputs chosen for
    /// the corners of the format. Skipped without git.
    #[test]
    fn agrees_with_git() {
        let Ok(out) = std::process::Command::new("git").arg("--version").output() else {
            eprintln!("skipped: git is not installed");
            return;
        };
        assert!(out.status.success());
        let dir = tempfile::tempdir().expect("tempdir");
        let cases: &[&[u8]] = &[
            b"[core]\n\tfsmonitor = touch x\n",
            b"[core] fsmonitor = \"a\\\"b\" ; c\n",
            b"[Remote \"O\\ri\\\"g\"]\n\tpush = +refs/*:refs/*\n",
            b"[branch.Main]\n\tmerge = refs/heads/main\n",
            b"[a]\n\tk = one \\\n two\n\tflag\n\tempty =\n",
            b"[a]\r\n\tk = v\r\n\tj = x\ry\n",
            b"\xef\xbb\xbf[a]\nk = v\n",
            b"[a]\nk = a \t b   \nq = \"  x  \"\n",
            b"[a]\nk = safe\0evil\n",
            b"[a \"sub\0x\"]\nk = v\n",
            b"[a]k=v\n[b]#c\nj=w\n",
            b"[include]\n\tpath = other\n[includeIf \"gitdir:/x/\"]\n\tpath = y\n",
            b"[alias]\n\tst = !touch \"$HOME/x\" # c\n",
            b"[a]\nk = x\\\n",
            b"[a.B \"C\"]\nk = v\n",
            b"k = v\n",
            b"[a]\nk =\rv\n\tj = \"\r\"\n",
            b"[a]\n\x0bk = v\n",
            b"[a]\nk = \x0cv\x0b\n",
        ];
        for (i, text) in cases.iter().enumerate() {
            let file = dir.path().join(format!("c{i}"));
            std::fs::write(&file, text).expect("write");
            let out = std::process::Command::new("git")
                .args(["config", "--list", "-z", "--no-includes", "-f"])
                .arg(&file)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .expect("git config");
            let ours = parse(text);
            if !out.status.success() {
                assert!(ours.is_err(), "git rejects {text:?}, we read {ours:?}");
                continue;
            }
            let theirs: Vec<Entry> = out
                .stdout
                .split(|&b| b == 0)
                .filter(|r| !r.is_empty())
                .map(|r| {
                    let (k, v) = match r.iter().position(|&b| b == b'\n') {
                        Some(i) => (&r[..i], Some(&r[i + 1..])),
                        None => (r, None),
                    };
                    Entry {
                        key: String::from_utf8_lossy(k).into_owned(),
                        value: v.map(|v| String::from_utf8_lossy(v).into_owned()),
                    }
                })
                .collect();
            assert_eq!(ours.as_ref().ok(), Some(&theirs), "{text:?}");
        }
    }
}
