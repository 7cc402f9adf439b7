//! `guard learn`: run a command observed, then write the smallest profile extending the base
//! profiles under which the same command runs with no refusal ([`RunBuilder::learn`]).
//!
//! 1. The command runs under the base profiles in observe mode ([`RunBuilder::learning`]):
//!    every call the supervisor judges is allowed and recorded, Landlock is off, the seccomp
//!    deny list stays, and the filter traps every open so the reads are recorded too (op
//!    `read`). The run is journaled like any other (`guard rollback` undoes it).
//! 2. Each decision of its audit log is judged again against the base policy, by the
//!    functions a run uses (`needs.rs`): `policy::decide` for what the supervisor would
//!    refuse, the Landlock plan for what the kernel would refuse (reads, executes, the
//!    interpreters and loaders the kernel opens for a program).
//! 3. What was refused becomes entries: read and write roots, generalised with the profile's
//!    variables (`places.rs`), `net.connect` targets, and allow rules for the calls a rule or
//!    `protect` refused (an exec by its exact command line, a change by its exact paths).
//! 4. The profile is loaded with the base, and every decision judged again: what is still
//!    refused is added exactly as the call had it. It is kept in the run directory as
//!    `learned.toml`.
//!
//! What learn cannot see, and so cannot put in a profile: calls the seccomp deny list refuses
//! (no profile can allow those), environment variables the base profile removes, a read of a
//! path that did not exist when it was opened, and anything this run of the command did not
//! do (another input, a warm cache, a network that answered differently). A root that would
//! cover the home directory itself, `/`, a top-level directory or guard's state directory is
//! never written; the profile says which calls needed one.

mod needs;
mod places;
mod render;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::config::ConfigFiles;
use super::{Outcome, Profiles, RunBuilder, RunError};
use crate::audit::{self, AuditError, Decision};
use crate::confine::features::{Kernel, Options, GUARD_MAX_ABI};
use crate::confine::Features;
use crate::policy::{self, NetAddr, PolicyError, Vars};

use needs::{Need, Needed};
use places::{Root, Wanted};
use render::{AllowRule, Draft, Entry};

/// What [`RunBuilder::learn`] found.
#[derive(Debug)]
pub struct Learned {
    /// The profile, as TOML (also kept as `learned.toml` in the run directory).
    pub profile: String,
    /// How the observed run ended.
    pub outcome: Outcome,
    /// Entries the profile adds (roots, connect targets, rules).
    pub entries: usize,
    /// Calls that needed something learn does not grant, one line each.
    pub not_learned: Vec<String>,
}

/// Why learning failed.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    /// The observed run could not start or be waited for.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The base is a resolver of the embedding program, which a profile cannot extend.
    #[error("learn needs the base profiles by name or file, to extend them")]
    NoSpecs,
    /// The run's audit log could not be read.
    #[error("cannot read the audit log of the observed run")]
    Audit(#[from] AuditError),
    /// The learned profile could not be written or loaded back.
    #[error("cannot write the learned profile {}", path.display())]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The learned profile does not load with its base (a bug of learn's).
    #[error("the learned profile does not load")]
    Profile(#[from] PolicyError),
}

/// How many times leftovers are added exactly before giving up.
const ROUNDS: usize = 3;

impl RunBuilder {
    /// Run `argv` observed ([`learning`](RunBuilder::learning)) and return the smallest profile
    /// extending this builder's profiles under which it runs with no refusal, named `name`
    /// (see the module documentation for what learn sees and what it cannot).
    pub fn learn<S: AsRef<OsStr>>(self, argv: &[S], name: &str) -> Result<Learned, LearnError> {
        let specs = self.profiles.specs().ok_or(LearnError::NoSpecs)?;
        let outcome = self.learning(true).spawn(argv)?.wait()?;
        let calls: Vec<Decision> = audit::read_events(&outcome.audit_log)?
            .into_iter()
            .filter(|v| v["type"] == "decision")
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect();
        let vars = run_vars(&outcome);
        let base = super::prepare::run_policy(
            Profiles::new(specs.clone()),
            &vars,
            &ConfigFiles::default(),
            false,
        )?;
        // The Landlock plan as a kernel with every right guard uses would enforce it, so the
        // profile holds on other kernels too.
        let kernel = Kernel {
            landlock_abi: GUARD_MAX_ABI,
            ..Kernel::probe()
        };
        let features = Features::of_kernel(&kernel, &Options::default());

        let argv: Vec<String> = argv
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        let mut draft = header(name, &specs, &argv, &outcome);
        add(
            &mut draft,
            &needs::needs(&base, &features, &calls),
            &vars,
            true,
        );
        let file = outcome.run_dir.join("learned.toml");
        let mut layered = specs.clone();
        layered.push(file.display().to_string());
        for round in 0..=ROUNDS {
            let text = render::render(&draft);
            std::fs::write(&file, &text).map_err(|source| LearnError::Write {
                path: file.clone(),
                source,
            })?;
            let learned = super::prepare::run_policy(
                Profiles::new(layered.clone()),
                &vars,
                &ConfigFiles::default(),
                false,
            )?;
            let left = needs::needs(&learned, &features, &calls);
            if left.is_empty() || round == ROUNDS {
                for n in &left {
                    draft
                        .not_learned
                        .push(format!("still refused: {} (by {})", n.by, n.refused_by));
                }
                if !left.is_empty() {
                    let text = render::render(&draft);
                    let _ = std::fs::write(&file, &text);
                }
                return Ok(Learned {
                    profile: render::render(&draft),
                    outcome,
                    entries: draft.entries(),
                    not_learned: draft.not_learned.clone(),
                });
            }
            // What generalising missed (a root learn would not widen): exactly as called.
            add(&mut draft, &left, &vars, false);
        }
        unreachable!("the loop returns in its last round")
    }
}

/// The variables the observed run had.
fn run_vars(outcome: &Outcome) -> Vars {
    let meta = crate::journal::RunDir {
        id: outcome.run_id.clone(),
        path: outcome.run_dir.clone(),
    }
    .read_meta()
    .ok();
    let state = outcome
        .run_dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Vars {
        workspace: meta.map(|m| m.workspace).unwrap_or_default(),
        home: std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
        tmp: std::env::temp_dir().join(format!("guard-{}", outcome.run_id)),
        state,
    }
}

/// The top of the profile: its name, what it extends, how it was learned and used.
fn header(name: &str, specs: &[String], argv: &[String], outcome: &Outcome) -> Draft {
    let command = shorten(&argv.join(" "), 100);
    let layers: String = specs.iter().map(|s| format!("-p {s} ")).collect();
    let extends = specs.last().map(|s| {
        let is_path = s.contains('/') || s.ends_with(".toml");
        match std::fs::canonicalize(s) {
            Ok(abs) if is_path => abs.display().to_string(),
            _ => s.clone(),
        }
    });
    Draft {
        name: name.to_string(),
        description: format!("learned from: {command}"),
        extends,
        header: vec![
            format!(
                "Learned by `guard learn {layers}-- {command}` (run {}).",
                outcome.run_id
            ),
            format!("Use it as: guard exec {layers}-p THIS-FILE -- ..."),
            "Each entry names the first call that needed it and what refused that call. Learn \
             sees every call guard judges and every file opened for reading; not what the \
             seccomp deny list refuses, the variables the base removes from the environment, \
             or what another run of the command would do."
                .to_string(),
            "A root must exist when a run starts: Landlock grants nothing beneath a missing \
             one. The roots the command created while it was learned are left in place."
                .to_string(),
        ],
        ..Draft::default()
    }
}

fn shorten(s: &str, max: usize) -> String {
    let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= max {
        return one;
    }
    one.chars().take(max - 3).collect::<String>() + "..."
}

/// Turn `needs` into entries of `draft`: generalised roots when `generalise`, else each path
/// exactly as needed.
fn add(draft: &mut Draft, needs: &[Needed], vars: &Vars, generalise: bool) {
    let mut read: Vec<(Wanted, String)> = Vec::new();
    let mut write: Vec<(Wanted, String)> = Vec::new();
    for n in needs {
        match &n.need {
            Need::Read { path, dir } => read.push((wanted(path, *dir, n), n.refused_by.clone())),
            Need::Execute { path } => read.push((wanted(path, false, n), n.refused_by.clone())),
            Need::Write { paths } => {
                for p in paths {
                    write.push((wanted(p, false, n), n.refused_by.clone()));
                }
            }
            Need::Connect { addr, text } => {
                let text = match addr {
                    NetAddr::Unix(p) => places::with_vars(p, vars),
                    _ => text.clone(),
                };
                push(&mut draft.connect, text, n);
            }
            Need::Resolve { name } => push(&mut draft.resolve, name.clone(), n),
            Need::Bind { text } => draft.not_learned.push(format!(
                "not learned: bind {text} (by {}; refused by {}): net.bind replaces the base's \
                 list, so add the address to a copy of it by hand",
                n.by, n.refused_by
            )),
            Need::AllowFs { op, paths } => {
                let id = format!("learned-{}-{}", op.as_str(), draft.rules.len() + 1);
                draft.rules.push(AllowRule {
                    id,
                    when: *op,
                    path: paths.iter().map(|p| path_glob(p, vars)).collect(),
                    argv: Vec::new(),
                    by: n.by.clone(),
                    refused_by: n.refused_by.clone(),
                });
            }
            Need::AllowExec { argv, .. } => {
                let id = format!("learned-exec-{}", draft.rules.len() + 1);
                draft.rules.push(AllowRule {
                    id,
                    when: policy::Op::Exec,
                    path: Vec::new(),
                    argv: argv.iter().map(|a| argv_element(a, vars)).collect(),
                    by: n.by.clone(),
                    refused_by: n.refused_by.clone(),
                });
            }
        }
    }
    let write_roots = to_entries(&mut draft.not_learned, &write, vars, generalise);
    let mut read_roots = to_entries(&mut draft.not_learned, &read, vars, generalise);
    // A write root is readable too.
    let writable: Vec<PathBuf> = write_roots
        .iter()
        .map(|(r, _)| r.abs.clone())
        .chain(draft.write.iter().map(|e| expand(&e.text, vars)))
        .collect();
    read_roots.retain(|(r, _)| !writable.iter().any(|w| r.abs.starts_with(w)));
    for (root, refused_by) in write_roots {
        push_root(&mut draft.write, root, refused_by);
    }
    for (root, refused_by) in read_roots {
        push_root(&mut draft.read, root, refused_by);
    }
}

fn wanted(path: &Path, dir: bool, n: &Needed) -> Wanted {
    Wanted {
        path: path.to_path_buf(),
        dir,
        by: n.by.clone(),
    }
}

fn push(list: &mut Vec<Entry>, text: String, n: &Needed) {
    if !list.iter().any(|e| e.text == text) {
        list.push(Entry {
            text,
            by: n.by.clone(),
            refused_by: n.refused_by.clone(),
        });
    }
}

fn push_root(list: &mut Vec<Entry>, root: Root, refused_by: String) {
    if !list.iter().any(|e| e.text == root.text) {
        list.push(Entry {
            text: root.text,
            by: root.by,
            refused_by,
        });
    }
}

/// Roots for `wanted`: generalised, or each path exactly; what is not granted goes to
/// `not_learned`.
fn to_entries(
    not_learned: &mut Vec<String>,
    wanted: &[(Wanted, String)],
    vars: &Vars,
    generalise: bool,
) -> Vec<(Root, String)> {
    if !generalise {
        return wanted
            .iter()
            .map(|(w, refused_by)| {
                let root = Root {
                    text: places::with_vars(&w.path, vars),
                    abs: w.path.clone(),
                    by: w.by.clone(),
                };
                (root, refused_by.clone())
            })
            .collect();
    }
    let list: Vec<Wanted> = wanted.iter().map(|(w, _)| w.clone()).collect();
    let (roots, refused) = places::roots(&list, vars);
    for r in refused {
        not_learned.push(format!(
            "not granted: {} would need a root on {}: {}",
            r.by,
            r.path.display(),
            r.why
        ));
    }
    roots
        .into_iter()
        .map(|root| {
            let refused_by = wanted
                .iter()
                .find(|(w, _)| w.by == root.by)
                .map(|(_, r)| r.clone())
                .unwrap_or_default();
            (root, refused_by)
        })
        .collect()
}

/// A root's text with its variables expanded (for the roots already in the draft).
fn expand(text: &str, vars: &Vars) -> PathBuf {
    let mut s = text.replace("{workspace}", &vars.workspace.display().to_string());
    s = s.replace("{tmp}", &vars.tmp.display().to_string());
    if let Some(h) = &vars.home {
        s = s.replace("{home}", &h.display().to_string());
    }
    PathBuf::from(s)
}

/// A rule path matching exactly `path`, with a variable where one applies.
fn path_glob(path: &Path, vars: &Vars) -> String {
    let text = places::with_vars(path, vars);
    match text.split_once('}') {
        Some((var, rest)) if text.starts_with('{') => {
            format!("{var}}}{}", render::literal_glob(rest))
        }
        _ => render::literal_glob(&text),
    }
}

/// An argv pattern element matching exactly `arg`: an absolute path normalised (as the matcher
/// normalises the argument) and written with a variable, anything else literally.
fn argv_element(arg: &OsString, vars: &Vars) -> String {
    let text = arg.to_string_lossy();
    if text.starts_with('/') {
        return path_glob(&policy::normalize(Path::new(arg)), vars);
    }
    render::literal_glob(&text)
}
