//! The OTLP exporter: a thread of its own that sends the audit lines, as they are written to
//! the local log, to an OpenTelemetry collector (OTLP/HTTP, protobuf, logs signal).
//!
//! Promises:
//! - [`Exporter::offer`] never blocks: a line that does not fit in the bounded queue is counted
//!   in [`Exporter::dropped`], which the audit writer reports as `suppressed` (`what: otlp`).
//! - A batch the collector does not take (unreachable, an HTTP error, records it rejects) is
//!   counted there too, never retried: the local log is the record, the export a copy. After a
//!   failure the exporter stays away for a while (1 s, doubling to 30 s), dropping and counting
//!   at once, so a collector that is down costs the run nothing but the count.
//! - Batches go out every 200 ms or 512 lines, in the order the lines were written.
//! - [`Exporter::flush`] and [`Exporter::stop`] wait at most the time they are given.
//!
//! The protobuf types are the official ones (`opentelemetry-proto`, prost); the HTTP client is
//! ureq, blocking, on this thread: no async runtime runs in guard's process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use super::otlp::{key_value, log_record, OtlpConfig};
use super::AuditError;

/// Lines queued for the exporter before further ones are dropped (and counted).
const QUEUE: usize = 16_384;
const MAX_BATCH: usize = 512;
const BATCH_WAIT: Duration = Duration::from_millis(200);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

enum Msg {
    Line(String),
    Flush(SyncSender<()>),
}

/// The handle the audit writer holds.
pub(crate) struct Exporter {
    tx: SyncSender<Msg>,
    thread: JoinHandle<()>,
    dropped: Arc<AtomicU64>,
}

impl Exporter {
    pub(crate) fn start(config: OtlpConfig) -> Result<Exporter, AuditError> {
        let (tx, rx) = sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let state = Sender::new(config, Arc::clone(&dropped));
        let thread = std::thread::Builder::new()
            .name("guard-otlp".into())
            .spawn(move || state.run(rx))
            .map_err(|source| AuditError::Spawn { source })?;
        Ok(Exporter {
            tx,
            thread,
            dropped,
        })
    }

    /// Queues one line (without its newline) for export, or counts it as dropped.
    pub(crate) fn offer(&self, line: &str) {
        if self.tx.try_send(Msg::Line(line.to_owned())).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lines not delivered since the counter was last taken (the writer swaps it to zero).
    pub(crate) fn dropped(&self) -> &AtomicU64 {
        &self.dropped
    }

    /// Waits until every line offered so far has been sent or dropped, for at most `wait`.
    /// Returns whether it got that far.
    pub(crate) fn flush(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let (ack_tx, ack_rx) = sync_channel(1);
        let mut msg = Msg::Flush(ack_tx);
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    msg = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        ack_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }

    /// Flushes (at most `wait`), then lets the thread end; a thread still inside a request
    /// when the time is up is left to finish on its own (its request has a timeout). Returns
    /// the lines dropped since the counter was last taken.
    pub(crate) fn stop(self, wait: Duration) -> u64 {
        let done = self.flush(wait);
        drop(self.tx);
        if done {
            let _ = self.thread.join();
        }
        self.dropped.swap(0, Ordering::Relaxed)
    }
}

/// The exporter thread's state.
struct Sender {
    config: OtlpConfig,
    agent: ureq::Agent,
    resource: Resource,
    dropped: Arc<AtomicU64>,
    /// After a failure, batches are dropped without trying until then.
    away_until: Option<Instant>,
    backoff: Duration,
}

impl Sender {
    fn new(config: OtlpConfig, dropped: Arc<AtomicU64>) -> Sender {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let resource = Resource {
            attributes: config
                .resource
                .iter()
                .map(|(k, v)| key_value(k, v.clone()))
                .collect(),
            ..Resource::default()
        };
        Sender {
            config,
            agent,
            resource,
            dropped,
            away_until: None,
            backoff: FIRST_BACKOFF,
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        let mut batch: Vec<String> = Vec::new();
        let mut started: Option<Instant> = None;
        loop {
            let wait = started.map_or(Duration::from_secs(3600), |t| {
                BATCH_WAIT.saturating_sub(t.elapsed())
            });
            match rx.recv_timeout(wait) {
                Ok(Msg::Line(line)) => {
                    started.get_or_insert_with(Instant::now);
                    batch.push(line);
                    if batch.len() >= MAX_BATCH {
                        self.send(&mut batch);
                        started = None;
                    }
                }
                Ok(Msg::Flush(ack)) => {
                    self.send(&mut batch);
                    started = None;
                    let _ = ack.try_send(());
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.send(&mut batch);
                    started = None;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
        }
    }

    /// Sends `batch` (emptying it), or counts it as dropped.
    fn send(&mut self, batch: &mut Vec<String>) {
        if batch.is_empty() {
            return;
        }
        let lines = std::mem::take(batch);
        let count = lines.len() as u64;
        if self.away_until.is_some_and(|t| Instant::now() < t) {
            self.dropped.fetch_add(count, Ordering::Relaxed);
            return;
        }
        match self.post(&lines) {
            Ok(rejected) => {
                self.away_until = None;
                self.backoff = FIRST_BACKOFF;
                self.dropped
                    .fetch_add(rejected.min(count), Ordering::Relaxed);
            }
            Err(why) => {
                tracing::warn!(
                    "cannot export {count} audit events to {}: {why}",
                    self.config.endpoint
                );
                self.dropped.fetch_add(count, Ordering::Relaxed);
                self.away_until = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// One export request; the number of records the collector says it rejected.
    fn post(&self, lines: &[String]) -> Result<u64, String> {
        let observed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let log_records = lines
            .iter()
            .map(|line| {
                let value = serde_json::from_str(line).unwrap_or_default();
                log_record(line, &value, observed)
            })
            .collect();
        let request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(self.resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "guard.audit".into(),
                        version: env!("GUARD_VERSION").into(),
                        ..InstrumentationScope::default()
                    }),
                    log_records,
                    ..ScopeLogs::default()
                }],
                ..ResourceLogs::default()
            }],
        };
        let mut req = self
            .agent
            .post(&self.config.endpoint)
            .header("Content-Type", "application/x-protobuf");
        for (k, v) in &self.config.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut response = req
            .send(&request.encode_to_vec()[..])
            .map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("the collector answered {status}"));
        }
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| e.to_string())?;
        let answer = ExportLogsServiceResponse::decode(&body[..]).unwrap_or_default();
        Ok(answer
            .partial_success
            .map_or(0, |p| u64::try_from(p.rejected_log_records).unwrap_or(0)))
    }
}
