//! guard: a transactional sandbox for AI coding agents and CI jobs.
//!
//! As a library, [`run`] is the entry point: [`Run::builder`] starts a command under a profile
//! and [`Running::wait`] returns its [`Outcome`]; [`History`] works with past runs. The `guard`
//! binary's subcommands are a thin layer over it (`cli`).
//!
//! The module tree follows the pipeline (DESIGN.md): `policy` resolves profiles into an immutable
//! `Policy`; `confine` turns it into a Landlock ruleset and a seccomp program; `launch` starts the
//! confined command; `supervisor` judges each trapped call; `journal` makes the workspace
//! transactional, and `creds` makes guard act with the caller's credentials; `audit` records
//! every decision. `sys` holds the only `unsafe` code.
#![deny(unsafe_code)]
#![warn(missing_docs)]

// The documented API for embedders is `run` (with the re-exports below) and the types its
// signatures expose: `audit` (events, records, summaries), `policy` (profiles resolved into a
// `Policy`, verdicts) and `journal` (reports on past runs). The modules marked
// `#[doc(hidden)]` are internal machinery: they are public only so that the `guard` binary,
// the integration tests, the benchmarks and the fuzz targets can reach them, and they carry no
// stability promise.
pub mod audit;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod confine;
#[doc(hidden)]
pub mod creds;
#[doc(hidden)]
pub mod dns;
pub mod journal;
#[doc(hidden)]
pub mod launch;
pub mod policy;
pub mod run;
#[doc(hidden)]
pub mod supervisor;
#[doc(hidden)]
pub mod sys;

pub use run::{History, Outcome, Profiles, Run, RunBuilder, RunError, Running};
