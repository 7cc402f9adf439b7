//! Integration tests: the real `guard` binary on real commands in temporary workspaces.

mod bins;
mod util;

mod attacks;
mod audit_log;
mod audit_query;
mod ci_kit;
mod conventions;
mod emulation;
mod fidelity;
mod fidelity_builds;
mod fidelity_suites;
mod fs_boundary;
mod git;
mod git_config;
mod journal_fidelity;
mod journal_limits;
mod library;
mod metadata;
mod otlp;
mod pjdfstest;
mod process;
mod profiles;
mod recovery;
mod rollback_ops;
mod syscalls;
mod transactions;
mod unprivileged;
