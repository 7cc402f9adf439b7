//! Hidden paths inside the roots (`fs.hide`): root-only secrets such as `/etc/shadow` that no
//! profile may let the sandbox read, root included (a sandboxed root keeps its uid, so file
//! ownership still lets it read what root owns).
//!
//! Landlock grants a right on a whole hierarchy and has no way to take a path back out of
//! it. So a root that holds a hidden path is not granted as a whole: it is granted entry by
//! entry, minus the hidden entries, recursing only into the entries a hidden path lies in
//! (`/etc` -> every entry of `/etc` but `shadow`, `gshadow`, `sudoers`, ...; `/etc/ssh` -> every
//! entry but the host keys), and the expanded directory itself gets the right to be listed
//! only. That costs one directory listing per expanded level at start, and no rule at all for
//! a root that holds nothing hidden.
//!
//! This runs on every start (the default profile expands `/etc` and `/dev`: some 170 rules),
//! so it is built for that: an expanded directory is listed through its descriptor and each
//! entry opened relative to it (no path walked from `/` per rule), and the patterns are a
//! [`PathSet`], which matches the profiles' patterns without compiling a regex.
//!
//! A guard that holds no capability (an ordinary user's) hides by Landlock only what its
//! user could reach: the command has that user, those groups and no capability either, so a
//! hidden path the user can neither read, write nor search (`/etc/shadow`, `/etc/sudoers`,
//! the host keys, each checked with `faccessat(AT_EACCESS)`), nor own (an owner may change
//! its mode), nor open up by changing the mode of a directory above it that the user owns, is
//! kept out by its permissions already, and a root expanded for nothing else is granted
//! whole: one rule instead of ~140 for `/etc`. A root guard's command is root without capabilities, which reads what root
//! owns, so there every pattern is hidden by Landlock.
//!
//! Consequences, documented in the profile reference: an entry created in an expanded
//! directory after the start is not granted (it did not exist when the rules were made), and
//! a symlink among the entries is not granted itself (the path it points to is judged where
//! it leads). A path left to its permissions follows them: one whose permissions are opened
//! during the run becomes readable.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use landlock::{AccessFs, BitFlags};
use nix::dir::{Dir, Type};
use nix::fcntl::OFlag;
use nix::sys::stat::{fstatat, Mode, SFlag};

use crate::policy::PathSet;
use crate::sys::fs::openat;

/// Expanding deeper than this grants the directory whole instead (and says so by counting
/// nothing hidden there).
const MAX_DEPTH: usize = 8;

/// Where a rule of [`Hidden::grant`] applies.
pub enum Place<'a> {
    /// The root itself, by path: it may not exist, which the caller reports.
    Root(&'a Path),
    /// An entry inside an expanded root, already opened (`O_PATH`) through its directory,
    /// and whether it is a directory (the listing said, or `fstatat` where it did not).
    Open(OwnedFd, &'a Path, bool),
}

/// Who could reach a hidden path without Landlock, which decides what Landlock must hide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The command may read by ownership what root owns, or hold capabilities: every
    /// pattern is hidden by Landlock.
    Anyone,
    /// guard holds no capability (nor, then, does its command, which has guard's user and
    /// groups): a path guard cannot read, write nor search is left to its permissions.
    ByPermissions,
}

impl Reach {
    /// [`Reach::ByPermissions`] when this thread has no capability in its effective or
    /// permitted set, [`Reach::Anyone`] otherwise (or when they cannot be read).
    pub fn of_this_thread() -> Reach {
        match crate::sys::creds::capget(0) {
            Ok(c) if c.effective == 0 && c.permitted == 0 => Reach::ByPermissions,
            _ => Reach::Anyone,
        }
    }
}

/// What [`Hidden::grant`] calls for each rule: grant the right at the place.
pub type AddRule<'f, E> = dyn FnMut(Place<'_>, BitFlags<AccessFs>) -> Result<(), E> + 'f;

/// The compiled `fs.hide` patterns.
#[derive(Debug)]
pub struct Hidden {
    set: PathSet,
    /// The directories to expand: the deepest directory each pattern's hidden entries lie
    /// in, and every directory above it. A set, since every entry of an expanded directory
    /// is looked up in it (hundreds in `/etc` and `/dev`).
    expand: HashSet<PathBuf>,
    /// How many patterns were left to the permissions of what they match ([`Reach`]).
    pub left_to_permissions: usize,
}

/// The components of `glob` up to the first one with glob syntax.
fn anchor(glob: &str) -> PathBuf {
    Path::new(glob)
        .components()
        .take_while(|c| !has_syntax(c.as_os_str().as_bytes()))
        .collect()
}

fn has_syntax(s: &[u8]) -> bool {
    s.iter().any(|b| b"*?[{\\".contains(b))
}

impl Hidden {
    /// The patterns were validated with the profile; one that does not compile hides
    /// nothing. With [`Reach::ByPermissions`], a pattern that matches nothing this thread can
    /// reach expands no root.
    pub fn new(patterns: &[String], reach: Reach) -> Hidden {
        let trimmed: Vec<&str> = patterns
            .iter()
            .map(|p| match p.trim_end_matches('/') {
                "" => "/",
                t => t,
            })
            .collect();
        let set = PathSet::lenient(&trimmed);
        let mut expand = HashSet::new();
        let mut left_to_permissions = 0;
        let mut probe = Probe::new();
        for (p, trimmed) in patterns.iter().zip(&trimmed) {
            // Nothing to hide where nothing is: no root is expanded for it. (A path guard may
            // not look up is not taken for missing.)
            let a = anchor(p);
            let meta = match probe.anchor_meta(&a) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                    continue;
                }
                found => found.ok(),
            };
            if reach == Reach::ByPermissions && probe.out_of_reach(trimmed, &a, meta) {
                left_to_permissions += 1;
                continue;
            }
            let dir = if a.as_os_str().len() == trimmed.len() {
                a.parent().map(Path::to_path_buf)
            } else {
                Some(a)
            };
            for d in dir.iter().flat_map(|d| d.ancestors()) {
                expand.insert(d.to_path_buf());
            }
        }
        Hidden {
            set,
            expand,
            left_to_permissions,
        }
    }

    /// Whether `path` (absolute, symlinks resolved) is hidden: it or a directory above it
    /// matches a pattern.
    pub fn hides(&self, path: &Path) -> bool {
        path.ancestors().any(|p| self.set.is_match(p))
    }

    /// Whether [`Hidden::grant`] grants `root` entry by entry (it holds a hidden path).
    pub fn expands(&self, root: &Path) -> bool {
        self.expand.contains(root) && !self.set.is_match(root)
    }

    /// Grants `root` with `access` minus the hidden paths, one `add` per rule; returns how
    /// many hidden entries were left out. An entry that vanishes while it is listed is left
    /// out as well (it holds nothing to grant).
    pub fn grant<E>(
        &self,
        root: &Path,
        access: BitFlags<AccessFs>,
        add: &mut AddRule<'_, E>,
    ) -> Result<usize, E> {
        if self.set.is_match(root) {
            return Ok(1);
        }
        if !self.expand.contains(root) {
            add(Place::Root(root), access)?;
            return Ok(0);
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match openat(None, root, flags, Mode::empty()) {
            Ok(dir) => self.expand_dir(dir, &mut root.to_path_buf(), access, add, 0),
            // Not a directory guard can list: granted as it is.
            Err(_) => add(Place::Root(root), access).map(|()| 0),
        }
    }

    /// Grants the entries of the expanded directory `dir` (at `path`) and the listing of
    /// `dir` itself.
    fn expand_dir<E>(
        &self,
        dir: OwnedFd,
        path: &mut PathBuf,
        access: BitFlags<AccessFs>,
        add: &mut AddRule<'_, E>,
        depth: usize,
    ) -> Result<usize, E> {
        let fd = dir.as_fd();
        let mut hidden = 0;
        // Every name in one buffer (`ends` marks where each stops): one allocation for a
        // listing of `/dev`'s some 250 entries, not one per entry.
        let mut bytes = Vec::with_capacity(4096);
        let mut ends = Vec::with_capacity(256);
        if let Ok(mut listing) = dir
            .try_clone()
            .map_err(drop)
            .and_then(|d| Dir::from(d).map_err(drop))
        {
            for entry in listing.iter().flatten() {
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    bytes.extend_from_slice(name);
                    ends.push((bytes.len(), entry.file_type()));
                }
            }
        }
        let names = ends.iter().scan(0, |start, &(end, kind)| {
            let name = &bytes[*start..end];
            *start = end;
            Some((name, kind))
        });
        // What each entry is compared with, picked for this directory once.
        let patterns = self.set.children(path);
        let expanded: Vec<&OsStr> = self
            .expand
            .iter()
            .filter(|d| d.parent() == Some(path.as_path()))
            .filter_map(|d| d.file_name())
            .collect();
        for (name, kind) in names {
            let kind = kind.or_else(|| kind_at(fd, name));
            if matches!(kind, None | Some(Type::Symlink)) {
                // Reached through its target, whose own rule (or lack of one) decides.
                continue;
            }
            let expand = kind == Some(Type::Directory)
                && depth + 1 < MAX_DEPTH
                && expanded.contains(&OsStr::from_bytes(name));
            // `push`, and below a cut back to the directory's length rather than a `pop`
            // (which parses the path's components again): once per entry of `/etc`, `/dev`.
            let stem = path.as_os_str().len();
            path.push(OsStr::from_bytes(name));
            if patterns.is_match(name, path) {
                hidden += 1;
            } else if expand {
                let flags =
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                match openat(Some(fd), name, flags, Mode::empty()) {
                    Ok(sub) => hidden += self.expand_dir(sub, path, access, add, depth + 1)?,
                    Err(_) => {
                        if let Some(entry) = open_path(fd, name) {
                            add(Place::Open(entry, path, true), access)?;
                        }
                    }
                }
            } else if let Some(entry) = open_path(fd, name) {
                add(
                    Place::Open(entry, path, kind == Some(Type::Directory)),
                    access,
                )?;
            }
            truncate(path, stem);
        }
        let list = access & AccessFs::ReadDir;
        if !list.is_empty() {
            add(Place::Open(dir, path, true), list)?;
        }
        Ok(hidden)
    }
}

/// What [`Hidden::new`] looks up to decide which patterns this thread can reach, each thing
/// once: a start as an ordinary user checks some 30 paths (the shadow files, `/dev`'s disks
/// and consoles), and each used to cost an `lstat` and three `faccessat` of its own, plus
/// one `lstat` (and `faccessat`) for each directory above it, `/dev` and `/` again and again.
struct Probe {
    /// This thread's file-system uid: what permission checks and ownership compare.
    me: u32,
    /// Each directory [`Probe::out_of_reach`] listed (`None`: it could not be listed).
    listings: HashMap<PathBuf, Option<Listing>>,
    /// The `lstat` of each anchor (an errno where it failed).
    anchors: HashMap<PathBuf, Result<std::fs::Metadata, i32>>,
    /// Whether each directory looked at is searchable.
    searchable: HashMap<PathBuf, bool>,
    /// Whether each directory looked at is this thread's and not searchable (it may open it).
    opens_up: HashMap<PathBuf, bool>,
}

impl Probe {
    fn new() -> Probe {
        Probe {
            me: crate::sys::creds::setfsuid(u32::MAX),
            listings: HashMap::new(),
            anchors: HashMap::new(),
            searchable: HashMap::new(),
            opens_up: HashMap::new(),
        }
    }

    /// `lstat` of the anchor `path`, read once for the patterns that share it (`/dev` for a
    /// dozen of the base profile's).
    fn anchor_meta(&mut self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        self.anchors
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                std::fs::symlink_metadata(path).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
            })
            .clone()
            .map_err(std::io::Error::from_raw_os_error)
    }

    /// Whether nothing `pattern` (whose literal part is `anchor`, whose `lstat` is `meta`)
    /// matches can be read, written or searched with this thread's credentials. A literal
    /// path is checked itself; a pattern with glob syntax in its last component only, through
    /// a listing of its directory; any other pattern is taken as reachable.
    fn out_of_reach(
        &mut self,
        pattern: &str,
        anchor: &Path,
        meta: Option<std::fs::Metadata>,
    ) -> bool {
        if anchor.as_os_str().len() == pattern.len() || !self.searchable(anchor) {
            return !self.reachable(anchor, meta.as_ref());
        }
        let depth = |p: &Path| p.components().count();
        if pattern.contains("**") || depth(Path::new(pattern)) != depth(anchor) + 1 {
            return false;
        }
        let one = PathSet::lenient(&[pattern]);
        let children = one.children(anchor);
        // The base profile has two dozen `/dev/...` patterns: `/dev` is listed once for them
        // all, each entry looked at through the listing's descriptor, at most once.
        let mut listing = self
            .listings
            .remove(anchor)
            .unwrap_or_else(|| Listing::new(anchor));
        let out = match listing.as_mut() {
            Some(l) => {
                // Each entry's path, for the patterns that match a whole path: the anchor and
                // a `/`, then the name, cut back after each.
                let mut path = anchor.as_os_str().as_bytes().to_vec();
                if path.last() != Some(&b'/') {
                    path.push(b'/');
                }
                let stem = path.len();
                (0..l.names.len()).all(|i| {
                    path.truncate(stem);
                    path.extend_from_slice(&l.names[i]);
                    let matched =
                        children.is_match(&l.names[i], Path::new(OsStr::from_bytes(&path)));
                    !matched || !l.reachable(i, self.me, || self.opens_up_above(anchor))
                })
            }
            None => false,
        };
        self.listings.insert(anchor.to_path_buf(), listing);
        out
    }

    /// Whether this thread owns `dir` or a directory above it that it may not search (and
    /// may open): what makes every entry of `dir` reachable in [`Probe::reachable`]'s sense.
    fn opens_up_above(&mut self, dir: &Path) -> bool {
        dir.ancestors().any(|d| self.opens_up(d))
    }

    /// Whether this thread may read, write or search `path` (`faccessat` with `AT_EACCESS`:
    /// its effective credentials, ACLs included), or could come to: it owns `path` (and may
    /// change its mode), or owns a directory above it that it may not search (and may open
    /// that). `meta` is `path`'s `lstat`, when it was read.
    ///
    /// A right that neither the group nor the other bits of the mode hold is no one's but
    /// the owner's, ACLs included (an ACL's named entries and the owning group are capped by
    /// its mask, which the group bits are), so it is not asked for: this thread holds no
    /// capability ([`Reach::ByPermissions`]) and is not the owner.
    fn reachable(&mut self, path: &Path, meta: Option<&std::fs::Metadata>) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        let looked;
        let meta = match meta {
            Some(m) => Some(m),
            None => {
                looked = std::fs::symlink_metadata(path).ok();
                looked.as_ref()
            }
        };
        let me = self.me;
        reachable_by(
            meta.map(|m| (m.uid(), m.mode())),
            me,
            |mode| access(path, mode),
            || path.ancestors().skip(1).any(|dir| self.opens_up(dir)),
        )
    }

    fn searchable(&mut self, dir: &Path) -> bool {
        if let Some(&known) = self.searchable.get(dir) {
            return known;
        }
        let known = access(dir, nix::unistd::AccessFlags::X_OK);
        self.searchable.insert(dir.to_path_buf(), known);
        known
    }

    fn opens_up(&mut self, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        if let Some(&known) = self.opens_up.get(dir) {
            return known;
        }
        let known = std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == self.me)
            && !self.searchable(dir);
        self.opens_up.insert(dir.to_path_buf(), known);
        known
    }
}

/// A directory [`Probe::out_of_reach`] lists: its entries' names, and whether each entry is
/// reachable, looked up through the directory's descriptor once asked (hundreds of entries in
/// `/dev`, of which the patterns name some seventy: the consoles, the disks).
struct Listing {
    dir: OwnedFd,
    names: Vec<Box<[u8]>>,
    reach: Vec<Option<bool>>,
}

impl Listing {
    fn new(path: &Path) -> Option<Listing> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let dir = openat(None, path, flags, Mode::empty()).ok()?;
        let mut names = Vec::new();
        let mut listing = Dir::from(dir.try_clone().ok()?).ok()?;
        for entry in listing.iter().flatten() {
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(name.into());
            }
        }
        let reach = vec![None; names.len()];
        Some(Listing { dir, names, reach })
    }

    /// [`Probe::reachable`] for entry `i`, by its descriptor and name: this thread (file
    /// system uid `me`) owns it, may read, write or search it, or `above` (owns a directory
    /// above it that it may not search).
    fn reachable(&mut self, i: usize, me: u32, above: impl FnOnce() -> bool) -> bool {
        if let Some(known) = self.reach[i] {
            return known;
        }
        let name = &*self.names[i];
        let st = fstatat(
            Some(self.dir.as_raw_fd()),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .ok();
        let dir = self.dir.as_raw_fd();
        let known = reachable_by(
            st.map(|st| (st.st_uid, st.st_mode)),
            me,
            |mode| {
                nix::unistd::faccessat(Some(dir), name, mode, nix::fcntl::AtFlags::AT_EACCESS)
                    .is_ok()
            },
            above,
        );
        self.reach[i] = Some(known);
        known
    }
}

/// [`Probe::reachable`]'s rule, for an entry whose owner and mode are `owner_mode` (`None`:
/// not known): its owner is `me`, or `access` grants a right that the group or other bits hold
/// (a right they do not hold is the owner's alone, ACLs included; for a symlink, whose mode is
/// 0777, every right is asked, through it), or `above`.
fn reachable_by(
    owner_mode: Option<(u32, u32)>,
    me: u32,
    access: impl Fn(nix::unistd::AccessFlags) -> bool,
    above: impl FnOnce() -> bool,
) -> bool {
    use nix::unistd::AccessFlags;
    if owner_mode.is_some_and(|(uid, _)| uid == me) {
        return true;
    }
    let may = |bit: u32| owner_mode.is_none_or(|(_, mode)| mode & (bit * 0o11) != 0);
    [
        (AccessFlags::R_OK, 4),
        (AccessFlags::W_OK, 2),
        (AccessFlags::X_OK, 1),
    ]
    .into_iter()
    .any(|(mode, bit)| may(bit) && access(mode))
        || above()
}

fn access(path: &Path, mode: nix::unistd::AccessFlags) -> bool {
    nix::unistd::faccessat(None, path, mode, nix::fcntl::AtFlags::AT_EACCESS).is_ok()
}

/// Cuts `path` back to its first `len` bytes (a length it had), without an allocation.
fn truncate(path: &mut PathBuf, len: usize) {
    let mut bytes = std::mem::take(path).into_os_string().into_vec();
    bytes.truncate(len);
    *path = PathBuf::from(std::ffi::OsString::from_vec(bytes));
}

/// `name` in the directory `dir`, opened `O_PATH` without following a symlink.
fn open_path(dir: BorrowedFd<'_>, name: &[u8]) -> Option<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(Some(dir), name, flags, Mode::empty()).ok()
}

/// The type of `name` in `dir` where the listing did not say it.
fn kind_at(dir: BorrowedFd<'_>, name: &[u8]) -> Option<Type> {
    let st = fstatat(
        Some(dir.as_raw_fd()),
        name,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    let fmt = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    Some(match fmt {
        SFlag::S_IFDIR => Type::Directory,
        SFlag::S_IFLNK => Type::Symlink,
        _ => Type::File,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use landlock::ABI;

    /// The rules `grant` makes, as paths.
    fn granted(
        hide: &Hidden,
        root: &Path,
        access: BitFlags<AccessFs>,
    ) -> (usize, Vec<(PathBuf, BitFlags<AccessFs>)>) {
        let mut out = Vec::new();
        let hidden = hide
            .grant::<()>(root, access, &mut |place, a| {
                let path = match place {
                    Place::Root(p) => p.to_path_buf(),
                    Place::Open(_, p, _) => p.to_path_buf(),
                };
                out.push((path, a));
                Ok(())
            })
            .expect("grant");
        (hidden, out)
    }

    #[test]
    fn a_root_is_granted_around_what_it_hides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let etc = dir.path().join("etc");
        for d in ["ssh", "ssl/certs", "empty"] {
            std::fs::create_dir_all(etc.join(d)).expect("mkdir");
        }
        for f in [
            "shadow",
            "passwd",
            "ssh/ssh_host_rsa_key",
            "ssh/ssh_host_rsa_key.pub",
            "ssl/certs/ca",
        ] {
            std::fs::write(etc.join(f), "x").expect("write");
        }
        std::os::unix::fs::symlink("shadow", etc.join("alias")).expect("symlink");
        let hide = Hidden::new(
            &[
                format!("{}/shadow", etc.display()),
                format!("{}/ssh/*_key", etc.display()),
            ],
            Reach::Anyone,
        );
        let read = AccessFs::from_read(ABI::V1);
        let (hidden, out) = granted(&hide, &etc, read);
        assert_eq!(hidden, 2);
        let has = |p: &str| out.iter().any(|(g, a)| g == &etc.join(p) && *a == read);
        assert!(has("passwd") && has("ssl") && has("empty"));
        assert!(has("ssh/ssh_host_rsa_key.pub"));
        assert!(!out
            .iter()
            .any(|(g, _)| g.ends_with("shadow") || g.ends_with("ssh_host_rsa_key")));
        assert!(
            !out.iter().any(|(g, _)| g.ends_with("alias")),
            "symlinks are not granted"
        );
        assert!(
            out.contains(&(etc.clone(), AccessFs::ReadDir.into())),
            "listing only"
        );
        assert!(
            out.contains(&(etc.join("ssh"), AccessFs::ReadDir.into())),
            "listing only, one level down"
        );
        // A root with nothing hidden inside is one rule.
        let (hidden, out) = granted(&hide, &dir.path().join("etc/ssl"), read);
        assert_eq!((hidden, out.len()), (0, 1));
    }

    #[test]
    fn what_the_thread_cannot_reach_is_left_to_its_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (to make files another user owns)");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let etc = dir.path().join("etc");
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
        };
        mode(dir.path(), 0o755);
        for d in ["ssh", "locked"] {
            std::fs::create_dir_all(etc.join(d)).expect("mkdir");
        }
        const NOBODY: u32 = 65534;
        // (file, mode, owned by nobody)
        for (f, m, nobodys) in [
            ("shadow", 0o000, false),
            ("passwd", 0o644, false),
            ("ssh/a_key", 0o000, false),
            ("ssh/b_key", 0o600, false),
            ("ssh/c.pub", 0o644, false),
            ("mine", 0o600, true),
            ("mine-000", 0o000, true),
            ("locked/inner", 0o644, false),
            // Root's, each with one right for its group (nobody's) or for others only: a
            // right in the group or other bits is asked for, whichever it is.
            ("group-w", 0o020, false),
            ("group-x", 0o010, false),
            ("other-r", 0o004, false),
            ("other-x", 0o001, false),
            // Root's, rights for the owner only: no one else's, not asked for.
            ("owner-only", 0o700, false),
        ] {
            let p = etc.join(f);
            std::fs::write(&p, "x").expect("write");
            mode(&p, m);
            if nobodys {
                std::os::unix::fs::chown(&p, Some(NOBODY), None).expect("chown");
            }
            if f.starts_with("group-") {
                std::os::unix::fs::chown(&p, None, Some(NOBODY)).expect("chgrp");
            }
        }
        // A directory nobody owns but may not search: nobody may open it up.
        std::os::unix::fs::chown(etc.join("locked"), Some(NOBODY), None).expect("chown");
        mode(&etc.join("locked"), 0o000);
        let etc2 = etc.clone();
        // A thread of its own that checks as nobody: its file-system ids (what permission
        // checks and ownership use) are nobody's, and it has no effective capability.
        std::thread::spawn(move || {
            let etc = etc2;
            let patterns = |names: &[&str]| -> Vec<String> {
                names
                    .iter()
                    .map(|n| format!("{}/{n}", etc.display()))
                    .collect()
            };
            use crate::sys::creds as raw;
            raw::setfsgid(NOBODY);
            raw::setfsuid(NOBODY);
            assert_eq!(raw::setfsuid(u32::MAX), NOBODY);
            let caps = raw::capget(0).expect("capget");
            raw::capset(&raw::CapSets {
                effective: 0,
                ..caps
            })
            .expect("capset");
            let read = AccessFs::from_read(ABI::V1);
            // Root's files of modes 000 and 600: out of nobody's reach, /etc granted whole.
            let hide = Hidden::new(&patterns(&["shadow", "ssh/*_key"]), Reach::ByPermissions);
            assert_eq!(hide.left_to_permissions, 2);
            let (hidden, out) = granted(&hide, &etc, read);
            assert_eq!((hidden, out.len()), (0, 1), "granted whole: {out:?}");
            // Still hidden as far as explaining goes.
            assert!(hide.hides(&etc.join("shadow")));
            // What nobody can read, owns, or can open up by a mode it may change: hidden by
            // Landlock, and the expansion leaves out the other pattern's match as well.
            let hide = Hidden::new(&patterns(&["owner-only"]), Reach::ByPermissions);
            assert_eq!(hide.left_to_permissions, 1, "owner-only");
            // Each reachable file by its name, and through a glob, whose matches are looked at
            // through the directory's listing (one reachable match is enough; `o*` and `s*`
            // also match files nobody can reach).
            for reachable in [
                "mine",
                "mine-000",
                "locked/inner",
                "group-w",
                "group-x",
                "other-r",
                "other-x",
                "mi*",
                "group-w*",
                "group-x*",
                "other-r*",
                "other-x*",
                "o*",
                "s*",
            ] {
                let hide = Hidden::new(&patterns(&["shadow", reachable]), Reach::ByPermissions);
                assert_eq!(hide.left_to_permissions, 1, "{reachable}");
                let (_, out) = granted(&hide, &etc, read);
                assert!(
                    out.iter().all(|(g, _)| !g.ends_with("shadow")),
                    "{reachable}: {out:?}"
                );
                assert!(out.iter().any(|(g, _)| g.ends_with("passwd")), "{out:?}");
            }
            let hide = Hidden::new(&patterns(&["owner-*", "sha*"]), Reach::ByPermissions);
            assert_eq!(
                hide.left_to_permissions, 2,
                "nothing either matches is reachable"
            );
            // By default everything is hidden by Landlock.
            let hide = Hidden::new(&patterns(&["shadow", "ssh/*_key"]), Reach::Anyone);
            assert_eq!(hide.left_to_permissions, 0);
            assert_eq!(granted(&hide, &etc, read).0, 3);
        })
        .join()
        .expect("thread");
    }
}
