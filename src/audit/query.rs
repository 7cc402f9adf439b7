//! Which events `guard log` shows: a [`Query`] over decoded lines (time bounds, verdicts, rules,
//! system calls, path globs). Pure: no I/O, so it is unit tested here and the CLI only builds
//! it from its flags. Promises: a query with no condition keeps every event; any condition on a
//! decision's fields (`--denied`, `--verdict`, `--rule`, `--syscall`, `--path`) keeps decisions
//! only; values are compared exactly, paths by glob on their bytes (lossless, non-UTF-8 too).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::policy::PathSet;
use base64::Engine as _;
use serde_json::Value;

use super::time::Timestamp;

/// A filter over audit events; the default keeps everything.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only decisions that refused a call (`deny`, `kill`), leaving out calls that failed only
    /// because their path does not resolve (rule `resolve`: the kernel's own answer).
    pub denied_only: bool,
    /// Events at or after this time.
    pub since: Option<Timestamp>,
    /// Events before this time.
    pub until: Option<Timestamp>,
    /// Decisions with one of these verdicts.
    pub verdicts: Vec<String>,
    /// Decisions by one of these rules.
    pub rules: Vec<String>,
    /// Decisions on one of these system calls.
    pub syscalls: Vec<String>,
    /// Decisions whose `path` or `path2` matches one of these globs.
    pub paths: Option<PathGlobs>,
}

/// Path globs as `--path` takes them: `*` stays within a path component, `**` crosses them, and
/// a glob that does not start with `/` or `**` matches at any depth (`.github/**` is
/// `**/.github/**`).
#[derive(Debug, Clone)]
pub struct PathGlobs {
    set: PathSet,
}

impl PathGlobs {
    /// Compiles `--path` globs (the rules above).
    ///
    /// # Errors
    ///
    /// A pattern that is not a valid glob.
    pub fn new(patterns: &[String]) -> Result<PathGlobs, globset::Error> {
        let anchored: Vec<String> = patterns
            .iter()
            .map(|p| {
                if p.starts_with('/') || p.starts_with("**") {
                    p.clone()
                } else {
                    format!("**/{p}")
                }
            })
            .collect();
        Ok(PathGlobs {
            set: PathSet::new(&anchored)?,
        })
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        self.set.is_match(Path::new(OsStr::from_bytes(bytes)))
    }
}

impl Query {
    /// Whether the query looks at a decision's own fields (and so keeps decisions only).
    fn about_decisions(&self) -> bool {
        self.denied_only
            || !self.verdicts.is_empty()
            || !self.rules.is_empty()
            || !self.syscalls.is_empty()
            || self.paths.is_some()
    }

    /// Whether the decoded line `v` passes every filter of the query.
    pub fn matches(&self, v: &Value) -> bool {
        if self.since.is_some() || self.until.is_some() {
            let Some(time) = v["time"].as_str().and_then(Timestamp::parse) else {
                return false;
            };
            if self.since.is_some_and(|s| time < s) || self.until.is_some_and(|u| time >= u) {
                return false;
            }
        }
        if !self.about_decisions() {
            return true;
        }
        if v["type"] != "decision" {
            return false;
        }
        let verdict = v["verdict"].as_str().unwrap_or_default();
        let rule = v["rule"].as_str().unwrap_or_default();
        // Version 1 logs wrote a path that does not resolve as `deny` by rule `resolve`.
        if self.denied_only && (!matches!(verdict, "deny" | "kill") || rule == "resolve") {
            return false;
        }
        let one_of =
            |list: &[String], value: &str| list.is_empty() || list.iter().any(|x| x == value);
        if !one_of(&self.verdicts, verdict)
            || !one_of(&self.rules, rule)
            || !one_of(&self.syscalls, v["syscall"].as_str().unwrap_or_default())
        {
            return false;
        }
        match &self.paths {
            None => true,
            Some(globs) => ["path", "path2"]
                .iter()
                .filter_map(|k| text_bytes(&v[*k]))
                .any(|b| globs.matches(&b)),
        }
    }
}

/// The bytes of a text field: a JSON string, or `{"base64": ...}` decoded.
pub(crate) fn text_bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Object(map) => base64::engine::general_purpose::STANDARD
            .decode(map.get("base64")?.as_str()?)
            .ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::tests::{decision, run_end};
    use crate::audit::event::{encode_at, Event, Verdict};
    use crate::audit::text::PathText;

    const T: i64 = 1_796_209_352_123_456;

    fn value(event: Event) -> Value {
        serde_json::from_str(&encode_at(&event, "r1", Timestamp::from_unix_micros(T)))
            .expect("json")
    }

    fn deny_at(path: &[u8]) -> Value {
        let mut d = decision(1, Verdict::Deny);
        d.path = Some(PathText::from(path.to_vec()));
        value(Event::Decision(d))
    }

    #[test]
    fn the_default_keeps_everything() {
        let q = Query::default();
        assert!(q.matches(&value(Event::RunEnd(run_end()))));
        assert!(q.matches(&deny_at(b"/ws/x")));
    }

    #[test]
    fn denied_keeps_refusals_but_not_unresolvable_paths() {
        let q = Query {
            denied_only: true,
            ..Query::default()
        };
        assert!(q.matches(&value(Event::Decision(decision(1, Verdict::Kill)))));
        assert!(!q.matches(&value(Event::Decision(decision(1, Verdict::Allow)))));
        assert!(!q.matches(&value(Event::RunEnd(run_end()))));
        let mut d = decision(1, Verdict::Deny);
        d.rule = "resolve".into();
        assert!(!q.matches(&value(Event::Decision(d))));
    }

    #[test]
    fn fields_are_compared_exactly() {
        let q = Query {
            verdicts: vec!["deny".into()],
            rules: vec!["fs.protect".into()],
            syscalls: vec!["unlinkat".into(), "connect".into()],
            ..Query::default()
        };
        assert!(q.matches(&deny_at(b"/ws/x")));
        let q = Query {
            rules: vec!["fs".into()],
            ..Query::default()
        };
        assert!(!q.matches(&deny_at(b"/ws/x")));
    }

    #[test]
    fn time_bounds_are_half_open() {
        let at = Timestamp::from_unix_micros(T);
        let q = |since, until| Query {
            since,
            until,
            ..Query::default()
        };
        let v = value(Event::RunEnd(run_end()));
        assert!(q(Some(at), None).matches(&v));
        assert!(!q(None, Some(at)).matches(&v));
        assert!(q(None, Some(Timestamp::from_unix_micros(T + 1))).matches(&v));
        assert!(!q(Some(Timestamp::from_unix_micros(T + 1)), None).matches(&v));
    }

    #[test]
    fn path_globs_match_at_any_depth_and_on_raw_bytes() {
        let q = |p: &str| Query {
            paths: Some(PathGlobs::new(&[p.to_string()]).expect("glob")),
            ..Query::default()
        };
        assert!(q(".github/**").matches(&deny_at(b"/ws/.github/workflows/ci.yml")));
        assert!(!q(".github/**").matches(&deny_at(b"/ws/src/github/x")));
        assert!(q("/ws/*").matches(&deny_at(b"/ws/x")));
        assert!(!q("/ws/*").matches(&deny_at(b"/ws/a/x")));
        assert!(q("**/bad*").matches(&deny_at(b"/ws/bad\xffname")));
        let mut d = decision(1, Verdict::Allow);
        d.path2 = Some("/ws/.github/new".into());
        assert!(q(".github/*").matches(&value(Event::Decision(d))));
        assert!(PathGlobs::new(&["a[".to_string()]).is_err());
    }
}
