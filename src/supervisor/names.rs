//! The kernel's name rules and the order of its answers, where guard must apply them itself.
//!
//! guard performs a call on a pinned parent directory and a final name. Two kinds of answers
//! cannot be left to that call:
//!
//! - A call the kernel refuses for its names alone: a trailing slash on something that is not
//!   a directory (or on any unlink, on the name a link, symlink or mknod creates, on a
//!   write-open other than O_TMPFILE), a final `.` or `..` on a call that removes, renames or
//!   creates. [`refused`] gives the kernel's errno; the resolve stage fails the call with it,
//!   so it never reaches the policy or the journal (it changes nothing, whatever the policy
//!   says; the journal would record a change under a name it cannot restore). Nothing is
//!   performed to find the errno, so a rule got wrong here can only give a wrong errno, never
//!   an unjudged change.
//! - A call refused at the write-root boundary is refused by guard (Landlock would refuse it
//!   bare), but the kernel answers some errors before it ever asks Landlock: a create finds an
//!   existing name (EEXIST: `mkdir` of an existing directory outside the write roots, which
//!   `git init` in an existing repository relies on), a lookup finds nothing (ENOENT).
//!   [`before_landlock`] gives that errno.
//!
//! - A call the policy refuses (a profile rule, `fs.protect`, guard's own files) that the kernel
//!   fails anyway: the refusal changes nothing, so the caller gets what it gets bare, and the
//!   refusal is neither explained on its stderr nor counted (`--atomic` and `on-deny` leave
//!   the run alone). The kernel's answers before any permission check ([`before_landlock`]), and
//!   one after them: the removal of a directory that holds entries, ENOTEMPTY
//!   ([`fails_anyway`]). `git stash -u` calls `rmdir(".git")` as it tidies up, expecting
//!   ENOTEMPTY; a refusal there would roll an `--atomic` run back. Only a policy that guard alone
//!   enforces is answered so: at the write-root boundary Landlock would answer a command's
//!   own call with EACCES before ENOTEMPTY, so guard does too.
//!
//! Whatever passes [`refused`] with a trailing slash names a directory (or O_TMPFILE's), where
//! the slash changes nothing; guard still passes it on to the kernel ([`Target::call_name`]).

use super::resolve::Act;
use super::target::{Kind, Target};

fn is_dir(t: &Target) -> bool {
    t.kind == Some(Kind::Dir)
}

fn missing(t: &Target) -> bool {
    t.kind.is_none()
}

/// Whether the directories `a` and `b` are in lie on different mounts (false when that cannot
/// be told).
fn on_other_mounts(a: &Target, b: &Target) -> bool {
    use std::os::fd::AsFd;
    let mount = |t: &Target| {
        crate::sys::fs::statx_at(
            Some(t.parent.as_fd()),
            c"",
            libc::AT_EMPTY_PATH,
            libc::STATX_MNT_ID,
        )
        .ok()
        .filter(|st| st.stx_mask & libc::STATX_MNT_ID != 0)
        .map(|st| st.stx_mnt_id)
    };
    matches!((mount(a), mount(b)), (Some(x), Some(y)) if x != y)
}

/// A new name with a trailing slash or a final `.`/`..` (filename_create): EEXIST when
/// something is there (a dot always is), else ENOENT.
fn new_name(t: &Target) -> Option<i32> {
    if t.is_dot() || (t.slash && !missing(t)) {
        Some(libc::EEXIST)
    } else if t.slash {
        Some(libc::ENOENT)
    } else {
        None
    }
}

/// The errno the kernel refuses `act` with for its names alone, if it does (see the module
/// doc), in the kernel's order.
pub fn refused(act: &Act) -> Option<i32> {
    match act {
        Act::Unlink(t) if t.is_dot() => Some(libc::EISDIR),
        Act::Unlink(t) if t.slash => Some(if missing(t) {
            libc::ENOENT
        } else if is_dir(t) {
            libc::EISDIR
        } else {
            libc::ENOTDIR
        }),
        Act::Rmdir(t) if t.path == std::path::Path::new("/") => Some(libc::EBUSY),
        Act::Rmdir(t) if t.name == "." => Some(libc::EINVAL),
        Act::Rmdir(t) if t.name == ".." => Some(libc::ENOTEMPTY),
        Act::Rmdir(t) if t.slash && !missing(t) && !is_dir(t) => Some(libc::ENOTDIR),
        // The kernel compares the two parents' mounts before it looks at the names: rustix
        // tells a mount point so (`renameat(proc, "../.", proc, ".")` is EXDEV at /proc).
        Act::Rename { from, to, .. }
            if (from.is_dot() || to.is_dot()) && on_other_mounts(from, to) =>
        {
            Some(libc::EXDEV)
        }
        Act::Rename { from, .. } if from.is_dot() => Some(libc::EBUSY),
        Act::Rename { to, flags, .. } if to.is_dot() => {
            Some(if flags & libc::RENAME_NOREPLACE != 0 {
                libc::EEXIST
            } else {
                libc::EBUSY
            })
        }
        Act::Rename { from, .. } if missing(from) => None,
        Act::Rename { from, to, flags } => {
            let exchange = flags & libc::RENAME_EXCHANGE != 0;
            let from_bad = from.slash && !is_dir(from);
            let to_bad = to.slash
                && if exchange {
                    !missing(to) && !is_dir(to)
                } else {
                    !is_dir(from)
                };
            (from_bad || to_bad).then_some(libc::ENOTDIR)
        }
        Act::Link { from, to } => {
            if from.slash || from.is_dot() || to.slash || to.is_dot() {
                if missing(from) {
                    Some(libc::ENOENT)
                } else if from.slash && !is_dir(from) {
                    Some(libc::ENOTDIR)
                } else if let Some(e) = new_name(to) {
                    Some(e)
                } else if !missing(to) {
                    Some(libc::EEXIST)
                } else {
                    Some(libc::EPERM) // a directory
                }
            } else {
                None
            }
        }
        Act::Symlink { at, .. } | Act::Mknod { at, .. } => new_name(at),
        Act::Mkdir { at, .. } => at.is_dot().then_some(libc::EEXIST),
        Act::Chmod { at, .. } | Act::Chown { at, .. } | Act::PathMeta { at, .. } => {
            (at.slash && !missing(at) && !is_dir(at)).then_some(libc::ENOTDIR)
        }
        Act::Truncate { at, .. } if at.slash => Some(if missing(at) {
            libc::ENOENT
        } else if is_dir(at) {
            libc::EISDIR
        } else {
            libc::ENOTDIR
        }),
        Act::Open { at, flags, .. }
            if at.slash
                && flags & libc::O_TMPFILE != libc::O_TMPFILE
                && at.kind != Some(Kind::Magic) =>
        {
            Some(if flags & libc::O_CREAT != 0 {
                libc::EISDIR
            } else if missing(at) {
                libc::ENOENT
            } else if is_dir(at) {
                libc::EISDIR
            } else {
                libc::ENOTDIR
            })
        }
        _ => None,
    }
}

/// The errno the kernel gives `act` before Landlock would be asked, if any (see the module
/// doc): for a call refused at the write-root boundary.
pub fn before_landlock(act: &Act) -> Option<i32> {
    let exists = |t: &Target| t.kind.is_some();
    match act {
        Act::Unlink(t)
        | Act::Rmdir(t)
        | Act::Chmod { at: t, .. }
        | Act::Chown { at: t, .. }
        | Act::PathMeta { at: t, .. }
        | Act::Truncate { at: t, .. } => missing(t).then_some(libc::ENOENT),
        Act::InstallConfig { from, .. } => missing(from).then_some(libc::ENOENT),
        Act::Rename { from, to, flags } => {
            if missing(from) || (flags & libc::RENAME_EXCHANGE != 0 && missing(to)) {
                Some(libc::ENOENT)
            } else if flags & libc::RENAME_NOREPLACE != 0 && exists(to) {
                Some(libc::EEXIST)
            } else {
                None
            }
        }
        Act::Link { from, to } => {
            if missing(from) {
                Some(libc::ENOENT)
            } else if exists(to) {
                Some(libc::EEXIST)
            } else {
                None
            }
        }
        Act::Symlink { at, .. } | Act::Mkdir { at, .. } | Act::Mknod { at, .. } => {
            exists(at).then_some(libc::EEXIST)
        }
        Act::Open { at, flags, .. } => {
            let creat = flags & libc::O_CREAT != 0;
            let excl = flags & libc::O_EXCL != 0;
            let writes = flags & (libc::O_WRONLY | libc::O_RDWR) != 0;
            if creat && excl && exists(at) {
                Some(libc::EEXIST)
            } else if !creat && missing(at) {
                Some(libc::ENOENT)
            } else if is_dir(at) && (writes || creat) && flags & libc::O_TMPFILE != libc::O_TMPFILE
            {
                Some(libc::EISDIR)
            } else {
                None
            }
        }
        Act::Continue | Act::Connect { .. } | Act::Net(_) | Act::FdMeta { .. } => None,
    }
}

/// The kernel's own answer, with the audit's reason, to a call the policy refuses under rule
/// `rule` (its audit id) where the kernel fails it anyway (see the module doc): at the
/// write-root boundary only `before` ([`before_landlock`]), for a rule guard alone enforces
/// `before` or else `anyway()` ([`fails_anyway`], which reads the directory, so it is asked
/// last). The supervisor's judge stage and `guard explain` both answer with it.
pub fn kernel_first(
    rule: &str,
    before: Option<i32>,
    anyway: impl FnOnce() -> Option<i32>,
) -> Option<(i32, String)> {
    if rule == crate::policy::Builtin::WriteRoots.as_str() {
        return before.map(|errno| {
            (
                errno,
                "the kernel answers before the write-root boundary".into(),
            )
        });
    }
    let errno = before.or_else(anyway)?;
    Some((
        errno,
        format!("the kernel fails the call anyway, so rule {rule} has nothing to refuse"),
    ))
}

/// The errno the kernel gives `act` after its permission checks when `act` would fail anyway
/// (see the module doc): ENOTEMPTY for the removal of a directory that holds an entry, when
/// the caller may write and search its parent (the kernel checks that first, EACCES) and no
/// sticky bit stands in the way (EPERM). The directory's entries are read, up to the first;
/// nothing is changed. `None` when that cannot be told (the directory cannot be read).
pub fn fails_anyway(act: &Act) -> Option<i32> {
    use std::os::fd::{AsFd, AsRawFd};
    if let Act::Net(net) = act {
        return super::net::sock::bind_fails_anyway(net);
    }
    let Act::Rmdir(t) = act else { return None };
    if !is_dir(t) || t.pinned.is_some() || t.name == "." || t.name == ".." {
        return None;
    }
    let flags = nix::fcntl::OFlag::O_RDONLY
        | nix::fcntl::OFlag::O_DIRECTORY
        | nix::fcntl::OFlag::O_NOFOLLOW
        | nix::fcntl::OFlag::O_CLOEXEC;
    let parent = t.parent.as_fd();
    let opened = crate::sys::fs::openat_unseen(
        Some(parent),
        t.name.as_os_str(),
        flags,
        nix::sys::stat::Mode::empty(),
    );
    let mut dir = nix::dir::Dir::from(opened.ok()?).ok()?;
    let holds_entry = dir
        .iter()
        .any(|e| e.is_ok_and(|e| !matches!(e.file_name().to_bytes(), b"." | b"..")));
    if !holds_entry {
        return None;
    }
    let may_change_entries = crate::creds::as_caller(|| {
        nix::unistd::faccessat(
            Some(parent.as_raw_fd()),
            ".",
            nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
            nix::fcntl::AtFlags::AT_EACCESS,
        )
        .map_err(std::io::Error::from)
    })
    .is_ok();
    let sticky_in_the_way = || -> Option<bool> {
        let p = nix::sys::stat::fstat(parent.as_raw_fd()).ok()?;
        if p.st_mode & libc::S_ISVTX == 0 {
            return Some(false);
        }
        let d = nix::sys::stat::fstat(dir.as_raw_fd()).ok()?;
        let fsuid = match crate::creds::assume::current() {
            Some(c) => c.creds.fsuid(),
            None => nix::unistd::geteuid().as_raw(),
        };
        Some(fsuid != p.st_uid && fsuid != d.st_uid)
    };
    (may_change_entries && sticky_in_the_way() == Some(false)).then_some(libc::ENOTEMPTY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn t(name: &str, kind: Option<Kind>, slash: bool) -> Target {
        let parent = OwnedFd::from(std::fs::File::open("/").expect("open /"));
        Target {
            parent: parent.into(),
            name: name.into(),
            path: std::path::Path::new("/x").join(name),
            kind,
            born: None,
            seen: None,
            looked: None,
            parent_owner: None,
            pinned: None,
            slash,
        }
    }

    const FILE: Option<Kind> = Some(Kind::File);
    const DIR: Option<Kind> = Some(Kind::Dir);
    const LINK: Option<Kind> = Some(Kind::Symlink);

    #[test]
    fn slashes_and_dots_are_refused_with_the_kernels_errno() {
        let open = |k, flags| Act::Open {
            at: t("a", k, true),
            flags,
            mode: 0o644,
        };
        let w = libc::O_WRONLY;
        assert_eq!(refused(&open(None, w | libc::O_CREAT)), Some(libc::EISDIR));
        assert_eq!(refused(&open(FILE, w)), Some(libc::ENOTDIR));
        assert_eq!(refused(&open(DIR, w)), Some(libc::EISDIR));
        assert_eq!(refused(&open(DIR, libc::O_TMPFILE | w)), None);
        assert_eq!(
            refused(&Act::Unlink(t("f", FILE, true))),
            Some(libc::ENOTDIR)
        );
        assert_eq!(refused(&Act::Unlink(t("d", DIR, true))), Some(libc::EISDIR));
        assert_eq!(
            refused(&Act::Unlink(t("m", None, true))),
            Some(libc::ENOENT)
        );
        assert_eq!(refused(&Act::Unlink(t("f", FILE, false))), None);
        assert_eq!(refused(&Act::Rmdir(t("d", DIR, true))), None);
        assert_eq!(
            refused(&Act::Rmdir(t("l", LINK, true))),
            Some(libc::ENOTDIR)
        );
        assert_eq!(refused(&Act::Rmdir(t(".", DIR, false))), Some(libc::EINVAL));
        assert_eq!(
            refused(&Act::Rmdir(t("..", DIR, false))),
            Some(libc::ENOTEMPTY)
        );
        let rename = |from, to, flags| Act::Rename { from, to, flags };
        assert_eq!(
            refused(&rename(t("..", DIR, false), t("x", None, false), 0)),
            Some(libc::EBUSY)
        );
        assert_eq!(
            refused(&rename(t("f", FILE, true), t("x", None, false), 0)),
            Some(libc::ENOTDIR)
        );
        assert_eq!(
            refused(&rename(t("f", FILE, false), t("x", None, true), 0)),
            Some(libc::ENOTDIR)
        );
        assert_eq!(
            refused(&rename(t("d", DIR, true), t("e", None, true), 0)),
            None
        );
        let mkfifo = |at| Act::Mknod {
            at,
            mode: libc::S_IFIFO | 0o644,
            dev: 0,
        };
        assert_eq!(refused(&mkfifo(t("n", None, true))), Some(libc::ENOENT));
        assert_eq!(refused(&mkfifo(t("n", FILE, true))), Some(libc::EEXIST));
        let mkdir = |at| Act::Mkdir { at, mode: 0o755 };
        assert_eq!(refused(&mkdir(t("n", None, true))), None);
        assert_eq!(refused(&mkdir(t("..", DIR, false))), Some(libc::EEXIST));
        let link = |from, to| Act::Link { from, to };
        assert_eq!(
            refused(&link(t("f", FILE, true), t("n", None, false))),
            Some(libc::ENOTDIR)
        );
        assert_eq!(
            refused(&link(t("f", FILE, false), t("n", None, true))),
            Some(libc::ENOENT)
        );
        assert_eq!(
            refused(&Act::Truncate {
                at: t("d", DIR, true),
                len: 0
            }),
            Some(libc::EISDIR)
        );
    }

    #[test]
    fn the_kernel_answers_existence_before_landlock() {
        let mkdir = Act::Mkdir {
            at: t("usr", DIR, false),
            mode: 0o755,
        };
        assert_eq!(before_landlock(&mkdir), Some(libc::EEXIST));
        assert_eq!(
            before_landlock(&Act::Unlink(t("gone", None, false))),
            Some(libc::ENOENT)
        );
        assert_eq!(before_landlock(&Act::Unlink(t("there", FILE, false))), None);
        let excl = Act::Open {
            at: t("f", FILE, false),
            flags: libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            mode: 0o644,
        };
        assert_eq!(before_landlock(&excl), Some(libc::EEXIST));
        let create = Act::Open {
            at: t("new", None, false),
            flags: libc::O_WRONLY | libc::O_CREAT,
            mode: 0o644,
        };
        assert_eq!(before_landlock(&create), None);
        let noreplace = Act::Rename {
            from: t("a", FILE, false),
            to: t("b", FILE, false),
            flags: libc::RENAME_NOREPLACE,
        };
        assert_eq!(before_landlock(&noreplace), Some(libc::EEXIST));
    }
}
