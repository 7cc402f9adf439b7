//! Integration tests: the real `guard` binary on real commands in temporary workspaces.

mod util;

mod attacks;
mod audit_log;
mod emulation;
mod fs_boundary;
mod git;
mod journal_fidelity;
mod journal_limits;
mod process;
mod profiles;
mod recovery;
mod rollback_ops;
mod syscalls;
mod transactions;
mod unprivileged;
