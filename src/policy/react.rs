//! [`react`]: what a verdict means for the run, beside [`decide`](super::decide()) and as pure.
//! `decide` says whether one call may happen; `react` says what else happens because of it:
//! checkpoints before a risky call or a new command, and what the profile's `on-deny` makes of a
//! denial (the call just fails, the command is rolled back, or the run ends). The supervisor
//! carries the reaction out; it applies no policy of its own.

use super::model::{Action, Builtin, OnDeny, Policy, RuleId, Verdict};

/// The facts about a call that `react` needs besides its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Situation {
    /// The call is an exec by a direct child of the run's root process: a new command starts.
    pub new_command: bool,
    /// The run has a journal (checkpoints and rollbacks are possible).
    pub transactional: bool,
}

/// What the supervisor does about a judged call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Perform the call.
    Allow,
    /// Take the named checkpoints, then perform the call: `risky` before the first risky call
    /// of the process, `new_command` when a new command starts (both may apply).
    CheckpointThenAllow {
        /// Take the checkpoint before the process's first risky call.
        risky: bool,
        /// Take the checkpoint that marks the start of a new command.
        new_command: bool,
    },
    /// Fail the call with the verdict's errno; nothing else happens.
    Fail,
    /// Fail the call, end the offending command's process subtree and restore the checkpoint
    /// taken when the command started (`on-deny = "rollback"`).
    RollbackCommand,
    /// Fail the call and end the whole run (a `kill` rule, or `on-deny = "kill"`).
    KillRun,
}

impl Reaction {
    /// The verdict the audit log records: a denial that ends the run is a `kill`.
    pub fn recorded(self, action: Action) -> Action {
        match self {
            Reaction::KillRun => Action::Kill,
            _ => action,
        }
    }
}

/// Which denials `on-deny` reacts to: the profile's own (its rules, protected paths, the
/// network, anonymous programs, malformed requests). Not a write refused at the write-root
/// boundary: that boundary is Landlock's, and a call refused there fails as it would without
/// the supervisor (programs probe for writable places all the time). Nor a call that failed
/// before it could be judged (a path that does not resolve, a call guard could not read).
fn on_deny_applies(rule: &RuleId) -> bool {
    !matches!(
        rule,
        RuleId::Builtin(Builtin::WriteRoots | Builtin::Resolve | Builtin::Decode)
    )
}

/// What `verdict` means for the run under `policy`.
pub fn react(policy: &Policy, verdict: &Verdict, situation: &Situation) -> Reaction {
    let Situation {
        new_command,
        transactional,
    } = *situation;
    match verdict.action {
        Action::Allow | Action::Risky => {
            // A mass deletion is flagged at the delete that crosses the line; the checkpoint
            // that matters is the one its command took when it started, before any of its
            // deletes. A new one here would come after them.
            let mass_delete = verdict.rule == RuleId::Builtin(Builtin::MassDelete);
            let risky = transactional && verdict.action == Action::Risky && !mass_delete;
            let new_command = transactional && new_command;
            if risky || new_command {
                Reaction::CheckpointThenAllow { risky, new_command }
            } else {
                Reaction::Allow
            }
        }
        Action::Kill => Reaction::KillRun,
        Action::Deny if !on_deny_applies(&verdict.rule) => Reaction::Fail,
        Action::Deny => match policy.transaction.on_deny {
            OnDeny::Errno => Reaction::Fail,
            OnDeny::Rollback if transactional => Reaction::RollbackCommand,
            OnDeny::Rollback => Reaction::Fail,
            OnDeny::Kill => Reaction::KillRun,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{load, Vars};

    fn policy(on_deny: OnDeny) -> Policy {
        let vars = Vars {
            workspace: "/ws".into(),
            home: None,
            tmp: "/tmp/g".into(),
            state: "/var/g".into(),
        };
        let mut p = load(&["agent".into()], &vars).expect("agent loads");
        p.transaction.on_deny = on_deny;
        p
    }

    fn verdict(action: Action, rule: RuleId) -> Verdict {
        Verdict {
            action,
            errno: if matches!(action, Action::Deny | Action::Kill) {
                libc::EPERM
            } else {
                0
            },
            rule,
            reason: None,
        }
    }

    const TX: Situation = Situation {
        new_command: false,
        transactional: true,
    };

    #[test]
    fn on_deny_reacts_to_the_profiles_own_denials() {
        let own = [
            RuleId::Builtin(Builtin::Protect),
            RuleId::Builtin(Builtin::Connect),
            RuleId::Builtin(Builtin::ExecAnonymous),
            RuleId::Builtin(Builtin::Default),
            RuleId::Profile("no-force-push".into()),
        ];
        for rule in own {
            let v = verdict(Action::Deny, rule.clone());
            assert_eq!(react(&policy(OnDeny::Errno), &v, &TX), Reaction::Fail);
            assert_eq!(
                react(&policy(OnDeny::Rollback), &v, &TX),
                Reaction::RollbackCommand,
                "{rule}"
            );
            assert_eq!(
                react(&policy(OnDeny::Kill), &v, &TX),
                Reaction::KillRun,
                "{rule}"
            );
        }
    }

    #[test]
    fn the_boundary_and_failed_calls_only_fail() {
        for b in [Builtin::WriteRoots, Builtin::Resolve, Builtin::Decode] {
            let v = verdict(Action::Deny, RuleId::Builtin(b));
            for on_deny in [OnDeny::Errno, OnDeny::Rollback, OnDeny::Kill] {
                assert_eq!(react(&policy(on_deny), &v, &TX), Reaction::Fail, "{b:?}");
            }
        }
    }

    #[test]
    fn a_profile_rule_named_like_a_builtin_one_is_still_a_profile_rule() {
        // Profiles cannot use guard's ids any more, but the decision never looked at the text.
        let v = verdict(Action::Deny, RuleId::Profile("fs.write-roots".into()));
        assert_eq!(react(&policy(OnDeny::Kill), &v, &TX), Reaction::KillRun);
    }

    #[test]
    fn rollback_needs_a_journal() {
        let v = verdict(Action::Deny, RuleId::Builtin(Builtin::Protect));
        let plain = Situation::default();
        assert_eq!(react(&policy(OnDeny::Rollback), &v, &plain), Reaction::Fail);
        assert_eq!(react(&policy(OnDeny::Kill), &v, &plain), Reaction::KillRun);
    }

    #[test]
    fn kill_rules_end_the_run_whatever_on_deny_says() {
        let v = verdict(Action::Kill, RuleId::Profile("no-lan".into()));
        for on_deny in [OnDeny::Errno, OnDeny::Rollback, OnDeny::Kill] {
            let r = react(&policy(on_deny), &v, &Situation::default());
            assert_eq!(r, Reaction::KillRun);
            assert_eq!(r.recorded(v.action), Action::Kill);
        }
        let deny = verdict(Action::Deny, RuleId::Builtin(Builtin::Protect));
        let r = react(&policy(OnDeny::Kill), &deny, &TX);
        assert_eq!(r.recorded(deny.action), Action::Kill, "recorded as a kill");
        assert_eq!(Reaction::Fail.recorded(Action::Deny), Action::Deny);
    }

    #[test]
    fn checkpoints_before_risky_calls_and_new_commands() {
        let p = policy(OnDeny::Errno);
        let allow = verdict(Action::Allow, RuleId::Builtin(Builtin::Default));
        let risky = verdict(Action::Risky, RuleId::Profile("migrations".into()));
        let command = Situation {
            new_command: true,
            transactional: true,
        };
        assert_eq!(react(&p, &allow, &TX), Reaction::Allow);
        assert_eq!(
            react(&p, &allow, &command),
            Reaction::CheckpointThenAllow {
                risky: false,
                new_command: true
            }
        );
        assert_eq!(
            react(&p, &risky, &command),
            Reaction::CheckpointThenAllow {
                risky: true,
                new_command: true
            }
        );
        assert_eq!(
            react(&p, &risky, &TX),
            Reaction::CheckpointThenAllow {
                risky: true,
                new_command: false
            }
        );
        let mass = verdict(Action::Risky, RuleId::Builtin(Builtin::MassDelete));
        assert_eq!(
            react(&p, &mass, &TX),
            Reaction::Allow,
            "no checkpoint after the deletes"
        );
        let deny = verdict(Action::Deny, RuleId::Builtin(Builtin::MassDelete));
        assert_eq!(
            react(&policy(OnDeny::Rollback), &deny, &TX),
            Reaction::RollbackCommand
        );
        // Without a journal there is nothing to checkpoint.
        let plain = Situation {
            new_command: true,
            transactional: false,
        };
        assert_eq!(react(&p, &risky, &plain), Reaction::Allow);
        assert_eq!(react(&p, &allow, &plain), Reaction::Allow);
    }
}
