//! A run's refusals for the people who read CI results: a Markdown summary (GitHub's job
//! summary, a merge request comment), GitHub workflow-command annotations (one `::error` per
//! refused call, with the file and the rule), and a GitLab Code Quality report. Built from the
//! audit log's lines; pure, so each format is unit tested here. Promises: every value that
//! comes from the sandboxed program is escaped for the format it lands in (a file name cannot
//! end a table cell, forge an annotation or inject HTML); targets are shown relative to the
//! workspace when they lie inside it.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::query::{text_bytes, Query};
use super::text::escape_for_terminal;

/// What the formats need to know about one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The run id.
    pub run: String,
    /// The profile name, as `run-start` gives it.
    pub profile: String,
    /// The workspace path, for display.
    pub workspace: String,
    /// The confined command, its argv joined by spaces.
    pub command: String,
    /// `run-end.status`, when the log has its end.
    pub status: Option<i64>,
    /// `run-end.outcome` (`exited`, `signaled`, `policy-kill`, `error`), when the log has its end.
    pub outcome: Option<String>,
    /// Decisions per verdict from `run-end.counts` (exact), when the log has its end.
    pub counts: Option<[u64; 5]>,
    /// Events counted but not written (`run-end.suppressed`).
    pub suppressed: u64,
    /// Every refused call the log holds, in log order.
    pub refusals: Vec<Refusal>,
}

/// One refused call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusal {
    /// When the call was judged (the line's `time`).
    pub time: String,
    /// `deny` or `kill`.
    pub verdict: String,
    /// The system call name (`unlinkat`, `connect`, ...).
    pub syscall: String,
    /// The judged operation (`delete`, `write`, `connect`, ...).
    pub op: String,
    /// The file the call was about (its `path`), if any, as raw text.
    pub path: Option<String>,
    /// What the call was about, for reading: path (`-> path2`), address, or argv.
    pub target: String,
    /// The rule that refused the call.
    pub rule: String,
    /// The rule's stated reason, if it gives one.
    pub reason: Option<String>,
    /// The errno returned to the caller, by name (`EPERM`).
    pub errno: Option<String>,
    /// The calling thread's pid.
    pub pid: u64,
    /// The calling thread's `comm`.
    pub comm: String,
    /// The decision's sequence number within the run.
    pub seq: u64,
}

fn text(v: &Value) -> Option<String> {
    text_bytes(v).map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| a.iter().filter_map(text).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl Report {
    /// Reads the report out of a log's decoded lines (in order).
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Value>) -> Report {
        let refused = Query {
            denied_only: true,
            ..Query::default()
        };
        let mut r = Report::default();
        for v in events {
            match v["type"].as_str() {
                Some("run-start") => {
                    r.run = v["run"].as_str().unwrap_or_default().to_owned();
                    r.profile = v["profile"].as_str().unwrap_or_default().to_owned();
                    r.workspace = text(&v["workspace"]).unwrap_or_default();
                    r.command = list(&v["command"]);
                }
                Some("run-end") => {
                    r.status = v["status"].as_i64();
                    r.outcome = v["outcome"].as_str().map(str::to_owned);
                    let c = &v["counts"];
                    let n = |k: &str| c[k].as_u64().unwrap_or(0);
                    r.counts = Some([n("allow"), n("deny"), n("risky"), n("kill"), n("error")]);
                    r.suppressed = v["suppressed"].as_u64().unwrap_or(0);
                }
                Some("decision") if refused.matches(v) => r.refusals.push(Refusal::from(v)),
                _ => {}
            }
        }
        r
    }

    /// `path` relative to the workspace (or to `base` when given) when it lies inside it.
    pub fn relative(&self, path: &str, base: Option<&str>) -> String {
        let base = base.unwrap_or(&self.workspace);
        match Path::new(path).strip_prefix(base) {
            Ok(rel) if !base.is_empty() && !rel.as_os_str().is_empty() => {
                rel.to_string_lossy().into_owned()
            }
            _ => path.to_owned(),
        }
    }

    /// The Markdown summary: a heading, the run in one sentence, and a table of refusals (at
    /// most `max` rows).
    pub fn markdown(&self, max: usize) -> String {
        let mut s = String::new();
        let command = shorten(&self.command, 80);
        let n = self.refusals.len();
        let _ = match n {
            0 => writeln!(s, "### guard: no call refused in {}", code(&command)),
            1 => writeln!(s, "### guard: 1 call refused in {}", code(&command)),
            n => writeln!(s, "### guard: {n} calls refused in {}", code(&command)),
        };
        s.push('\n');
        let _ = write!(
            s,
            "Run {} under profile {}",
            code(&self.run),
            code(&self.profile)
        );
        match (self.status, &self.outcome) {
            (Some(status), Some(outcome)) => {
                let _ = write!(s, ", exit status {status} ({})", html(outcome));
            }
            _ => s.push_str(", with no end in its log (still running, or guard was killed)"),
        }
        if let Some([allow, deny, risky, kill, error]) = self.counts {
            let _ = write!(
                s,
                ". Calls judged: {} ({allow} allowed, {risky} risky, {deny} denied, {kill} killed the run",
                allow + deny + risky + kill + error
            );
            if error > 0 {
                let _ = write!(s, ", {error} failed on a path that does not exist");
            }
            s.push(')');
        }
        s.push_str(".\n");
        if self.suppressed > 0 {
            let _ = writeln!(
                s,
                "\n{} events were left out of the log by its rate limit; the counts above are exact.",
                self.suppressed
            );
        }
        if n > 0 {
            s.push_str("\n| verdict | call | target | rule | reason |\n|---|---|---|---|---|\n");
            for r in self.refusals.iter().take(max) {
                let target = match &r.path {
                    Some(p) if r.target == *p => self.relative(p, None),
                    _ => r.target.clone(),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} {} | {} | {} | {} |",
                    html(&r.verdict),
                    html(&r.op),
                    html(&format!("({})", r.syscall)),
                    code(&shorten(&target, 120)),
                    code(&r.rule),
                    html(r.reason.as_deref().unwrap_or("")),
                );
            }
            if n > max {
                let _ = writeln!(s, "\n...and {} more.", n - max);
            }
            let _ = writeln!(
                s,
                "\nEvery refusal: `guard log {} --denied`, or the audit log in this job's artifact.",
                self.run
            );
        }
        s
    }

    /// GitHub workflow commands: one `::error` per refusal (at most `max`, then one
    /// `::warning` saying how many more). `base` is the repository root for `file=`.
    pub fn github_annotations(&self, base: Option<&str>, max: usize) -> String {
        let mut s = String::new();
        for r in self.refusals.iter().take(max) {
            let mut props = Vec::new();
            if let Some(p) = &r.path {
                props.push(format!("file={}", property(&self.relative(p, base))));
            }
            props.push(format!(
                "title={}",
                property(&format!("guard refused {} ({})", r.op, r.rule))
            ));
            let reason = r.reason.as_deref().map_or_else(
                || format!("refused by rule {}", r.rule),
                |why| format!("{why} (rule {})", r.rule),
            );
            let errno = r
                .errno
                .as_deref()
                .map(|e| format!(", {e}"))
                .unwrap_or_default();
            let message = format!(
                "{} {}: {reason}; pid {} ({}){errno}",
                r.syscall, r.target, r.pid, r.comm
            );
            let _ = writeln!(s, "::error {}::{}", props.join(","), data(&message));
        }
        if self.refusals.len() > max {
            let _ = writeln!(
                s,
                "::warning title=guard::{}",
                data(&format!(
                    "{} more refused calls; see the audit log (guard log {} --denied)",
                    self.refusals.len() - max,
                    self.run
                ))
            );
        }
        s
    }

    /// A GitLab Code Quality report (a JSON array), one issue per refusal.
    pub fn gitlab_code_quality(&self) -> String {
        let issues: Vec<Value> = self
            .refusals
            .iter()
            .map(|r| {
                let location = r.path.as_deref().map_or_else(
                    || format!("{}: {}", r.op, r.target),
                    |p| self.relative(p, None),
                );
                serde_json::json!({
                    "description": format!("guard refused {} {}: {}", r.syscall, r.target,
                        r.reason.clone().unwrap_or_else(|| format!("rule {}", r.rule))),
                    "check_name": format!("guard/{}", r.rule),
                    "fingerprint": fingerprint(&self.run, r.seq),
                    "severity": if r.verdict == "kill" { "critical" } else { "major" },
                    "location": { "path": location, "lines": { "begin": 1 } },
                })
            })
            .collect();
        serde_json::to_string_pretty(&issues).unwrap_or_else(|_| "[]".into())
    }
}

impl From<&Value> for Refusal {
    fn from(v: &Value) -> Refusal {
        let path = text(&v["path"]);
        let target = match (&path, text(&v["path2"]), v["addr"].as_str()) {
            (Some(p), Some(p2), _) => format!("{p} -> {p2}"),
            (_, _, Some(addr)) => addr.to_owned(),
            (Some(p), None, None) => p.clone(),
            (None, _, None) => list(&v["argv"]),
        };
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        Refusal {
            time: s("time"),
            verdict: s("verdict"),
            syscall: s("syscall"),
            op: s("op"),
            path,
            target,
            rule: s("rule"),
            reason: v["reason"].as_str().map(str::to_owned),
            errno: v["errno"].as_str().map(str::to_owned),
            pid: v["pid"].as_u64().unwrap_or(0),
            comm: text(&v["comm"]).unwrap_or_default(),
            seq: v["seq"].as_u64().unwrap_or(0),
        }
    }
}

/// At most `max` characters, on one line, control characters escaped.
fn shorten(s: &str, max: usize) -> String {
    let one_line = escape_for_terminal(
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .as_bytes(),
    );
    if one_line.chars().count() <= max {
        return one_line;
    }
    one_line
        .chars()
        .take(max.saturating_sub(3))
        .collect::<String>()
        + "..."
}

/// Text for Markdown and HTML: control characters escaped, `& < > |` as entities (a `|` would
/// end a table cell), and Markdown's emphasis and link characters as entities too.
fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in escape_for_terminal(s.as_bytes()).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("&#124;"),
            '*' | '_' | '`' | '[' | ']' | '\\' | '#' | '~' => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A code span that no content can close or break out of.
fn code(s: &str) -> String {
    format!("<code>{}</code>", html(s))
}

/// A workflow command's message: `%`, CR and LF encoded as GitHub's runner decodes them.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`, which delimit properties.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

fn fingerprint(run: &str, seq: u64) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(format!("{run}:{seq}").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<Value> {
        [
            r#"{"type":"run-start","run":"r1","profile":"ci","workspace":"/ws","command":["bash","-c","make\ntest"]}"#,
            r#"{"type":"decision","seq":3,"verdict":"deny","syscall":"openat","op":"write","path":"/ws/.git/hooks/pre-commit","rule":"fs.protect","reason":"git hooks run code","errno":"EACCES","pid":7,"comm":"sh","time":"t"}"#,
            r#"{"type":"decision","seq":4,"verdict":"deny","syscall":"unlinkat","op":"delete","path":"/etc/a|b,c:d%\n::error::x","rule":"fs.write-roots","errno":"EACCES","pid":8,"comm":"rm","time":"t"}"#,
            r#"{"type":"decision","seq":5,"verdict":"deny","syscall":"connect","op":"connect","addr":"1.2.3.4:443","rule":"net.connect","pid":9,"comm":"curl","time":"t"}"#,
            r#"{"type":"decision","seq":6,"verdict":"deny","syscall":"openat","op":"write","path":"/ws/missing/x","rule":"resolve","pid":9,"comm":"sh","time":"t"}"#,
            r#"{"type":"decision","seq":7,"verdict":"allow","syscall":"openat","op":"write","path":"/ws/ok","rule":"default","pid":9,"comm":"sh","time":"t"}"#,
            r#"{"type":"run-end","status":2,"outcome":"exited","counts":{"allow":5,"deny":4,"risky":0,"kill":0},"suppressed":0}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
    }

    #[test]
    fn refusals_are_read_from_the_log() {
        let r = Report::from_events(&events());
        assert_eq!(r.run, "r1");
        assert_eq!(r.command, "bash -c make\ntest");
        assert_eq!(r.status, Some(2));
        let rules: Vec<&str> = r.refusals.iter().map(|x| x.rule.as_str()).collect();
        assert_eq!(
            rules,
            ["fs.protect", "fs.write-roots", "net.connect"],
            "resolve is not a refusal"
        );
        assert_eq!(r.refusals[2].target, "1.2.3.4:443");
        assert_eq!(r.refusals[2].path, None);
    }

    #[test]
    fn annotations_name_file_and_rule_and_cannot_be_forged() {
        let r = Report::from_events(&events());
        let out = r.github_annotations(Some("/ws"), 50);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].starts_with("::error file=.git/hooks/pre-commit,title=guard refused write (fs.protect)::openat /ws/.git/hooks/pre-commit: git hooks run code (rule fs.protect)"), "{}", lines[0]);
        // The hostile name stays inside its property and message, on one line.
        assert!(
            lines[1].starts_with("::error file=/etc/a|b%2Cc%3Ad%25%0A%3A%3Aerror%3A%3Ax,title="),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with(
                "::error title=guard refused connect (net.connect)::connect 1.2.3.4:443"
            ),
            "{}",
            lines[2]
        );
        let capped = r.github_annotations(None, 1);
        assert_eq!(capped.lines().count(), 2);
        assert!(
            capped.contains("::warning title=guard::2 more refused calls"),
            "{capped}"
        );
    }

    #[test]
    fn markdown_lists_each_refusal_in_a_table_that_holds() {
        let r = Report::from_events(&events());
        let md = r.markdown(50);
        assert!(
            md.starts_with("### guard: 3 calls refused in <code>bash -c make test</code>"),
            "{md}"
        );
        assert!(md.contains("exit status 2 (exited)"), "{md}");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| deny")).collect();
        assert_eq!(rows.len(), 3, "{md}");
        assert!(
            rows[0].contains("<code>.git/hooks/pre-commit</code>")
                && rows[0].contains("fs.protect")
        );
        // Five cells in every row: the hostile `|` is an entity, the newline escaped.
        for row in &rows {
            assert_eq!(row.matches('|').count(), 6, "{row}");
        }
        assert!(
            rows[1].contains("<code>/etc/a&#124;b,c:d% ::error::x</code>"),
            "{}",
            rows[1]
        );
        let none = Report {
            refusals: Vec::new(),
            ..r.clone()
        };
        assert!(none.markdown(50).starts_with("### guard: no call refused"));
    }

    #[test]
    fn gitlab_code_quality_issues() {
        let r = Report::from_events(&events());
        let v: Value = serde_json::from_str(&r.gitlab_code_quality()).expect("json");
        let issues = v.as_array().expect("array");
        assert_eq!(issues.len(), 3);
        assert_eq!(issues[0]["check_name"], "guard/fs.protect");
        assert_eq!(issues[0]["location"]["path"], ".git/hooks/pre-commit");
        assert_eq!(issues[0]["fingerprint"].as_str().map(str::len), Some(64));
        assert_ne!(issues[0]["fingerprint"], issues[1]["fingerprint"]);
    }
}
