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
    #[error("cannot open audit log {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write audit log {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot sync audit log {}", path.display())]
    Sync {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read audit log {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("malformed line {line} in audit log {}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write to the output of guard log")]
    Output {
        #[source]
        source: io::Error,
    },
    #[error("cannot start the audit writer thread")]
    Spawn {
        #[source]
        source: io::Error,
    },
    #[error("the audit writer thread panicked")]
    WriterPanicked,
    #[error(transparent)]
    Otlp(#[from] OtlpConfigError),
    #[error("cannot write run summary {}", path.display())]
    Summary {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
