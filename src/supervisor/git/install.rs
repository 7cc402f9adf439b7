//! Installing a repository's config from the content guard judged. A caller's rename of
//! `config.lock` over `config` would move the caller's own inode into place, and any
//! descriptor the caller still holds on it (or a second hard link) could then rewrite the
//! judged config. So guard writes the judged bytes into a new file of its own next to the
//! config, with the lock file's mode and owner, renames that over the config and removes the
//! lock file: the same names end up in the same places as after the caller's rename, and no
//! descriptor the caller holds reaches the installed config. Every step goes through the
//! journal when there is one.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};

use nix::fcntl::{OFlag, RenameFlags};
use nix::sys::stat::Mode;

use super::super::target::Target;
use crate::journal::Journal;

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
    let tmp_path = to.path.with_file_name(&tmp);
    if let Some(j) = journal.as_deref_mut() {
        j.will_create(&tmp_path).map_err(|e| {
            tracing::warn!("the journal cannot record a config install, refusing it: {e}");
            io::Error::from_raw_os_error(libc::EIO)
        })?;
    }
    let fd = crate::sys::fs::openat(
        Some(to.parent.as_fd()),
        tmp.as_os_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    let written = (|| -> io::Result<()> {
        let mut f = std::fs::File::from(fd);
        f.write_all(content)?;
        // The lock file's owner (guard may run as root for a caller that is not) and mode.
        let _ = nix::unistd::fchown(
            f.as_raw_fd(),
            Some(nix::unistd::Uid::from_raw(st.st_uid)),
            Some(nix::unistd::Gid::from_raw(st.st_gid)),
        );
        nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(st.st_mode & 0o7777))?;
        Ok(())
    })();
    let moved = written.and_then(|()| match journal.as_deref_mut() {
        Some(j) => j.rename(
            to.parent.as_fd(),
            &tmp,
            &tmp_path,
            to.parent.as_fd(),
            &to.name,
            &to.path,
            0,
        ),
        None => nix::fcntl::renameat2(
            Some(to.parent.as_raw_fd()),
            tmp.as_os_str(),
            Some(to.parent.as_raw_fd()),
            to.name.as_os_str(),
            RenameFlags::empty(),
        )
        .map_err(io::Error::from),
    });
    if let Err(e) = moved {
        let _ = nix::unistd::unlinkat(
            Some(to.parent.as_raw_fd()),
            tmp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        return Err(e);
    }
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
