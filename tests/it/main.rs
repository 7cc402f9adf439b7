//! Integration tests: the real `guard` binary on real commands in temporary workspaces.

mod bins;
mod util;

mod agent_session;
mod agents;
mod attacks;
mod audit_log;
mod audit_query;
mod ci_kit;
mod config_files;
mod conventions;
mod credentials;
mod emulation;
mod explain;
mod fidelity;
mod fidelity_builds;
mod fidelity_names;
mod fidelity_suites;
mod fifo;
mod fs_boundary;
mod git;
mod home;
mod journal_fidelity;
mod journal_limits;
mod library;
mod net;
mod netns;
mod otlp;
mod pjdfstest;
mod process;
mod profiles;
mod recovery;
mod rollback_ops;
mod syscalls;
mod transactions;
mod unprivileged;
