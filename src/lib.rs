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

pub mod audit;
pub mod cli;
pub mod confine;
pub mod creds;
pub mod dns;
pub mod journal;
pub mod launch;
pub mod policy;
pub mod run;
pub mod supervisor;
pub mod sys;

pub use run::{History, Outcome, Profiles, Run, RunBuilder, RunError, Running};
