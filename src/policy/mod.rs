//! Profiles: TOML schema, built-in profiles, `extends`, variables, validation -> one immutable
//! [`Policy`]; and the pure [`decide`] function. No I/O besides reading profile files.

mod model;

pub use model::*;
