//! Who a call is performed as. guard performs the calls it judges for the sandboxed caller;
//! the kernel must then judge each of them with the *caller's* credentials, not guard's, or
//! guard becomes a confused deputy (a process running as nobody could delete root's files
//! through it). [`Creds`] are the credentials that matter to a file-system call (fsuid, fsgid,
//! supplementary groups, effective capabilities, umask), read from /proc for one thread;
//! [`assume`] makes a worker thread take them on around exactly the caller's own call, with
//! per-thread system calls, and puts guard's own back after.

pub mod assume;

use std::io;
use std::sync::Arc;

pub use assume::{
    as_caller, as_caller_creating_nothing, as_caller_making, caller_could_create,
    caller_could_open, caller_differs_in_capabilities_only, caller_owns_as, caller_owns_with,
    changing_entries_of, for_caller, knowing_dir, looking_up_as_caller, open_without_switch,
    opens_existing_without_switch, with_callers_umask, Caller,
};

/// The capabilities the kernel drops from the effective set when the fsuid leaves 0, and
/// raises again (from the permitted set) when it comes back (`CAP_FS_MASK`): CHOWN,
/// DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, LINUX_IMMUTABLE, MAC_OVERRIDE, MKNOD.
pub const CAP_FS_MASK: u64 =
    (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 9) | (1 << 32) | (1 << 27);

#[cfg(test)]
thread_local! {
    /// How many times this thread has read a /proc/TID/status ([`Creds::of_thread`]): the
    /// caches built on it prove what they spare.
    pub static STATUS_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One thread's credentials, as far as file-system calls are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    /// Real, effective, saved and file-system user ids.
    pub uids: [u32; 4],
    /// Real, effective, saved and file-system group ids.
    pub gids: [u32; 4],
    /// Supplementary groups, in the kernel's (sorted) order.
    pub groups: Arc<[u32]>,
    pub cap_effective: u64,
    pub cap_permitted: u64,
    /// The file-mode creation mask (shared by the threads of a process).
    pub umask: u32,
    /// The thread's process (thread group).
    pub tgid: u32,
}

impl Creds {
    /// Whether a path lookup made with `other` meets the same permission checks as one made
    /// with these: the file-system ids, the groups and the effective capabilities agree (the
    /// umask and the process do not matter to a lookup).
    pub fn looks_up_as(&self, other: &Creds) -> bool {
        self.fsuid() == other.fsuid()
            && self.fsgid() == other.fsgid()
            && self.cap_effective == other.cap_effective
            && *self.groups == *other.groups
    }

    pub fn fsuid(&self) -> u32 {
        self.uids[3]
    }

    pub fn fsgid(&self) -> u32 {
        self.gids[3]
    }

    /// Whether a process with these credentials can change them at all: it holds a
    /// capability, or its ids differ among themselves (setresuid may then swap them).
    /// Without either (and with no_new_privs, and no user namespaces) they are fixed for
    /// good, and so are those of every process it starts.
    pub fn can_change(&self) -> bool {
        self.cap_permitted != 0
            || self.uids.iter().any(|u| *u != self.uids[0])
            || self.gids.iter().any(|g| *g != self.gids[0])
    }

    /// The credentials of thread `tid`, from /proc/TID/status.
    pub fn of_thread(tid: u32) -> io::Result<Creds> {
        #[cfg(test)]
        STATUS_READS.with(|r| r.set(r.get() + 1));
        let text = crate::sys::process::read_proc_text(format!("/proc/{tid}/status"))?;
        Creds::parse(&text).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/proc/{tid}/status: no credentials in it"),
            )
        })
    }

    /// Parses the text of a /proc/TID/status file.
    pub fn parse(status: &str) -> Option<Creds> {
        let mut uids = None;
        let mut gids = None;
        let mut groups = None;
        let mut eff = None;
        let mut prm = None;
        let mut umask = None;
        let mut tgid = None;
        let four = |v: &str| -> Option<[u32; 4]> {
            let mut it = v.split_whitespace().map(|x| x.parse::<u32>().ok());
            Some([it.next()??, it.next()??, it.next()??, it.next()??])
        };
        for line in status.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            match key {
                "Uid" => uids = four(value),
                "Gid" => gids = four(value),
                "Groups" => {
                    groups = value
                        .split_whitespace()
                        .map(|g| g.parse::<u32>().ok())
                        .collect::<Option<Vec<u32>>>()
                }
                "CapEff" => eff = u64::from_str_radix(value.trim(), 16).ok(),
                "CapPrm" => prm = u64::from_str_radix(value.trim(), 16).ok(),
                "Umask" => umask = u32::from_str_radix(value.trim(), 8).ok(),
                "Tgid" => tgid = value.trim().parse().ok(),
                _ => {}
            }
        }
        Some(Creds {
            uids: uids?,
            gids: gids?,
            groups: groups?.into(),
            cap_effective: eff?,
            cap_permitted: prm?,
            // Kernels before 4.7 do not show it: the usual default.
            umask: umask.unwrap_or(0o022),
            tgid: tgid?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tpjdfstest\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n\
        Pid:\t4243\nUid:\t0\t65534\t0\t65534\nGid:\t0\t65533\t0\t65533\nFDSize:\t64\n\
        Groups:\t65533 65534 \nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
        CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn parses_the_credentials_of_a_status_file() {
        let c = Creds::parse(STATUS).expect("parses");
        assert_eq!(c.uids, [0, 65534, 0, 65534]);
        assert_eq!(c.fsuid(), 65534);
        assert_eq!(c.fsgid(), 65533);
        assert_eq!(&*c.groups, &[65533, 65534]);
        assert_eq!(c.cap_effective, 0);
        assert_eq!(c.cap_permitted, 0x1ff_ffff_ffff);
        assert_eq!(c.umask, 0o022);
        assert_eq!(c.tgid, 4242);
        assert!(c.can_change());
        assert!(Creds::parse("Name:\tx\n").is_none());
    }

    #[test]
    fn reads_our_own_thread() {
        let me = nix::unistd::gettid().as_raw() as u32;
        let c = Creds::of_thread(me).expect("own status");
        assert_eq!(c.tgid, std::process::id());
        assert_eq!(c.uids[1], nix::unistd::geteuid().as_raw());
    }

    #[test]
    fn fixed_credentials_cannot_change() {
        let mut c = Creds::parse(STATUS).expect("parses");
        c.uids = [1000; 4];
        c.gids = [1000; 4];
        c.cap_permitted = 0;
        assert!(!c.can_change());
    }
}
