//! What the running kernel offers guard: probed once, never assumed, and reported with one
//! vocabulary. `guard doctor`, the `run-start` audit event and the launch all read the same
//! [`Features`], so a feature has one name and one status everywhere.
//!
//! Every [`Feature`] gets a [`Status`] (the way rust-landlock's `RestrictionStatus` reports a
//! restriction): available, switched off by an option of the run (the degraded-kernel knobs of
//! [`Options`]), or absent from this kernel with the reason and a hint. Probing is cheap and
//! never forks for a run: the kernel facts are a handful of system calls ([`Kernel::probe`]),
//! and the listener features are probed on the run's own listener ([`probe_listener`]), the
//! same function `guard doctor` calls on a throwaway listener in a child.
#![warn(missing_docs)]

mod catalog;
mod json;
mod probe;
mod status;

use crate::sys;

pub use catalog::Feature;
pub use probe::{probe_listener, Kernel, ListenerCaps};
pub use status::Status;

/// The highest Landlock ABI whose rights guard has vetted; newer kernels are used at this ABI.
pub const GUARD_MAX_ABI: u8 = 9;

/// The options that switch features off, to exercise the degraded paths on a new kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Use at most this Landlock ABI (0: no Landlock).
    pub max_landlock_abi: Option<u8>,
    /// Use SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP when the kernel has it.
    pub sync_wake_up: bool,
    /// Inject descriptors with SECCOMP_IOCTL_NOTIF_ADDFD when the kernel can.
    pub addfd: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_landlock_abi: None,
            sync_wake_up: true,
            addfd: true,
        }
    }
}

/// One feature and its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureStatus {
    /// The feature.
    pub feature: Feature,
    /// Whether it is in use, and why not.
    pub status: Status,
    /// Facts worth showing (sizes, versions); may be empty.
    pub detail: String,
}

/// Every feature guard knows, with its status on this kernel under the run's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// `uname -r`.
    pub kernel: String,
    /// The architecture guard was built for.
    pub arch: &'static str,
    /// The kernel's Landlock ABI (0: none).
    pub kernel_landlock_abi: u8,
    /// The ABI a ruleset uses under the options (`None`: no Landlock).
    pub landlock_abi: Option<u8>,
    /// The notification structure sizes, when the kernel has user notification.
    pub notif_sizes: Option<sys::NotifSizes>,
    features: Vec<FeatureStatus>,
}

fn absent(feature: Feature, reason: impl Into<String>) -> Status {
    let hint = match feature.since() {
        Some(v) => format!("use Linux {v} or newer"),
        None => String::new(),
    };
    Status::Absent {
        reason: reason.into(),
        hint,
    }
}

impl Features {
    /// The statuses that need no listener: Landlock (under the ABI cap), user notification,
    /// pidfd_getfd, openat2. The listener features are added by [`Features::with_listener`].
    pub fn of_kernel(kernel: &Kernel, options: &Options) -> Features {
        let k = kernel.landlock_abi;
        let cap = options
            .max_landlock_abi
            .unwrap_or(GUARD_MAX_ABI)
            .min(GUARD_MAX_ABI);
        let v = k.min(cap);
        let mut features = Vec::new();
        for f in Feature::ALL {
            let Some(need) = f.landlock_abi() else {
                continue;
            };
            let status = if v >= need {
                Status::Available
            } else if f == Feature::Landlock && k == 0 {
                Status::Absent {
                    reason: "this kernel has no landlock (abi 0)".into(),
                    hint: "enable landlock (CONFIG_SECURITY_LANDLOCK, `lsm=` boot parameter)"
                        .into(),
                }
            } else if f == Feature::Landlock {
                Status::Off {
                    reason: "landlock switched off (--landlock-abi 0)".into(),
                }
            } else if k >= need {
                Status::Off {
                    reason: format!(
                        "needs landlock abi {need}; capped at abi {v} (--landlock-abi)"
                    ),
                }
            } else {
                absent(
                    f,
                    format!("needs landlock abi {need}; this kernel has abi {k}"),
                )
            };
            let detail = if f == Feature::Landlock && k > 0 {
                format!("ABI {k}")
            } else {
                String::new()
            };
            features.push(FeatureStatus {
                feature: f,
                status,
                detail,
            });
        }
        let (notify, detail) = match kernel.notif_sizes {
            Ok(s) => (
                Status::Available,
                format!(
                    "notif {} / resp {} / data {} bytes",
                    s.notif, s.resp, s.data
                ),
            ),
            Err(errno) => (
                absent(
                    Feature::SeccompNotify,
                    format!(
                        "SECCOMP_GET_NOTIF_SIZES failed: {}",
                        std::io::Error::from_raw_os_error(errno)
                    ),
                ),
                String::new(),
            ),
        };
        features.push(FeatureStatus {
            feature: Feature::SeccompNotify,
            status: notify,
            detail,
        });
        for (f, ok, name) in [
            (Feature::PidfdGetfd, kernel.pidfd_getfd, "pidfd_getfd"),
            (Feature::Openat2, kernel.openat2, "openat2"),
        ] {
            features.push(FeatureStatus {
                feature: f,
                status: if ok {
                    Status::Available
                } else {
                    absent(f, format!("{name} failed"))
                },
                detail: String::new(),
            });
        }
        features.sort_by_key(|f| f.feature);
        Features {
            kernel: kernel.release.clone(),
            arch: std::env::consts::ARCH,
            kernel_landlock_abi: k,
            landlock_abi: (v > 0).then_some(v),
            notif_sizes: kernel.notif_sizes.ok(),
            features,
        }
    }

    /// Add the listener features: `caps` from [`probe_listener`], `None` when no listener
    /// could be installed at all (then user notification is absent too).
    pub fn with_listener(mut self, caps: Option<&ListenerCaps>, options: &Options) -> Features {
        let Some(caps) = caps else {
            self.set(
                Feature::SeccompNotify,
                absent(
                    Feature::SeccompNotify,
                    "no seccomp listener could be installed",
                ),
            );
            for f in [Feature::SyncWakeUp, Feature::AddFd, Feature::AddFdSend] {
                self.set(f, absent(f, "no seccomp listener"));
            }
            return self;
        };
        let sync = match caps.sync_wake_up {
            None => Status::Off {
                reason: "switched off (--no-sync-wake-up)".into(),
            },
            Some(Ok(())) => Status::Available,
            Some(Err(errno)) => absent(
                Feature::SyncWakeUp,
                format!(
                    "the kernel refused it ({})",
                    std::io::Error::from_raw_os_error(errno)
                ),
            ),
        };
        self.set(Feature::SyncWakeUp, sync);
        let off = || Status::Off {
            reason: "switched off (--no-addfd)".into(),
        };
        let addfd = match (options.addfd, caps.addfd) {
            (false, _) => off(),
            (true, true) => Status::Available,
            (true, false) => absent(Feature::AddFd, "the kernel lacks SECCOMP_IOCTL_NOTIF_ADDFD"),
        };
        self.set(Feature::AddFd, addfd);
        let send = match (options.addfd, caps.addfd_send) {
            (false, _) => off(),
            (true, true) => Status::Available,
            (true, false) => absent(
                Feature::AddFdSend,
                "the kernel lacks SECCOMP_ADDFD_FLAG_SEND",
            ),
        };
        self.set(Feature::AddFdSend, send);
        self
    }

    /// Probe everything for `guard doctor`: the kernel facts, and the listener features on a
    /// throwaway listener in a child (so this forks; call it before starting threads).
    pub fn probe() -> Features {
        Features::probe_with(&Options::default())
    }

    /// [`Features::probe`] with a run's options (what `guard explain` assumes of a run).
    pub fn probe_with(options: &Options) -> Features {
        let caps = probe::probe_listener_in_child();
        Features::of_kernel(&Kernel::probe(), options).with_listener(caps.as_ref(), options)
    }

    fn set(&mut self, feature: Feature, status: Status) {
        match self.features.iter_mut().find(|f| f.feature == feature) {
            Some(f) => f.status = status,
            None => {
                self.features.push(FeatureStatus {
                    feature,
                    status,
                    detail: String::new(),
                });
                self.features.sort_by_key(|f| f.feature);
            }
        }
    }

    /// Every feature probed so far, in [`Feature::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = &FeatureStatus> {
        self.features.iter()
    }

    /// The status of `feature`; absent when it was not probed.
    pub fn status(&self, feature: Feature) -> Status {
        self.features
            .iter()
            .find(|f| f.feature == feature)
            .map(|f| f.status.clone())
            .unwrap_or_else(|| absent(feature, "not probed"))
    }

    /// True when `feature` is available.
    pub fn available(&self, feature: Feature) -> bool {
        self.features
            .iter()
            .any(|f| f.feature == feature && f.status.is_available())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(abi: u8) -> Kernel {
        Kernel {
            release: "6.18".into(),
            landlock_abi: abi,
            notif_sizes: Ok(sys::NotifSizes {
                notif: 80,
                resp: 24,
                data: 64,
            }),
            pidfd_getfd: true,
            openat2: true,
        }
    }

    fn all_caps() -> ListenerCaps {
        ListenerCaps {
            sync_wake_up: Some(Ok(())),
            addfd: true,
            addfd_send: true,
        }
    }

    #[test]
    fn every_feature_has_a_status_and_a_unique_name() {
        let o = Options::default();
        let f = Features::of_kernel(&kernel(9), &o).with_listener(Some(&all_caps()), &o);
        let names: Vec<&str> = f.iter().map(|x| x.feature.name()).collect();
        assert_eq!(names.len(), Feature::ALL.len());
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique, names);
        assert!(f.iter().all(|x| x.status.is_available()), "{f:?}");
        assert_eq!(f.landlock_abi, Some(9));
    }

    #[test]
    fn a_cap_switches_off_and_an_old_kernel_is_absent_with_a_hint() {
        let capped = Features::of_kernel(
            &kernel(7),
            &Options {
                max_landlock_abi: Some(1),
                ..Options::default()
            },
        );
        assert_eq!(capped.landlock_abi, Some(1));
        let refer = capped.status(Feature::LandlockFsRefer);
        assert!(matches!(refer, Status::Off { .. }), "{refer:?}");
        assert!(refer.reason().contains("capped at abi 1"));
        let unix = capped.status(Feature::LandlockFsResolveUnix);
        assert!(matches!(unix, Status::Absent { .. }), "{unix:?}");
        assert!(unix.reason().contains("this kernel has abi 7"));

        let old = Features::of_kernel(&kernel(3), &Options::default());
        let scope = old.status(Feature::LandlockScopeSignal);
        assert!(scope.reason().contains("Linux 6.12"), "{scope:?}");
        let none = Features::of_kernel(&kernel(0), &Options::default());
        assert_eq!(none.landlock_abi, None);
        assert!(none.status(Feature::Landlock).reason().contains("hint:"));
    }

    #[test]
    fn listener_options_are_reported_as_switched_off() {
        let o = Options {
            sync_wake_up: false,
            addfd: false,
            ..Options::default()
        };
        let caps = ListenerCaps {
            sync_wake_up: None,
            addfd: true,
            addfd_send: true,
        };
        let f = Features::of_kernel(&kernel(9), &o).with_listener(Some(&caps), &o);
        for feature in [Feature::SyncWakeUp, Feature::AddFd, Feature::AddFdSend] {
            assert!(
                matches!(f.status(feature), Status::Off { .. }),
                "{feature:?}: {:?}",
                f.status(feature)
            );
        }
        let old = ListenerCaps {
            sync_wake_up: Some(Err(libc::EINVAL)),
            addfd: true,
            addfd_send: false,
        };
        let d = Options::default();
        let f = Features::of_kernel(&kernel(9), &d).with_listener(Some(&old), &d);
        assert!(f.available(Feature::AddFd));
        assert!(f.status(Feature::AddFdSend).reason().contains("Linux 5.14"));
        assert!(f.status(Feature::SyncWakeUp).reason().contains("Linux 6.6"));
    }

    #[test]
    fn the_probe_of_this_kernel_agrees_with_itself() {
        let k = Kernel::probe();
        let f = Features::of_kernel(&k, &Options::default());
        assert_eq!(f.kernel_landlock_abi, k.landlock_abi);
        assert_eq!(f.available(Feature::Landlock), k.landlock_abi > 0);
    }
}
