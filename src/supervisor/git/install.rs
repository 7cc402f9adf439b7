//! Installing a repository's config from the content guard judged. A caller's rename of
//! `config.lock` over `config` would move the caller's own inode into place, and any
//! descriptor the caller still holds on it (or a second hard link) could then rewrite the
//! judged config. So guard writes the judged bytes into a new file of its own next to the
//! config, with the lock file's mode and owner, renames that over the config and removes the
//! lock file: the same names end up in the same places as after the caller's rename, and no
//! descriptor the caller holds reaches the installed config. The same holds for a config
//! written while its directory was not yet a repository: when the directory becomes one, guard
//! installs the content it judged then in its place ([`reinstall`]). Every step goes through
//! the journal when there is one.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

use nix::fcntl::{OFlag, RenameFlags};
use nix::sys::stat::Mode;

use super::super::target::Target;
use crate::journal::{Journal, Looked};

/// Install `content` at `to` and remove `from`, as `rename(from, to)` would have left them.
pub fn install(
    mut journal: Option<&mut Journal>,
    from: &Target,
    to: &Target,
    content: &[u8],
) -> io::Result<()> {
    let st = nix::sys::stat::fstatat(
        Some(from.parent.as_raw_fd()),
        from.name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )?;
    place(
        journal.as_deref_mut(),
        to.parent.as_fd(),
        &to.name,
        &to.path,
        content,
        &st,
    )?;
    match journal {
        Some(j) => j.delete_file(from.parent.as_fd(), &from.name, &from.path),
        None => nix::unistd::unlinkat(
            Some(from.parent.as_raw_fd()),
            from.name.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(io::Error::from),
    }
}

/// Install the judged content of a config that became a repository's ([`super::Reinstall`])
/// as a new file in its place, with the old file's mode and owner. If that fails, the config
/// is removed: git then reads none of what guard could not install.
pub fn reinstall(mut journal: Option<&mut Journal>, r: &super::Reinstall) -> io::Result<()> {
    let dir = r.dir.as_fd();
    let placed = nix::sys::stat::fstatat(
        Some(dir.as_raw_fd()),
        r.name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(io::Error::from)
    .and_then(|st| {
        place(
            journal.as_deref_mut(),
            dir,
            &r.name,
            &r.path,
            &r.content,
            &st,
        )
    });
    if let Err(e) = placed {
        tracing::warn!(
            "cannot install the judged config {}, removing it: {e}",
            r.path.display()
        );
        let _ = match journal {
            Some(j) => j.delete_file(dir, &r.name, &r.path),
            None => nix::unistd::unlinkat(
                Some(dir.as_raw_fd()),
                r.name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )
            .map_err(io::Error::from),
        };
        return Err(e);
    }
    Ok(())
}

/// Write `content` into a new file next to `dir/name` (with the mode and owner of `like`) and
/// rename it over `dir/name`.
fn place(
    mut journal: Option<&mut Journal>,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
    content: &[u8],
    like: &libc::stat,
) -> io::Result<()> {
    let st = like;
    let mut tmp = OsString::from(".guard-config-");
    tmp.push(std::process::id().to_string());
    tmp.push("-");
    tmp.push(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default()
            .to_string(),
    );
    let tmp_path = path.with_file_name(&tmp);
    if let Some(j) = journal.as_deref_mut() {
        j.will_create(&tmp_path).map_err(|e| {
            tracing::warn!("the journal cannot record a config install, refusing it: {e}");
            io::Error::from_raw_os_error(libc::EIO)
        })?;
    }
    let fd = crate::sys::fs::openat(
        Some(dir),
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    let written = (|| -> io::Result<()> {
        let mut f = std::fs::File::from(fd);
        f.write_all(content)?;
        // The old file's owner (guard may run as root for a caller that is not) and mode.
        let _ = nix::unistd::fchown(
            f.as_raw_fd(),
            Some(nix::unistd::Uid::from_raw(st.st_uid)),
            Some(nix::unistd::Gid::from_raw(st.st_gid)),
        );
        nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(st.st_mode & 0o7777))?;
        Ok(())
    })();
    let moved = written.and_then(|()| match journal {
        Some(j) => j.rename(dir, &tmp, &tmp_path, dir, name, path, 0, [Looked::Not; 2]),
        None => nix::fcntl::renameat2(
            Some(dir.as_raw_fd()),
            tmp.as_os_str(),
            Some(dir.as_raw_fd()),
            name,
            RenameFlags::empty(),
        )
        .map_err(io::Error::from),
    });
    if let Err(e) = moved {
        let _ = nix::unistd::unlinkat(
            Some(dir.as_raw_fd()),
            tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(e);
    }
    Ok(())
}
