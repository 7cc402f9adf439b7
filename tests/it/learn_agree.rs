//! `guard explain` agrees with what a run did: the decisions of a workload's audit log (the
//! learn tests' shell session, cargo build and npm install, under their base and under the
//! learned profile) are asked again of `guard explain`, with the same profiles, and each
//! answer must carry the verdict and the rule the run recorded.
//!
//! explain judges the filesystem as it is when asked, a run as it was at the call; so only the
//! calls whose target is in the state the call saw are asked: a create whose path is still
//! missing, a write or delete whose target still exists, every connect and exec. An exec the
//! supervisor let through and Landlock refused is recorded as allowed with a note that
//! Landlock refuses it; explain names Landlock as the layer that decides: that agrees.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::Value;

use crate::util::Workspace;

/// What was asked of explain for one run.
#[derive(Debug, Default)]
pub struct Agreed {
    /// Cases asked (all agreed, or the check panicked).
    pub cases: usize,
    /// Of which the run refused.
    pub refused: usize,
    /// Cases per operation.
    pub ops: BTreeMap<String, usize>,
}

impl Agreed {
    pub fn add(&mut self, other: Agreed) {
        self.cases += other.cases;
        self.refused += other.refused;
        for (op, n) in other.ops {
            *self.ops.entry(op).or_default() += n;
        }
    }
}

/// One decision to ask about.
struct Case<'a> {
    d: &'a Value,
    op: &'static str,
    /// The `--write`/`--delete`/`--connect` value, or the command line.
    arg: Vec<String>,
}

/// Ask `guard explain` about at most `max` decisions of `decisions` (a run under `profiles`
/// and the test layer, with the environment `env`), refusals first, then the others by
/// operation in turn; panics listing every disagreement.
pub fn explain_agrees(
    w: &Workspace,
    profiles: &[&str],
    env: &[(&str, String)],
    decisions: &[Value],
    max: usize,
) -> Agreed {
    let cases = pick(decisions, max);
    let mut failures = Vec::new();
    let mut agreed = Agreed::default();
    for case in &cases {
        let e = ask(w, profiles, env, case);
        if let Err(why) = agrees(case.d, &e) {
            failures.push(format!(
                "{} {:?}: {why}\n  run:     {}\n  explain: {e}",
                case.op, case.arg, case.d
            ));
            continue;
        }
        agreed.cases += 1;
        if matches!(case.d["verdict"].as_str(), Some("deny" | "kill")) {
            agreed.refused += 1;
        }
        *agreed.ops.entry(case.op.to_string()).or_default() += 1;
    }
    assert!(
        failures.is_empty(),
        "explain disagrees with the run on {} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    agreed
}

/// The decisions explain can be asked about in the state the call saw, one per target and
/// verdict.
fn pick(decisions: &[Value], max: usize) -> Vec<Case<'_>> {
    let mut seen = HashSet::new();
    let mut refused = Vec::new();
    let mut by_op: BTreeMap<&'static str, Vec<Case<'_>>> = BTreeMap::new();
    for d in decisions {
        let Some(case) = case_of(d) else { continue };
        if !seen.insert((case.op, case.arg.clone(), d["verdict"].to_string())) {
            continue;
        }
        if matches!(d["verdict"].as_str(), Some("deny" | "kill")) {
            refused.push(case);
        } else {
            by_op.entry(case.op).or_default().push(case);
        }
    }
    let mut cases: Vec<Case<'_>> = refused.into_iter().take(max).collect();
    let mut queues: Vec<std::vec::IntoIter<Case<'_>>> =
        by_op.into_values().map(Vec::into_iter).collect();
    while cases.len() < max {
        let before = cases.len();
        for q in &mut queues {
            if cases.len() < max {
                cases.extend(q.next());
            }
        }
        if cases.len() == before {
            break;
        }
    }
    cases
}

fn case_of(d: &Value) -> Option<Case<'_>> {
    let path = d["path"].as_str().map(Path::new);
    let exists = path.is_some_and(|p| p.symlink_metadata().is_ok());
    let (op, arg) = match d["op"].as_str()? {
        "exec" => {
            let argv: Vec<String> = d["argv"]
                .as_array()?
                .iter()
                .map(|a| a.as_str().map(str::to_string))
                .collect::<Option<_>>()?;
            d["exe"].as_str()?;
            ("exec", argv)
        }
        // An address explain can be asked about: IP:PORT, a unix socket path, @abstract (not
        // a netlink or other family's).
        "connect" => {
            let addr = d["addr"].as_str()?;
            let askable = addr.parse::<std::net::SocketAddr>().is_ok()
                || addr.starts_with('/')
                || addr.starts_with('@');
            if !askable {
                return None;
            }
            ("connect", vec![addr.to_string()])
        }
        // An entry the call created (open, mkdir, mknod or symlink: the supervisor judges
        // them alike), still missing, in a directory that is still there.
        "create" if !exists && path?.parent().is_some_and(Path::is_dir) => {
            ("write", vec![d["path"].as_str()?.to_string()])
        }
        "write" if path?.is_file() => ("write", vec![d["path"].as_str()?.to_string()]),
        "delete" if exists => ("delete", vec![d["path"].as_str()?.to_string()]),
        _ => return None,
    };
    // An EEXIST create asked as a write would be a different call.
    if d["errno"] == "EEXIST" {
        return None;
    }
    Some(Case { d, op, arg })
}

/// `guard explain --json` on one case, with the profiles of the run; an exec is asked from
/// the caller's working directory, its program found first where the run found it.
fn ask(w: &Workspace, profiles: &[&str], env: &[(&str, String)], case: &Case<'_>) -> Value {
    let mut g = w.guard();
    g.args(["explain", "--json"]);
    for p in profiles {
        g.arg("-p").arg(p);
    }
    g.arg("-p").arg(&w.profile).arg("-w").arg(&w.ws);
    for (k, v) in env {
        g.env(k, v);
    }
    let out = if case.op == "exec" {
        let path = env
            .iter()
            .find(|(k, _)| *k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        let exe = Path::new(case.d["exe"].as_str().unwrap_or("/"));
        let dir = exe.parent().unwrap_or(Path::new("/"));
        g.env("PATH", format!("{}:{path}", dir.display()));
        if let Some(cwd) = case.d["cwd"].as_str().filter(|c| Path::new(c).is_dir()) {
            g.cmd.current_dir(cwd);
        }
        g.run(&case.arg)
    } else {
        g.arg(format!("--{}", case.op)).arg(&case.arg[0]).output()
    };
    serde_json::from_str(out.stdout().trim()).unwrap_or_else(|e| {
        panic!(
            "explain {} {:?}: {e}: {}{}",
            case.op,
            case.arg,
            out.stdout(),
            out.stderr()
        )
    })
}

/// Whether explain's answer `e` is the run's decision `d`.
fn agrees(d: &Value, e: &Value) -> Result<(), String> {
    if e["layer"] == "landlock" {
        // Landlock decides: the supervisor let the call through, and a refusal by the kernel
        // is noted in the decision of an exec.
        if d["verdict"] != "allow" {
            return Err("explain says Landlock decides, the run's supervisor did not allow".into());
        }
        let noted = d["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Landlock refuses"));
        return match (e["verdict"].as_str(), noted) {
            (Some("deny"), true) | (Some("allow"), false) => Ok(()),
            _ => Err("Landlock's verdict differs from the run's note".into()),
        };
    }
    if e["verdict"] != d["verdict"] {
        return Err("verdicts differ".into());
    }
    if e["rule"] != d["rule"] {
        return Err("rules differ".into());
    }
    if matches!(d["verdict"].as_str(), Some("deny" | "kill" | "error")) && e["errno"] != d["errno"]
    {
        return Err("errnos differ".into());
    }
    Ok(())
}
