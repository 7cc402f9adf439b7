//! Loading a profile chain: classifying specs (built-in name or path), reading and parsing the
//! files, following `extends` recursively with cycle detection, and the chain's digest.
//!
//! A spec is a path when it contains `/` or ends in `.toml`, otherwise a built-in name. A path
//! in `extends` is relative to the directory of the file that says it. Several specs layer left
//! to right: each later spec's chain is stacked on the earlier ones, and a profile already in
//! the stack (the same built-in, or the same file) is not applied twice. This is the only file
//! of `policy/` that does I/O.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::builtin;
use super::error::PolicyError;
use super::paths::normalize;
use super::raw::{self, RawProfile};

/// Where one profile of the chain comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    Builtin(String),
    Path(PathBuf),
}

impl Spec {
    /// A spec as the user or an `extends` line wrote it; `dir` is the directory paths are
    /// relative to (the extending file's), `None` for the current directory.
    pub fn classify(text: &str, dir: Option<&Path>) -> Spec {
        if text.contains('/') || text.ends_with(".toml") {
            let path = Path::new(text);
            match dir {
                Some(d) if path.is_relative() => Spec::Path(d.join(path)),
                _ => Spec::Path(path.to_path_buf()),
            }
        } else {
            Spec::Builtin(text.to_string())
        }
    }
}

/// One parsed profile of the chain.
#[derive(Debug, Clone)]
pub struct Unit {
    /// How messages and `Policy::sources` name it: the built-in name or the file path.
    pub display: String,
    /// The file it was read from, absolute (canonical when it could be resolved); `None` for
    /// a built-in.
    file: Option<PathBuf>,
    /// A configuration file found without a flag: it refines the profile and keeps its name
    /// unless it says `name = ...`.
    pub config: bool,
    /// Identity for cycle and duplicate detection.
    key: String,
    /// The name a profile gets when it does not say `name = ...`.
    pub default_name: String,
    pub text: String,
    pub raw: RawProfile,
}

impl Unit {
    /// The file this profile was read from; `None` for a built-in.
    pub fn file(&self) -> Option<&PathBuf> {
        self.file.as_ref()
    }

    /// Whether this profile says `extends = ...`.
    pub fn extends(&self) -> bool {
        self.raw.extends.is_some()
    }
}

/// Loads the chains of `specs` and stacks them: the result is ordered base first, most
/// derived last.
pub fn load_all(specs: &[Spec]) -> Result<Vec<Unit>, PolicyError> {
    let mut out = Vec::new();
    let mut applied = HashSet::new();
    for spec in specs {
        let mut stack = Vec::new();
        load_chain(spec, &mut stack, &mut out, &mut applied)?;
    }
    Ok(out)
}

fn load_chain(
    spec: &Spec,
    stack: &mut Vec<(String, String)>,
    out: &mut Vec<Unit>,
    applied: &mut HashSet<String>,
) -> Result<(), PolicyError> {
    let (key, display) = identity(spec);
    if let Some(pos) = stack.iter().position(|(k, _)| *k == key) {
        let mut names: Vec<&str> = stack[pos..].iter().map(|(_, d)| d.as_str()).collect();
        names.push(&display);
        return Err(PolicyError::Cycle {
            chain: names.join(" -> "),
        });
    }
    let unit = read_unit(spec, key.clone(), display.clone())?;
    if let Some(parent) = &unit.raw.extends {
        let dir = match spec {
            Spec::Path(p) => p.parent(),
            Spec::Builtin(_) => None,
        };
        stack.push((key.clone(), display));
        load_chain(&Spec::classify(parent, dir), stack, out, applied)?;
        stack.pop();
    }
    if applied.insert(key) {
        out.push(unit);
    }
    Ok(())
}

fn identity(spec: &Spec) -> (String, String) {
    match spec {
        Spec::Builtin(name) => (format!("builtin:{name}"), name.clone()),
        Spec::Path(path) => {
            let key = std::fs::canonicalize(path).unwrap_or_else(|_| {
                let abs = std::env::current_dir()
                    .map(|cwd| cwd.join(path))
                    .unwrap_or_else(|_| path.clone());
                normalize(&abs)
            });
            (
                format!("file:{}", key.display()),
                path.display().to_string(),
            )
        }
    }
}

fn read_unit(spec: &Spec, key: String, display: String) -> Result<Unit, PolicyError> {
    let (text, default_name, raw) = match spec {
        Spec::Builtin(name) => {
            let unknown = || PolicyError::UnknownProfile {
                name: name.clone(),
                builtins: builtin::builtin_names().join(", "),
            };
            let text = builtin::builtin_source(name).ok_or_else(unknown)?;
            let values = builtin::builtin_values(name).ok_or_else(unknown)?;
            // Checked at build time and by a test: a built-in profile always parses. Were it
            // not to, the TOML's own parse says where.
            let raw = match raw::parse_values(values) {
                Ok(raw) => raw,
                Err(_) => raw::parse(text).map_err(|error| PolicyError::Parse {
                    profile: display.clone(),
                    problem: super::diagnose::describe(text, &error),
                })?,
            };
            (text.to_string(), name.clone(), raw)
        }
        Spec::Path(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
                path: path.clone(),
                source,
            })?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| display.clone());
            let raw = raw::parse(&text).map_err(|error| PolicyError::Parse {
                profile: display.clone(),
                problem: super::diagnose::describe(&text, &error),
            })?;
            (text, stem, raw)
        }
    };
    let file = match spec {
        Spec::Path(_) => key.strip_prefix("file:").map(PathBuf::from),
        Spec::Builtin(_) => None,
    };
    Ok(Unit {
        display,
        file,
        config: false,
        key,
        default_name,
        text,
        raw,
    })
}

/// sha256 (hex) over the spec list and the source texts of the chain, in order
/// ([`super::digest::of`]). The chain of one built-in profile, which most runs use, was
/// digested at build time from the same texts: a run on it hashes nothing (about 30 µs of
/// every start here, half of it the SHA extensions' `cpuid` probe, which traps to the
/// hypervisor on a VM).
pub fn digest(specs: &[String], units: &[Unit]) -> String {
    if let [spec] = specs {
        if units.iter().all(|u| u.key.starts_with("builtin:")) {
            if let Some(digest) = builtin::chain_digest(spec) {
                return digest.to_owned();
            }
        }
    }
    super::digest::of(
        specs.iter().map(String::as_str),
        units.iter().map(|u| (u.key.as_str(), u.text.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_specs() {
        assert_eq!(Spec::classify("agent", None), Spec::Builtin("agent".into()));
        assert_eq!(
            Spec::classify("my.toml", None),
            Spec::Path("my.toml".into())
        );
        assert_eq!(
            Spec::classify("../p/x", Some(Path::new("/a/b"))),
            Spec::Path("/a/b/../p/x".into())
        );
    }

    #[test]
    fn cycle_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.toml"), "extends = \"b.toml\"\n").unwrap();
        std::fs::write(dir.path().join("b.toml"), "extends = \"./a.toml\"\n").unwrap();
        let err = load_all(&[Spec::Path(dir.path().join("a.toml"))]).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, PolicyError::Cycle { .. }), "{msg}");
        assert!(
            msg.contains("a.toml -> ") && msg.contains("b.toml"),
            "{msg}"
        );
    }

    #[test]
    fn builtins_are_applied_once_when_layered() {
        let units = load_all(&[
            Spec::Builtin("agent".into()),
            Spec::Builtin("strict".into()),
        ])
        .unwrap();
        let names: Vec<_> = units.iter().map(|u| u.display.as_str()).collect();
        assert_eq!(names, ["base", "agent", "strict"]);
    }

    #[test]
    fn unknown_builtin_hints_the_names() {
        let msg = load_all(&[Spec::Builtin("agnet".into())])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("unknown profile `agnet`"), "{msg}");
        assert!(msg.contains("hint:") && msg.contains("agent"), "{msg}");
    }

    #[test]
    fn a_builtin_chains_digest_from_the_build_is_the_one_computed() {
        for &name in builtin::builtin_names() {
            let units = load_all(&[Spec::Builtin(name.into())]).unwrap();
            let computed = super::super::digest::of(
                [name],
                units.iter().map(|u| (u.key.as_str(), u.text.as_str())),
            );
            assert_eq!(
                builtin::chain_digest(name),
                Some(computed.as_str()),
                "{name}"
            );
            assert_eq!(digest(&[name.into()], &units), computed, "{name}");
        }
        // Anything else is hashed at run time: two specs, a file in the chain.
        let two = load_all(&[Spec::Builtin("agent".into()), Spec::Builtin("ci".into())]).unwrap();
        let specs = ["agent".to_string(), "ci".to_string()];
        assert_ne!(digest(&specs, &two), builtin::chain_digest("ci").unwrap());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(&file, "extends = \"agent\"\n").unwrap();
        let spec = file.to_string_lossy().into_owned();
        let units = load_all(&[Spec::Path(file.clone())]).unwrap();
        assert_eq!(units.len(), 3);
        assert_ne!(
            digest(std::slice::from_ref(&spec), &units),
            builtin::chain_digest("agent").unwrap()
        );
    }

    #[test]
    fn digest_depends_on_text_and_specs() {
        let a = load_all(&[Spec::Builtin("agent".into())]).unwrap();
        let b = load_all(&[Spec::Builtin("strict".into())]).unwrap();
        let d1 = digest(&["agent".into()], &a);
        assert_eq!(d1.len(), 64);
        assert_ne!(d1, digest(&["strict".into()], &b));
        assert_ne!(d1, digest(&["x".into()], &a));
    }
}
