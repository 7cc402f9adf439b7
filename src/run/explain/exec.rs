//! What explain says about an exec: the supervisor judges the command line and the program
//! found on `PATH`, then Landlock's execute right decides, for the program and for a script's
//! interpreter.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{execve, Explainer, Explanation, Layer, Step};
use crate::confine::landlock::Need;
use crate::policy::{self, Op, Request};
use crate::supervisor::preview;

impl Explainer {
    pub(super) fn exec(&self, argv: &[OsString], e: &mut Explanation) {
        e.target = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let Some(name) = argv.first() else {
            return self.kernel(libc::ENOENT, "no command".into(), e);
        };
        if self.filter(execve(), [0; 6], e).is_some() {
            return;
        }
        let program = match crate::launch::resolve_program(name, self.path_var.as_deref()) {
            Ok(p) => p,
            Err(err) => {
                // No such program here: the profile's verdict on the command line still holds
                // wherever it is installed, so judge the arguments alone.
                let errno = match err {
                    crate::launch::CommandError::NotExecutable { .. } => libc::EACCES,
                    _ => libc::ENOENT,
                };
                let req = Request {
                    argv,
                    cwd: Some(&self.cwd),
                    ..Request::new(Op::Exec)
                };
                if self.judge(&self.policy, &req, e) {
                    self.kernel(errno, err.to_string(), e);
                }
                return;
            }
        };
        let exe = match preview::resolve_path(&program, true) {
            Ok(v) => v.path,
            Err(errno) => return self.unresolved(errno, e),
        };
        let req = Request {
            argv,
            exe: Some(&exe),
            cwd: Some(&self.cwd),
            ..Request::new(Op::Exec)
        };
        if !self.judge(&self.policy, &req, e) {
            return;
        }
        e.steps.push(Step {
            layer: Layer::Supervisor,
            says: "lets the kernel carry out the exec (it cannot be performed for the caller)"
                .into(),
        });
        if !self.landlock(&exe, Need::Execute, e) {
            // The supervisor tells the caller the kernel will refuse it.
            if self.policy.report.denials != policy::Denials::None {
                let shown = crate::audit::escape_for_terminal(exe.as_os_str().as_bytes());
                let dir = exe.parent().unwrap_or(&exe);
                e.told = Some(policy::explain_landlock_exec(
                    &shown,
                    &crate::audit::escape_for_terminal(dir.as_os_str().as_bytes()),
                ));
            }
            return;
        }
        if let Some(interpreter) = shebang(&exe) {
            if let Ok(v) = preview::resolve_path(&interpreter, true) {
                self.landlock(&v.path, Need::Execute, e);
            }
        }
    }
}

/// The interpreter of a `#!` script, which the kernel executes too.
fn shebang(exe: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(exe).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    text.split_whitespace().next().map(PathBuf::from)
}
