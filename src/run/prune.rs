//! Pruning the journals of older runs while the command runs: a thread of its own starts once
//! the command has exec'd (a thread started while the command is being set up takes a CPU
//! from that), and the run joins it at its end, where the pruning used to happen. The run's
//! own journal is the newest, so it is always among those kept; a run still going (or rolling
//! back) is never pruned.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crate::journal;

/// The pruning of a run; joined when dropped, so it never outlives the run.
pub(super) struct Pruning {
    thread: Option<JoinHandle<()>>,
}

fn prune(state: &Path, keep: usize) {
    if let Err(e) = journal::prune(state, keep) {
        tracing::warn!("cannot prune old journals: {e}");
    }
}

impl Pruning {
    /// Start pruning the journals in `state` down to the newest `keep`; nothing when `keep`
    /// is `None` or nothing is beyond it ([`journal::may_prune`]). When no thread can be
    /// started, prune here and now.
    pub(super) fn start(state: &Path, keep: Option<usize>) -> Pruning {
        let Some(keep) = keep.filter(|&keep| journal::may_prune(state, keep)) else {
            return Pruning { thread: None };
        };
        let dir: PathBuf = state.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("guard-prune".into())
            .spawn(move || prune(&dir, keep));
        match spawned {
            Ok(thread) => Pruning {
                thread: Some(thread),
            },
            Err(e) => {
                tracing::debug!("cannot start a thread to prune old journals: {e}");
                prune(state, keep);
                Pruning { thread: None }
            }
        }
    }

    /// Wait for the pruning to end.
    pub(super) fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Pruning {
    fn drop(&mut self) {
        self.join();
    }
}
