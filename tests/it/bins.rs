//! Where the harness finds the programs it runs: `guard` (built by cargo for this test binary)
//! and the helper programs of the `guard-test-helpers` crate (`tests/helpers`), which cargo does
//! not build for the root package's tests: the harness builds them once per test process, with
//! the same cargo, profile and target directory, so they land next to `guard`.
//!
//! Both are then linked (or copied, across filesystems) once per test process into one shared
//! directory that every user can read, so a workspace run as the unprivileged user can reach
//! them wherever the build directory lives. That directory is named after the test process
//! (pid and start time); a later test process removes the ones whose process is gone.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// guard as cargo built it for this test binary; the helpers are built next to it, and the
/// tests of build.rs's link options read it.
pub const BUILT: &str = env!("CARGO_BIN_EXE_guard");

/// The guard binary the tests run: cargo's, or the one `GUARD_TEST_BIN` names (CI runs the
/// suite once more on the static-pie build that way, with the test programs as they are).
pub fn guard_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| std::env::var("GUARD_TEST_BIN").unwrap_or_else(|_| BUILT.to_owned()))
}

/// The package holding the helper programs, and the ones the harness uses.
const HELPERS_PACKAGE: &str = "guard-test-helpers";
const HELPERS: &[&str] = &["guard-probe", "guard-callloop"];

const SHARED_PREFIX: &str = "guard-it-bin-";

/// The shared directory of this test process and the programs in it.
pub struct Bins {
    /// Readable and searchable by every user; a test profile lists it as a read root.
    pub dir: PathBuf,
    pub guard: PathBuf,
    pub probe: PathBuf,
}

/// The shared directory, built on first use.
pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| {
        let built = build_helpers();
        let dir = shared_dir();
        link_or_copy(Path::new(guard_bin()), &dir.join("guard"));
        for name in HELPERS {
            link_or_copy(&built.join(name), &dir.join(name));
        }
        Bins {
            guard: dir.join("guard"),
            probe: dir.join("guard-probe"),
            dir,
        }
    })
}

/// Build the helpers' binaries into the directory that holds `guard` and return it.
fn build_helpers() -> PathBuf {
    let guard = Path::new(BUILT);
    let out_dir = guard.parent().expect("guard's directory");
    // The target directory is the nearest ancestor cargo tagged; between it and `out_dir`
    // lie an optional target triple and the profile's directory.
    let target_dir = out_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .unwrap_or_else(|| panic!("no cargo target directory above {}", out_dir.display()));
    let between: Vec<_> = out_dir
        .strip_prefix(target_dir)
        .expect("under the target directory")
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let (triple, profile_dir) = match between.as_slice() {
        [p] => (None, p.as_str()),
        [t, p] => (Some(t.as_str()), p.as_str()),
        _ => panic!("unexpected layout of {}", out_dir.display()),
    };
    // cargo names the dev and test profiles' directory `debug`, release and bench `release`.
    let profile = match profile_dir {
        "debug" => "dev",
        other => other,
    };
    let cargo = std::env::var_os("CARGO")
        .or_else(|| option_env!("CARGO").map(Into::into))
        .unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "--bins",
        "-p",
        HELPERS_PACKAGE,
        "--profile",
        profile,
    ])
    .arg("--manifest-path")
    .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
    .arg("--target-dir")
    .arg(target_dir);
    if let Some(t) = triple {
        cmd.args(["--target", t]);
    }
    let out = cmd.output().expect("run cargo to build the test helpers");
    assert!(
        out.status.success(),
        "building {HELPERS_PACKAGE} failed: {:?}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    for name in HELPERS {
        assert!(
            out_dir.join(name).is_file(),
            "cargo built no {name} in {}",
            out_dir.display()
        );
    }
    out_dir.to_path_buf()
}

/// This process's start time in clock ticks since boot (field 22 of /proc/PID/stat).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain numbers.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Create this process's shared directory after removing those of processes that are gone.
fn shared_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some((pid, start)) = name
                .strip_prefix(SHARED_PREFIX)
                .and_then(|s| s.split_once('-'))
            else {
                continue;
            };
            let alive = pid
                .parse()
                .ok()
                .and_then(start_time)
                .is_some_and(|t| t.to_string() == start);
            if !alive {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let me = std::process::id();
    let start = start_time(me).expect("own start time");
    let dir = tmp.join(format!("{SHARED_PREFIX}{me}-{start}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let dir = std::fs::canonicalize(&dir).expect("canonical shared dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .expect("chmod shared dir");
    dir
}

/// A hard link when `from` is on the same filesystem, else a copy; executable by everyone.
fn link_or_copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_file(to);
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", to.display()));
}
