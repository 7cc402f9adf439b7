//! The supervisor's per-call work without the kernel's round trip, for `benches/per_call.rs`:
//! a notification built by the benchmark (its own pid, registers pointing into its own
//! memory) goes down the same stages `handle` takes it through, up to a chosen one: decode,
//! read, resolve, decide (with `policy::react`), record (what the writer thread is handed: the
//! decision's facts, from which it builds the audit event). Nothing is answered, validated or
//! performed, and the caller's credentials are not taken on: those need a trapped task. Timing
//! each prefix says what each stage costs.
//!
//! Not part of the library's interface (hidden from its documentation); it exists so that a
//! regression of the hot path shows up in `cargo bench`.

use std::sync::Arc;

use crate::audit;
use crate::policy::{self, Policy};
use crate::sys::Notif;

use super::procinfo::ProcCache;
use super::record::Record;
use super::resolve::Resolution;
use super::{decode, read, resolve, Judged};

/// The stage a [`PerCall::run`] stops after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Decode,
    Read,
    Resolve,
    Decide,
    Record,
}

/// What a supervisor worker keeps between calls, as far as these stages use it.
pub struct PerCall {
    policy: Arc<Policy>,
    procs: ProcCache,
    root: u32,
    seq: u64,
}

/// How far a call went.
pub enum Reached {
    /// The stage asked for was done; the call would be judged.
    Stage(Stage),
    /// The resolve stage let the call through unjudged (or carries it without a decision).
    Unjudged,
    /// What the writer thread is handed (the last stage): calling it builds the audit event,
    /// the writer thread's share.
    Event(Box<dyn FnOnce() -> audit::Decision + Send>),
}

impl PerCall {
    /// Judge calls against `policy` in a run whose root process is `root`.
    pub fn new(policy: Arc<Policy>, root: u32) -> PerCall {
        PerCall {
            policy,
            procs: ProcCache::default(),
            root,
            seq: 0,
        }
    }

    /// Take `n` through the stages up to `last`.
    pub fn run(&mut self, n: &Notif, last: Stage) -> Reached {
        let call = decode::decode(n);
        if last == Stage::Decode {
            return Reached::Stage(last);
        }
        let resolved = match call {
            Ok(call) => {
                let mem = read::read(n.pid, &call);
                if last == Stage::Read {
                    return Reached::Stage(last);
                }
                resolve::resolve(n, &call, mem, self.root)
            }
            Err(f) => Err(f),
        };
        if last == Stage::Resolve {
            return Reached::Stage(last);
        }
        let judged = match resolved {
            Ok(Resolution::Judge(r)) => Judged::Call(r),
            Ok(Resolution::Pass | Resolution::Read(_) | Resolution::Carry(_)) => {
                return Reached::Unjudged
            }
            Err(f) => Judged::Failed(f),
        };
        let verdict = match &judged {
            Judged::Call(r) => policy::decide(&self.policy, &r.request(false)),
            Judged::Failed(f) => f.verdict(),
        };
        let reaction = policy::react(&self.policy, &verdict, &judged.situation(true));
        if last == Stage::Decide {
            return Reached::Stage(last);
        }
        let who = self.procs.get(n.pid, std::time::Instant::now());
        let record = Record::of(who, n, judged, verdict, reaction);
        self.seq += 1;
        let seq = self.seq;
        Reached::Event(Box::new(move || record.into_event(seq, 0)))
    }
}
