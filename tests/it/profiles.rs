//! Profiles from the command line: list, show, check (strict parsing), explain; and `doctor`.

use crate::util::Workspace;

#[test]
fn a_profile_with_an_unknown_key_is_rejected_with_its_name_and_line() {
    let w = Workspace::new();
    let bad = w.root.join("bad.toml");
    std::fs::write(&bad, "name = \"bad\"\n[fs]\nwirte = [\"/tmp\"]\n").expect("write");
    let out = w.guard().arg("profile").arg("check").arg(&bad).output();
    out.expect_code(125);
    assert!(out.stderr().contains("wirte"), "{}", out.stderr());
    assert!(out.stderr().contains("line 3"), "{}", out.stderr());
    let out = w.exec(&[bad.to_str().expect("utf8")]).run(&["true"]);
    out.expect_code(125);
    assert!(out.stderr().contains("wirte"));
}

#[test]
fn builtin_profiles_are_listed_shown_and_resolve() {
    let w = Workspace::new();
    let out = w.guard().args(["profile", "list"]).output();
    out.expect_code(0);
    for name in [
        "agent",
        "ci",
        "strict",
        "observe",
        "claude-code",
        "codex",
        "gemini",
        "aider",
    ] {
        assert!(out.stdout().contains(name), "{}", out.stdout());
        w.guard()
            .args(["profile", "show", name, "--resolved"])
            .output()
            .expect_code(0);
    }
    let shown = w.guard().args(["profile", "show", "agent"]).output();
    assert!(shown.stdout().contains("[[rule]]"));
}

#[test]
fn explain_judges_an_exec_without_running_it() {
    let w = Workspace::new();
    let out = w
        .guard()
        .args(["explain", "--", "git", "push", "--force", "origin", "main"])
        .output();
    out.expect_code(1);
    assert!(out.stdout().starts_with("deny"), "{}", out.stdout());
    let out = w
        .guard()
        .args(["explain", "--", "git", "push", "origin", "main"])
        .output();
    out.expect_code(0);
}

#[test]
fn strict_profile_has_no_network() {
    let w = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "connect", &addr]);
    assert_eq!(
        crate::util::probe_result(&out),
        "ok",
        "agent reaches loopback"
    );
    let out = w.exec(&["strict"]).run(&[&w.probe(), "connect", &addr]);
    assert!(
        crate::util::probe_result(&out).starts_with("errno"),
        "strict has no network"
    );
}

#[test]
fn observe_allows_and_records_everything() {
    let w = Workspace::new();
    let victim = w.write(&w.outside.join("gone.txt").display().to_string(), "x");
    let out = w
        .exec(&["observe"])
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    assert_eq!(crate::util::probe_result(&out), "ok");
    assert!(!victim.exists());
    let d = w
        .decisions()
        .into_iter()
        .find(|d| d["syscall"] == "unlink")
        .expect("recorded");
    assert_eq!(d["verdict"], "allow");
    assert_eq!(d["rule"], "observe");
}

#[test]
fn doctor_passes_on_this_machine() {
    let w = Workspace::new();
    let out = w.guard().arg("doctor").output();
    assert_eq!(
        out.code(),
        0,
        "doctor must find every feature here:\n{}",
        out.stdout()
    );
    assert!(out.stdout().contains("landlock"));
    let json = w.guard().args(["doctor", "--json"]).output();
    let v: serde_json::Value = serde_json::from_str(&json.stdout()).expect("doctor --json");
    assert!(v["landlock_abi"].as_u64().unwrap_or(0) >= 1);
}

#[test]
fn an_argv_rule_judges_the_command_guard_starts_itself() {
    // The rules' matchers compile on a thread after the fork; the command's own exec, the
    // run's first judged call, must already meet them (and the glob element in them).
    let w = Workspace::new();
    let rule = w.root.join("rule.toml");
    std::fs::write(
        &rule,
        "name = \"no-true-x\"\n[[rule]]\nid = \"no-true-x\"\nwhen = \"exec\"\n\
         argv = [\"true\", \"x*\"]\naction = \"deny\"\n",
    )
    .expect("write rule");
    let rule = rule.to_string_lossy().into_owned();
    let out = w.exec(&["agent", &rule]).run(&["true", "xy"]);
    out.expect_code(126);
    let denied: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec" && d["verdict"] == "deny")
        .collect();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["rule"], "no-true-x", "{denied:?}");
    // The same program with an argument the rule does not name runs.
    w.exec(&["agent", &rule])
        .run(&["true", "zz"])
        .expect_code(0);
}
