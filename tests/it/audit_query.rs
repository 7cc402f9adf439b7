//! `guard log` beyond one run: the hash chain (`--verify` names a changed, a removed and a moved
//! line), queries across runs (`--all`, `--since`, `--denied`, `--syscall`, `--path`,
//! `--json`), a run that failed to start never taken as the default, `--follow` waiting for a
//! log to appear, and the jq recipes of docs/audit-format.md run against real runs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::util::{lacks, probe_result, Workspace};

/// A run under `agent` with several refusals and allowed changes, so its log has many lines.
fn busy_run(w: &Workspace) {
    let script = format!(
        "p={probe}; $p unlink {out}/a; $p mkdir {ws}/d; $p unlink {out}/b; $p write {ws}/f x; $p unlink {out}/c",
        probe = w.probe(),
        out = w.outside.display(),
        ws = w.ws.display()
    );
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
}

/// The only run directory of a workspace's state.
fn only_run(w: &Workspace) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The run ids of a workspace's state, oldest first.
fn run_ids(w: &Workspace) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids
}

fn verify(w: &Workspace, target: &Path) -> crate::util::Out {
    w.guard().args(["log", "--verify"]).arg(target).output()
}

#[test]
fn verify_names_a_changed_a_removed_and_a_moved_line() {
    let w = Workspace::new();
    busy_run(&w);
    let run = only_run(&w);
    let log = std::fs::read_to_string(run.join("audit.jsonl")).expect("log");
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() >= 8, "{log}");
    let ok = verify(&w, &run.join("audit.jsonl"));
    ok.expect_code(0);
    assert!(ok.stdout().contains("ok"), "{}", ok.stdout());

    let tampered = |name: &str, lines: Vec<String>| -> PathBuf {
        let p = w.root.join(name);
        std::fs::write(&p, lines.join("\n") + "\n").expect("write");
        p
    };
    let owned = || lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    // A decision in the middle of the log: line n (1-based), index n - 1.
    let n = 1
        + (2..lines.len() - 2)
            .find(|&i| lines[i].contains("\"type\":\"decision\""))
            .expect("a decision in the middle");

    // Changed: the decision's pid (still valid JSON).
    let mut changed = owned();
    changed[n - 1] = changed[n - 1].replacen("\"pid\":", "\"pid\":1", 1);
    assert_ne!(changed[n - 1], lines[n - 1]);
    let out = verify(&w, &tampered("changed.jsonl", changed));
    out.expect_code(1);
    let expected = format!(
        "line {}: does not follow line {n}: line {n} was changed",
        n + 1
    );
    assert!(out.stderr().contains(&expected), "{}", out.stderr());

    let mut removed = owned();
    removed.remove(n - 1);
    let out = verify(&w, &tampered("removed.jsonl", removed));
    out.expect_code(1);
    assert!(
        out.stderr().contains(&format!("line {n}:")),
        "{}",
        out.stderr()
    );

    let mut moved = owned();
    moved.swap(n - 1, n);
    let out = verify(&w, &tampered("moved.jsonl", moved));
    out.expect_code(1);
    assert!(
        out.stderr().contains(&format!("line {n}:")),
        "{}",
        out.stderr()
    );

    // Lines cut from the end of the run's own log: the chain holds, the summary's head does not.
    let mut cut = owned();
    cut.pop();
    std::fs::write(run.join("audit.jsonl"), cut.join("\n") + "\n").expect("cut");
    let id = run.file_name().expect("id").to_string_lossy().into_owned();
    let out = w.guard().args(["log", "--verify", &id]).output();
    out.expect_code(1);
    assert!(
        out.stderr().contains("lines were removed from the end"),
        "{}",
        out.stderr()
    );
}

#[test]
fn queries_across_runs() {
    let w = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    // Run 1: a refused connect (strict has no network).
    let out = w.exec(&["strict"]).run(&[&w.probe(), "connect", &addr]);
    assert!(probe_result(&out).starts_with("errno"), "{}", out.stdout());
    // Run 2: creates .github/ in the workspace.
    w.exec(&["agent"])
        .run(&[
            &w.probe(),
            "mkdir",
            &w.ws.join(".github").display().to_string(),
        ])
        .expect_code(0);
    let ids = run_ids(&w);
    assert_eq!(ids.len(), 2);
    let json_lines = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = w.guard().arg("log").args(args).arg("--json").output();
        out.expect_code(0);
        out.stdout()
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect()
    };

    let connects = json_lines(&["--all", "--denied", "--syscall", "connect"]);
    assert_eq!(connects.len(), 1, "{connects:?}");
    assert_eq!(connects[0]["addr"], addr.as_str());
    assert_eq!(connects[0]["run"], ids[0].as_str());

    let github = json_lines(&["--all", "--path", ".github"]);
    assert!(!github.is_empty());
    assert!(
        github.iter().all(|e| e["run"] == ids[1].as_str()),
        "{github:?}"
    );

    // --since alone looks at every run; --until in the past finds nothing.
    let recent = json_lines(&["--since", "1h"]);
    let runs: std::collections::BTreeSet<&str> =
        recent.iter().filter_map(|e| e["run"].as_str()).collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(json_lines(&["--until", "2000-01-01"]).is_empty());
    assert!(json_lines(&["--all", "--verdict", "kill"]).is_empty());

    // The JSON lines are the lines as written: byte for byte, so they verify.
    let log = std::fs::read_to_string(w.state.join("runs").join(&ids[1]).join("audit.jsonl"))
        .expect("log");
    let out = w.guard().args(["log", &ids[1], "--json"]).output();
    assert_eq!(out.stdout(), log);

    // Human output across runs names each run before its events.
    let out = w.guard().args(["log", "--all", "--denied"]).output();
    out.expect_code(0);
    assert!(
        out.stdout().contains(&format!("== run {}", ids[0])),
        "{}",
        out.stdout()
    );

    let out = w.guard().args(["log", "--since", "last tuesday"]).output();
    out.expect_code(125);
    assert!(out.stderr().contains("hint:"), "{}", out.stderr());
}

#[test]
fn a_run_that_failed_to_start_is_never_the_default() {
    let w = Workspace::new();
    busy_run(&w);
    let good = only_run(&w)
        .file_name()
        .expect("id")
        .to_string_lossy()
        .into_owned();
    let out = w.exec(&["agent"]).run(&["/nonexistent/command"]);
    out.expect_code(127);
    let runs = w.guard().args(["runs", "--json"]).output();
    runs.expect_code(0);
    let listed: Vec<serde_json::Value> = runs
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["state"], "failed", "{listed:?}");
    assert_eq!(listed[1]["id"], good.as_str());

    let log = w.guard().args(["log", "--json"]).output();
    log.expect_code(0);
    assert!(
        log.stdout().lines().all(|l| l.contains(&good)),
        "{}",
        log.stdout()
    );
    let diff = w.guard().arg("diff").output();
    diff.expect_code(0);
    assert!(diff.stdout().contains(&good), "{}", diff.stdout());
}

#[test]
fn follow_waits_for_the_log_to_appear() {
    let w = Workspace::new();
    busy_run(&w);
    let real = only_run(&w);
    // A run that has started but not yet written its log (as between guard's start and its
    // audit writer's), made from the real run's files.
    let pending = w.state.join("runs/29991231T235959Z-0000");
    std::fs::create_dir_all(&pending).expect("mkdir");
    let meta = std::fs::read_to_string(real.join("run.json")).expect("meta");
    let meta = meta.replace("\"ended\"", "\"running\"");
    std::fs::write(pending.join("run.json"), meta).expect("meta");

    let mut g = w.guard();
    g.args(["log", "--follow", "--json", "2999"]);
    let mut child = g
        .cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("stderr line");
    assert!(first.contains("waiting for"), "{first}");
    // Now the log appears, whole.
    let log = std::fs::read(real.join("audit.jsonl")).expect("log");
    std::fs::write(pending.join(".audit.tmp"), &log).expect("write");
    std::fs::rename(pending.join(".audit.tmp"), pending.join("audit.jsonl")).expect("rename");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, log, "every line, up to run-end");
}

/// The jq recipes of docs/audit-format.md: each fenced block that starts with
/// `# recipe: NAME` is run with `sh` against real runs, and its output is checked, so the
/// documentation cannot drift from the tool.
#[test]
fn the_documented_jq_recipes_work() {
    if lacks(&["jq"]) {
        return;
    }
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/audit-format.md"))
        .expect("docs/audit-format.md");
    let recipes = recipes(&doc);
    let names: Vec<&str> = recipes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "refused-connects-this-week",
            "runs-that-touched-github",
            "refusals-per-rule",
            "degraded-runs",
            "every-refusal",
            "decisions-per-rule",
            "programs-started",
            "left-out",
            "stopped-by-policy",
            "verify-all",
        ]
    );

    let w = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    std::fs::create_dir_all(w.ws.join(".github")).expect("mkdir");
    let ci_yml = w.ws.join(".github/ci.yml").display().to_string();
    // Runs: a refused connect; a write under .github/; elsewhere; under .github/ again; a
    // refusal that stops the run (on-deny = kill).
    w.exec(&["strict"]).run(&[&w.probe(), "connect", &addr]);
    w.exec(&["agent"])
        .run(&[&w.probe(), "write", &ci_yml, "x"])
        .expect_code(0);
    w.exec(&["agent"])
        .run(&[
            &w.probe(),
            "mkdir",
            &w.ws.join("other").display().to_string(),
        ])
        .expect_code(0);
    w.exec(&["agent"])
        .run(&[&w.probe(), "write", &ci_yml, "y"])
        .expect_code(0);
    let kill = w.profile_file(
        "kill",
        "extends = \"agent\"\n[transaction]\non-deny = \"kill\"\n\
         [[rule]]\nid = \"keep-victim\"\nwhen = \"delete\"\npath = \"{workspace}/victim\"\naction = \"deny\"\n",
    );
    let victim = w.write("victim", "x").display().to_string();
    w.exec(&[&kill])
        .run(&[&w.probe(), "unlink", &victim])
        .expect_code(120);
    let ids = run_ids(&w);
    assert_eq!(ids.len(), 5);

    let bin = Path::new(crate::util::guard_bin())
        .parent()
        .expect("bin dir");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |script: &str| -> String {
        let out = std::process::Command::new("sh")
            .args(["-ec", script])
            .env("PATH", &path)
            .env("GUARD_STATE_DIR", &w.state)
            .env("HOME", &w.home)
            .env_remove("XDG_STATE_HOME")
            .current_dir(&w.ws)
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "recipe failed: {script}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for (name, script) in &recipes {
        let out = run(script);
        match name.as_str() {
            "refused-connects-this-week" => {
                let rows: Vec<&str> = out.lines().collect();
                assert_eq!(rows.len(), 1, "{out}");
                assert!(
                    rows[0].contains(&addr) && rows[0].contains(&ids[0]),
                    "{out}"
                );
            }
            "runs-that-touched-github" => {
                let got: Vec<&str> = out.lines().collect();
                assert_eq!(got, [ids[1].as_str(), ids[3].as_str()], "{out}");
            }
            "refusals-per-rule" => {
                let v: serde_json::Value = serde_json::from_str(&out).expect("json");
                let rows = v.as_array().expect("array");
                let count = |rule: &str| {
                    rows.iter()
                        .find(|r| r["rule"] == rule)
                        .unwrap_or_else(|| panic!("a {rule} row: {out}"))["count"]
                        .clone()
                };
                assert_eq!(count("net.connect"), 1, "{out}");
                assert_eq!(count("keep-victim"), 1, "{out}");
            }
            "degraded-runs" => {
                // On a kernel that enforces everything there are none; each line shown names
                // a run and what it lacked.
                for line in out.lines() {
                    let v: serde_json::Value = serde_json::from_str(line).expect("json");
                    assert!(ids.iter().any(|i| v["run"] == i.as_str()), "{line}");
                    assert!(v["degraded"].as_array().is_some_and(|d| !d.is_empty()));
                }
            }
            "every-refusal" => {
                let rows: Vec<&str> = out.lines().collect();
                assert_eq!(rows.len(), 2, "{out}");
                assert!(rows[0].contains(&addr), "{out}");
                assert!(
                    rows[1].contains(&victim) && rows[1].contains("kill"),
                    "{out}"
                );
            }
            "decisions-per-rule" => {
                let v: serde_json::Value = serde_json::from_str(&out).expect("json");
                let total: u64 = v
                    .as_array()
                    .expect("array")
                    .iter()
                    .map(|r| r["total"].as_u64().expect("total"))
                    .sum();
                assert!(total >= 5, "{out}");
            }
            "programs-started" => {
                let probes = out
                    .lines()
                    .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
                    .filter(|v| {
                        v["argv"][0]
                            .as_str()
                            .is_some_and(|a| a.ends_with("guard-probe"))
                    })
                    .count();
                assert!(probes >= 1, "{out}");
            }
            "left-out" => {
                let ends = out.lines().filter(|l| l.contains("\"run-end\"")).count();
                assert_eq!(ends, 5, "{out}");
            }
            "stopped-by-policy" => assert_eq!(out.trim(), ids[4], "{out}"),
            "verify-all" => {
                let ok = out.lines().filter(|l| l.contains(": ok, ")).count();
                assert_eq!(ok, 5, "{out}");
            }
            other => panic!("no check for recipe {other}"),
        }
    }
}

/// `(name, script)` of each fenced block whose first line is `# recipe: NAME`.
fn recipes(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("```") {
            continue;
        }
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        if let Some(name) = block.first().and_then(|l| l.strip_prefix("# recipe: ")) {
            out.push((name.trim().to_string(), block[1..].join("\n")));
        }
    }
    out
}
