//! The `run-start` audit event: what runs, under which profile, and what this kernel enforces
//! for it. `enforced` and `degraded` come from the Landlock plan (which depends on the policy)
//! and from the statuses of the one feature probe, under the features' own names.

use std::ffi::OsString;
use std::path::Path;

use crate::audit;
use crate::confine::{Features, LandlockReport};
use crate::policy::{Mode, Policy};

/// `run-start`'s `enforced` and `degraded`: the Landlock plan's entries, then every other
/// feature by its status.
pub(super) fn lists(
    features: &Features,
    landlock: &LandlockReport,
    mode: Mode,
) -> (Vec<String>, Vec<audit::Degraded>) {
    let mut enforced = landlock.enforced.clone();
    let mut degraded: Vec<audit::Degraded> = landlock
        .degraded
        .iter()
        .map(|(feature, reason)| audit::Degraded {
            feature: feature.clone(),
            reason: reason.clone(),
        })
        .collect();
    if mode == Mode::Enforce {
        enforced.push("seccomp-deny-list".to_string());
    }
    for f in features.iter() {
        if f.feature.landlock_abi().is_some() {
            // Reported by the Landlock plan, which knows what the policy asks for.
            continue;
        }
        if f.status.is_available() {
            enforced.push(f.feature.name().to_string());
        } else {
            degraded.push(audit::Degraded {
                feature: f.feature.name().to_string(),
                reason: f.status.describe(Some(f.feature.without())),
            });
        }
    }
    enforced.push("emulation".to_string());
    (enforced, degraded)
}

/// The `run-start` event of a run.
pub(super) fn run_start(
    policy: &Policy,
    workspace: &Path,
    argv: &[OsString],
    features: &Features,
    landlock: &LandlockReport,
) -> audit::RunStart {
    let (enforced, degraded) = lists(features, landlock, policy.mode);
    audit::RunStart {
        profile: policy.name.clone(),
        profile_sources: policy.sources.iter().map(|s| s.as_str().into()).collect(),
        profile_digest: policy.digest.clone(),
        workspace: workspace.to_path_buf().into(),
        command: argv.iter().map(|a| a.clone().into()).collect(),
        guard_version: env!("CARGO_PKG_VERSION").to_string(),
        kernel: features.kernel.clone(),
        landlock_abi: landlock.abi.map(u32::from),
        enforced,
        degraded,
        pid: std::process::id(),
        uid: nix::unistd::getuid().as_raw(),
    }
}
