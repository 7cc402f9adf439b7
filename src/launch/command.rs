//! Finding the command to run: a `PATH` search done in the parent, so "not found" and "not
//! executable" are reported by guard with the path and a hint, before anything is confined.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why the command cannot be run (found before anything is confined).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// Not found on `PATH` (or the path given does not exist).
    #[error("command not found: {name}\nhint: check the spelling, or give the full path; PATH is {path}")]
    NotFound {
        /// The name given.
        name: String,
        /// The `PATH` searched.
        path: String,
    },
    /// Found, but not an executable file.
    #[error("{path} is not executable\nhint: chmod +x {path}, or run it through its interpreter")]
    NotExecutable {
        /// The file.
        path: PathBuf,
    },
    /// The command line is empty.
    #[error("no command given\nhint: guard exec -- CMD [ARGS...]")]
    Empty,
}

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Resolve `name` the way `execvp` would, with the given `PATH` value.
pub fn resolve_program(name: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, CommandError> {
    if name.is_empty() {
        return Err(CommandError::Empty);
    }
    if name.as_bytes().contains(&b'/') {
        let p = PathBuf::from(name);
        if !p.exists() {
            return Err(CommandError::NotFound {
                name: name.to_string_lossy().into_owned(),
                path: "(not searched: the name contains a slash)".into(),
            });
        }
        if !is_executable_file(&p) {
            return Err(CommandError::NotExecutable { path: p });
        }
        return Ok(p);
    }
    let default = OsString::from("/usr/local/bin:/usr/bin:/bin");
    let path_var = path_var.unwrap_or(&default);
    let mut non_exec = None;
    for dir in std::env::split_paths(path_var) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(name);
        // One stat per candidate: most of PATH does not hold the name.
        match std::fs::metadata(&candidate) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return Ok(candidate),
            Ok(m) if m.is_file() && non_exec.is_none() => non_exec = Some(candidate),
            _ => {}
        }
    }
    match non_exec {
        Some(path) => Err(CommandError::NotExecutable { path }),
        None => Err(CommandError::NotFound {
            name: name.to_string_lossy().into_owned(),
            path: path_var.to_string_lossy().into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sh_in_a_path() {
        let p = resolve_program(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
        )
        .expect("sh exists");
        assert!(p.ends_with("sh"));
    }

    #[test]
    fn the_first_executable_wins_and_a_file_without_the_bit_is_named_when_none_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir(d).expect("mkdir");
        }
        std::fs::write(a.join("tool"), "").expect("write");
        std::fs::write(b.join("tool"), "").expect("write");
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::fs::create_dir(a.join("dir-tool")).expect("mkdir");
        let path = std::env::join_paths([&a, &b]).expect("join");
        let found = resolve_program(OsStr::new("tool"), Some(&path)).expect("found");
        assert_eq!(found, b.join("tool"));
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        match resolve_program(OsStr::new("tool"), Some(&path)) {
            Err(CommandError::NotExecutable { path }) => assert_eq!(path, a.join("tool")),
            other => panic!("{other:?}"),
        }
        // A directory of that name is passed over.
        assert!(matches!(
            resolve_program(OsStr::new("dir-tool"), Some(&path)),
            Err(CommandError::NotFound { .. })
        ));
    }

    #[test]
    fn missing_command_names_itself() {
        let e = resolve_program(OsStr::new("no-such-cmd-xyz"), Some(OsStr::new("/bin")))
            .expect_err("must not exist");
        assert!(e.to_string().contains("no-such-cmd-xyz"));
    }
}
