//! The command's home, as the profile's `[home]` says, prepared before anything is forked:
//!
//! 1. missing write roots under the user's home are created (toolchain caches such as
//!    `~/.cache/pip` that a tool makes on first use), rather than left out of the ruleset:
//!    a root is created when its parent directory exists, or when its parent is one of the
//!    XDG base directories (`~/.cache`, `~/.config`, `~/.local/share`, `~/.local/state`),
//!    which are created with it; other missing roots stay skipped, so a user without Go gets
//!    no `~/go`;
//! 2. `private = true`: the command's HOME is an empty directory of the run's own,
//!    `{tmp}/home`, with `XDG_CONFIG_HOME`, `XDG_CACHE_HOME`, `XDG_DATA_HOME` and
//!    `XDG_STATE_HOME` inside it; nothing under the user's home is read through HOME;
//! 3. `locate`: each variable is set to its directory when the directory exists and the
//!    command's environment does not have the variable already, so a toolchain under the
//!    user's home (`RUSTUP_HOME`, `PYENV_ROOT`, `NVM_DIR`, `CARGO_HOME`) is found wherever
//!    HOME points;
//! 4. `redact`: each variable points at a copy of its file (in `{tmp}/redacted/`) without the
//!    lines that hold credentials (see [`redact`]), when the file exists and the variable is
//!    not set already: `NPM_CONFIG_USERCONFIG` and `~/.npmrc` keep npm's settings without its
//!    tokens.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::prepare::cstring;
use super::RunError;
use crate::policy::Policy;

/// The XDG base directories, relative to the home directory, and their variables.
const XDG: [(&str, &str); 4] = [
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_CACHE_HOME", ".cache"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
];

/// Step 1: create the missing write roots under the user's home (see the module docs).
pub(super) fn create_write_roots(policy: &Policy) {
    let Some(home) = policy.vars.home.as_deref() else {
        return;
    };
    for root in &policy.fs.write {
        if root.exists() || !root.starts_with(home) || root == home {
            continue;
        }
        let Some(parent) = root.parent() else {
            continue;
        };
        let xdg_parent = XDG.iter().any(|(_, rel)| parent == home.join(rel));
        if !parent.is_dir() && !xdg_parent {
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(root) {
            tracing::debug!("cannot create the write root {}: {e}", root.display());
        }
    }
}

/// Step 2: the private home, when the profile asks for one; returns the variables that point
/// at it (HOME and the XDG directories), for guard's own variables.
pub(super) fn private_home(
    policy: &Policy,
    tmp: &Path,
) -> Result<Vec<(String, OsString)>, RunError> {
    if !policy.home.private {
        return Ok(Vec::new());
    }
    let home = tmp.join("home");
    let mut vars = vec![("HOME".to_string(), home.clone().into_os_string())];
    for (var, rel) in XDG {
        let dir = home.join(rel);
        create_private(&dir)?;
        vars.push((var.to_string(), dir.into_os_string()));
    }
    Ok(vars)
}

fn create_private(dir: &Path) -> Result<(), RunError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| RunError::Tmp {
            path: dir.to_path_buf(),
            source,
        })
}

/// Steps 3 and 4: add the `locate` and `redact` variables the command's environment `envp`
/// (`NAME=value`, as the profile filtered it) does not have yet. Returns the files it made in
/// `tmp` (the redacted copies), which the run's end removes by name.
pub(super) fn tool_variables(
    policy: &Policy,
    tmp: &Path,
    envp: &mut Vec<CString>,
) -> Result<Vec<PathBuf>, RunError> {
    let mut made = Vec::new();
    let has = |envp: &[CString], var: &str| {
        envp.iter().any(|e| {
            e.as_bytes()
                .strip_prefix(var.as_bytes())
                .is_some_and(|rest| rest.first() == Some(&b'='))
        })
    };
    let set = |envp: &mut Vec<CString>, var: &str, value: &Path| {
        let mut bytes = format!("{var}=").into_bytes();
        bytes.extend_from_slice(value.as_os_str().as_bytes());
        envp.push(cstring(bytes));
    };
    for (var, dir) in &policy.home.locate {
        if !has(envp, var) && dir.exists() {
            set(envp, var, dir);
        }
    }
    for (var, file) in &policy.home.redact {
        if has(envp, var) {
            continue;
        }
        let text = match std::fs::read(file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!("cannot read {} to redact it: {e}", file.display());
                continue;
            }
        };
        // Beside the run's other files in its private tmp, not in a directory of its own: on
        // this machine's ext4 a directory costs four times a file to make.
        let mut name = std::ffi::OsString::from("guard-redacted-");
        name.push(file.file_name().unwrap_or_else(|| "file".as_ref()));
        let copy = tmp.join(name);
        write_private(&copy, &redact(&text)).map_err(|source| RunError::Tmp {
            path: copy.clone(),
            source,
        })?;
        set(envp, var, &copy);
        made.push(copy);
    }
    Ok(made)
}

fn write_private(path: &Path, content: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(content)
}

/// Words that mark a settings key as a credential (compared without case).
const SECRET_WORDS: [&str; 6] = [
    "auth",
    "token",
    "password",
    "passwd",
    "secret",
    "credential",
];

/// `text` (an ini-like settings file: `key = value` lines, `;` or `#` comments) without the
/// lines whose key names a credential: `//registry.npmjs.org/:_authToken=...`, `_auth`,
/// `_password`, `email`-less setups keep everything else. Each removed line becomes a comment
/// that names its key, so the copy still says what was there.
pub fn redact(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let raw_key = line
            .split(|&b| b == b'=')
            .next()
            .map(|k| String::from_utf8_lossy(k).trim().to_string())
            .unwrap_or_default();
        let key = raw_key.to_ascii_lowercase();
        let comment = key.starts_with(';') || key.starts_with('#');
        let secret =
            line.contains(&b'=') && !comment && SECRET_WORDS.iter().any(|w| key.contains(w));
        if secret {
            out.extend_from_slice(b"; removed by guard (a credential): ");
            out.extend_from_slice(raw_key.as_bytes());
            out.push(b'\n');
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_lines_are_removed_and_settings_kept() {
        let npmrc = b"registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm_SECRET\n_auth = dXNlcjpwYXNz\n//npm.example.com/:_password=cGFzcw==\nomit-lockfile-registry-resolved=true\n; a comment about auth=x\nfund=false";
        let out = String::from_utf8(redact(npmrc)).expect("utf-8");
        assert!(
            !out.contains("SECRET") && !out.contains("dXNlcjpwYXNz") && !out.contains("cGFzcw"),
            "{out}"
        );
        assert!(
            out.contains("registry=https://registry.npmjs.org/\n"),
            "{out}"
        );
        assert!(
            out.contains("omit-lockfile-registry-resolved=true\n"),
            "{out}"
        );
        assert!(out.contains("; a comment about auth=x\n"), "{out}");
        assert!(out.ends_with("fund=false"), "{out}");
        assert!(
            out.contains("; removed by guard (a credential): //registry.npmjs.org/:_authToken"),
            "{out}"
        );
        assert_eq!(out.lines().count(), 7);
    }
}
