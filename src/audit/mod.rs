//! The audit log: a versioned JSONL wire format ([`event`]) whose lines are hash-chained
//! ([`chain`]), a writer that never blocks the sandboxed program and counts what it cannot
//! write ([`writer`]), the reader and queries behind `guard log` ([`reader`], [`query`]) and the
//! run summary and refusal reports for CI ([`summary`], [`report`]). Lines can also go to an OpenTelemetry collector
//! ([`otlp`] says what and where, a private exporter thread sends them). This module depends on no other guard
//! module: callers translate their types into the wire types here.

use std::io;
use std::path::PathBuf;

pub mod chain;
pub mod event;
mod export;
mod limit;
pub mod otlp;
pub mod query;
pub mod reader;
pub mod report;
pub mod summary;
pub mod text;
pub mod time;
pub mod writer;

pub use event::{
    decode, encode, encode_at, encode_chained, errno_name, Checkpoint, Counts, Decision, Degraded,
    ErrorEvent, Event, Outcome, Record, Rollback, RunEnd, RunStart, Suppressed, Verdict, VERSION,
};
pub(crate) use limit::RateLimit;
pub use otlp::{OtlpConfig, OtlpConfigError};
pub use query::{PathGlobs, Query};
pub use reader::{follow, follow_with, format_human, read_events, read_lines, LogLine};
pub use report::Report;
pub use summary::{DeniedEntry, Summary};
pub use text::{escape_for_terminal, PathText};
pub use time::Timestamp;
pub use writer::{AuditHandle, AuditStats, AuditWriter, Limits};

/// Failures of the audit log; every I/O failure names its file.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The log file could not be opened or created.
    #[error("cannot open audit log {}", path.display())]
    Open {
        /// The audit log.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A line could not be written.
    #[error("cannot write audit log {}", path.display())]
    Write {
        /// The audit log.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The log could not be flushed to disk.
    #[error("cannot sync audit log {}", path.display())]
    Sync {
        /// The audit log.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The log could not be read.
    #[error("cannot read audit log {}", path.display())]
    Read {
        /// The audit log.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A line of the log could not be decoded.
    #[error("malformed line {line} in audit log {}", path.display())]
    Parse {
        /// The audit log.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What the JSON decoder found wrong.
        #[source]
        source: serde_json::Error,
    },
    /// Writing to `guard log`'s standard output failed.
    #[error("cannot write to the output of guard log")]
    Output {
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The thread that writes the log could not be started.
    #[error("cannot start the audit writer thread")]
    Spawn {
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The writer thread panicked; lines it had not written are lost.
    #[error("the audit writer thread panicked")]
    WriterPanicked,
    /// The OTLP exporter's configuration is invalid.
    #[error(transparent)]
    Otlp(#[from] OtlpConfigError),
    /// The run summary file could not be written.
    #[error("cannot write run summary {}", path.display())]
    Summary {
        /// The summary file.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
}
