//! From the paths a command needed to the roots a profile lists: generalised (a directory
//! rather than the 300 files in it) and written with the profile variables (`{workspace}`,
//! `{home}`, `{tmp}`) instead of literal paths, but never wider than a fixed boundary.
//!
//! Each path is placed under an *anchor*: the workspace, or the run's private tmp, whole; the
//! first component beneath the home directory (`{home}/.cargo`: never the home directory
//! itself, which holds `~/.ssh`); elsewhere the first two components (`/opt/tool`); a shared
//! scratch directory's first entry (`/tmp/x`). A file's directory stands for the file, unless
//! that directory lies above its anchor (`{home}/.gitconfig` stays a file). The roots of one
//! anchor become their deepest common directory; when three or more roots share a scratch
//! directory (`/tmp`), they become that directory (random temporary names differ every run).
//! The home directory itself, `/` and the top-level directories are never granted: a call
//! that needs one is reported as not learned.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::policy::Vars;

/// Shared scratch directories: many entries there are one root.
const SCRATCH: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// A wanted root, as it comes from a need.
#[derive(Debug, Clone)]
pub(super) struct Wanted {
    /// The path needed.
    pub path: PathBuf,
    /// Whether the path itself is a directory (else its directory stands for it).
    pub dir: bool,
    /// The first call that needed it.
    pub by: String,
}

/// A root for the profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Root {
    /// As the profile writes it (`{home}/.cargo`).
    pub text: String,
    /// The absolute path.
    pub abs: PathBuf,
    /// The first call that needed it.
    pub by: String,
}

/// A path that needed a root learn will not grant.
#[derive(Debug, Clone)]
pub(super) struct Refused {
    pub path: PathBuf,
    pub by: String,
    pub why: &'static str,
}

/// The variables a path may be written with, most specific first, with their real paths.
struct Bases {
    list: Vec<(&'static str, PathBuf)>,
}

impl Bases {
    fn of(vars: &Vars) -> Bases {
        let mut list = Vec::new();
        let mut add = |name: &'static str, p: &Path| {
            list.push((name, p.to_path_buf()));
            if let Ok(real) = std::fs::canonicalize(p) {
                if real != p {
                    list.push((name, real));
                }
            }
        };
        add("{workspace}", &vars.workspace);
        add("{tmp}", &vars.tmp);
        if let Some(h) = &vars.home {
            add("{home}", h);
        }
        Bases { list }
    }

    /// The variable `path` lies under, with the rest of the path.
    fn split<'a>(&'a self, path: &'a Path) -> Option<(&'static str, &'a Path, &'a Path)> {
        self.list.iter().find_map(|(name, base)| {
            path.strip_prefix(base)
                .ok()
                .map(|rest| (*name, base.as_path(), rest))
        })
    }

    /// `path` written with a variable where one applies.
    fn text(&self, path: &Path) -> String {
        match self.split(path) {
            Some((name, _, rest)) if rest.as_os_str().is_empty() => name.to_string(),
            Some((name, _, rest)) => format!("{name}/{}", rest.display()),
            None => path.display().to_string(),
        }
    }
}

/// The anchor of `path`: the widest root it may be generalised to.
fn anchor(path: &Path, bases: &Bases) -> Result<PathBuf, &'static str> {
    if let Some((name, base, rest)) = bases.split(path) {
        if name != "{home}" {
            return Ok(base.to_path_buf());
        }
        return match rest.components().next() {
            Some(first) => Ok(base.join(first)),
            None => Err("the home directory itself (it holds ~/.ssh and the like)"),
        };
    }
    let normal: Vec<Component<'_>> = path
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    if let Some(scratch) = SCRATCH.iter().map(Path::new).find(|s| path.starts_with(s)) {
        let depth = scratch.components().count();
        return match path.components().nth(depth) {
            Some(first) => Ok(scratch.join(first)),
            None => Ok(scratch.to_path_buf()),
        };
    }
    match normal.len() {
        0 => Err("the root directory (everything)"),
        1 if path.is_dir() => Err("a top-level directory"),
        1 => Ok(path.to_path_buf()),
        _ => Ok(Path::new("/").join(normal[0]).join(normal[1])),
    }
}

/// The deepest directory both `a` and `b` lie in.
fn common(a: &Path, b: &Path) -> PathBuf {
    a.components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// The roots for `wanted`, and what learn does not grant.
pub(super) fn roots(wanted: &[Wanted], vars: &Vars) -> (Vec<Root>, Vec<Refused>) {
    let bases = Bases::of(vars);
    // A root never holds one of these whole unless it is that very one (the state directory
    // above all: a write root there would let the command rewrite its own journal).
    let mut kept_out: Vec<PathBuf> = bases.list.iter().map(|(_, p)| p.clone()).collect();
    kept_out.push(vars.state.clone());
    if let Ok(real) = std::fs::canonicalize(&vars.state) {
        kept_out.push(real);
    }
    let widens_too_far = |root: &Path| kept_out.iter().any(|k| k != root && k.starts_with(root));
    let mut refused = Vec::new();
    // anchor -> [(root, first caller)]
    let mut groups: BTreeMap<PathBuf, Vec<(PathBuf, String)>> = BTreeMap::new();
    for w in wanted {
        let anchor = match anchor(&w.path, &bases) {
            Ok(a) => a,
            Err(why) => {
                refused.push(Refused {
                    path: w.path.clone(),
                    by: w.by.clone(),
                    why,
                });
                continue;
            }
        };
        let mut candidate = if w.dir {
            w.path.clone()
        } else {
            w.path
                .parent()
                .map_or_else(|| w.path.clone(), Path::to_path_buf)
        };
        if !candidate.starts_with(&anchor) {
            // The directory lies above the anchor: the file alone.
            candidate = w.path.clone();
        }
        let group = groups.entry(anchor).or_default();
        let merged = group.iter_mut().find_map(|(root, _)| {
            let wider = common(root, &candidate);
            (!widens_too_far(&wider)).then(|| *root = wider)
        });
        if merged.is_none() {
            group.push((candidate, w.by.clone()));
        }
    }
    let mut list: Vec<(PathBuf, String)> = groups.into_values().flatten().collect();
    // Three or more roots in one scratch directory: the directory.
    for scratch in SCRATCH.iter().map(Path::new) {
        let inside = list
            .iter()
            .filter(|(r, _)| r.parent() == Some(scratch))
            .count();
        if inside >= 3 && !widens_too_far(scratch) {
            let by = list
                .iter()
                .find(|(r, _)| r.parent() == Some(scratch))
                .map(|(_, b)| b.clone())
                .unwrap_or_default();
            list.retain(|(r, _)| r.parent() != Some(scratch));
            list.push((scratch.to_path_buf(), by));
        }
    }
    // Nothing inside another root.
    let all: Vec<PathBuf> = list.iter().map(|(r, _)| r.clone()).collect();
    list.retain(|(r, _)| !all.iter().any(|o| o != r && r.starts_with(o)));
    list.sort();
    list.dedup_by(|a, b| a.0 == b.0);
    let roots = list
        .into_iter()
        .map(|(abs, by)| Root {
            text: bases.text(&abs),
            abs,
            by,
        })
        .collect();
    (roots, refused)
}

/// `path` written with a variable where one applies (for rule paths and argv).
pub(super) fn with_vars(path: &Path, vars: &Vars) -> String {
    Bases::of(vars).text(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            workspace: "/w/ws".into(),
            home: Some("/w/home".into()),
            tmp: "/w/tmp/guard-1".into(),
            state: "/w/state".into(),
        }
    }

    fn want(paths: &[(&str, bool)]) -> Vec<Wanted> {
        paths
            .iter()
            .map(|(p, dir)| Wanted {
                path: PathBuf::from(p),
                dir: *dir,
                by: format!("by {p}"),
            })
            .collect()
    }

    fn texts(roots: &[Root]) -> Vec<&str> {
        roots.iter().map(|r| r.text.as_str()).collect()
    }

    #[test]
    fn many_files_become_their_directory_with_variables() {
        let mut files: Vec<(String, bool)> = (0..300)
            .map(|i| {
                (
                    format!("/w/home/.cargo/registry/src/crate-{i}/lib.rs"),
                    false,
                )
            })
            .collect();
        files.push(("/w/home/.cargo/config.toml".into(), false));
        files.push(("/w/ws/src/main.rs".into(), false));
        files.push(("/w/ws/target".into(), true));
        let wanted: Vec<(&str, bool)> = files.iter().map(|(p, d)| (p.as_str(), *d)).collect();
        let (roots, refused) = roots(&want(&wanted), &vars());
        assert_eq!(texts(&roots), ["{home}/.cargo", "{workspace}"]);
        assert!(refused.is_empty());
        assert_eq!(roots[0].by, "by /w/home/.cargo/registry/src/crate-0/lib.rs");
    }

    #[test]
    fn a_file_in_home_stays_a_file_and_home_itself_is_refused() {
        let (roots, refused) = roots(
            &want(&[
                ("/w/home/.gitconfig", false),
                ("/w/home/.config/tool/state", false),
                ("/w/home", true),
            ]),
            &vars(),
        );
        assert_eq!(texts(&roots), ["{home}/.config/tool", "{home}/.gitconfig"]);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].path, PathBuf::from("/w/home"));
    }

    #[test]
    fn elsewhere_two_components_and_scratch_directories_collapse() {
        let (roots, refused) = roots(
            &want(&[
                ("/opt/tool/bin/x", false),
                ("/opt/tool/lib/y.so", false),
                ("/tmp/a1", false),
                ("/tmp/b2", false),
                ("/tmp/c3", false),
                ("/var/tmp/only", false),
                ("/", true),
                ("/w/tmp/guard-1/x", false),
            ]),
            &vars(),
        );
        assert_eq!(
            texts(&roots),
            ["/opt/tool", "/tmp", "/var/tmp/only", "{tmp}"]
        );
        assert_eq!(refused.len(), 1);
    }

    #[test]
    fn never_widened_over_the_state_directory_or_a_variable() {
        let v = Vars {
            workspace: "/tmp/x/ws".into(),
            home: Some("/tmp/x/home".into()),
            tmp: "/tmp/guard-1".into(),
            state: "/tmp/x/state".into(),
        };
        // Both lie under the anchor /tmp/x, whose common root would hold the state directory.
        let (roots, _) = roots(
            &want(&[("/tmp/x/outside/a/f", false), ("/tmp/x/bin/g", false)]),
            &v,
        );
        assert_eq!(texts(&roots), ["/tmp/x/bin", "/tmp/x/outside/a"]);
    }
}
