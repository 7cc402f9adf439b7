//! Integration tests: the real `guard` binary on real commands in temporary workspaces.

mod util;

mod attacks;
mod audit_log;
mod audit_query;
mod ci_kit;
mod conventions;
mod emulation;
mod fs_boundary;
mod git;
mod journal_limits;
mod otlp;
mod process;
mod profiles;
mod recovery;
mod syscalls;
mod transactions;
mod unprivileged;
