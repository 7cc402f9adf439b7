//! Embeds the commit guard is built from in `guard --version`: `GUARD_COMMIT` from the
//! environment if set (release builds, packagers), else `git describe` when building from a
//! git checkout, else nothing (a tarball build shows the crate version alone). Cargo reruns
//! this only when HEAD or the branch it points to moves, so ordinary builds do not pay for it.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=GUARD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let version = env!("CARGO_PKG_VERSION");
    let commit = match std::env::var("GUARD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        _ => {
            // Only a checkout of guard itself counts, not a repository guard's sources sit in.
            let top = git(&["rev-parse", "--show-toplevel"]).map(PathBuf::from);
            let here = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
            if top.is_some() && top == here {
                for name in ["HEAD", "packed-refs"] {
                    if let Some(p) = git(&["rev-parse", "--git-path", name]) {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
                git(&["describe", "--always", "--tags", "--abbrev=12"])
            } else {
                None
            }
        }
    };
    let long = match commit {
        Some(c) => format!("{version} ({c})"),
        None => version.to_owned(),
    };
    println!("cargo:rustc-env=GUARD_VERSION={long}");
}
