//! The CI kit: the GitHub Action's step script run under a faked GitHub environment (step
//! summary, outputs, workspace and runner temp pointing into a temporary directory) on a real
//! run with refusals; the install script's checksum check; the `ci` profile keeping CI
//! credentials from the command (and passing one a profile allows by name); and action.yml
//! wired to the scripts the tests run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{guard_bin, lacks, Workspace};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A directory holding only `guard`, to put first on PATH as a runner's install would.
fn guard_on_path(w: &Workspace) -> String {
    let dir = w.root.join("guard-bin");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(guard_bin(), dir.join("guard")).expect("copy guard");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn lines_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_github_step_script_annotates_summarises_and_keeps_the_artifact() {
    let w = Workspace::new();
    let gh = w.root.join("github");
    let runner_temp = gh.join("runner-temp");
    std::fs::create_dir_all(&runner_temp).expect("mkdir");
    let (summary, output) = (gh.join("step-summary.md"), gh.join("output"));
    std::fs::create_dir_all(w.ws.join(".git/hooks")).expect("mkdir hooks");
    let keep = w.write(&w.outside.join("keep.txt").display().to_string(), "keep\n");
    let script = format!(
        "echo built > built.txt\n\
         echo 'exit 0' > .git/hooks/pre-commit || true\n\
         rm -f {keep} || true\n\
         exit 3\n",
        keep = keep.display()
    );
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("ci/github-step.sh"))
        .current_dir(&w.ws)
        .env("PATH", guard_on_path(&w))
        .env("GUARD_STATE_DIR", &w.state)
        .env("HOME", &w.home)
        .env_remove("XDG_STATE_HOME")
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_JOB", "test")
        .env("GITHUB_WORKSPACE", &w.ws)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        .env("RUNNER_TEMP", &runner_temp)
        .env("INPUT_RUN", &script)
        .env("INPUT_PROFILE", format!("ci {}", w.profile.display()))
        .env("INPUT_SHELL", "bash")
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(3),
        "the command's status\n{stdout}\n{stderr}"
    );
    assert!(w.ws.join("built.txt").exists(), "the command ran");
    assert_eq!(
        lines_of(&keep),
        "keep\n",
        "the refused delete did not happen"
    );

    // Step outputs.
    let outputs: std::collections::HashMap<String, String> = lines_of(&output)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        outputs.get("status").map(String::as_str),
        Some("3"),
        "{outputs:?}"
    );
    assert_eq!(
        outputs.get("refused").map(String::as_str),
        Some("2"),
        "{outputs:?}"
    );
    let run_id = outputs.get("run-id").expect("run-id").clone();
    let artifact = PathBuf::from(outputs.get("artifact-dir").expect("artifact-dir"));
    assert!(artifact.starts_with(&runner_temp), "{}", artifact.display());

    // The artifact: the audit log (intact chain), the summary and the report.
    let log = artifact.join("audit.jsonl");
    let verify = Command::new(guard_bin())
        .args(["log", "--verify"])
        .arg(&log)
        .output()
        .expect("guard");
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&lines_of(&artifact.join("summary.json"))).expect("summary");
    assert_eq!(s["run"], run_id.as_str());
    assert_eq!(s["status"], 3);
    assert!(lines_of(&artifact.join("report.md")).starts_with("### guard: 2 calls refused"));

    // Every refused call of the log: one annotation with its file and rule, one summary row.
    let refusals: Vec<serde_json::Value> = lines_of(&log)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .filter(|e| e["type"] == "decision" && e["verdict"] == "deny" && e["rule"] != "resolve")
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    let annotations: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("::error "))
        .collect();
    assert_eq!(annotations.len(), 2, "{stdout}");
    let job_summary = lines_of(&summary);
    assert!(
        job_summary.starts_with("### guard: 2 calls refused"),
        "{job_summary}"
    );
    for r in &refusals {
        let path = r["path"].as_str().expect("path");
        let rule = r["rule"].as_str().expect("rule");
        let file = Path::new(path)
            .strip_prefix(&w.ws)
            .map_or(path.to_string(), |p| p.display().to_string());
        assert!(
            annotations
                .iter()
                .any(|a| a.starts_with(&format!("::error file={file},title="))
                    && a.contains(&format!("({rule})"))),
            "no annotation for {file} ({rule}):\n{stdout}"
        );
        assert!(
            job_summary
                .lines()
                .any(|l| l.starts_with("| deny") && l.contains(&file) && l.contains(rule)),
            "no summary row for {file}:\n{job_summary}"
        );
    }
    assert!(annotations
        .iter()
        .any(|a| a.contains("file=.git/hooks/pre-commit")));
    assert!(annotations
        .iter()
        .any(|a| a.contains(&keep.display().to_string())));
}

#[test]
fn the_install_script_checks_the_binary_it_downloads() {
    if lacks(&["curl", "sha256sum"]) {
        return;
    }
    let w = Workspace::new();
    let digest = {
        use sha2::Digest;
        format!(
            "{:x}",
            sha2::Sha256::digest(std::fs::read(guard_bin()).expect("guard"))
        )
    };
    let install = |sha: &str, root: &Path| {
        let path_file = w.root.join("github-path");
        let out = Command::new("bash")
            .arg(Path::new(ROOT).join("ci/install.sh"))
            .env("GUARD_URL", format!("file://{}", guard_bin()))
            .env("GUARD_SHA256", sha)
            .env("GUARD_INSTALL_ROOT", root)
            .env("GITHUB_PATH", &path_file)
            .stdin(Stdio::null())
            .output()
            .expect("bash");
        (out, path_file)
    };
    let good = w.root.join("good");
    let (out, path_file) = install(&digest, &good);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("guard "));
    assert!(lines_of(&path_file).contains(&good.join("bin").display().to_string()));

    let bad = w.root.join("bad");
    let (out, _) = install(&"0".repeat(64), &bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("::error title=guard::"));
    assert!(
        !bad.join("bin/guard").exists(),
        "a binary that does not match is not installed"
    );
}

/// The CI credentials the `ci` profile keeps from the command.
const CREDENTIALS: &[&str] = &[
    "CI_JOB_TOKEN",
    "CI_REGISTRY_PASSWORD",
    "CI_REPOSITORY_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_CACHE_URL",
    "GITHUB_TOKEN",
    "NPM_TOKEN",
];

fn env_under(w: &Workspace, profiles: &[&str]) -> Vec<String> {
    let mut g = w.exec(profiles);
    for name in CREDENTIALS {
        g.env(name, format!("secret-{name}"));
    }
    g.env("CI", "true").env("GITHUB_RUN_ID", "77");
    let out = g.run(&["env"]);
    out.expect_code(0);
    out.stdout().lines().map(str::to_string).collect()
}

#[test]
fn the_ci_profile_keeps_ci_credentials_from_the_command() {
    let w = Workspace::new();
    let seen = |env: &[String], name: &str| env.iter().any(|l| l.starts_with(&format!("{name}=")));
    let env = env_under(&w, &["ci"]);
    for name in CREDENTIALS {
        assert!(!seen(&env, name), "{name} reached the command");
    }
    assert!(env.iter().any(|l| l == "CI=true"), "{env:?}");
    assert!(
        env.iter().any(|l| l == "GITHUB_RUN_ID=77"),
        "the job's identity is not a secret"
    );

    // A profile extending ci passes one credential on, by name, and only that one.
    let allow = w.profile_file(
        "release",
        "extends = \"ci\"\n[env]\nallow = [\"GITHUB_TOKEN\"]\n",
    );
    let env = env_under(&w, &[&allow]);
    assert!(
        env.iter().any(|l| l == "GITHUB_TOKEN=secret-GITHUB_TOKEN"),
        "{env:?}"
    );
    for name in CREDENTIALS.iter().filter(|n| **n != "GITHUB_TOKEN") {
        assert!(!seen(&env, name), "{name} reached the command");
    }

    // allow takes names, not patterns.
    let glob = w.profile_file("glob", "extends = \"ci\"\n[env]\nallow = [\"*_TOKEN\"]\n");
    let out = w.guard().args(["profile", "check", &glob]).output();
    out.expect_code(125);
    assert!(out.stderr().contains("env.allow"), "{}", out.stderr());
}

#[test]
fn the_action_runs_the_tested_scripts() {
    let action = std::fs::read_to_string(Path::new(ROOT).join("action.yml")).expect("action.yml");
    assert!(action.contains("using: composite"));
    assert!(action.contains("bash \"$GITHUB_ACTION_PATH/ci/install.sh\""));
    assert!(action.contains("bash \"$GITHUB_ACTION_PATH/ci/github-step.sh\""));
    assert!(action.contains("uses: actions/upload-artifact@v4"));
    // Every input the step script reads is passed by the action.
    let script =
        std::fs::read_to_string(Path::new(ROOT).join("ci/github-step.sh")).expect("script");
    let mut read: Vec<&str> = script
        .match_indices("INPUT_")
        .map(|(i, _)| {
            let rest = &script[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    read.retain(|v| v.len() > "INPUT_".len());
    read.sort_unstable();
    read.dedup();
    assert!(read.len() >= 6, "{read:?}");
    for var in read {
        assert!(
            action.contains(&format!("{var}: ${{{{ inputs.")),
            "action.yml does not set {var}"
        );
    }
}
