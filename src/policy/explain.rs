//! [`explain`]: the one line guard gives a refused process (and its user) about a refusal:
//! what was refused, which rule refused it and why, and what a human would change to allow
//! it. Built here, from the typed verdict, and nowhere else: every built-in rule knows its own
//! reason and its "to allow" hint ([`Builtin::hint`]); a profile rule gives its `reason`.
//!
//! Pure: the caller passes the operation and the subject already made printable (paths and
//! arguments escaped, one line).

use super::model::{Builtin, Op, RuleId, Verdict};

impl Builtin {
    /// What this rule says about a call it refused, in a few words.
    pub fn refusal(self) -> &'static str {
        match self {
            Builtin::WriteRoots => "outside the write roots",
            Builtin::Protect => "a protected path",
            Builtin::ExecAnonymous => "the program is not a file on disk",
            Builtin::Connect => "the address is not in net.connect",
            Builtin::Bind => "the address is not in net.bind",
            Builtin::Dns => "the name is not a host of net.connect nor in net.resolve",
            Builtin::Default => "the call is missing what its operation needs",
            Builtin::Decode => "guard could not read the call",
            Builtin::GuardConfig => "guard's own configuration",
            Builtin::SetId => "a set-user-id or set-group-id file",
            Builtin::GitConfig => "a repository config git would run or follow elsewhere",
            Builtin::GitHook => "a git hook",
            Builtin::GitPush => "a push that deletes or rewrites remote refs",
            Builtin::MassDelete => "the command deletes much of the workspace",
            Builtin::Shared => "an entry of a shared directory that this run did not make",
            Builtin::Observe | Builtin::FdReopen | Builtin::ThreadName | Builtin::Resolve => {
                "refused"
            }
        }
    }

    /// How a human would allow what this rule refused, as the end of the sentence
    /// "to allow, ..."; `None` when nothing in a profile allows it.
    pub fn hint(self, op: Option<Op>) -> Option<&'static str> {
        Some(match self {
            Builtin::WriteRoots => {
                "add the directory to [fs] write (in .guard.toml or a profile layered with -p)"
            }
            Builtin::Protect => {
                "make the change outside the sandbox (protected paths are [fs] protect)"
            }
            Builtin::Connect => {
                "add the host or address and port to [net] connect (in .guard.toml or a profile layered with -p)"
            }
            Builtin::Bind => {
                "add the address and port to [net] bind (in .guard.toml or a profile layered with -p)"
            }
            Builtin::Dns => {
                "add the host to [net] connect (HOST:PORT) or the name to [net] resolve (in .guard.toml or a profile layered with -p)"
            }
            Builtin::GuardConfig => "edit guard's configuration outside the sandbox",
            Builtin::SetId => "set [fs] allow-setid = true (in a profile layered with -p)",
            Builtin::GitConfig => {
                "set the key outside the sandbox, or list it in [git] allow-keys (in a profile layered with -p)"
            }
            Builtin::GitHook => "install the hook outside the sandbox",
            Builtin::GitPush => {
                "push outside the sandbox, or set [git] refuse-destructive-push = false (in a profile layered with -p)"
            }
            Builtin::MassDelete => {
                "raise [transaction] mass-delete's min-entries or share (in a profile layered with -p)"
            }
            Builtin::Shared => {
                "make the change outside the sandbox, or add the directory to [fs] write (in a profile layered with -p)"
            }
            Builtin::ExecAnonymous if op == Some(Op::Exec) => {
                "run the program from a file under the read roots"
            }
            _ => return None,
        })
    }
}

/// The words for an operation in "refused ... of X".
fn verb(op: Option<Op>) -> &'static str {
    match op {
        Some(Op::Exec) => "exec of",
        Some(Op::Delete) => "delete of",
        Some(Op::Rename) => "rename of",
        Some(Op::Write) => "write to",
        Some(Op::Create) => "create of",
        Some(Op::Link) => "link of",
        Some(Op::Chmod) => "metadata change of",
        Some(Op::Connect) => "connect to",
        Some(Op::Bind) => "bind to",
        Some(Op::Dns) => "lookup of",
        None => "call",
    }
}

/// The line for a refused call: `guard: refused OP SUBJECT: WHY (RULE); to allow, HINT`.
/// `subject` is the call's target made printable (a path, `from -> to`, an address, argv).
pub fn explain(verdict: &Verdict, op: Option<Op>, subject: &str) -> String {
    let what = match subject {
        "" => verb(op)
            .trim_end_matches(" of")
            .trim_end_matches(" to")
            .to_string(),
        s => format!("{} {s}", verb(op)),
    };
    let (why, hint) = match &verdict.rule {
        RuleId::Builtin(b) => {
            let why = match (b, &verdict.reason) {
                (Builtin::Default | Builtin::Decode, Some(r)) => r.as_str(),
                _ => b.refusal(),
            };
            (why.to_string(), b.hint(op).map(str::to_string))
        }
        RuleId::Profile(id) => (
            verdict
                .reason
                .clone()
                .unwrap_or_else(|| "refused by a profile rule".to_string()),
            Some(format!(
                "a profile layered after the one with rule `{id}` needs a [[rule]] that allows it (the first matching rule wins)"
            )),
        ),
    };
    let mut line = format!("guard: refused {what}: {why} ({})", verdict.rule);
    if let Some(h) = hint {
        line.push_str("; to allow, ");
        line.push_str(&h);
    }
    line
}

/// The line for an exec the policy allows but the kernel will refuse: the program (`exe`,
/// printable) lies outside every root Landlock grants execute on; `dir` is its directory.
pub fn explain_landlock_exec(exe: &str, dir: &str) -> String {
    format!(
        "guard: the kernel will refuse exec of {exe}: outside the read roots (Landlock); to allow, add {dir} to [fs] read"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Action;
    use std::sync::Arc;

    fn verdict(rule: RuleId, reason: Option<&str>) -> Verdict {
        Verdict {
            action: Action::Deny,
            errno: libc::EACCES,
            rule,
            reason: reason.map(str::to_string),
        }
    }

    #[test]
    fn builtin_refusals_name_the_rule_and_the_key() {
        let v = verdict(
            RuleId::Builtin(Builtin::WriteRoots),
            Some("path outside the write roots"),
        );
        assert_eq!(
            explain(&v, Some(Op::Delete), "/home/u/notes.txt"),
            "guard: refused delete of /home/u/notes.txt: outside the write roots (fs.write-roots); to allow, add the directory to [fs] write (in .guard.toml or a profile layered with -p)"
        );
        let v = verdict(RuleId::Builtin(Builtin::Connect), None);
        let line = explain(&v, Some(Op::Connect), "10.1.2.3:443");
        assert!(
            line.starts_with("guard: refused connect to 10.1.2.3:443: the address is not in net.connect (net.connect); to allow, add the host"),
            "{line}"
        );
        let v = verdict(
            RuleId::Builtin(Builtin::Decode),
            Some("cannot read the path"),
        );
        assert_eq!(
            explain(&v, None, ""),
            "guard: refused call: cannot read the path (decode)"
        );
    }

    #[test]
    fn profile_rules_give_their_reason() {
        let v = verdict(
            RuleId::Profile(Arc::from("no-force-push")),
            Some("force-push rewrites shared history"),
        );
        let line = explain(&v, Some(Op::Exec), "git push -f origin main");
        assert!(
            line.starts_with("guard: refused exec of git push -f origin main: force-push rewrites shared history (no-force-push); to allow, "),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn every_builtin_that_refuses_explains_itself() {
        for b in Builtin::ALL {
            assert!(!b.refusal().is_empty(), "{b:?}");
        }
    }
}
