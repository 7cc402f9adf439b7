//! The audit writer: one thread owns the sink files; everyone else talks to it through
//! [`AuditHandle`]s over a channel that holds at most [`Limits::channel_capacity`] events.
//!
//! Promises:
//! - [`AuditHandle::emit`] and [`AuditHandle::decision`] never block, and an event that does
//!   not fit is counted as suppressed (`what: overflow`), never dropped silently.
//! - Decisions, which the sandboxed program can trigger at will, pass a token bucket first
//!   (denials and kills a separate, larger one); the excess is counted (`what: decision`).
//! - Every decision is counted per verdict before any limit, so `run-end.counts` is exact.
//! - At most once a second, and at the end, the writer writes a `suppressed` line per kind with
//!   the count since the previous one; the counts add up to `run-end.suppressed`.
//! - Lines are hash-chained in the order written (see [`super::chain`]); every sink gets the
//!   same lines, so each copy verifies on its own.
//! - Each line reaches a sink in a single `write` (lines are never split across buffer flushes).
//!   The writer drains the queue every 20 ms without being woken by senders (see `DRAIN_EVERY`;
//!   every 250 ms once it has found the queue empty twice in a row, see `DOZE`, and then the
//!   first event sent wakes it, once) and flushes whenever it finds the queue empty, so `guard
//!   log --follow` sees events within about 20 ms while they come, and the first after a
//!   quiet spell at once. A sink that fails is reported once (`tracing::warn`) and then
//!   skipped; the other sinks and the sandbox carry on. [`AuditWriter::finish`] returns the
//!   failures.
//! - Events emitted after [`AuditWriter::finish`] has been called are discarded.
//! - With an OTLP exporter ([`AuditWriter::start_with`]), every line written is also offered
//!   to it; lines it could not deliver are counted in `suppressed` lines with `what: otlp`
//!   (kept out of `run-end.suppressed`: the local log has them) and in `run-end.otlp_dropped`.
//!   `finish` waits at most [`EXPORT_WAIT`] for the exporter, twice.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::chain;
use super::event::{encode_chained, Counts, Decision, Event, RunEnd, Suppressed, Verdict};
use super::export::Exporter;
use super::limit::RateLimit;
use super::otlp::OtlpConfig;
use super::summary::{DeniedEntry, MAX_DENIED};
use super::time::Timestamp;
use super::AuditError;

/// How often at most a `suppressed` line is written per kind.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How often the writer drains the queue. The writer never blocks in `recv`: a blocked receiver
/// makes every `try_send` wake it (a futex call and a cross-CPU wake-up on the supervisor's hot
/// path, tens of microseconds on a VM whose idle vCPUs halt). It parks instead and drains on
/// this tick; `finish` unparks it.
const DRAIN_EVERY: Duration = Duration::from_millis(20);
/// How often the writer drains the queue once it has found it empty [`DOZE_AFTER`] times in a
/// row: a run whose command waits (on the network, on a person) woke guard 50 times a second
/// for nothing. The first event sent during a doze wakes the writer (one wake-up per doze):
/// what comes after a quiet spell is in the log at once, not up to this long later.
const DOZE: Duration = Duration::from_millis(250);
const DOZE_AFTER: u32 = 2;
const SINK_BUFFER: usize = 64 * 1024;
/// How long `finish` waits for the exporter to deliver what is queued (before the last lines,
/// and after them): one export request's timeout and a little more.
pub const EXPORT_WAIT: Duration = Duration::from_secs(6);

/// Bounds on what the sandboxed program can make the writer do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sustained allow/risky decisions written per second (at least 1). Default 2000.
    pub decisions_per_sec: u32,
    /// Allow/risky decisions written at once after a quiet period (at least 1). Default 10,000.
    pub burst: u32,
    /// Sustained deny/kill decisions written per second (at least 1). Default 10,000.
    pub denials_per_sec: u32,
    /// Deny/kill decisions written at once after a quiet period (at least 1). Default 50,000.
    pub denial_burst: u32,
    /// Events queued for the writer thread before further ones are counted as overflow
    /// (at least 1). Default 65,536.
    pub channel_capacity: usize,
    /// fsync the sinks when the writer finishes (power-loss safety). Default false: the page
    /// cache already survives a crash of guard, and an fsync costs milliseconds per run.
    pub fsync: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            decisions_per_sec: 2000,
            burst: 10_000,
            denials_per_sec: 10_000,
            denial_burst: 50_000,
            channel_capacity: 65_536,
            fsync: false,
        }
    }
}

/// What the writer did over a run.
#[derive(Debug, Default)]
pub struct AuditStats {
    /// Lines written (to every sink that had not failed), `run-end` included.
    pub events_written: u64,
    /// Events counted but not written: the sum of all `suppressed` lines.
    pub suppressed: u64,
    /// Every decision per verdict, suppressed ones included.
    pub counts: Counts,
    /// `checkpoint` events written.
    pub checkpoints: u32,
    /// `rollback` events written.
    pub rollbacks: u32,
    /// The first [`MAX_DENIED`] deny/kill decisions written, for the summary.
    pub denied: Vec<DeniedEntry>,
    /// Sinks that failed (each at its first failure); they received no further lines.
    pub sink_errors: Vec<AuditError>,
    /// The link to the last line written (`run-end`'s): the head of the run's hash chain.
    pub chain_head: String,
    /// Lines the OTLP exporter did not deliver, as counted in the log (`run-end.otlp_dropped`).
    pub otlp_dropped: u64,
    /// Lines it did not deliver after `run-end` was written (so not counted in the log).
    pub otlp_dropped_after_end: u64,
}

enum Msg {
    Event(Timestamp, Box<Event>),
    /// A decision whose event the writer thread builds (see [`AuditHandle::decision_with`]).
    Decision(Timestamp, Box<dyn FnOnce() -> Decision + Send>),
}

/// The writer's state and its queue. The thread holds it while it drains the queue;
/// [`AuditWriter::finish`] takes it and writes the end on the caller's own thread (handing
/// the end to the thread and waiting for its stats cost two wake-ups at every run's end, one
/// of them often of a halted vCPU). Emptied, it tells the thread to end.
type Slot = Arc<Mutex<Option<(WriterThread, Receiver<Msg>)>>>;

/// State shared by the handles and the writer thread.
struct Shared {
    counts: [AtomicU64; 5],
    rate_limited: AtomicU64,
    overflow: AtomicU64,
    /// Events sent and not yet taken by the writer thread, at most `capacity`. The queue
    /// itself is unbounded and grows as it fills: a bounded one allocates and writes every
    /// slot when created (65,536 slots: 2.6 MB and over a millisecond at every run's start).
    queued: AtomicUsize,
    capacity: usize,
    decisions: RateLimit,
    denials: RateLimit,
    /// How long the idle writer thread parks at a time ([`DOZE`]).
    doze: Duration,
    /// The writer thread parks for `doze`: the first event sent meanwhile wakes it.
    dozing: AtomicBool,
    /// The writer thread, to wake.
    thread: std::sync::OnceLock<std::thread::Thread>,
    /// How many times an event woke the dozing writer.
    woken: AtomicU64,
}

impl Shared {
    fn counts(&self) -> Counts {
        let get = |v: Verdict| self.counts[v as usize].load(Ordering::Relaxed);
        Counts {
            allow: get(Verdict::Allow),
            deny: get(Verdict::Deny),
            risky: get(Verdict::Risky),
            kill: get(Verdict::Kill),
            error: get(Verdict::Error),
        }
    }
}

/// Owns the writer thread; [`AuditWriter::finish`] ends the log.
pub struct AuditWriter {
    handle: AuditHandle,
    /// Not joined: once [`AuditWriter::finish`] has taken the slot, the thread only exits.
    /// `None` until [`AuditWriter::spawn`] (events queue meanwhile).
    thread: Option<JoinHandle<()>>,
    slot: Slot,
}

/// A cheap, cloneable way to send events to the writer from any thread.
#[derive(Clone)]
pub struct AuditHandle {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
}

impl AuditWriter {
    /// Opens every sink for append (created with mode 0600 if missing; parent directories must
    /// exist) and starts the writer thread. Fails on the first sink that cannot be opened.
    ///
    /// # Errors
    ///
    /// [`AuditError::Open`] for a sink that cannot be opened, [`AuditError::Spawn`] when the
    /// thread cannot be started.
    pub fn start(
        sinks: Vec<PathBuf>,
        run: String,
        limits: Limits,
    ) -> Result<AuditWriter, AuditError> {
        AuditWriter::start_with(sinks, run, limits, None)
    }

    /// Like [`AuditWriter::start`], also exporting every line over OTLP when `otlp` is given.
    ///
    /// # Errors
    ///
    /// As [`AuditWriter::start`]; [`AuditError::Spawn`] also when the exporter's thread cannot be
    /// started.
    pub fn start_with(
        sinks: Vec<PathBuf>,
        run: String,
        limits: Limits,
        otlp: Option<OtlpConfig>,
    ) -> Result<AuditWriter, AuditError> {
        let mut writer = AuditWriter::open_with(sinks, run, limits, otlp)?;
        writer.spawn()?;
        Ok(writer)
    }

    /// [`AuditWriter::start_with`] without the writer thread: events queue until
    /// [`AuditWriter::spawn`] starts it, or [`AuditWriter::drain_now`] or
    /// [`AuditWriter::finish`] writes them on the calling thread. For a caller whose thread
    /// start would delay something more urgent (a run starts its writer once the command
    /// runs: a thread started on a 2-vCPU machine while the command is being set up took the
    /// CPU from guard's side of the launch, 120 µs a start in the median and 590 in one start
    /// of four).
    ///
    /// # Errors
    ///
    /// As [`AuditWriter::start_with`], but for the thread's start.
    pub fn open_with(
        sinks: Vec<PathBuf>,
        run: String,
        limits: Limits,
        otlp: Option<OtlpConfig>,
    ) -> Result<AuditWriter, AuditError> {
        AuditWriter::open_dozing(sinks, run, limits, otlp, DOZE)
    }

    /// Starts the writer thread, if it is not running yet.
    ///
    /// # Errors
    ///
    /// [`AuditError::Spawn`] when the thread cannot be started; the events stay queued for
    /// [`AuditWriter::drain_now`] and [`AuditWriter::finish`].
    pub fn spawn(&mut self) -> Result<(), AuditError> {
        if self.thread.is_some() {
            return Ok(());
        }
        let served = Arc::clone(&self.slot);
        let shared = Arc::clone(&self.handle.shared);
        let thread = std::thread::Builder::new()
            .name("guard-audit".into())
            .spawn(move || serve(&served, &shared))
            .map_err(|source| AuditError::Spawn { source })?;
        let _ = self.handle.shared.thread.set(thread.thread().clone());
        self.thread = Some(thread);
        Ok(())
    }

    /// [`AuditWriter::open_with`], with the writer dozing `doze` at a time once idle.
    fn open_dozing(
        sinks: Vec<PathBuf>,
        run: String,
        limits: Limits,
        otlp: Option<OtlpConfig>,
        doze: Duration,
    ) -> Result<AuditWriter, AuditError> {
        let exporter = otlp.map(Exporter::start).transpose()?;
        let sinks = sinks
            .into_iter()
            .map(Sink::open)
            .collect::<Result<Vec<_>, _>>()?;
        let shared = Arc::new(Shared {
            counts: Default::default(),
            rate_limited: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            capacity: limits.channel_capacity.max(1),
            decisions: RateLimit::new(limits.decisions_per_sec, limits.burst),
            denials: RateLimit::new(limits.denials_per_sec, limits.denial_burst),
            doze,
            dozing: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
            woken: AtomicU64::new(0),
        });
        let (tx, rx) = channel();
        let thread_state = WriterThread {
            fsync: limits.fsync,
            sinks,
            exporter,
            run,
            shared: Arc::clone(&shared),
            stats: AuditStats {
                chain_head: chain::ANCHOR.to_owned(),
                ..AuditStats::default()
            },
            since: Timestamp::now(),
            last_report: Instant::now(),
        };
        let slot: Slot = Arc::new(Mutex::new(Some((thread_state, rx))));
        Ok(AuditWriter {
            handle: AuditHandle { tx, shared },
            thread: None,
            slot,
        })
    }

    /// A handle that queues events to this writer; clone it for each thread that records.
    pub fn handle(&self) -> AuditHandle {
        self.handle.clone()
    }

    /// Writes everything queued before this call, the last `suppressed` lines and `end` (its
    /// `counts` and `suppressed` replaced by the writer's exact figures), then syncs the sinks
    /// and stops the thread. The writing is done on the calling thread (waiting for the writer
    /// thread only while it is draining the queue). Blocks until done.
    ///
    /// # Errors
    ///
    /// [`AuditError::WriterPanicked`] when the writer thread panicked while it was writing. A
    /// sink that fails while writing does not make this fail: it is listed in
    /// [`AuditStats::sink_errors`].
    pub fn finish(self, end: RunEnd) -> Result<AuditStats, AuditError> {
        let taken = self
            .slot
            .lock()
            .map_err(|_| AuditError::WriterPanicked)?
            .take();
        // It finds the slot empty and ends.
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
        let (mut writer, rx) = taken.ok_or(AuditError::WriterPanicked)?;
        // This writer's handle is still here, so the queue is not disconnected.
        writer.drain(&rx);
        drop(self.handle);
        Ok(writer.finish(end))
    }
}

impl AuditWriter {
    /// Writes what is queued now on the calling thread, as the writer thread does on its tick:
    /// for a caller that has a moment with nothing else to do (guard's main thread once the
    /// command runs), so that [`AuditWriter::finish`] is left with less to write while the
    /// run's end waits for it.
    pub fn drain_now(&self) {
        if let Ok(mut held) = self.slot.lock() {
            if let Some((writer, rx)) = held.as_mut() {
                writer.drain(rx);
            }
        }
    }
}

impl AuditHandle {
    /// Queues `event` without blocking. A [`Event::Decision`] goes through
    /// [`AuditHandle::decision`].
    pub fn emit(&self, event: Event) {
        match event {
            Event::Decision(d) => self.decision(d),
            other => self.send(other),
        }
    }

    /// Counts `d` under its verdict, then queues it if the rate limit for its verdict allows.
    pub fn decision(&self, d: Decision) {
        if self.admit(d.verdict) {
            self.send(Event::Decision(d));
        }
    }

    /// [`decision`](Self::decision) for a caller on a hot path: `verdict` is counted and
    /// rate-limited as of `at` (a reading of the monotonic clock the caller made already, the
    /// time of the decision or a moment before it), and `build` makes the event on the writer
    /// thread, with the time stamped now. The caller hands over what it holds instead of
    /// converting it (names to text, numbers to names) while a sandboxed call waits.
    pub fn decision_with(
        &self,
        verdict: Verdict,
        at: std::time::Instant,
        build: impl FnOnce() -> Decision + Send + 'static,
    ) {
        if self.admit_by(verdict, at) {
            self.send_msg(|time| Msg::Decision(time, Box::new(build)));
        }
    }

    /// Counts a decision under `verdict`; whether the rate limit for it lets it be written.
    fn admit(&self, verdict: Verdict) -> bool {
        self.admit_by(verdict, std::time::Instant::now())
    }

    /// [`admit`](Self::admit) as of `at`.
    fn admit_by(&self, verdict: Verdict, at: std::time::Instant) -> bool {
        self.shared.counts[verdict as usize].fetch_add(1, Ordering::Relaxed);
        let limit = if verdict.is_denial() {
            &self.shared.denials
        } else {
            &self.shared.decisions
        };
        let admitted = limit.admit_by(at);
        if !admitted {
            self.shared.rate_limited.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    fn send(&self, event: Event) {
        self.send_msg(|time| Msg::Event(time, Box::new(event)));
    }

    fn send_msg(&self, msg: impl FnOnce(Timestamp) -> Msg) {
        let shared = &self.shared;
        if shared.queued.fetch_add(1, Ordering::Relaxed) >= shared.capacity {
            shared.queued.fetch_sub(1, Ordering::Relaxed);
            shared.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let msg = msg(Timestamp::now());
        if self.tx.send(msg).is_err() {
            shared.queued.fetch_sub(1, Ordering::Relaxed);
            shared.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The first event of a doze wakes the writer (one wake-up per doze, none otherwise),
        // so that a reader following the log sees it at once, not up to DOZE later. Paired
        // with the writer's check of `queued` once it has said it dozes (`serve`): one of the
        // two sees the other.
        std::sync::atomic::fence(Ordering::SeqCst);
        if shared.dozing.load(Ordering::Relaxed) && shared.dozing.swap(false, Ordering::AcqRel) {
            if let Some(thread) = shared.thread.get() {
                thread.unpark();
            }
            shared.woken.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One open sink; `failed` once a write to it has failed.
struct Sink {
    path: PathBuf,
    out: BufWriter<File>,
    failed: bool,
}

impl Sink {
    fn open(path: PathBuf) -> Result<Sink, AuditError> {
        match OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => Ok(Sink {
                out: BufWriter::with_capacity(SINK_BUFFER, file),
                path,
                failed: false,
            }),
            Err(source) => Err(AuditError::Open { path, source }),
        }
    }

    fn fail(&mut self, error: AuditError, errors: &mut Vec<AuditError>) {
        tracing::warn!(error = %error, cause = ?std::error::Error::source(&error), "audit sink disabled");
        self.failed = true;
        errors.push(error);
    }
}

/// What [`WriterThread::drain`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    Nothing,
    Some,
    Disconnected,
}

/// The writer thread: drains the queue every [`DRAIN_EVERY`] (every [`DOZE`] once it has
/// found it empty [`DOZE_AFTER`] times in a row), until [`AuditWriter::finish`] takes the slot
/// or every handle is gone.
fn serve(slot: &Slot, shared: &Shared) {
    let mut empty = 0u32;
    loop {
        let drained = {
            let Ok(mut held) = slot.lock() else {
                return;
            };
            let Some((writer, rx)) = held.as_mut() else {
                return;
            };
            let drained = writer.drain(rx);
            if drained == Drained::Disconnected {
                if let Some((writer, _)) = held.take() {
                    writer.end_quietly();
                }
                return;
            }
            drained
        };
        empty = match drained {
            Drained::Some => 0,
            _ => empty.saturating_add(1),
        };
        if empty < DOZE_AFTER {
            std::thread::park_timeout(DRAIN_EVERY);
            continue;
        }
        // The first event sent from here on wakes this thread (`AuditHandle::send_msg`); one
        // sent before is seen in `queued`.
        shared.dozing.store(true, Ordering::SeqCst);
        if shared.queued.load(Ordering::SeqCst) == 0 {
            std::thread::park_timeout(shared.doze);
        }
        shared.dozing.store(false, Ordering::SeqCst);
    }
}

struct WriterThread {
    fsync: bool,
    sinks: Vec<Sink>,
    exporter: Option<Exporter>,
    run: String,
    shared: Arc<Shared>,
    stats: AuditStats,
    /// Start of the interval the next `suppressed` lines cover.
    since: Timestamp,
    last_report: Instant,
}

impl WriterThread {
    /// Writes every event queued now; whether there was any, or `Disconnected` when every
    /// handle is gone (without `finish`).
    fn drain(&mut self, rx: &Receiver<Msg>) -> Drained {
        let mut wrote = Drained::Nothing;
        loop {
            match rx.try_recv() {
                Ok(Msg::Event(time, event)) => {
                    self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                    self.write(&event, time);
                }
                Ok(Msg::Decision(time, build)) => {
                    self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                    self.write(&Event::Decision(build()), time);
                }
                Err(TryRecvError::Empty) => {
                    self.report_suppressed(false);
                    self.flush();
                    return wrote;
                }
                Err(TryRecvError::Disconnected) => return Drained::Disconnected,
            }
            wrote = Drained::Some;
            self.report_suppressed(false);
        }
    }

    /// Every handle and the writer are gone without `finish`: end quietly.
    fn end_quietly(mut self) {
        self.report_suppressed(true);
        self.flush();
        self.sync();
        if let Some(exporter) = self.exporter.take() {
            exporter.stop(EXPORT_WAIT);
        }
    }

    fn finish(mut self, mut end: RunEnd) -> AuditStats {
        if let Some(exporter) = &self.exporter {
            // Delivered or counted, so the last `suppressed` lines account for it.
            exporter.flush(EXPORT_WAIT);
        }
        self.report_suppressed(true);
        end.counts = self.shared.counts();
        end.suppressed = self.stats.suppressed;
        end.otlp_dropped = self.exporter.as_ref().map(|_| self.stats.otlp_dropped);
        self.stats.counts = end.counts;
        self.write(&Event::RunEnd(end), Timestamp::now());
        self.flush();
        self.sync();
        if let Some(exporter) = self.exporter.take() {
            self.stats.otlp_dropped_after_end = exporter.stop(EXPORT_WAIT);
            if self.stats.otlp_dropped_after_end > 0 {
                tracing::warn!(
                    "{} audit events written after the last count were not exported",
                    self.stats.otlp_dropped_after_end
                );
            }
        }
        self.stats
    }

    /// Writes a `suppressed` line per kind with a nonzero count, if a report is due (or `now`).
    fn report_suppressed(&mut self, now: bool) {
        if !now && self.last_report.elapsed() < REPORT_EVERY {
            return;
        }
        let since = self.since;
        self.since = Timestamp::now();
        self.last_report = Instant::now();
        for what in ["decision", "overflow", "otlp"] {
            let counter = match (what, &self.exporter) {
                ("decision", _) => &self.shared.rate_limited,
                ("overflow", _) => &self.shared.overflow,
                (_, Some(exporter)) => exporter.dropped(),
                (_, None) => continue,
            };
            let count = counter.swap(0, Ordering::Relaxed);
            if count > 0 {
                if what == "otlp" {
                    self.stats.otlp_dropped += count;
                } else {
                    self.stats.suppressed += count;
                }
                let event = Event::Suppressed(Suppressed {
                    count,
                    what: what.to_owned(),
                    since,
                });
                self.write(&event, self.since);
            }
        }
        self.stats.counts = self.shared.counts();
    }

    fn write(&mut self, event: &Event, time: Timestamp) {
        match event {
            Event::Decision(d) if d.verdict.is_denial() && self.stats.denied.len() < MAX_DENIED => {
                self.stats.denied.push(DeniedEntry::from_decision(d));
            }
            Event::Checkpoint(_) => self.stats.checkpoints += 1,
            Event::Rollback(_) => self.stats.rollbacks += 1,
            _ => {}
        }
        let mut line = encode_chained(event, &self.run, time, &self.stats.chain_head);
        self.stats.chain_head = chain::link(&line);
        if let Some(exporter) = &self.exporter {
            exporter.offer(&line);
        }
        line.push('\n');
        for sink in self.sinks.iter_mut().filter(|s| !s.failed) {
            if let Err(source) = sink.out.write_all(line.as_bytes()) {
                let path = sink.path.clone();
                sink.fail(
                    AuditError::Write { path, source },
                    &mut self.stats.sink_errors,
                );
            }
        }
        self.stats.events_written += 1;
    }

    fn flush(&mut self) {
        for sink in self.sinks.iter_mut().filter(|s| !s.failed) {
            if let Err(source) = sink.out.flush() {
                let path = sink.path.clone();
                sink.fail(
                    AuditError::Write { path, source },
                    &mut self.stats.sink_errors,
                );
            }
        }
    }

    fn sync(&mut self) {
        if !self.fsync {
            return;
        }
        for sink in self.sinks.iter_mut().filter(|s| !s.failed) {
            if let Err(source) = sink.out.get_ref().sync_all() {
                let path = sink.path.clone();
                sink.fail(
                    AuditError::Sync { path, source },
                    &mut self.stats.sink_errors,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::tests::{decision, run_end};
    use crate::audit::event::{decode, Checkpoint};
    use crate::audit::reader::read_events;

    fn lines(path: &std::path::Path) -> Vec<crate::audit::event::Record> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(|l| decode(l).expect("every line decodes"))
            .collect()
    }

    #[test]
    fn never_blocks_and_accounts_for_every_decision() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let limits = Limits {
            channel_capacity: 1024,
            ..Limits::default()
        };
        let writer = AuditWriter::start(vec![path.clone()], "r1".into(), limits).expect("start");
        const THREADS: u64 = 4;
        const PER_THREAD: u64 = 50_000;
        let emitters: Vec<_> = (0..THREADS)
            .map(|t| {
                let handle = writer.handle();
                std::thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let verdict = Verdict::ALL[(i % 5) as usize];
                        handle.decision(decision(t * PER_THREAD + i, verdict));
                    }
                })
            })
            .collect();
        for e in emitters {
            e.join().expect("emitter");
        }
        let stats = writer.finish(run_end()).expect("finish");
        assert!(stats.sink_errors.is_empty());

        let records = lines(&path);
        let written = records
            .iter()
            .filter(|r| matches!(r.event, Event::Decision(_)))
            .count() as u64;
        let reported: u64 = records
            .iter()
            .filter_map(|r| match &r.event {
                Event::Suppressed(s) => Some(s.count),
                _ => None,
            })
            .sum();
        assert!(reported > 0, "the flood must have been suppressed in part");
        assert_eq!(stats.suppressed, reported);
        assert_eq!(written + reported, THREADS * PER_THREAD);
        assert_eq!(stats.events_written, records.len() as u64);

        let Some(Event::RunEnd(end)) = records.last().map(|r| &r.event) else {
            panic!("last line is run-end");
        };
        let each = THREADS * PER_THREAD / 5;
        let expected = Counts {
            allow: each,
            deny: each,
            risky: each,
            kill: each,
            error: each,
        };
        assert_eq!(end.counts, expected);
        assert_eq!(stats.counts, expected);
        assert_eq!(end.suppressed, reported);
        assert_eq!(stats.denied.len(), crate::audit::summary::MAX_DENIED);
    }

    #[test]
    fn writes_every_sink_in_order_and_counts_exactly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sinks = vec![dir.path().join("a.jsonl"), dir.path().join("b.jsonl")];
        let writer =
            AuditWriter::start(sinks.clone(), "r1".into(), Limits::default()).expect("start");
        let handle = writer.handle();
        handle.emit(Event::Checkpoint(Checkpoint {
            id: "c1".into(),
            reason: "start".into(),
            pid: None,
        }));
        handle.emit(Event::Decision(decision(1, Verdict::Allow)));
        handle.decision(decision(2, Verdict::Deny));
        let end = RunEnd {
            suppressed: 99,
            ..run_end()
        };
        let stats = writer.finish(end).expect("finish");
        handle.decision(decision(3, Verdict::Deny)); // after finish: discarded, no panic
        assert_eq!(stats.events_written, 4);
        assert_eq!(stats.checkpoints, 1);
        for sink in &sinks {
            let records = lines(sink);
            let kinds: Vec<_> = records.iter().map(|r| r.event.kind()).collect();
            assert_eq!(kinds, ["checkpoint", "decision", "decision", "run-end"]);
            let Event::RunEnd(end) = &records[3].event else {
                unreachable!()
            };
            assert_eq!(
                (end.counts.allow, end.counts.deny, end.suppressed),
                (1, 1, 0)
            );
            assert_eq!(read_events(sink).expect("read").len(), 4);
            let lines = crate::audit::reader::read_lines(sink).expect("read");
            let runs = crate::audit::chain::verify(&lines).expect("the chain holds");
            assert_eq!(runs[0].head, stats.chain_head);
            assert!(runs[0].ended);
            let mode = std::fs::metadata(sink).expect("stat").permissions();
            assert_eq!(
                std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
                0o600
            );
        }
    }

    /// A writer dropped without `finish` (its run's end never came) still writes what was
    /// queued, from its own thread, once every handle is gone; and `finish` writes from the
    /// caller's thread what was queued while the writer thread slept.
    #[test]
    fn queued_events_are_written_with_and_without_finish() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("dropped.jsonl");
        let writer =
            AuditWriter::start(vec![path.clone()], "r1".into(), Limits::default()).expect("start");
        let handle = writer.handle();
        handle.decision(decision(1, Verdict::Allow));
        handle.decision(decision(2, Verdict::Deny));
        drop(writer);
        drop(handle);
        let deadline = Instant::now() + Duration::from_secs(10);
        while lines(&path).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let kinds: Vec<_> = lines(&path).iter().map(|r| r.event.kind()).collect();
        assert_eq!(kinds, ["decision", "decision"]);

        let path = dir.path().join("finished.jsonl");
        let writer =
            AuditWriter::start(vec![path.clone()], "r2".into(), Limits::default()).expect("start");
        let handle = writer.handle();
        // Long enough for the writer thread to doze.
        std::thread::sleep(DRAIN_EVERY * (DOZE_AFTER + 2));
        handle.decision(decision(1, Verdict::Allow));
        let stats = writer.finish(run_end()).expect("finish");
        assert_eq!(stats.events_written, 2);
        let kinds: Vec<_> = lines(&path).iter().map(|r| r.event.kind()).collect();
        assert_eq!(kinds, ["decision", "run-end"]);
    }

    /// A dozing writer is woken by the first event sent, once, and writes it without waiting
    /// for the doze to end: a reader following the log sees it at once.
    #[test]
    fn the_first_event_after_a_quiet_spell_wakes_the_writer_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        // A doze longer than the test: only the wake-up can have the lines written.
        let hour = Duration::from_secs(3600);
        let mut writer = AuditWriter::open_dozing(
            vec![path.clone()],
            "r1".into(),
            Limits::default(),
            None,
            hour,
        )
        .expect("open");
        writer.spawn().expect("start");
        let handle = writer.handle();
        let dozing = || handle.shared.dozing.load(Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dozing() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(dozing(), "the idle writer dozes");
        assert_eq!(handle.shared.woken.load(Ordering::SeqCst), 0);
        handle.decision(decision(1, Verdict::Allow));
        handle.decision(decision(2, Verdict::Allow));
        assert_eq!(handle.shared.woken.load(Ordering::SeqCst), 1, "woken once");
        // Written by the writer thread (not by `finish`, which is not called before).
        let deadline = Instant::now() + Duration::from_secs(10);
        while lines(&path).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(lines(&path).len(), 2);
        writer.finish(run_end()).expect("finish");
    }

    #[test]
    fn rate_limit_counts_decisions_it_drops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let limits = Limits {
            decisions_per_sec: 1,
            burst: 3,
            ..Limits::default()
        };
        let writer = AuditWriter::start(vec![path.clone()], "r1".into(), limits).expect("start");
        let handle = writer.handle();
        for i in 0..10 {
            handle.decision(decision(i, Verdict::Allow));
        }
        handle.decision(decision(10, Verdict::Deny)); // separate bucket
        let stats = writer.finish(run_end()).expect("finish");
        assert_eq!(stats.suppressed, 7);
        assert_eq!(stats.counts.allow, 10);
        let records = lines(&path);
        let suppressed: Vec<_> = records
            .iter()
            .filter_map(|r| match &r.event {
                Event::Suppressed(s) => Some((s.count, s.what.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(suppressed, [(7, "decision")]);
        assert_eq!(records.len(), 3 + 1 + 1 + 1);
    }

    #[test]
    fn open_error_names_the_path() {
        let err = AuditWriter::start(
            vec!["/nonexistent-guard-dir/audit.jsonl".into()],
            "r1".into(),
            Limits::default(),
        )
        .err()
        .expect("cannot open");
        assert_eq!(
            err.to_string(),
            "cannot open audit log /nonexistent-guard-dir/audit.jsonl"
        );
    }

    #[test]
    fn a_failing_sink_does_not_stop_the_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("good.jsonl");
        let full = PathBuf::from("/dev/full");
        if !full.exists() {
            eprintln!("skip: /dev/full is missing");
            return;
        }
        let writer = AuditWriter::start(vec![full, good.clone()], "r1".into(), Limits::default())
            .expect("start");
        writer.handle().decision(decision(1, Verdict::Deny));
        let stats = writer.finish(run_end()).expect("finish");
        assert_eq!(stats.sink_errors.len(), 1);
        assert!(stats.sink_errors[0].to_string().contains("/dev/full"));
        assert_eq!(lines(&good).len(), 2);
    }
}
