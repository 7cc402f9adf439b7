//! The status of one feature: available, switched off by an option of the run, or absent from
//! the kernel with the reason and a hint; and how it reads in a message.

/// Whether a feature is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The kernel has it and guard uses it.
    Available,
    /// The kernel may have it, but an option of the run switched it off.
    Off {
        /// Which option, and what it did.
        reason: String,
    },
    /// The kernel lacks it (or refused it).
    Absent {
        /// Why it is missing.
        reason: String,
        /// What to do about it.
        hint: String,
    },
}

impl Status {
    /// True for [`Status::Available`].
    pub fn is_available(&self) -> bool {
        matches!(self, Status::Available)
    }

    /// Why it is not available (empty when it is).
    pub fn why(&self) -> &str {
        match self {
            Status::Available => "",
            Status::Off { reason } | Status::Absent { reason, .. } => reason,
        }
    }

    /// What to do about it (empty when nothing).
    pub fn hint(&self) -> &str {
        match self {
            Status::Absent { hint, .. } => hint,
            _ => "",
        }
    }

    /// `why`, then `: effect` when given, then `\nhint: ...` when there is a hint; empty when
    /// available.
    pub fn describe(&self, effect: Option<&str>) -> String {
        if self.is_available() {
            return String::new();
        }
        let mut s = self.why().to_string();
        if let Some(e) = effect {
            s.push_str(": ");
            s.push_str(e);
        }
        if !self.hint().is_empty() {
            s.push_str("\nhint: ");
            s.push_str(self.hint());
        }
        s
    }

    /// The reason it is not available, with the hint; empty when it is.
    pub fn reason(&self) -> String {
        self.describe(None)
    }
}
