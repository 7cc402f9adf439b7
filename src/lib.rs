//! guard: a transactional sandbox for AI coding agents and CI jobs.
//!
//! The module tree follows the pipeline (DESIGN.md): `policy` resolves profiles into an immutable
//! `Policy`; `confine` turns it into a Landlock ruleset and a seccomp program; `launch` starts the
//! confined command; `supervisor` judges each trapped call; `journal` makes the workspace
//! transactional; `audit` records every decision. `sys` holds the only `unsafe` code.
#![deny(unsafe_code)]

pub mod audit;
pub mod cli;
pub mod confine;
pub mod journal;
pub mod launch;
pub mod policy;
pub mod supervisor;
pub mod sys;
