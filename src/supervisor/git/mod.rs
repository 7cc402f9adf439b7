//! The facts about git that the policy judges ([`GitFacts`]), gathered in the resolve stage
//! from what a call is about to do to a repository's files, or from an exec of git
//! ([`exec`]). Reading them is I/O; judging them is `policy::git`'s.
//!
//! A directory is a repository's git directory ("git-like") when it is named `.git` or holds
//! two of `HEAD`, `commondir`, `objects`, `refs` (a git directory has HEAD, objects and refs;
//! a worktree's has HEAD and commondir; a common directory objects and refs). The invariant
//! guard keeps: **no git directory inside the write roots ends up with config or hooks the
//! run wrote without guard judging them**. So:
//!
//! - a repository's `config`/`config.worktree` changes only by a rename over it (git's
//!   `config.lock` path), judged by the content guard reads from the source and then installs
//!   itself ([`install`]); writing it in place, linking, exchanging, a symlink or a device
//!   there are refused. "A repository" here is a directory with two markers (git itself
//!   wants all three of HEAD, objects and refs): in a directory git would not use yet, a new
//!   `.git` included, the config is written freely;
//! - a directory that becomes git-like (a marker created in it, or renamed to `.git`) has
//!   the config and hooks it already holds judged then, so a repository assembled piece by
//!   piece in any order is judged when it becomes one; the config judged is then installed
//!   anew as guard read it ([`Reinstall`]), so a descriptor or mapping the run kept on the
//!   file it wrote reaches nothing git reads;
//! - an executable or a symlink in a git directory's `hooks/` under a name git runs (not
//!   `*.sample`) is a hook: created, renamed or linked there, or made executable;
//! - a `.git` file or symlink renamed or linked into place is judged by where it points.
//!
//! A `.git` file written in place is not judged by content: whatever it points to is either
//! a git directory inside the write roots (judged as above) or outside them (the run cannot
//! have written its config).

pub mod exec;
pub mod install;

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use super::meta::MetaOp;
use super::resolve::{Act, Resolved};
use super::target::{Kind, Target};
use crate::policy::git::{config, is_sample, GitFacts};
use crate::policy::{normalize, Op};
use crate::sys::Notif;

/// Entries whose presence makes a directory a git directory.
const MARKERS: [&str; 4] = ["HEAD", "commondir", "objects", "refs"];
/// guard reads at most this much of a config file it judges.
const CONFIG_MAX: u64 = 4 << 20;

fn is_config_name(name: &OsStr) -> bool {
    name == "config" || name == "config.worktree"
}

fn is_marker(name: &OsStr) -> bool {
    MARKERS.iter().any(|m| name == *m)
}

fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> Option<libc::stat> {
    nix::sys::stat::fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()
}

fn markers_in(dir: BorrowedFd<'_>) -> usize {
    MARKERS
        .iter()
        .filter(|m| stat_at(dir, OsStr::new(m)).is_some())
        .count()
}

/// Whether the directory `dir` (at `path`) is a git directory, with `extra` more markers.
fn git_like(dir: BorrowedFd<'_>, path: &Path, extra: usize) -> bool {
    path.file_name() == Some(OsStr::new(".git")) || markers_in(dir) + extra >= 2
}

fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlag) -> Option<OwnedFd> {
    crate::sys::fs::openat_unseen(Some(dir), name, flags | OFlag::O_CLOEXEC, Mode::empty()).ok()
}

/// The git directory a hooks directory `hooks` (at `path`) belongs to, if it is one.
fn hooks_owner(hooks: BorrowedFd<'_>, path: &Path) -> bool {
    if path.file_name() != Some(OsStr::new("hooks")) {
        return false;
    }
    let Some(up) = open_at(hooks, OsStr::new(".."), OFlag::O_PATH | OFlag::O_DIRECTORY) else {
        return false;
    };
    path.parent().is_some_and(|gd| git_like(up.as_fd(), gd, 0))
}

/// Whether `t` names an entry in a git directory's hooks directory, under a name git runs.
fn in_hooks(t: &Target) -> bool {
    !is_sample(&t.name)
        && t.path
            .parent()
            .is_some_and(|p| hooks_owner(t.parent.as_fd(), p))
}

/// Whether `t` names the config of a directory git would use as a repository (two markers:
/// git itself wants HEAD, objects and refs). A config in a directory that is not one yet, a
/// new `.git` included, is written freely: git reads none of it until the markers arrive, and
/// then guard judges it and installs what it judged ([`Reinstall`]).
fn is_config(t: &Target) -> bool {
    is_config_name(&t.name) && markers_in(t.parent.as_fd()) >= 2
}

/// Why a write-open of a repository's config is refused (it is judged only when renamed
/// into place).
pub(super) const CONFIG_IN_PLACE: &str = "a repository's config is written through config.lock \
     and a rename, which guard judges; it is not written in place";

/// Whether `path` is the config (or worktree config) of a repository, as [`is_config`]
/// decides for a call's target: for `guard explain`.
pub(super) fn is_repository_config(path: &Path) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    is_config_name(name) && std::fs::File::open(dir).is_ok_and(|d| markers_in(d.as_fd()) >= 2)
}

/// The content of a regular file `dir/name` (not following a final symlink), if it is one
/// with a single link and not too large.
fn read_regular(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Vec<u8>, &'static str> {
    let fd = open_at(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK,
    )
    .ok_or("cannot read the file that would become a repository's config")?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd())
        .map_err(|_| "cannot read the file that would become a repository's config")?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("a repository's config must be a regular file");
    }
    if st.st_size as u64 > CONFIG_MAX {
        return Err("a repository's config larger than guard judges");
    }
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(CONFIG_MAX)
        .read_to_end(&mut out)
        .map_err(|_| "cannot read the file that would become a repository's config")?;
    Ok(out)
}

/// The entries of the config at `dir/name` now (none when absent or unreadable: then every
/// key of the new content counts as added).
fn current_entries(dir: BorrowedFd<'_>, name: &OsStr) -> Vec<config::Entry> {
    read_regular(dir, name)
        .ok()
        .and_then(|t| config::parse(&t).ok())
        .unwrap_or_default()
}

/// Whether a file of `mode` is something git would run as a hook.
fn runnable(mode: u32) -> bool {
    match mode & libc::S_IFMT {
        libc::S_IFLNK => true,
        libc::S_IFREG => mode & 0o111 != 0,
        _ => false,
    }
}

/// A config that was written while its directory was not a repository, judged when the
/// directory becomes one: guard installs the content it judged as a new file (the caller may
/// still hold a descriptor on the old one, or a shared mapping of it) once the call that makes
/// the repository is done.
#[derive(Debug)]
pub struct Reinstall {
    /// The git directory (O_PATH; it follows the directory if the call renames it).
    pub dir: OwnedFd,
    /// Where the config will be once the call is done.
    pub path: PathBuf,
    pub name: OsString,
    pub content: Vec<u8>,
}

/// The judgement of a directory that is (or becomes) a git directory: its config files as
/// they are (every key counts as added) and its hooks; the configs judged are installed anew.
fn whole_repository(
    dir: BorrowedFd<'_>,
    path: &Path,
    facts: &mut Vec<GitFacts>,
    reinstall: &mut Vec<Reinstall>,
) {
    for name in ["config", "config.worktree"] {
        let name = OsStr::new(name);
        let Some(st) = stat_at(dir, name) else {
            continue;
        };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_nlink > 1 {
            facts.push(GitFacts::Unjudgeable(
                "a repository's config that is a link or not a regular file",
            ));
            continue;
        }
        match read_regular(dir, name) {
            Ok(text) => {
                facts.push(GitFacts::Config {
                    git_dir: path.to_path_buf(),
                    old: Vec::new(),
                    new: config::parse(&text),
                });
                if let Some(d) = open_at(dir, OsStr::new("."), OFlag::O_PATH | OFlag::O_DIRECTORY) {
                    reinstall.push(Reinstall {
                        dir: d,
                        path: path.join(name),
                        name: name.to_os_string(),
                        content: text,
                    });
                }
            }
            Err(why) => facts.push(GitFacts::Unjudgeable(why)),
        }
    }
    let hooks = OsStr::new("hooks");
    match stat_at(dir, hooks) {
        Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => facts.push(GitFacts::Hook {
            name: OsString::from("hooks"),
        }),
        Some(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {
            hooks_in(dir, hooks, facts);
        }
        _ => {}
    }
}

/// Every runnable, non-sample entry of the directory `dir/name`, as hooks.
fn hooks_in(dir: BorrowedFd<'_>, name: &OsStr, facts: &mut Vec<GitFacts>) {
    let Some(h) = open_at(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
    ) else {
        return;
    };
    let Ok(names) = crate::sys::fs::list_names(Some(dir), name) else {
        return;
    };
    for n in names {
        if is_sample(&n) {
            continue;
        }
        if stat_at(h.as_fd(), &n).is_some_and(|st| runnable(st.st_mode)) {
            facts.push(GitFacts::Hook { name: n });
        }
    }
}

/// A marker about to be created at `t`: if its directory becomes (or is) git-like, judge it.
fn marker_created(t: &Target, facts: &mut Vec<GitFacts>, reinstall: &mut Vec<Reinstall>) {
    if t.kind.is_none() && is_marker(&t.name) {
        if let Some(d) = t.path.parent() {
            if git_like(t.parent.as_fd(), d, 1) {
                whole_repository(t.parent.as_fd(), d, facts, reinstall);
            }
        }
    }
}

/// Where a `.git` file's `gitdir:` line (or a `.git` symlink's target) sends git, from the
/// directory `base`.
fn redirect(base: &Path, target: &[u8]) -> PathBuf {
    let t = Path::new(OsStr::from_bytes(target));
    normalize(&base.join(t))
}

fn gitfile_target(content: &[u8]) -> Option<&[u8]> {
    let line = content.split(|&b| b == b'\n').next()?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let rest = line.strip_prefix(b"gitdir:")?;
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    Some(&rest[start..])
}

/// Gather the git facts of `r` (and turn a rename over a repository's config into guard's own
/// install of the content it judged).
pub fn inspect(n: &Notif, r: &mut Resolved) {
    let mut facts = Vec::new();
    let mut reinstall = Vec::new();
    match &r.act {
        Act::Continue if r.op == Op::Exec => {
            if let Some(e) = exec::inspect(n, r) {
                facts.push(GitFacts::Exec(e));
            }
        }
        Act::Open { at, flags, mode } => {
            let creates = *flags & libc::O_CREAT != 0 && at.kind.is_none();
            if is_config(at) {
                facts.push(GitFacts::Unjudgeable(CONFIG_IN_PLACE));
            } else if in_hooks(at) {
                let runs = if creates {
                    mode & 0o111 != 0
                } else {
                    stat_at(at.parent.as_fd(), &at.name).is_some_and(|st| runnable(st.st_mode))
                };
                if runs {
                    facts.push(GitFacts::Hook {
                        name: at.name.clone(),
                    });
                }
            }
            if creates {
                marker_created(at, &mut facts, &mut reinstall);
            }
        }
        Act::Truncate { at, .. } if is_config(at) => facts.push(GitFacts::Unjudgeable(
            "a repository's config is not truncated in place",
        )),
        Act::Rename { from, to, flags } => {
            rename(from, to, *flags, &mut facts, &mut reinstall);
            let install = *flags == 0
                && is_config(to)
                && !facts.iter().any(|f| matches!(f, GitFacts::Unjudgeable(_)));
            if install {
                let old = std::mem::replace(&mut r.act, Act::Continue);
                if let Act::Rename { from, to, .. } = old {
                    match read_regular(from.parent.as_fd(), &from.name) {
                        Ok(content) => {
                            facts.push(GitFacts::Config {
                                git_dir: to
                                    .path
                                    .parent()
                                    .map(Path::to_path_buf)
                                    .unwrap_or_default(),
                                old: current_entries(to.parent.as_fd(), &to.name),
                                new: config::parse(&content),
                            });
                            r.act = Act::InstallConfig { from, to, content };
                        }
                        Err(why) => {
                            facts.push(GitFacts::Unjudgeable(why));
                            r.act = Act::Rename { from, to, flags: 0 };
                        }
                    }
                }
            }
        }
        Act::Link { from, to } => {
            if is_config(to) || is_config(from) {
                facts.push(GitFacts::Unjudgeable(
                    "a hard link to a repository's config would let it change unjudged",
                ));
            }
            if in_hooks(to)
                && stat_at(from.parent.as_fd(), &from.name).is_some_and(|st| runnable(st.st_mode))
            {
                facts.push(GitFacts::Hook {
                    name: to.name.clone(),
                });
            }
            if to.name == ".git" {
                if let Ok(content) = read_regular(from.parent.as_fd(), &from.name) {
                    if let (Some(t), Some(base)) = (gitfile_target(&content), to.path.parent()) {
                        facts.push(GitFacts::Redirect {
                            target: redirect(base, t),
                        });
                    }
                }
            }
            marker_created(to, &mut facts, &mut reinstall);
        }
        Act::Symlink { target, at } => {
            if is_config(at) {
                facts.push(GitFacts::Unjudgeable(
                    "a symlink as a repository's config would let it change unjudged",
                ));
            }
            if in_hooks(at) {
                facts.push(GitFacts::Hook {
                    name: at.name.clone(),
                });
            }
            if at.name == ".git" {
                if let Some(base) = at.path.parent() {
                    facts.push(GitFacts::Redirect {
                        target: redirect(base, target),
                    });
                }
            }
            marker_created(at, &mut facts, &mut reinstall);
        }
        Act::Mkdir { at, .. } => marker_created(at, &mut facts, &mut reinstall),
        Act::Mknod { at, mode, .. } => {
            if is_config(at) {
                facts.push(GitFacts::Unjudgeable(
                    "a device or fifo as a repository's config",
                ));
            }
            if in_hooks(at) && runnable(*mode) {
                facts.push(GitFacts::Hook {
                    name: at.name.clone(),
                });
            }
            marker_created(at, &mut facts, &mut reinstall);
        }
        Act::Chmod { at, mode }
            if in_hooks(at) && at.kind == Some(Kind::File) && mode & 0o111 != 0 =>
        {
            facts.push(GitFacts::Hook {
                name: at.name.clone(),
            });
        }
        Act::FdMeta {
            on,
            op: MetaOp::Chmod { mode },
        } => {
            let in_hooks_dir = !on.unnamed
                && on.kind == Some(Kind::File)
                && mode & 0o111 != 0
                && on.path.file_name().is_some_and(|n| !is_sample(n))
                && on.path.parent().is_some_and(|h| {
                    crate::sys::fs::openat(
                        None,
                        h,
                        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                        Mode::empty(),
                    )
                    .is_ok_and(|fd| hooks_owner(fd.as_fd(), h))
                });
            if in_hooks_dir {
                facts.push(GitFacts::Hook {
                    name: on.path.file_name().unwrap_or_default().to_os_string(),
                });
            }
        }
        _ => {}
    }
    r.git = facts;
    r.reinstall = reinstall;
}

/// The facts of a rename (the config install is decided by the caller).
fn rename(
    from: &Target,
    to: &Target,
    flags: u32,
    facts: &mut Vec<GitFacts>,
    reinstall: &mut Vec<Reinstall>,
) {
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let sensitive = |t: &Target| {
        is_config(t) || in_hooks(t) || is_marker(&t.name) || t.name == ".git" || t.name == "hooks"
    };
    if exchange && (sensitive(from) || sensitive(to)) {
        facts.push(GitFacts::Unjudgeable(
            "an exchange involving a repository's config, hooks or markers",
        ));
        return;
    }
    if is_config(to) && flags != 0 && !exchange {
        // RENAME_NOREPLACE or WHITEOUT over a config: judged like a plain rename would be,
        // but guard installs only plain renames.
        facts.push(GitFacts::Unjudgeable(
            "a rename over a repository's config with flags",
        ));
    }
    // What the walk found there a moment ago; a stat of its own only for a target no walk found.
    let from_st = from
        .seen
        .or_else(|| stat_at(from.parent.as_fd(), &from.name));
    let from_mode = from_st.map_or(0, |st| st.st_mode);
    if in_hooks(to) && runnable(from_mode) {
        facts.push(GitFacts::Hook {
            name: to.name.clone(),
        });
    }
    let is_dir = from_mode & libc::S_IFMT == libc::S_IFDIR;
    if to.name == "hooks" && is_dir {
        if let Some(gd) = to.path.parent() {
            if git_like(to.parent.as_fd(), gd, 0) {
                hooks_in(from.parent.as_fd(), &from.name, facts);
            }
        }
    }
    if to.name == ".git" {
        if is_dir {
            if let Some(d) = open_at(
                from.parent.as_fd(),
                &from.name,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
            ) {
                whole_repository(d.as_fd(), &to.path, facts, reinstall);
            }
        } else if let Some(base) = to.path.parent() {
            if from_mode & libc::S_IFMT == libc::S_IFLNK {
                if let Ok(t) =
                    nix::fcntl::readlinkat(Some(from.parent.as_raw_fd()), from.name.as_os_str())
                {
                    facts.push(GitFacts::Redirect {
                        target: redirect(base, t.as_bytes()),
                    });
                }
            } else if let Ok(content) = read_regular(from.parent.as_fd(), &from.name) {
                if let Some(t) = gitfile_target(&content) {
                    facts.push(GitFacts::Redirect {
                        target: redirect(base, t),
                    });
                }
            }
        }
    }
    marker_created(to, facts, reinstall);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitfile_lines() {
        assert_eq!(
            gitfile_target(b"gitdir: ../x.git\n"),
            Some(&b"../x.git"[..])
        );
        assert_eq!(gitfile_target(b"gitdir:/abs\r\n"), Some(&b"/abs"[..]));
        assert_eq!(gitfile_target(b"nope"), None);
        assert_eq!(
            redirect(Path::new("/ws/src"), b"../evil.git"),
            PathBuf::from("/ws/evil.git")
        );
    }

    #[test]
    fn git_like_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("r");
        std::fs::create_dir(&d).expect("mkdir");
        let fd = std::fs::File::open(&d).expect("open");
        assert!(!git_like(fd.as_fd(), &d, 0));
        assert!(git_like(fd.as_fd(), &d, 2));
        std::fs::write(d.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        assert!(!git_like(fd.as_fd(), &d, 0), "HEAD alone is not enough");
        std::fs::create_dir(d.join("refs")).expect("mkdir");
        assert!(git_like(fd.as_fd(), &d, 0));
        let dotgit = dir.path().join(".git");
        std::fs::create_dir(&dotgit).expect("mkdir");
        let g = std::fs::File::open(&dotgit).expect("open");
        assert!(git_like(g.as_fd(), &dotgit, 0), "named .git");
    }
}
