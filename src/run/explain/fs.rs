//! What explain says about the filesystem: a read (the filter lets it through, Landlock
//! decides), a write and a delete (the supervisor judges the target its walker finds, the
//! kernel's name rules first, then performs the call or lets the kernel continue it).

use std::path::Path;

use super::{errno_name, openat, unlinkat, Explainer, Explanation, Layer, Step};
use crate::confine::landlock::Need;
use crate::confine::Feature;
use crate::policy::{self, Action, Op, Request};
use crate::supervisor::preview::{self, Change, EntryKind};

impl Explainer {
    pub(super) fn read(&self, p: &Path, e: &mut Explanation) {
        e.target = p.display().to_string();
        let flags = libc::O_RDONLY as u64;
        let at = libc::AT_FDCWD as i64 as u64;
        if let Some(Err(_)) = self.filter(openat(), [at, 0, flags, 0, 0, 0], e) {
            return;
        }
        let view = match preview::resolve_path(p, true) {
            Ok(v) => v,
            Err(errno) => return self.kernel(errno, "the path does not resolve".into(), e),
        };
        e.target = view.path.display().to_string();
        if view.kind.is_none() {
            return self.kernel(libc::ENOENT, "no such file".into(), e);
        }
        // A directory is read by listing it, which `fs.list` grants as well.
        let need = if view.kind == Some(EntryKind::Dir) {
            Need::List
        } else {
            Need::Read
        };
        self.landlock(&view.path, need, e);
    }

    pub(super) fn write(&self, p: &Path, e: &mut Explanation) {
        e.target = p.display().to_string();
        let flags = (libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC) as u64;
        let at = libc::AT_FDCWD as i64 as u64;
        if self
            .filter(openat(), [at, 0, flags, 0o666, 0, 0], e)
            .is_some()
        {
            return;
        }
        let change = match preview::resolve_change(p, Change::Write) {
            Ok(c) => c,
            Err(errno) => return self.unresolved(errno, e),
        };
        let view = &change.view;
        e.target = view.path.display().to_string();
        if let Some(errno) = change.by_name {
            return self.unresolved(errno, e);
        }
        let creates = view.kind.is_none();
        let git = preview::git_facts_of_write(&view.path);
        let req = Request {
            path: Some(&view.path),
            creates,
            git: &git,
            ..Request::new(if creates { Op::Create } else { Op::Write })
        };
        if !self.judge_change(&req, &change, e) {
            return;
        }
        self.performed(&view.path, view.kind == Some(EntryKind::Dir), e);
    }

    pub(super) fn delete(&self, p: &Path, e: &mut Explanation) {
        e.target = p.display().to_string();
        let change = match preview::resolve_change(p, Change::Delete) {
            Ok(c) => c,
            Err(errno) => {
                let at = libc::AT_FDCWD as i64 as u64;
                if self.filter(unlinkat(), [at, 0, 0, 0, 0, 0], e).is_some() {
                    return;
                }
                return self.unresolved(errno, e);
            }
        };
        let view = &change.view;
        let rmdir = view.kind == Some(EntryKind::Dir);
        let flags = if rmdir { libc::AT_REMOVEDIR as u64 } else { 0 };
        let at = libc::AT_FDCWD as i64 as u64;
        if self
            .filter(unlinkat(), [at, 0, flags, 0, 0, 0], e)
            .is_some()
        {
            return;
        }
        e.target = view.path.display().to_string();
        if let Some(errno) = change.by_name {
            return self.unresolved(errno, e);
        }
        let req = Request {
            path: Some(&view.path),
            ..Request::new(Op::Delete)
        };
        if !self.judge_change(&req, &change, e) {
            return;
        }
        e.steps.push(Step {
            layer: Layer::Supervisor,
            says: "removes it for the caller, journaled first when it is in the workspace".into(),
        });
        if view.kind.is_none() {
            self.kernel(libc::ENOENT, "nothing to remove".into(), e);
        }
    }

    /// A path the supervisor cannot walk: the call fails with the kernel's errno, recorded
    /// under the rule `resolve`.
    pub(super) fn unresolved(&self, errno: i32, e: &mut Explanation) {
        e.layer = Layer::Supervisor;
        e.verdict = Action::Deny;
        e.errno = Some(errno);
        e.rule = policy::Builtin::Resolve.as_str().into();
        e.reason = Some("the path does not resolve".into());
        e.steps.push(Step {
            layer: Layer::Supervisor,
            says: format!(
                "cannot walk the path: the call fails with {}, as without guard (rule resolve)",
                errno_name(errno)
            ),
        });
    }

    /// An allowed change, performed: by the supervisor (so no Landlock rule applies), or, on a
    /// kernel without descriptor injection, continued into the kernel, where Landlock checks it.
    pub(super) fn performed(&self, path: &Path, is_dir: bool, e: &mut Explanation) {
        if self.features.available(Feature::AddFd) {
            e.steps.push(Step {
                layer: Layer::Supervisor,
                says: "opens it for the caller with the caller's credentials and hands over the \
                       descriptor; the pre-image is journaled first when it is in the workspace"
                    .into(),
            });
        } else {
            e.steps.push(Step {
                layer: Layer::Supervisor,
                says: "lets the kernel continue the open (no descriptor injection here)".into(),
            });
            if !self.landlock(path, Need::Write, e) {
                return;
            }
        }
        if is_dir {
            self.kernel(
                libc::EISDIR,
                "a directory cannot be opened for writing".into(),
                e,
            );
        }
    }
}
