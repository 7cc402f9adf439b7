//! Build tools' real workflows from a fresh checkout, bare and under `guard exec -p agent` with
//! the same credentials (see `fidelity.rs`): `cargo build` + `cargo test` with no `target/`,
//! `npm install` with no `node_modules`, `python3 -m venv .venv` + `pip install`. Same exit
//! statuses, same test results, same files produced. Everything is local (a crate, npm
//! tarballs and a wheel that the test writes), so no registry is needed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fidelity::{args, both, clean_env, differences, keyed, kind, tree, Roots};
use crate::fidelity_suites::python;
use crate::util::{lacks, Out, Workspace};

/// What one side left: the script's stdout (statuses and test results) and the tree.
struct Side {
    stdout: String,
    tree: BTreeMap<String, String>,
}

/// Compare the two sides: the script's stdout lines and the trees.
fn report(bare: &(Out, Side), guard: &(Out, Side)) -> String {
    let lines = |r: &Side| -> BTreeMap<String, String> {
        r.stdout
            .lines()
            .enumerate()
            .map(|(i, l)| (format!("stdout line {:03}", i + 1), l.to_string()))
            .collect()
    };
    let mut s = String::new();
    if bare.0.code() != guard.0.code() {
        s.push_str(&format!(
            "exit status: bare {}, guard {}\n",
            bare.0.code(),
            guard.0.code()
        ));
    }
    s.push_str(&differences(
        "output",
        &lines(&bare.1),
        &lines(&guard.1),
        40,
    ));
    s.push_str(&differences("files", &bare.1.tree, &guard.1.tree, 40));
    if !s.is_empty() {
        s.push_str(&format!(
            "--- guard's stderr (tail)\n{}\n",
            tail(&guard.0.stderr(), 25)
        ));
    }
    s
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<_> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One workflow: the shell script both sides run and what it needs.
struct Workflow<'a> {
    /// PATH on both sides.
    path: &'a str,
    /// More environment on both sides.
    env: &'a [(&'a str, String)],
    script: &'a str,
    /// Read roots the test layer adds under guard (the toolchain).
    read: &'a [&'a Path],
    /// Lines the bare side must print: the workflow works at all.
    expect: &'a [&'a str],
}

/// Run the workflow's script with `sh -c` on both sides, each time after `setup`, and compare,
/// with `normalize` applied to the trees.
fn compare(
    w: &Workspace,
    wf: &Workflow,
    setup: impl Fn(&Path),
    normalize: impl Fn(&Path, &str) -> Option<String>,
) -> String {
    let Workflow {
        path,
        env: extra_env,
        script,
        read,
        expect,
    } = *wf;
    let dir = crate::fidelity::run_dir(w);
    // HOME and TMPDIR inside the run directory: writable on both sides, left out of the trees.
    let mut argv = clean_env(path, &dir.join(".home"), &dir.join(".tmp"));
    argv.extend(
        extra_env
            .iter()
            .map(|(k, v)| OsString::from(format!("{k}={v}"))),
    );
    argv.extend(args(["sh", "-c", script]));
    let (bare, guard) = both(
        w,
        |d| {
            std::fs::create_dir_all(d.join(".tmp")).expect("mkdir tmp");
            std::fs::create_dir_all(d.join(".home")).expect("mkdir home");
            setup(d);
        },
        &argv,
        Roots {
            read,
            ..Roots::default()
        },
        |_, d, out| Side {
            stdout: out.stdout(),
            tree: keyed(&tree(d, |p, desc| {
                if p.starts_with(".tmp") || p.starts_with(".home") {
                    return None;
                }
                normalize(p, desc)
            })),
        },
    );
    eprintln!(
        "--- bare stdout\n{}--- guard stdout\n{}--- {} files bare, {} under guard",
        bare.1.stdout,
        guard.1.stdout,
        bare.1.tree.len(),
        guard.1.tree.len()
    );
    for line in expect {
        assert!(
            bare.1.stdout.lines().any(|l| l == *line),
            "the bare side did not print {line:?}: the workflow itself is broken here\n{}\n{}",
            bare.1.stdout,
            bare.0.stderr()
        );
    }
    report(&bare, &guard)
}

fn write(dir: &Path, rel: &str, content: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, content).expect("write");
}

/// The toolchain's own directory (the sysroot: cargo and rustc, not rustup's proxies).
fn sysroot() -> Option<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.join("bin/cargo").is_file().then_some(p)
}

/// PATH (the toolchain's own cargo and rustc first) and the environment of an offline cargo
/// run in `w`'s run directory, with a cargo home of its own there.
fn offline_cargo(w: &Workspace, sysroot: &Path) -> (String, [(&'static str, String); 3]) {
    let dir = crate::fidelity::run_dir(w);
    (
        format!("{}/bin:/usr/bin:/bin", sysroot.display()),
        [
            ("CARGO_HOME", dir.join(".cargo-home").display().to_string()),
            ("CARGO_NET_OFFLINE", "true".to_string()),
            ("CARGO_TERM_COLOR", "never".to_string()),
        ],
    )
}

/// A small crate with a build script, a library, a binary, unit and integration tests, one of
/// which fails on purpose (so "same failures" is checked, not only "all pass").
fn write_crate(d: &Path) {
    write(
        d,
        "Cargo.toml",
        "[package]\nname = \"fidelity-crate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        d,
        "build.rs",
        "fn main() {\n    let out = std::env::var(\"OUT_DIR\").unwrap();\n    \
         std::fs::write(format!(\"{out}/gen.rs\"), \"pub const GENERATED: u32 = 42;\").unwrap();\n    \
         println!(\"cargo:rerun-if-changed=build.rs\");\n}\n",
    );
    write(
        d,
        "src/lib.rs",
        "include!(concat!(env!(\"OUT_DIR\"), \"/gen.rs\"));\n\
         pub fn twice(x: u32) -> u32 { x * 2 }\n\
         #[cfg(test)]\nmod tests {\n    \
         #[test] fn generated() { assert_eq!(super::GENERATED, 42); }\n    \
         #[test] fn files_in_tmp() {\n        let d = std::env::temp_dir().join(\"fidelity-crate-test\");\n        \
         std::fs::create_dir_all(&d).unwrap();\n        std::fs::write(d.join(\"f\"), b\"x\").unwrap();\n        \
         std::fs::rename(d.join(\"f\"), d.join(\"g\")).unwrap();\n        std::fs::remove_dir_all(&d).unwrap();\n    }\n    \
         #[test] fn fails_on_purpose() { assert_eq!(super::twice(2), 5); }\n}\n",
    );
    write(
        d,
        "src/main.rs",
        "fn main() { println!(\"{}\", fidelity_crate::twice(21)); }\n",
    );
    write(
        d,
        "tests/it.rs",
        "#[test] fn twice() { assert_eq!(fidelity_crate::twice(4), 8); }\n",
    );
}

#[test]
fn cargo_build_and_test_of_a_fresh_checkout_give_the_same_results_bare_and_under_guard() {
    let Some(sysroot) = sysroot() else {
        eprintln!("skipped: no rust toolchain (rustc --print sysroot)");
        return;
    };
    if lacks(&["cc", "setpriv"]) {
        return;
    }
    let w = Workspace::new();
    let (path, env) = offline_cargo(&w, &sysroot);
    let script =
        "cargo build -q 2>build.err; s=$?; echo \"build exit $s\"; \
                  [ $s = 0 ] || sed 's/^/build.err: /' build.err >&2; ./target/debug/fidelity-crate; \
                  cargo test --no-fail-fast -- --test-threads=1 >test.out 2>test.err; \
                  echo \"test exit $?\"; grep -E '^test .* \\.\\.\\. ' test.out | sort";
    let report = compare(
        &w,
        &Workflow {
            path: &path,
            env: &env,
            script,
            read: &[&sysroot],
            expect: &[
                "build exit 0",
                "42",
                "test exit 101",
                "test tests::fails_on_purpose ... FAILED",
                "test tests::generated ... ok",
                "test twice ... ok",
            ],
        },
        write_crate,
        |p, desc| {
            let s = p.display().to_string();
            if s.starts_with(".cargo-home")
                || s.contains("/incremental/")
                || s.ends_with(".err")
                || s.ends_with(".out")
            {
                return None;
            }
            // Build outputs are compared by name and kind: they embed times and hashes.
            if s.starts_with("target") {
                return Some(kind(desc));
            }
            Some(desc.to_string())
        },
    );
    assert!(report.is_empty(), "cargo differs under guard\n{report}");
}

/// The source of walkdir 2.5.1 as cargo unpacked it for guard's own build (guard depends on
/// it), with its dependencies vendored beside it (`cargo vendor`, which fetches its
/// dev-dependencies from the registry), in `dest`; `Err` says why not.
fn walkdir_source(sysroot: &Path, dest: &Path) -> Result<(), String> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("no CARGO_HOME or HOME")?;
    let src = std::fs::read_dir(cargo_home.join("registry/src"))
        .map_err(|e| format!("no registry sources in {}: {e}", cargo_home.display()))?
        .flatten()
        .map(|d| d.path().join("walkdir-2.5.1"))
        .find(|p| p.join("Cargo.toml").is_file())
        .ok_or("walkdir-2.5.1 is not unpacked in the registry")?;
    let copied = Command::new("cp").arg("-a").arg(&src).arg(dest).status();
    if !copied.is_ok_and(|s| s.success()) {
        return Err(format!("cannot copy {}", src.display()));
    }
    let vendor = Command::new(sysroot.join("bin/cargo"))
        .args(["vendor", "-q", "--versioned-dirs", "vendor"])
        .current_dir(dest)
        .output()
        .map_err(|e| format!("cargo vendor: {e}"))?;
    if !vendor.status.success() {
        return Err(format!(
            "cargo vendor failed (the registry unreachable?): {}",
            String::from_utf8_lossy(&vendor.stderr).trim()
        ));
    }
    write(
        dest,
        ".cargo/config.toml",
        "[source.crates-io]\nreplace-with = \"vendored\"\n[source.vendored]\ndirectory = \"vendor\"\n",
    );
    Ok(())
}

/// walkdir's own test suite (outside material: a directory walker's tests of symlinks, loops,
/// depths, sorting and file systems) gives the same results under guard as bare. Following a
/// symlink, walkdir 2.5.1 opens every directory above where its walk began, up to `/`, to
/// check for a loop; before `fs.list`, Landlock refused the first one outside the read roots
/// and four of its tests failed with EACCES.
#[test]
#[ignore = "builds walkdir's tests (a minute); vendors its dev-dependencies from the registry"]
fn walkdir_test_suite_gives_the_same_results_bare_and_under_guard() {
    let Some(sysroot) = sysroot() else {
        eprintln!("skipped: no rust toolchain (rustc --print sysroot)");
        return;
    };
    if lacks(&["cc", "setpriv", "cp"]) {
        return;
    }
    let w = Workspace::new();
    let pristine = w.root.join("walkdir");
    if let Err(why) = walkdir_source(&sysroot, &pristine) {
        eprintln!("skipped: {why}");
        return;
    }
    let (path, env) = offline_cargo(&w, &sysroot);
    let script = "cargo test --no-fail-fast -- --test-threads=1 >test.out 2>test.err; \
                  echo \"test exit $?\"; grep -E '^test .* \\.\\.\\. ' test.out | sort";
    let report = compare(
        &w,
        &Workflow {
            path: &path,
            env: &env,
            script,
            read: &[&sysroot],
            expect: &[
                "test exit 0",
                "test tests::recursive::sym_dir_follow ... ok",
                "test tests::recursive::same_file_system ... ok",
            ],
        },
        |d| {
            let copied = Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", pristine.display()))
                .arg(d)
                .status();
            assert!(copied.is_ok_and(|s| s.success()), "copy walkdir");
        },
        |p, desc| {
            // The sources are compared; what the build and the tests left is not.
            let s = p.display().to_string();
            (!(s.starts_with("target")
                || s.starts_with(".cargo-home")
                || s.ends_with(".err")
                || s.ends_with(".out")
                || s == "Cargo.lock"))
                .then(|| desc.to_string())
        },
    );
    assert!(
        report.is_empty(),
        "walkdir's tests differ under guard\n{report}"
    );
}

/// Two local npm packages packed into tarballs in `w.bin` (read-only under guard): `fid-a`,
/// with a command, and `fid-b`, with nested directories.
fn npm_tarballs(w: &Workspace) -> Vec<PathBuf> {
    let src = w.root.join("npm-src");
    write(
        &src,
        "fid-a/package.json",
        r#"{"name":"fid-a","version":"1.0.0","bin":{"fid-a":"cli.js"},"main":"index.js"}"#,
    );
    write(&src, "fid-a/index.js", "module.exports = (x) => x * 2;\n");
    write(
        &src,
        "fid-a/cli.js",
        "#!/usr/bin/env node\nconsole.log('fid-a', require('./index.js')(21));\n",
    );
    write(
        &src,
        "fid-b/package.json",
        r#"{"name":"fid-b","version":"2.1.0","main":"lib/deep/index.js"}"#,
    );
    write(
        &src,
        "fid-b/lib/deep/index.js",
        "module.exports = require('../../data/value.json');\n",
    );
    write(&src, "fid-b/data/value.json", "{\"value\": 7}\n");
    let mut out = Vec::new();
    for (pkg, file) in [("fid-a", "fid-a-1.0.0.tgz"), ("fid-b", "fid-b-2.1.0.tgz")] {
        let status = Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(&w.bin)
            .current_dir(src.join(pkg))
            .env("npm_config_cache", w.root.join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .stdout(std::process::Stdio::null())
            .status()
            .expect("npm pack");
        assert!(status.success(), "npm pack {pkg}");
        out.push(w.bin.join(file));
    }
    out
}

#[test]
fn npm_install_of_a_fresh_checkout_gives_the_same_results_bare_and_under_guard() {
    if lacks(&["npm", "node", "setpriv"]) {
        return;
    }
    let w = Workspace::new();
    let tarballs = npm_tarballs(&w);
    let dir = crate::fidelity::run_dir(&w);
    let package = format!(
        "{{\"name\":\"fidelity-app\",\"version\":\"1.0.0\",\"private\":true,\
         \"scripts\":{{\"test\":\"node test.js\"}},\
         \"dependencies\":{{\"fid-a\":\"file:{}\",\"fid-b\":\"file:{}\"}}}}\n",
        tarballs[0].display(),
        tarballs[1].display()
    );
    let env = [
        (
            "npm_config_cache",
            dir.join(".npm-cache").display().to_string(),
        ),
        ("npm_config_update_notifier", "false".to_string()),
        ("npm_config_audit", "false".to_string()),
        ("npm_config_fund", "false".to_string()),
        ("npm_config_offline", "true".to_string()),
    ];
    let script = "npm install --no-progress >install.out 2>install.err; echo \"install exit $?\"; \
                  npm test --silent; echo \"test exit $?\"; ./node_modules/.bin/fid-a";
    let report = compare(
        &w,
        &Workflow {
            path: "/usr/bin:/bin",
            env: &env,
            script,
            read: &[],
            expect: &["install exit 0", "a 4 b 7", "test exit 0", "fid-a 42"],
        },
        |d| {
            write(d, "package.json", &package);
            write(
                d,
                "test.js",
                "const a = require('fid-a'); const b = require('fid-b');\n\
                 console.log('a', a(2), 'b', b.value);\n",
            );
        },
        |p, desc| {
            let s = p.display().to_string();
            if s.starts_with(".npm-cache") || s.starts_with("install.") {
                return None;
            }
            Some(desc.to_string())
        },
    );
    assert!(report.is_empty(), "npm differs under guard\n{report}");
}

/// A pure-Python wheel written by hand (a wheel is a zip with a RECORD): a package with a data
/// file and a console script.
fn wheel(python: &Path, dest: &Path) -> PathBuf {
    let script = r#"
import base64, hashlib, sys, zipfile
files = {
    "fidpkg/__init__.py": "def twice(x):\n    return x * 2\n",
    "fidpkg/cli.py": "from fidpkg import twice\ndef main():\n    print('fidpkg', twice(21))\n",
    "fidpkg/data/value.txt": "7\n",
    "fidpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: fidpkg\nVersion: 1.0\n",
    "fidpkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "fidpkg-1.0.dist-info/entry_points.txt": "[console_scripts]\nfidpkg-cli = fidpkg.cli:main\n",
}
record = []
for name, text in files.items():
    data = text.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
record.append("fidpkg-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("fidpkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let whl = dest.join("fidpkg-1.0-py3-none-any.whl");
    let status = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&whl)
        .status()
        .expect("write the wheel");
    assert!(status.success());
    whl
}

#[test]
fn venv_and_pip_install_give_the_same_results_bare_and_under_guard() {
    let Some((python, prefix)) = python() else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    if lacks(&["setpriv"]) {
        return;
    }
    let w = Workspace::new();
    let whl = wheel(&python, &w.bin);
    let path = format!("{}/bin:/usr/bin:/bin", prefix.display());
    let env = [
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1".to_string()),
        ("PIP_NO_INPUT", "1".to_string()),
    ];
    let script = format!(
        "{} -m venv .venv; echo \"venv exit $?\"; \
         .venv/bin/pip install -q --no-index --no-cache-dir {} 2>pip.err; echo \"pip exit $?\"; \
         .venv/bin/fidpkg-cli; .venv/bin/python -c 'import fidpkg; print(fidpkg.twice(4))'; \
         .venv/bin/pip list --format=freeze 2>/dev/null | sort",
        python.display(),
        whl.display()
    );
    let report = compare(
        &w,
        &Workflow {
            path: &path,
            env: &env,
            script: &script,
            read: &[&prefix],
            expect: &["venv exit 0", "pip exit 0", "fidpkg 42", "8", "fidpkg==1.0"],
        },
        |_| {},
        |p, desc| {
            let s = p.display().to_string();
            if s.ends_with(".err") {
                return None;
            }
            // Compiled files embed their source's mtime.
            if s.ends_with(".pyc") {
                return Some(kind(desc));
            }
            Some(desc.to_string())
        },
    );
    assert!(report.is_empty(), "venv + pip differ under guard\n{report}");
}
