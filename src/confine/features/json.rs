//! The JSON form of [`Features`] printed by `guard doctor --json`: the kernel, its Landlock ABI,
//! and per feature its name, `available`, `status` (`available`, `off`, `absent`), the reason
//! and hint when it is not available, what guard uses it for and what happens without it.

use serde::Serialize;

use super::{Features, Status};

/// The JSON form of one feature (`guard doctor --json`).
#[derive(Serialize)]
struct FeatureJson<'a> {
    name: &'static str,
    available: bool,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    hint: &'a str,
    purpose: &'static str,
    without: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    detail: &'a str,
}

impl Serialize for Features {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Doc<'a> {
            kernel: &'a str,
            arch: &'static str,
            landlock_abi: Option<u8>,
            features: Vec<FeatureJson<'a>>,
        }
        let features = self
            .features
            .iter()
            .map(|f| {
                let (status, reason, hint) = match &f.status {
                    Status::Available => ("available", "", ""),
                    Status::Off { reason } => ("off", reason.as_str(), ""),
                    Status::Absent { reason, hint } => ("absent", reason.as_str(), hint.as_str()),
                };
                FeatureJson {
                    name: f.feature.name(),
                    available: f.status.is_available(),
                    status,
                    reason,
                    hint,
                    purpose: f.feature.purpose(),
                    without: f.feature.without(),
                    detail: &f.detail,
                }
            })
            .collect();
        Doc {
            kernel: &self.kernel,
            arch: self.arch,
            landlock_abi: (self.kernel_landlock_abi > 0).then_some(self.kernel_landlock_abi),
            features,
        }
        .serialize(s)
    }
}
