//! The audit log wire format, version 2: one JSON object per line,
//! `{"v":2,"type":"<kind>","time":"<RFC 3339 UTC, microseconds>","run":"<run id>",
//! "prev":"sha256:<hex>",...}` followed by the fields of that kind (`prev` links the line to the
//! one before it: see [`super::chain`]). Field names are snake_case, `type` values and enumerated values are
//! kebab-case. Optional fields are omitted when absent (except `landlock_abi`, which is always
//! present and `null` without Landlock). Paths, argv elements and `comm` are [`PathText`]: a JSON
//! string, or `{"base64": "..."}` when the bytes are not UTF-8. Readers must ignore fields they do
//! not know; a change that removes or retypes a field bumps `v`.
//!
//! Promises: [`encode`] never panics and always yields exactly one line (JSON escapes every
//! control character), and [`decode`] reads back everything [`encode`] wrote.

use serde::{Deserialize, Serialize};

use super::text::PathText;
use super::time::Timestamp;

/// The wire format version written in every line's `v`.
///
/// Version 2 gave a call that failed only because its path does not resolve its own verdict,
/// `error`, where version 1 wrote `deny` (rule `resolve`). Everything else is as in version 1,
/// so a version 1 line reads as a version 2 line.
pub const VERSION: u32 = 2;

/// The oldest version [`decode`] reads.
pub const OLDEST_VERSION: u32 = 1;

/// One audit record, without the envelope (`v`, `time`, `run`) that [`encode`] adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Event {
    /// The first line of a run: what runs, under which profile, and what the kernel enforces.
    RunStart(RunStart),
    /// The supervisor judged one trapped system call.
    Decision(Decision),
    /// The journal took a checkpoint.
    Checkpoint(Checkpoint),
    /// The workspace was rolled back to a checkpoint.
    Rollback(Rollback),
    /// Events that were counted but not written (rate limit, full queue, undelivered export).
    Suppressed(Suppressed),
    /// The last line of a run: how it ended and what it decided.
    RunEnd(RunEnd),
    /// An internal failure of the supervisor; the run may go on.
    Error(ErrorEvent),
}

impl Event {
    /// The `type` value on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStart(_) => "run-start",
            Event::Decision(_) => "decision",
            Event::Checkpoint(_) => "checkpoint",
            Event::Rollback(_) => "rollback",
            Event::Suppressed(_) => "suppressed",
            Event::RunEnd(_) => "run-end",
            Event::Error(_) => "error",
        }
    }
}

/// `run-start`: the first line of a run; what runs, under which profile, and what the kernel
/// actually enforces.
///
/// - `profile` (string): the profile name as given (`default`, `./agent.toml`).
/// - `profile_sources` (list of text): every file or built-in the resolved profile came from, in
///   `extends` order (built-ins as `builtin:NAME`).
/// - `profile_digest` (string): `sha256:<hex>` of the resolved profile.
/// - `workspace` (text): the absolute workspace path.
/// - `command` (list of text): the argv of the confined command.
/// - `guard_version` (string), `kernel` (string, `uname -r`).
/// - `landlock_abi` (integer or null): the Landlock ABI in effect; null when Landlock is missing.
/// - `enforced` (list of strings): features in effect, among `landlock-fs`, `landlock-net-tcp`,
///   `landlock-scope-signal`, `landlock-scope-abstract-unix`, `seccomp-deny-list`,
///   `seccomp-notify`, `sync-wake-up`.
/// - `degraded` (list of `{feature, reason}`): wanted features that are not in effect, and why.
/// - `pid` (integer): guard's own pid; `uid` (integer): the real uid of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStart {
    /// The profile name as given (`default`, `./agent.toml`).
    pub profile: String,
    /// Every file or built-in the resolved profile came from, in `extends` order (built-ins as
    /// `builtin:NAME`).
    pub profile_sources: Vec<PathText>,
    /// `sha256:<hex>` of the resolved profile.
    pub profile_digest: String,
    /// The absolute workspace path.
    pub workspace: PathText,
    /// The argv of the confined command.
    pub command: Vec<PathText>,
    /// The version of guard that wrote the run.
    pub guard_version: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The Landlock ABI in effect; `None` when the kernel has no Landlock.
    pub landlock_abi: Option<u32>,
    /// Features in effect (`landlock-fs`, `seccomp-notify`, ...; the list above).
    pub enforced: Vec<String>,
    /// Wanted features that are not in effect, and why.
    pub degraded: Vec<Degraded>,
    /// guard's own pid.
    pub pid: u32,
    /// The real uid of the run.
    pub uid: u32,
}

/// One entry of `run-start.degraded`: `feature` (string, same vocabulary as `enforced`) and
/// `reason` (string, human readable, e.g. `landlock ABI 3 < 4`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degraded {
    /// The feature that is missing, in the vocabulary of `run-start.enforced`.
    pub feature: String,
    /// Why it is missing, for a human (`landlock ABI 3 < 4`).
    pub reason: String,
}

/// `decision`: the supervisor judged one trapped system call.
///
/// - `seq` (integer): the supervisor's sequence number, strictly increasing within a run; gaps
///   mean suppressed decisions (see `suppressed`).
/// - `pid` (integer), `comm` (text): the calling thread's pid and `comm`.
/// - `exe` (text, optional): the caller's executable.
/// - `syscall` (string): the system call name (`unlinkat`, `execve`, `connect`, ...).
/// - `op` (string): the judged operation: `exec`, `delete`, `rename`, `write`, `create`, `link`,
///   `chmod`, `connect`.
/// - `path` (text, optional): the target, resolved; `path2` (text, optional): the second path
///   (rename/link destination).
/// - `argv` (list of text, optional): for `exec`, the new program's arguments.
/// - `addr` (string, optional): for `connect`, `ip:port`, `[ipv6]:port` or a socket path.
/// - `cwd` (text, optional): the caller's working directory when `path` was relative.
/// - `verdict` (string): `allow`, `deny`, `risky` (allowed after a checkpoint), `kill`
///   (denied and the run ended) or `error` (the call failed with the kernel's own answer
///   because its path does not resolve: an outcome, not a refusal).
/// - `errno` (string, optional): the error returned to the caller, by name (`EPERM`).
/// - `rule` (string): the rule that decided: a profile rule id or a built-in one (`fs.protect`,
///   `fs.write-roots`, `net.connect`, `default`, `observe`).
/// - `reason` (string, optional): the rule's stated reason.
/// - `latency_us` (integer): microseconds from notification to answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The supervisor's sequence number, strictly increasing within a run; gaps are suppressed
    /// decisions.
    pub seq: u64,
    /// The calling thread's pid.
    pub pid: u32,
    /// The calling thread's `comm` (its name, as the kernel truncates it).
    pub comm: PathText,
    /// The caller's executable, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<PathText>,
    /// The system call name (`unlinkat`, `execve`, `connect`, ...).
    pub syscall: String,
    /// The judged operation (`exec`, `delete`, `rename`, `write`, `create`, `link`, `chmod`,
    /// `connect`, `dns`).
    pub op: String,
    /// The target path, resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathText>,
    /// The second path: the destination of a rename or a link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path2: Option<PathText>,
    /// For `exec`, the new program's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<PathText>>,
    /// For `connect`, `ip:port`, `[ipv6]:port` or a socket path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// The name a DNS query asked for (`op` `dns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The caller's working directory, when `path` was relative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathText>,
    /// What guard answered.
    pub verdict: Verdict,
    /// The error returned to the caller, by name (`EPERM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// The rule that decided: a profile rule id or a built-in one (`fs.protect`, `fs.write-roots`,
    /// `net.connect`, `default`, `observe`).
    pub rule: String,
    /// The rule's stated reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Microseconds from the notification to the answer.
    pub latency_us: u64,
}

/// `decision.verdict` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The call was performed.
    Allow,
    /// The call was refused with an errno.
    Deny,
    /// The call was allowed after the journal took a checkpoint.
    Risky,
    /// The call was refused and guard ended the run.
    Kill,
    /// The call failed with the kernel's own errno before any rule applied (a path that does
    /// not resolve): not a refusal.
    Error,
}

impl Verdict {
    /// Every verdict, in the order of `run-end.counts`: `allow`, `deny`, `risky`, `kill`, `error`.
    pub const ALL: [Verdict; 5] = [
        Verdict::Allow,
        Verdict::Deny,
        Verdict::Risky,
        Verdict::Kill,
        Verdict::Error,
    ];

    /// The verdict's name on the wire (`allow`, `risky`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Risky => "risky",
            Verdict::Kill => "kill",
            Verdict::Error => "error",
        }
    }

    /// Deny and kill: the call did not happen.
    pub fn is_denial(self) -> bool {
        matches!(self, Verdict::Deny | Verdict::Kill)
    }
}

/// `checkpoint`: the journal took a checkpoint. `id` (string): the checkpoint id, as accepted by
/// `guard rollback --to`; `reason` (string): why (`risky:<rule>`, `start`, `manual`); `pid`
/// (integer, optional): the process whose call caused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The checkpoint id, as `guard rollback --to` accepts it.
    pub id: String,
    /// Why it was taken (`risky:<rule>`, `start`, `manual`).
    pub reason: String,
    /// The process whose call caused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

/// `rollback`: the workspace was rolled back. `checkpoint` (string): the checkpoint restored;
/// `entries_undone` (integer): journal entries undone; `digest_after` (string): the workspace
/// tree digest afterwards, empty when it was not computed (a command's rollback on a denial
/// does not digest the whole workspace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The checkpoint restored.
    pub checkpoint: String,
    /// How many journal entries were undone.
    pub entries_undone: u64,
    /// The workspace tree digest afterwards (`sha256:<hex>`); empty when it was not computed.
    pub digest_after: String,
}

/// `suppressed`: events that were counted but not written. `count` (integer): how many since
/// `since` (time); `what` (string): `decision` for decisions over the rate limit, `overflow` for
/// events of any type dropped because the writer's queue was full, `otlp` for lines written
/// here but not delivered to the OTLP collector. Written at most once a second per `what`, and
/// at the end of the run; the counts of the `decision` and `overflow` lines add up to
/// `run-end.suppressed`, those of the `otlp` lines to `run-end.otlp_dropped`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suppressed {
    /// How many events were left out since `since`.
    pub count: u64,
    /// Which events: `decision` (over the rate limit), `overflow` (the writer's queue was full) or
    /// `otlp` (written here, not delivered to the collector).
    pub what: String,
    /// When the counting began.
    pub since: Timestamp,
}

/// `run-end`: the last line of a run.
///
/// - `status` (integer): guard's exit status (the command's, 128+N for signal N).
/// - `signal` (integer, optional): the signal that ended the command.
/// - `outcome` (string): `exited`, `signaled`, `policy-kill` or `error`.
/// - `counts` (`{allow, deny, risky, kill, error}`, integers): every decision of the run per
///   verdict, suppressed ones included (`error` is absent in version 1 logs: read as 0).
/// - `suppressed` (integer): events counted but not written over the whole run.
/// - `duration_ms` (integer): wall time of the run.
/// - `otlp_dropped` (integer, optional): with an OTLP exporter, lines written here that it did
///   not deliver (the sum of the `suppressed` lines with `what: otlp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// guard's exit status: the command's, or 128+N when signal N ended it.
    pub status: i32,
    /// The signal that ended the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// How the run ended.
    pub outcome: Outcome,
    /// Every decision of the run per verdict, suppressed ones included.
    pub counts: Counts,
    /// Events counted but not written over the whole run.
    pub suppressed: u64,
    /// Wall time of the run, in milliseconds.
    pub duration_ms: u64,
    /// With an OTLP exporter, lines written here that it did not deliver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_dropped: Option<u64>,
}

/// `run-end.outcome` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The command exited on its own.
    Exited,
    /// A signal ended the command.
    Signaled,
    /// guard ended the run on policy: a denial whose `on-deny` ends the run.
    PolicyKill,
    /// The command could not be started (its exec failed).
    Error,
}

/// Decisions per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Calls performed.
    pub allow: u64,
    /// Calls refused with an errno.
    pub deny: u64,
    /// Calls allowed after a checkpoint.
    pub risky: u64,
    /// Calls refused that ended the run.
    pub kill: u64,
    /// Calls that failed with the kernel's own errno (a path that does not resolve); 0 in version 1
    /// logs.
    #[serde(default)]
    pub error: u64,
}

impl Counts {
    /// The count for one verdict.
    pub fn get(&self, v: Verdict) -> u64 {
        match v {
            Verdict::Allow => self.allow,
            Verdict::Deny => self.deny,
            Verdict::Risky => self.risky,
            Verdict::Kill => self.kill,
            Verdict::Error => self.error,
        }
    }

    /// Every decision, whatever its verdict.
    pub fn total(&self) -> u64 {
        self.allow + self.deny + self.risky + self.kill + self.error
    }

    /// Calls refused by policy: `deny` and `kill` (what `guard log --denied` lists).
    pub fn refused(&self) -> u64 {
        self.deny + self.kill
    }
}

/// `error`: an internal failure of the supervisor (the run may go on). `message` (string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// What failed, for a human.
    pub message: String,
}

/// The envelope around an event's own fields, in wire order.
#[derive(Serialize)]
struct Line<'a, T> {
    v: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    time: Timestamp,
    run: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prev: Option<&'a str>,
    #[serde(flatten)]
    body: &'a T,
}

/// One line (no trailing newline) for `event`, stamped now, outside any chain.
pub fn encode(event: &Event, run: &str) -> String {
    encode_at(event, run, Timestamp::now())
}

/// One line (no trailing newline) for `event`, stamped `time`, outside any chain. Never
/// panics.
pub fn encode_at(event: &Event, run: &str, time: Timestamp) -> String {
    encode_line(event, run, time, None)
}

/// One line (no trailing newline) for `event`, stamped `time`, whose `prev` is the link to
/// the line before it (see [`super::chain`]). Never panics.
pub fn encode_chained(event: &Event, run: &str, time: Timestamp, prev: &str) -> String {
    encode_line(event, run, time, Some(prev))
}

fn encode_line(event: &Event, run: &str, time: Timestamp, prev: Option<&str>) -> String {
    let envelope = |kind| (kind, time, run, prev);
    let kind = event.kind();
    match event {
        Event::RunStart(e) => line(envelope(kind), e),
        Event::Decision(e) => line(envelope(kind), e),
        Event::Checkpoint(e) => line(envelope(kind), e),
        Event::Rollback(e) => line(envelope(kind), e),
        Event::Suppressed(e) => line(envelope(kind), e),
        Event::RunEnd(e) => line(envelope(kind), e),
        Event::Error(e) => line(envelope(kind), e),
    }
}

type Envelope<'a> = (&'static str, Timestamp, &'a str, Option<&'a str>);

fn line<T: Serialize>((kind, time, run, prev): Envelope<'_>, body: &T) -> String {
    let line = Line {
        v: VERSION,
        kind,
        time,
        run,
        prev,
        body,
    };
    serde_json::to_string(&line).unwrap_or_else(|e| {
        // Unreachable with these types (string keys only), but a log line beats a panic.
        let fallback = ErrorEvent {
            message: format!("cannot encode {kind} event: {e}"),
        };
        let line = Line {
            v: VERSION,
            kind: "error",
            time,
            run,
            prev,
            body: &fallback,
        };
        serde_json::to_string(&line).unwrap_or_default()
    })
}

/// A decoded line: the envelope and the event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Record {
    /// The wire format version of the line ([`VERSION`] or older, down to [`OLDEST_VERSION`]).
    pub v: u32,
    /// When the event happened.
    pub time: Timestamp,
    /// The id of the run that wrote the line.
    pub run: String,
    /// The link to the line before (absent in logs written before the chain existed).
    #[serde(default)]
    pub prev: Option<String>,
    /// The event itself.
    #[serde(flatten)]
    pub event: Event,
}

/// Decodes one line written by [`encode`] (or by a guard that wrote an older version, from
/// [`OLDEST_VERSION`] on). Unknown fields are ignored; an unknown `type` or a `v` outside
/// those versions is an error.
///
/// # Errors
///
/// A line that is not JSON, has no known `type`, lacks a field of its type, or has a `v`
/// outside [`OLDEST_VERSION`]..=[`VERSION`].
pub fn decode(line: &str) -> Result<Record, serde_json::Error> {
    let record: Record = serde_json::from_str(line)?;
    if !(OLDEST_VERSION..=VERSION).contains(&record.v) {
        return Err(serde::de::Error::custom(format_args!(
            "unsupported audit format version {}",
            record.v
        )));
    }
    Ok(record)
}

/// The name of an errno value (`EPERM`), or `E<number>` for one this platform does not name.
pub fn errno_name(errno: i32) -> String {
    match nix::errno::Errno::from_raw(errno) {
        nix::errno::Errno::UnknownErrno => format!("E{errno}"),
        known => format!("{known:?}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn decision(seq: u64, verdict: Verdict) -> Decision {
        Decision {
            seq,
            pid: 123,
            comm: PathText::from("rm"),
            exe: Some(PathText::from("/usr/bin/rm")),
            syscall: "unlinkat".into(),
            op: "delete".into(),
            path: Some(PathText::from("/ws/x")),
            path2: None,
            argv: None,
            addr: None,
            name: None,
            cwd: None,
            verdict,
            errno: verdict.is_denial().then(|| "EPERM".into()),
            rule: "fs.protect".into(),
            reason: None,
            latency_us: 4,
        }
    }

    pub(crate) fn run_end() -> RunEnd {
        RunEnd {
            status: 0,
            signal: None,
            outcome: Outcome::Exited,
            counts: Counts::default(),
            suppressed: 0,
            duration_ms: 1200,
            otlp_dropped: None,
        }
    }

    fn every_kind() -> Vec<Event> {
        let t = Timestamp::from_unix_micros(1_796_209_352_123_456);
        vec![
            Event::RunStart(RunStart {
                profile: "default".into(),
                profile_sources: vec!["builtin:default".into(), "/ws/.guard.toml".into()],
                profile_digest: "sha256:00ff".into(),
                workspace: PathText::from(b"/ws/\xff".to_vec()),
                command: vec!["make".into(), PathText::from(b"t\xfe\n".to_vec())],
                guard_version: "0.1.0".into(),
                kernel: "6.18.0".into(),
                landlock_abi: None,
                enforced: vec!["landlock-fs".into(), "seccomp-notify".into()],
                degraded: vec![Degraded {
                    feature: "landlock-net-tcp".into(),
                    reason: "landlock ABI 3 < 4".into(),
                }],
                pid: 99,
                uid: 1000,
            }),
            Event::Decision(decision(7, Verdict::Deny)),
            Event::Decision(Decision {
                path2: Some("/ws/b".into()),
                argv: Some(vec!["sh".into(), "-c".into(), "echo \u{1b}[2J".into()]),
                addr: Some("[::1]:443".into()),
                name: Some("api.github.com".into()),
                cwd: Some(PathText::from(b"/ws/\x80".to_vec())),
                reason: Some("no network".into()),
                ..decision(8, Verdict::Kill)
            }),
            Event::Checkpoint(Checkpoint {
                id: "c3".into(),
                reason: "risky:git-push".into(),
                pid: Some(5),
            }),
            Event::Rollback(Rollback {
                checkpoint: "c3".into(),
                entries_undone: 12,
                digest_after: "sha256:ab".into(),
            }),
            Event::Suppressed(Suppressed {
                count: 40,
                what: "decision".into(),
                since: t,
            }),
            Event::RunEnd(RunEnd {
                signal: Some(9),
                outcome: Outcome::PolicyKill,
                counts: Counts {
                    allow: 1,
                    deny: 2,
                    risky: 3,
                    kill: 4,
                    error: 5,
                },
                ..run_end()
            }),
            Event::Error(ErrorEvent {
                message: "bad\nthing\u{0}".into(),
            }),
        ]
    }

    #[test]
    fn every_kind_round_trips_on_one_line() {
        let t = Timestamp::from_unix_micros(1_796_209_352_123_456);
        for event in every_kind() {
            let line = encode_at(&event, "run-1", t);
            assert!(!line.chars().any(char::is_control), "{line}");
            let prefix = format!(
                r#"{{"v":2,"type":"{}","time":"2026-12-02T11:02:32.123456Z","run":"run-1","#,
                event.kind()
            );
            assert!(line.starts_with(&prefix), "{line}");
            let record = decode(&line).expect("decodes");
            assert_eq!(record.event, event);
            assert_eq!(record.time, t);
            assert_eq!(record.run, "run-1");
        }
    }

    #[test]
    fn decision_field_names_are_the_documented_ones() {
        let line = encode(&Event::Decision(decision(1, Verdict::Deny)), "r");
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        let mut keys: Vec<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(|k| &**k)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "comm",
                "errno",
                "exe",
                "latency_us",
                "op",
                "path",
                "pid",
                "rule",
                "run",
                "seq",
                "syscall",
                "time",
                "type",
                "v",
                "verdict"
            ]
        );
    }

    #[test]
    fn landlock_abi_is_always_present() {
        let Event::RunStart(start) = &every_kind()[0] else {
            unreachable!()
        };
        let line = encode(&Event::RunStart(start.clone()), "r");
        assert!(line.contains(r#""landlock_abi":null"#), "{line}");
    }

    #[test]
    fn run_id_with_control_characters_stays_on_one_line() {
        let line = encode(
            &Event::Error(ErrorEvent {
                message: "x".into(),
            }),
            "a\nb\"\u{7f}",
        );
        assert!(!line.contains('\n'));
        assert_eq!(decode(&line).expect("decodes").run, "a\nb\"\u{7f}");
    }

    #[test]
    fn decode_rejects_other_versions_and_kinds() {
        let line = encode(
            &Event::Error(ErrorEvent {
                message: "x".into(),
            }),
            "r",
        );
        assert!(decode(&line.replace(r#""v":2"#, r#""v":3"#)).is_err());
        assert!(decode(&line.replace(r#""v":2"#, r#""v":0"#)).is_err());
        assert!(decode(&line.replace(r#""type":"error""#, r#""type":"nope""#)).is_err());
        let extra = line.replace(r#""v":2"#, r#""v":2,"future":true"#);
        assert!(decode(&extra).is_ok());
    }

    #[test]
    fn version_1_lines_still_decode() {
        let v1 = r#"{"v":1,"type":"run-end","time":"2026-12-02T11:02:32.123456Z","run":"r","status":0,"outcome":"exited","counts":{"allow":1,"deny":2,"risky":0,"kill":0},"suppressed":0,"duration_ms":3}"#;
        let Event::RunEnd(end) = decode(v1).expect("a version 1 line decodes").event else {
            panic!("run-end");
        };
        assert_eq!((end.counts.deny, end.counts.error), (2, 0));
        let error = encode(&Event::Decision(decision(1, Verdict::Error)), "r");
        assert!(error.contains(r#""verdict":"error""#), "{error}");
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(libc::EPERM), "EPERM");
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(100_000), "E100000");
    }
}
