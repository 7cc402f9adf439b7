//! CPython's own test suite, its file-handling modules, bare and under `guard exec -p agent`
//! with the same credentials (see `fidelity.rs`): every test must have the same result on both
//! sides. The suite works in the workspace (`--tempdir` and `TMPDIR` inside it), so the calls
//! guard performs itself are the ones exercised. Results come from `--junit-xml`, read with the
//! same interpreter; the raw files land in `target/tmp/fidelity/cpython/`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fidelity::{args, artifacts, both, clean_env, differences, Roots};
use crate::util::{lacks, tool, Out, Workspace};

/// The modules compared: the file-handling part of the standard library's tests.
const MODULES: &[&str] = &[
    "test_os",
    "test_shutil",
    "test_tempfile",
    "test_tarfile",
    "test_zipfile",
    "test_pathlib",
    "test_posix",
    "test_glob",
    "test_fileinput",
    "test_filecmp",
    "test_fileio",
    "test_stat",
    "test_posixpath",
    "test_genericpath",
    "test_compileall",
    "test_py_compile",
    "test_zipimport",
    "test_dbm_dumb",
    "test_mailbox",
];

/// The interpreter (the real executable, not a shim) and the prefix it reads its library from.
pub fn python() -> Option<(PathBuf, PathBuf)> {
    tool("python3")?;
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, os; print(os.path.realpath(sys.executable)); print(sys.base_prefix)",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let exe = PathBuf::from(lines.next()?);
    let prefix = PathBuf::from(lines.next()?);
    Some((exe, prefix))
}

/// Read a JUnit file with `python`: test id -> (`passed` | `failure` | `error` | `skipped`,
/// message).
fn junit(python: &Path, file: &Path) -> BTreeMap<String, (String, String)> {
    let script = r#"
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter('testcase'):
    status, msg = 'passed', ''
    for child in tc:
        if child.tag in ('failure', 'error', 'skipped'):
            status = child.tag
            msg = (child.get('message') or child.text or '').strip().splitlines()
            msg = msg[0][:160] if msg else ''
            break
    print(f"{tc.get('classname')}.{tc.get('name')}\t{status}\t{msg}")
"#;
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .expect("run python to read the junit file");
    assert!(
        out.status.success(),
        "cannot read {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let id = f.next()?.to_string();
            let status = f.next()?.to_string();
            Some((id, (status, f.next().unwrap_or("").to_string())))
        })
        .collect()
}

#[test]
#[ignore = "slow: about three minutes a side; run by .ci/run with --ignored"]
fn cpython_file_handling_tests_give_the_same_results_bare_and_under_guard() {
    let Some((python, prefix)) = python() else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    if lacks(&["setpriv"]) {
        return;
    }
    let w = Workspace::new();
    let dir = crate::fidelity::run_dir(&w);
    let path = format!("{}/bin:/usr/bin:/bin", prefix.display());
    let mut argv = clean_env(&path, &dir.join("home"), &dir.join("tmp"));
    argv.push(python.clone().into());
    argv.extend(args([
        "-m",
        "test",
        // One worker: with two, the descriptor numbers a test module starts with depend on
        // which worker thread made its temporary files first, and test_os's closerange tests
        // skip or pass with them, bare as under guard.
        "-j1",
        "--timeout",
        "600",
        "--junit-xml",
    ]));
    argv.push(dir.join("results.xml").into());
    argv.push("--tempdir".into());
    argv.push(dir.join("work").into());
    argv.extend(MODULES.iter().map(OsString::from));
    let keep = artifacts("cpython");
    let collect = |side: &str, d: &Path, out: &Out| {
        std::fs::write(keep.join(format!("{side}.out")), out.stdout()).expect("write");
        std::fs::write(keep.join(format!("{side}.err")), out.stderr()).expect("write");
        let xml = d.join("results.xml");
        assert!(
            xml.is_file(),
            "{side}: no junit file (exit {})\n--- stderr\n{}\n--- stdout (tail)\n{}",
            out.code(),
            out.stderr(),
            out.stdout()
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::fs::copy(&xml, keep.join(format!("{side}.xml"))).expect("keep xml");
        junit(&python, &xml)
    };
    let ((bare, b), (guarded, g)) = both(
        &w,
        |d| {
            std::fs::create_dir_all(d.join("tmp")).expect("mkdir tmp");
            std::fs::create_dir_all(d.join("home")).expect("mkdir home");
        },
        &argv,
        Roots {
            // What the suite may read is policy, not fidelity: `test_os` lists `/`.
            read: &[&prefix, Path::new("/")],
            // Likewise writes: `test_zipfile` skips unless it may write where Python is
            // installed. multiprocessing's locks (`test_compileall`'s workers) are POSIX
            // semaphores in /dev/shm, which `agent` shares (`fs.shared`).
            write: &[&prefix],
            // test_tarfile's extraction filters extract set-id files on purpose, which agent
            // refuses (EPERM, rule fs.setid): policy, compared with it allowed.
            allow_setid: true,
        },
        collect,
    );
    let status = |m: &BTreeMap<String, (String, String)>| -> BTreeMap<String, String> {
        m.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
    };
    let count =
        |m: &BTreeMap<String, (String, String)>, s: &str| m.values().filter(|v| v.0 == s).count();
    eprintln!(
        "cpython: bare {} tests ({} failure, {} error, {} skipped), exit {}; guard {} tests ({} failure, {} error, {} skipped), exit {}; raw output in {}",
        b.len(), count(&b, "failure"), count(&b, "error"), count(&b, "skipped"), bare.code(),
        g.len(), count(&g, "failure"), count(&g, "error"), count(&g, "skipped"), guarded.code(),
        keep.display()
    );
    let mut report = differences("test results", &status(&b), &status(&g), 80);
    // The message of each test whose result differs, from the side where it did not pass.
    for (id, (gs, gm)) in &g {
        let bs = b.get(id).map(|v| v.0.as_str()).unwrap_or("(none)");
        if bs != gs {
            let bm = b.get(id).map(|v| v.1.as_str()).unwrap_or("");
            report.push_str(&format!(
                "  {id}\n    bare: {bs} {bm}\n    guard: {gs} {gm}\n"
            ));
        }
    }
    if bare.code() != guarded.code() {
        report.push_str(&format!(
            "exit status: bare {}, guard {}\n",
            bare.code(),
            guarded.code()
        ));
    }
    // A call guard could not judge (rule `decode`) is refused where bare runs it: none here.
    let failed = w.undecodable();
    if !failed.is_empty() {
        report.push_str(&format!(
            "{} call(s) guard could not judge:\n{}\n",
            failed.len(),
            failed
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    std::fs::write(keep.join("report.txt"), &report).expect("write report");
    assert!(
        !b.is_empty(),
        "the bare run reported no test\n{}",
        bare.stderr()
    );
    assert!(
        report.is_empty(),
        "CPython's tests differ under guard\n{report}"
    );
}
