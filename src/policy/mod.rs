//! Profiles: TOML schema, built-in profiles, `extends`, variables, validation -> one immutable
//! [`Policy`]; and the pure [`decide()`] function. No I/O besides reading profile files.
//!
//! The pipeline inside: `chain` loads the files of a profile chain (`raw` is their schema),
//! `resolve` merges and validates them (`diagnose` words parse errors) into the `model` types
//! (with `paths`, `net`, `argv` and `errno` compiling the pieces), `decide` judges requests,
//! `react` says what a verdict means for the run, `render` shows the result.

mod argv;
mod builtin;
mod chain;
mod decide;
mod diagnose;
mod digest;
mod errno;
mod error;
mod explain;
pub mod git;
mod globs;
mod model;
mod net;
mod paths;
mod raw;
mod react;
mod render;
mod resolve;
pub mod volume;

pub use argv::ArgvPattern;
pub use builtin::{builtin_names, builtin_source};
pub use decide::{decide, is_thread_name};
pub use diagnose::Problem;
pub use error::PolicyError;
pub use explain::{explain, explain_landlock_exec};
pub use globs::{Children, PathSet};
pub use model::*;
pub use net::{name_matches, NetMatcher};
pub use paths::normalize;
pub use react::{react, Reaction, Situation};
pub use render::render;
pub use resolve::{check, load, load_layers};
