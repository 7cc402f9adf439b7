//! Rules on volume: one command deleting much of the workspace is a policy event of its own,
//! whatever program does it (`rm -rf ./*`, `find . -delete`, `shutil.rmtree`, `git rm -r .`).
//! No single delete is wrong; the count is. The supervisor counts, per command, the deletes of
//! workspace entries that existed when the command started, and asks [`crosses`] and
//! [`verdict`] at each one.

use super::model::{Action, Builtin, MassDelete, RuleId, Verdict};

/// Whether `deleted` (this delete included) crosses the line `m` draws for a workspace of
/// `total` entries: at least `min_entries`, and at least `share` of the workspace.
pub fn crosses(m: &MassDelete, deleted: u64, total: u64) -> bool {
    m.action != Action::Allow
        && deleted >= m.min_entries
        && (deleted as f64) >= m.share * (total as f64)
}

/// The verdict on the delete that crosses the line (the caller asks once per command).
pub fn verdict(m: &MassDelete, deleted: u64, total: u64, since: Option<&str>) -> Verdict {
    let errno = match m.action {
        Action::Deny | Action::Kill => libc::EPERM,
        Action::Allow | Action::Risky => 0,
    };
    let mut reason = format!(
        "mass deletion: this command has deleted {deleted} of the workspace's {total} entries"
    );
    if let Some(cp) = since {
        reason.push_str(&format!("; checkpoint {cp} precedes its first delete"));
    }
    Verdict {
        action: m.action,
        errno,
        rule: RuleId::Builtin(Builtin::MassDelete),
        reason: Some(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_needs_both_count_and_share() {
        let m = MassDelete {
            action: Action::Risky,
            min_entries: 20,
            share: 0.5,
        };
        assert!(!crosses(&m, 19, 30), "below the count");
        assert!(!crosses(&m, 20, 100), "below the share");
        assert!(crosses(&m, 20, 40));
        assert!(crosses(&m, 50, 100));
        let off = MassDelete {
            action: Action::Allow,
            ..m
        };
        assert!(!crosses(&off, 1000, 1000));
        let v = verdict(
            &MassDelete {
                action: Action::Deny,
                ..m
            },
            20,
            40,
            Some("3"),
        );
        assert_eq!((v.action, v.errno), (Action::Deny, libc::EPERM));
        assert_eq!(v.rule.as_str(), "fs.mass-delete");
        assert!(v.reason.unwrap().contains("20 of the workspace's 40"));
    }
}
