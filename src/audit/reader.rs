//! Reading audit logs back, for `guard log`: whole files ([`read_lines`]), live tails
//! ([`follow`], which waits for a log that does not exist yet) and one human-readable line per
//! event ([`format_human`]). Events stay
//! `serde_json::Value`s so that a newer log (unknown types or fields) still reads. Promises: a
//! truncated last line (guard crashed mid-write) is skipped, any other malformed line is an error
//! naming the file and line; human output never contains a control character from the log, so a
//! hostile file name cannot drive the terminal.

use std::fs::File;
use std::io::{self, Read as _, Write};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::query::Query;
use super::text::escape_for_terminal;
use super::AuditError;

/// How often [`follow`] looks for new lines.
const POLL: Duration = Duration::from_millis(100);

/// One line of a log as read back: its 1-based number in the file, its exact text (what the
/// hash chain covers) and its decoded value.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// The line number in the file, from 1.
    pub number: usize,
    /// The line's exact text, without the newline.
    pub text: String,
    /// The line decoded as JSON.
    pub value: Value,
}

/// Every event of the log at `path`, in order. A last line without its newline that does not
/// parse is taken for a crash mid-write and skipped.
///
/// # Errors
///
/// [`AuditError::Read`] when the file cannot be read, [`AuditError::Parse`] for a complete line
/// that is not JSON.
pub fn read_events(path: &Path) -> Result<Vec<Value>, AuditError> {
    Ok(read_lines(path)?.into_iter().map(|l| l.value).collect())
}

/// Every line of the log at `path` with its number and text; see [`read_events`].
///
/// # Errors
///
/// As [`read_events`].
pub fn read_lines(path: &Path) -> Result<Vec<LogLine>, AuditError> {
    let bytes = std::fs::read(path).map_err(|source| AuditError::Read {
        path: path.to_owned(),
        source,
    })?;
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.len() - 1;
    let mut out = Vec::new();
    for (i, line) in lines.into_iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(value) => out.push(LogLine {
                number: i + 1,
                text: String::from_utf8_lossy(line).into_owned(),
                value,
            }),
            Err(_) if i == last && !complete => break,
            Err(source) => {
                return Err(AuditError::Parse {
                    path: path.to_owned(),
                    line: i + 1,
                    source,
                })
            }
        }
    }
    Ok(out)
}

/// Tails the log at `path`, writing [`format_human`] lines of the events `query` keeps to
/// `out`, until a `run-end` event has been read or `stop()` returns true (checked every 100 ms).
/// A log that does not exist yet is waited for.
///
/// # Errors
///
/// [`AuditError::Read`] when the log cannot be read, [`AuditError::Parse`] for a line that is
/// not JSON, [`AuditError::Output`] when writing to `out` fails.
pub fn follow(
    path: &Path,
    query: &Query,
    out: &mut dyn Write,
    stop: &dyn Fn() -> bool,
) -> Result<(), AuditError> {
    follow_with(path, query, stop, &mut |line| {
        writeln!(out, "{}", format_human(&line.value))?;
        out.flush()
    })
}

/// Like [`follow`], handing each kept line to `on_line` (e.g. to print the raw JSON).
///
/// # Errors
///
/// As [`follow`]; [`AuditError::Output`] when `on_line` fails.
pub fn follow_with(
    path: &Path,
    query: &Query,
    stop: &dyn Fn() -> bool,
    on_line: &mut dyn FnMut(&LogLine) -> io::Result<()>,
) -> Result<(), AuditError> {
    let read_err = |source| AuditError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = loop {
        match File::open(path) {
            Ok(file) => break file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if stop() {
                    return Ok(());
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(read_err(e)),
        }
    };
    let mut pending = Vec::new();
    let mut line_no = 0;
    loop {
        file.read_to_end(&mut pending).map_err(read_err)?;
        let mut consumed = 0;
        while let Some(len) = pending[consumed..].iter().position(|&b| b == b'\n') {
            let line = &pending[consumed..consumed + len];
            consumed += len + 1;
            line_no += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value =
                serde_json::from_slice(line).map_err(|source| AuditError::Parse {
                    path: path.to_owned(),
                    line: line_no,
                    source,
                })?;
            let ended = value["type"] == "run-end";
            if query.matches(&value) {
                let line = LogLine {
                    number: line_no,
                    text: String::from_utf8_lossy(line).into_owned(),
                    value,
                };
                on_line(&line).map_err(|source| AuditError::Output { source })?;
            }
            if ended {
                return Ok(());
            }
        }
        pending.drain(..consumed);
        if stop() {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
}

/// One line for a terminal, e.g.
/// `11:02:32.123 deny  EPERM unlinkat /ws/x (pid 123 rm) rule=fs.protect`. Times are UTC.
pub fn format_human(v: &Value) -> String {
    let time = clock(&v["time"]);
    let kind = text(&v["type"]);
    let body = match kind.as_str() {
        "decision" => return format!("{time} {}", decision(v)),
        "run-start" => {
            let mut s = format!(
                "run {} profile={} workspace={} landlock_abi={} enforced={}",
                text(&v["run"]),
                text(&v["profile"]),
                text(&v["workspace"]),
                text(&v["landlock_abi"]),
                list(&v["enforced"], ","),
            );
            if let Some(degraded) = v["degraded"].as_array().filter(|d| !d.is_empty()) {
                let items: Vec<String> = degraded
                    .iter()
                    .map(|d| format!("{} ({})", text(&d["feature"]), text(&d["reason"])))
                    .collect();
                s.push_str(&format!(" degraded={}", items.join(", ")));
            }
            s.push_str(&format!(" -- {}", list(&v["command"], " ")));
            s
        }
        "run-end" => {
            let c = &v["counts"];
            let mut s = format!("{} status={}", text(&v["outcome"]), text(&v["status"]));
            if !v["signal"].is_null() {
                s.push_str(&format!(" signal={}", text(&v["signal"])));
            }
            s.push_str(&format!(
                " allow={} deny={} risky={} kill={}",
                text(&c["allow"]),
                text(&c["deny"]),
                text(&c["risky"]),
                text(&c["kill"]),
            ));
            if !c["error"].is_null() {
                s.push_str(&format!(" error={}", text(&c["error"])));
            }
            s.push_str(&format!(
                " suppressed={} duration={}ms",
                text(&v["suppressed"]),
                text(&v["duration_ms"]),
            ));
            s
        }
        "checkpoint" => {
            let mut s = format!("{} reason={}", text(&v["id"]), text(&v["reason"]));
            if !v["pid"].is_null() {
                s.push_str(&format!(" (pid {})", text(&v["pid"])));
            }
            s
        }
        "rollback" => format!(
            "to {} undone={} digest={}",
            text(&v["checkpoint"]),
            text(&v["entries_undone"]),
            text(&v["digest_after"]),
        ),
        "suppressed" => format!(
            "{} {} events since {}",
            text(&v["count"]),
            text(&v["what"]),
            clock(&v["since"]),
        ),
        "error" => text(&v["message"]),
        _ => escape_for_terminal(v.to_string().as_bytes()),
    };
    format!("{time} {kind} {body}")
}

fn decision(v: &Value) -> String {
    let mut s = String::new();
    if !v["errno"].is_null() {
        s.push_str(&text(&v["errno"]));
        s.push(' ');
    }
    s.push_str(&text(&v["syscall"]));
    for (key, prefix) in [("path", ""), ("path2", "-> "), ("addr", "")] {
        if !v[key].is_null() {
            s.push_str(&format!(" {prefix}{}", text(&v[key])));
        }
    }
    if v["argv"].is_array() {
        s.push_str(&format!(" [{}]", list(&v["argv"], " ")));
    }
    s.push_str(&format!(
        " (pid {} {}) rule={}",
        text(&v["pid"]),
        text(&v["comm"]),
        text(&v["rule"])
    ));
    if !v["reason"].is_null() {
        s.push_str(&format!(" reason=\"{}\"", text(&v["reason"])));
    }
    format!("{:<5} {s}", text(&v["verdict"]))
}

/// `HH:MM:SS.mmm` of an RFC 3339 time, or the whole value when it is not one.
fn clock(v: &Value) -> String {
    match v.as_str().and_then(|t| t.get(11..23)) {
        Some(hms) => escape_for_terminal(hms.as_bytes()),
        None => text(v),
    }
}

/// A field for display: strings as is, `{"base64": ...}` decoded, anything else as JSON; always
/// escaped for the terminal.
fn text(v: &Value) -> String {
    let bytes = match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(map) if map.len() == 1 && map.contains_key("base64") => {
            let b64 = map["base64"].as_str().unwrap_or_default();
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(bytes) => bytes,
                Err(_) => v.to_string().into_bytes(),
            }
        }
        Value::Null => b"-".to_vec(),
        other => other.to_string().into_bytes(),
    };
    escape_for_terminal(&bytes)
}

fn list(v: &Value, sep: &str) -> String {
    match v.as_array() {
        Some(items) => items.iter().map(text).collect::<Vec<_>>().join(sep),
        None => text(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::tests::decision as sample;
    use crate::audit::event::{encode_at, Event, Verdict};
    use crate::audit::text::PathText;
    use crate::audit::time::Timestamp;

    const T: i64 = 1_796_209_352_123_456;

    fn line(event: Event) -> String {
        encode_at(&event, "r1", Timestamp::from_unix_micros(T))
    }

    fn value(event: Event) -> Value {
        serde_json::from_str(&line(event)).expect("json")
    }

    #[test]
    fn human_decision_line() {
        let v = value(Event::Decision(sample(1, Verdict::Deny)));
        assert_eq!(
            format_human(&v),
            "11:02:32.123 deny  EPERM unlinkat /ws/x (pid 123 rm) rule=fs.protect"
        );
    }

    #[test]
    fn human_lines_escape_hostile_bytes() {
        let mut d = sample(1, Verdict::Allow);
        d.path = Some(PathText::from(b"/ws/\x1b]0;pwned\x07\xff".to_vec()));
        d.argv = Some(vec!["ls".into(), "\n".into()]);
        let shown = format_human(&value(Event::Decision(d)));
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert!(
            shown.contains("/ws/\\u{1b}]0;pwned\\u{7}\\xff [ls \\n]"),
            "{shown}"
        );
    }

    #[test]
    fn read_tolerates_a_truncated_last_line_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let full = line(Event::Decision(sample(1, Verdict::Deny)));
        let text = format!("{full}\n{full}\n{}", &full[..full.len() / 2]);
        std::fs::write(&path, &text).expect("write");
        assert_eq!(read_events(&path).expect("read").len(), 2);

        std::fs::write(&path, format!("{}\n{full}\n", &full[..10])).expect("write");
        let err = read_events(&path).expect_err("corrupt middle line");
        assert!(matches!(err, AuditError::Parse { line: 1, .. }), "{err:?}");
        assert!(err.to_string().contains("audit.jsonl"));
    }

    #[test]
    fn follow_sees_appended_lines_until_run_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let first = line(Event::Decision(sample(1, Verdict::Deny)));
        std::fs::write(&path, format!("{first}\n")).expect("write");
        let appender = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .expect("open");
                let allow = line(Event::Decision(sample(2, Verdict::Allow)));
                let (a, b) = allow.split_at(20);
                f.write_all(a.as_bytes()).expect("write");
                std::thread::sleep(Duration::from_millis(150));
                writeln!(f, "{b}").expect("write");
                let end = line(Event::RunEnd(crate::audit::event::tests::run_end()));
                writeln!(f, "{end}").expect("write");
            })
        };
        let mut out = Vec::new();
        follow(&path, &Query::default(), &mut out, &|| false).expect("follow");
        appender.join().expect("appender");
        let out = String::from_utf8(out).expect("utf8");
        let kinds: Vec<_> = out.lines().map(|l| l.split(' ').nth(1)).collect();
        assert_eq!(
            kinds,
            [Some("deny"), Some("allow"), Some("run-end")],
            "{out}"
        );
    }

    #[test]
    fn follow_stops_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "").expect("write");
        let mut out = Vec::new();
        follow(&path, &Query::default(), &mut out, &|| true).expect("follow");
        assert!(out.is_empty());
    }

    #[test]
    fn follow_waits_for_a_log_that_does_not_exist_yet() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                // Written only once the reader has looked and found nothing.
                rx.recv().expect("the reader looked");
                let end = line(Event::RunEnd(crate::audit::event::tests::run_end()));
                std::fs::write(&path, format!("{end}\n")).expect("write");
            })
        };
        let mut out = Vec::new();
        let looked = std::cell::Cell::new(false);
        let stop = || {
            if !looked.replace(true) {
                tx.send(()).expect("writer waits");
            }
            false
        };
        follow(&path, &Query::default(), &mut out, &stop).expect("follow");
        writer.join().expect("writer");
        assert!(String::from_utf8(out).expect("utf8").contains("run-end"));
    }
}
