//! What the OpenTelemetry exporter sends, and where: the endpoint and headers
//! ([`OtlpConfig::detect`], from `--audit-otlp` or the standard `OTEL_EXPORTER_OTLP_*`
//! variables), the resource attributes a fleet needs to tell runs apart (host, user, run id, CI
//! job), and one OTLP `LogRecord` per audit line ([`log_record`]). Pure apart from reading the
//! environment and the host name; the thread that sends is in `export.rs`.
//!
//! Mapping: the record's body is the audit line exactly as written to the local log (so a
//! collector's copy can be compared with, and chained like, the local file); `time_unix_nano` is
//! the event's time; `event_name` is `guard.<type>`; a few fields are repeated as attributes
//! for routing and queries (`guard.type`, `guard.verdict`, `guard.rule`, `guard.syscall`,
//! `guard.op`, `guard.path`, `guard.prev`); severity is WARN for refusals, ERROR for `error`,
//! INFO otherwise.

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, SeverityNumber};
use serde_json::Value;

use super::query::text_bytes;

/// The OTLP/HTTP path of the logs signal, appended to a base endpoint.
const LOGS_PATH: &str = "v1/logs";
/// How long one export request may take, connection included.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how to export; `None` from [`OtlpConfig::detect`] when nothing asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The full URL of the logs endpoint (`http://host:4318/v1/logs`).
    pub endpoint: String,
    /// Extra request headers (authentication for the collector).
    pub headers: Vec<(String, String)>,
    /// Resource attributes, in order.
    pub resource: Vec<(String, String)>,
    /// How long one export request may take before it is given up.
    pub timeout: Duration,
}

/// Why an OTLP setting cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OTLP export: {0}")]
pub struct OtlpConfigError(String);

/// CI variables that identify a job, exported as resource attributes when present:
/// (variable, semantic-convention attribute or "" for none). Every one is also exported under
/// its own name as `ci.<VARIABLE>`.
const CI_IDENTITY: &[(&str, &str)] = &[
    ("GITHUB_RUN_ID", "cicd.pipeline.run.id"),
    ("GITHUB_RUN_ATTEMPT", ""),
    ("GITHUB_WORKFLOW", "cicd.pipeline.name"),
    ("GITHUB_JOB", "cicd.pipeline.task.name"),
    ("GITHUB_REPOSITORY", "vcs.repository.name"),
    ("GITHUB_SHA", "vcs.ref.head.revision"),
    ("RUNNER_NAME", "cicd.worker.name"),
    ("CI_PIPELINE_ID", "cicd.pipeline.run.id"),
    ("CI_PROJECT_PATH", "vcs.repository.name"),
    ("CI_JOB_ID", "cicd.pipeline.task.run.id"),
    ("CI_JOB_NAME", "cicd.pipeline.task.name"),
    ("CI_COMMIT_SHA", "vcs.ref.head.revision"),
    ("CI_RUNNER_ID", "cicd.worker.id"),
    ("CI_RUNNER_DESCRIPTION", "cicd.worker.name"),
    ("BUILDKITE_BUILD_ID", "cicd.pipeline.run.id"),
    ("BUILDKITE_AGENT_NAME", "cicd.worker.name"),
    ("JENKINS_URL", ""),
    ("BUILD_TAG", ""),
];

impl OtlpConfig {
    /// The exporter's settings: `--audit-otlp URL` (`flag`) when given, else
    /// `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (used as is), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a
    /// base: `/v1/logs` is appended); `None` when none is set. A flag URL without a path gets
    /// `/v1/logs` too. Headers come from `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_EXPORTER_OTLP_LOGS_HEADERS` (`k=v,k2=v2`, percent-encoded values), extra resource
    /// attributes from `OTEL_RESOURCE_ATTRIBUTES`, the service name from `OTEL_SERVICE_NAME`.
    /// `env` reads a variable (the process environment in guard, a table in tests).
    ///
    /// # Errors
    ///
    /// [`OtlpConfigError`] for an endpoint that is not a plain `http://` URL or a protocol other
    /// than `http/protobuf`; the message has a hint.
    pub fn detect(
        flag: Option<&str>,
        run: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let endpoint = if let Some(url) = flag {
            with_logs_path(url, true)?
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") {
            with_logs_path(&url, false)?
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let base = url.trim_end_matches('/');
            check_url(base)?;
            format!("{base}/{LOGS_PATH}")
        } else {
            return Ok(None);
        };
        for name in [
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = var(name).filter(|p| p != "http/protobuf") {
                return Err(OtlpConfigError(format!(
                    "{name}={p} is not supported: guard sends http/protobuf\nhint: point guard at the collector's OTLP/HTTP receiver (port 4318)"
                )));
            }
        }
        let mut headers = Vec::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        ] {
            for (k, v) in pairs(&var(name).unwrap_or_default(), name)? {
                headers.retain(|(old, _): &(String, String)| !old.eq_ignore_ascii_case(&k));
                headers.push((k, v));
            }
        }
        let mut resource = detect_resource(run, env);
        if let Some(name) = var("OTEL_SERVICE_NAME") {
            set(&mut resource, "service.name", name);
        }
        for (k, v) in pairs(
            &var("OTEL_RESOURCE_ATTRIBUTES").unwrap_or_default(),
            "OTEL_RESOURCE_ATTRIBUTES",
        )? {
            if k != "guard.run.id" {
                set(&mut resource, &k, v);
            }
        }
        Ok(Some(OtlpConfig {
            endpoint,
            headers,
            resource,
            timeout: DEFAULT_TIMEOUT,
        }))
    }
}

fn check_url(url: &str) -> Result<(), OtlpConfigError> {
    if url.starts_with("http://") {
        return Ok(());
    }
    let why = if url.starts_with("https://") {
        "guard sends OTLP over plain HTTP only\nhint: run a collector on this host (http://127.0.0.1:4318) and let it forward with TLS"
    } else {
        "not an http:// URL\nhint: --audit-otlp http://127.0.0.1:4318"
    };
    Err(OtlpConfigError(format!("{url}: {why}")))
}

/// `url` as given, or with `/v1/logs` when `add_path` and it has no path.
fn with_logs_path(url: &str, add_path: bool) -> Result<String, OtlpConfigError> {
    check_url(url)?;
    let after_scheme = &url["http://".len()..];
    let has_path = after_scheme
        .find('/')
        .is_some_and(|i| after_scheme[i..] != *"/");
    Ok(if has_path || !add_path {
        url.to_owned()
    } else {
        format!("{}/{LOGS_PATH}", url.trim_end_matches('/'))
    })
}

/// `k=v,k2=v2` with percent-encoded values, as the OTLP variables write lists.
fn pairs(text: &str, name: &str) -> Result<Vec<(String, String)>, OtlpConfigError> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                OtlpConfigError(format!("{name}: `{}` is not key=value", p.trim()))
            })?;
            Ok((percent_decode(k.trim()), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn set(list: &mut Vec<(String, String)>, key: &str, value: String) {
    list.retain(|(k, _)| k != key);
    list.push((key.to_owned(), value));
}

/// The attributes that identify where a run happened.
fn detect_resource(run: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| env("USER"));
    let host = nix::sys::utsname::uname()
        .ok()
        .map(|u| u.nodename().to_string_lossy().into_owned());
    let mut out = vec![
        ("service.name".to_owned(), "guard".to_owned()),
        (
            "service.version".to_owned(),
            env!("GUARD_VERSION").to_owned(),
        ),
        ("guard.run.id".to_owned(), run.to_owned()),
        ("process.pid".to_owned(), std::process::id().to_string()),
        ("user.id".to_owned(), uid.to_string()),
    ];
    if let Some(u) = user {
        out.push(("user.name".to_owned(), u));
    }
    if let Some(h) = host {
        out.push(("host.name".to_owned(), h));
    }
    let provider = if env("GITHUB_ACTIONS").is_some() {
        Some("github-actions")
    } else if env("GITLAB_CI").is_some() {
        Some("gitlab-ci")
    } else if env("BUILDKITE").is_some() {
        Some("buildkite")
    } else if env("JENKINS_URL").is_some() {
        Some("jenkins")
    } else {
        None
    };
    if let Some(p) = provider {
        out.push(("ci.provider".to_owned(), p.to_owned()));
    }
    for (var, convention) in CI_IDENTITY {
        if let Some(value) = env(var).filter(|v| !v.is_empty()) {
            if !convention.is_empty() && !out.iter().any(|(k, _)| k == convention) {
                out.push(((*convention).to_owned(), value.clone()));
            }
            out.push((format!("ci.{var}"), value));
        }
    }
    out
}

pub(crate) fn key_value(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// The OTLP record for one audit line: `line` exactly as written, `value` its decoded form,
/// `observed` now in nanoseconds since the epoch.
pub fn log_record(line: &str, value: &Value, observed: u64) -> LogRecord {
    let kind = value["type"].as_str().unwrap_or_default();
    let time = value["time"]
        .as_str()
        .and_then(super::Timestamp::parse)
        .map_or(0, |t| u64::try_from(t.unix_micros()).unwrap_or(0) * 1000);
    let (severity, text) = match (kind, value["verdict"].as_str()) {
        ("error", _) => (SeverityNumber::Error, "ERROR"),
        (_, Some("deny" | "kill")) => (SeverityNumber::Warn, "WARN"),
        _ => (SeverityNumber::Info, "INFO"),
    };
    let mut attributes = vec![key_value("guard.type", kind.to_owned())];
    for (field, key) in [
        ("verdict", "guard.verdict"),
        ("rule", "guard.rule"),
        ("syscall", "guard.syscall"),
        ("op", "guard.op"),
        ("prev", "guard.prev"),
    ] {
        if let Some(s) = value[field].as_str() {
            attributes.push(key_value(key, s.to_owned()));
        }
    }
    if let Some(path) = text_bytes(&value["path"]) {
        attributes.push(key_value(
            "guard.path",
            String::from_utf8_lossy(&path).into_owned(),
        ));
    }
    LogRecord {
        time_unix_nano: time,
        observed_time_unix_nano: observed,
        severity_number: severity as i32,
        severity_text: text.to_owned(),
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(line.to_owned())),
        }),
        attributes,
        event_name: format!("guard.{kind}"),
        ..LogRecord::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn detect(
        flag: Option<&str>,
        vars: &[(&str, &str)],
    ) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OtlpConfig::detect(flag, "r1", &|k| vars.get(k).cloned())
    }

    fn endpoint(flag: Option<&str>, vars: &[(&str, &str)]) -> Option<String> {
        detect(flag, vars).expect("valid").map(|c| c.endpoint)
    }

    #[test]
    fn endpoints_follow_the_otlp_rules() {
        assert_eq!(endpoint(None, &[]), None);
        assert_eq!(
            endpoint(Some("http://127.0.0.1:4318"), &[]).as_deref(),
            Some("http://127.0.0.1:4318/v1/logs")
        );
        assert_eq!(
            endpoint(Some("http://c:4318/custom/path"), &[]).as_deref(),
            Some("http://c:4318/custom/path")
        );
        let base = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/otlp/")];
        assert_eq!(
            endpoint(None, &base).as_deref(),
            Some("http://c:4318/otlp/v1/logs")
        );
        let both = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://l:9/x"),
        ];
        assert_eq!(endpoint(None, &both).as_deref(), Some("http://l:9/x"));
        assert_eq!(
            endpoint(Some("http://flag:1"), &both).as_deref(),
            Some("http://flag:1/v1/logs"),
            "the flag wins"
        );
    }

    #[test]
    fn unusable_settings_are_refused_with_a_hint() {
        for (flag, vars) in [
            (Some("https://c:4318"), vec![]),
            (Some("c:4318"), vec![]),
            (
                None,
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
            ),
            (
                None,
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
                ],
            ),
        ] {
            let err = detect(flag, &vars).expect_err("refused");
            assert!(err.to_string().starts_with("OTLP export: "), "{err}");
        }
        let err = detect(Some("https://c"), &[]).expect_err("tls");
        assert!(err.to_string().contains("hint:"), "{err}");
    }

    #[test]
    fn headers_and_resource_attributes() {
        let c = detect(
            Some("http://c:4318"),
            &[
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "Authorization=Basic%20abc, x-a=1",
                ),
                ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "X-A=2"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "deployment.environment=ci,guard.run.id=spoofed",
                ),
                ("OTEL_SERVICE_NAME", "guard-fleet"),
                ("GITHUB_ACTIONS", "true"),
                ("GITHUB_RUN_ID", "42"),
                ("RUNNER_NAME", "runner-7"),
            ],
        )
        .expect("valid")
        .expect("configured");
        assert_eq!(
            c.headers,
            [
                ("Authorization".to_string(), "Basic abc".to_string()),
                ("X-A".to_string(), "2".to_string())
            ]
        );
        let get = |k: &str| {
            c.resource
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("service.name"), Some("guard-fleet"));
        assert_eq!(get("guard.run.id"), Some("r1"));
        assert_eq!(get("deployment.environment"), Some("ci"));
        assert_eq!(get("ci.provider"), Some("github-actions"));
        assert_eq!(get("cicd.pipeline.run.id"), Some("42"));
        assert_eq!(get("ci.GITHUB_RUN_ID"), Some("42"));
        assert_eq!(get("cicd.worker.name"), Some("runner-7"));
        assert!(get("host.name").is_some() && get("user.id").is_some());
    }

    #[test]
    fn a_record_carries_the_line_as_written() {
        let line = r#"{"v":1,"type":"decision","time":"2026-12-02T11:02:32.123456Z","run":"r","prev":"sha256:00","verdict":"deny","rule":"fs.protect","syscall":"unlinkat","op":"delete","path":{"base64":"L3dzL/8="}}"#;
        let value: Value = serde_json::from_str(line).expect("json");
        let r = log_record(line, &value, 7);
        assert_eq!(r.time_unix_nano, 1_796_209_352_123_456_000);
        assert_eq!(r.observed_time_unix_nano, 7);
        assert_eq!(r.severity_number, SeverityNumber::Warn as i32);
        assert_eq!(r.event_name, "guard.decision");
        assert_eq!(
            r.body.and_then(|b| b.value),
            Some(any_value::Value::StringValue(line.to_owned()))
        );
        let attr = |k: &str| {
            r.attributes
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| match &a.value {
                    Some(AnyValue {
                        value: Some(any_value::Value::StringValue(s)),
                    }) => Some(s.clone()),
                    _ => None,
                })
        };
        assert_eq!(attr("guard.rule").as_deref(), Some("fs.protect"));
        assert_eq!(attr("guard.prev").as_deref(), Some("sha256:00"));
        assert_eq!(attr("guard.path").as_deref(), Some("/ws/\u{fffd}"));
    }

    #[test]
    fn a_path_that_does_not_resolve_is_not_a_warning() {
        let line = r#"{"v":2,"type":"decision","time":"2026-12-02T11:02:32.123456Z","run":"r","verdict":"error","rule":"resolve","errno":"ENOENT","syscall":"openat","op":"write"}"#;
        let value: Value = serde_json::from_str(line).expect("json");
        let r = log_record(line, &value, 7);
        assert_eq!(r.severity_number, SeverityNumber::Info as i32);
    }
}
