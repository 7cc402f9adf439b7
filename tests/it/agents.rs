//! The agent profiles (`claude-code`, `codex`, `gemini`, `aider`): a script that touches
//! exactly the paths each agent uses (its state under the home directory, its files in the
//! repository, its installed program), run under the profile with a test home, with zero
//! refusals; and each agent's API hosts judged by the profile (allowed there, refused by plain
//! `agent`), through the library's `decide`, so no remote host is ever contacted. The agents
//! themselves need accounts, so they are not run. Where each path and host comes from is
//! cited in the profiles.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use guard::policy::{self, Action, NetAddr, NetTarget, Op, Request, Vars};

use crate::util::Workspace;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Run `script` under `profile` with the test home as HOME (and nothing of the runner's own
/// agent settings); assert it succeeds and nothing was refused.
fn run_clean(w: &Workspace, profile: &str, script: &str) {
    let h = w.home.display().to_string();
    let mut g = w.exec(&[profile]);
    g.env("PATH", format!("{h}/.local/bin:/usr/bin:/bin"));
    for var in [
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_SANDBOX",
        "XDG_CONFIG_HOME",
    ] {
        g.cmd.env_remove(var);
    }
    let out = g.run(&["sh", "-c", &format!("set -e\n{script}\necho all-done")]);
    assert!(
        out.stdout().contains("all-done"),
        "{profile}: the script failed\n--- stdout\n{}\n--- stderr\n{}",
        out.stdout(),
        out.stderr()
    );
    out.expect_code(0);
    let refused: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny" || d["verdict"] == "kill")
        .collect();
    assert!(refused.is_empty(), "{profile}: refusals {refused:#?}");
    assert!(!out.stderr().contains("guard: refused"), "{}", out.stderr());
}

#[test]
fn claude_code_state_and_program_work_with_zero_refusals() {
    let w = Workspace::new();
    // What a user of Claude Code has before the run: settings, the native install.
    write(
        &w.home.join(".claude/settings.json"),
        "{\"model\": \"opus\"}\n",
    );
    let version = w.home.join(".local/share/claude/versions/9.9.9");
    write(&version, "#!/bin/sh\necho claude 9.9.9\n");
    std::fs::set_permissions(&version, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::create_dir_all(w.home.join(".local/bin")).expect("mkdir");
    std::os::unix::fs::symlink(&version, w.home.join(".local/bin/claude")).expect("symlink");
    let script = r#"
test "$CLAUDE_CONFIG_DIR" = "$HOME/.claude"
test "$DISABLE_AUTOUPDATER" = 1
claude
d="$CLAUDE_CONFIG_DIR"
cat "$d/settings.json"
# the global config, saved as Claude Code saves it: lock directory, temporary file, rename
mkdir "$d/.claude.json.lock"
printf '{"numStartups": 1}' > "$d/.claude.json.tmp.$$.1767225600000"
mv "$d/.claude.json.tmp.$$.1767225600000" "$d/.claude.json"
rmdir "$d/.claude.json.lock"
mkdir -p "$d/backups" && cp "$d/.claude.json" "$d/backups/.claude.json.backup.1"
# credentials, sessions, todos, shell snapshots, metrics
printf '{"claudeAiOauth": {}}' > "$d/.credentials.json"
mkdir -p "$d/projects/-ws" "$d/todos" "$d/shell-snapshots" "$d/statsig"
echo '{"type":"user"}' >> "$d/projects/-ws/session.jsonl"
echo '[]' > "$d/todos/session-agent.json"
echo 'export PATH=/usr/bin' > "$d/shell-snapshots/snapshot-sh-1.sh"
echo '{}' > "$d/statsig/statsig.cached.evaluations"
# the native installer's version lock
mkdir -p "$HOME/.local/state/claude/locks"
touch "$HOME/.local/state/claude/locks/9.9.9.lock"
# the project's own files, and the Bash tool's working files in TMPDIR
mkdir -p .claude && echo '{}' > .claude/settings.local.json && echo '# memory' > CLAUDE.md
echo /ws > "$TMPDIR/claude-1234-cwd"
"#;
    run_clean(&w, "claude-code", script);
    assert!(w.home.join(".claude/.claude.json").is_file());
}

#[test]
fn codex_state_works_with_zero_refusals() {
    let w = Workspace::new();
    write(
        &w.home.join(".codex/config.toml"),
        "model = \"gpt-5-codex\"\n",
    );
    let script = r#"
test "$CODEX_HOME" = "$HOME/.codex"
cat "$CODEX_HOME/config.toml"
printf '{"OPENAI_API_KEY": null}' > "$CODEX_HOME/auth.json.tmp" && mv "$CODEX_HOME/auth.json.tmp" "$CODEX_HOME/auth.json"
mkdir -p "$CODEX_HOME/sessions/2026/12/02" "$CODEX_HOME/log"
echo '{}' >> "$CODEX_HOME/sessions/2026/12/02/rollout-2026-12-02T10-00-00.jsonl"
echo 'started' >> "$CODEX_HOME/log/codex-tui.log"
echo '{"text":"hi"}' >> "$CODEX_HOME/history.jsonl"
touch "$CODEX_HOME/state_5.sqlite" "$CODEX_HOME/state_5.sqlite-wal"
echo '# instructions' > AGENTS.md
"#;
    run_clean(&w, "codex", script);
}

#[test]
fn gemini_state_works_with_zero_refusals() {
    let w = Workspace::new();
    write(
        &w.home.join(".gemini/settings.json"),
        "{\"theme\": \"Default\"}\n",
    );
    let script = r#"
test "$GEMINI_SANDBOX" = false
cat "$HOME/.gemini/settings.json"
echo '{}' > "$HOME/.gemini/oauth_creds.json"
echo '{"active": null}' > "$HOME/.gemini/google_accounts.json"
echo 00000000 > "$HOME/.gemini/installation_id"
mkdir -p "$HOME/.gemini/tmp/0123abcd/chats"
echo '{}' > "$HOME/.gemini/tmp/0123abcd/chats/session-1.json"
mkdir -p .gemini && echo '{}' > .gemini/settings.json && echo '# context' > GEMINI.md
"#;
    run_clean(&w, "gemini", script);
}

#[test]
fn aider_state_works_with_zero_refusals() {
    let w = Workspace::new();
    write(&w.home.join(".aider.conf.yml"), "model: sonnet\n");
    let script = r#"
cat "$HOME/.aider.conf.yml"
mkdir -p "$HOME/.aider/caches"
echo '{}' > "$HOME/.aider/caches/model_prices_and_context_window.json"
echo '{"uuid": "x"}' > "$HOME/.aider/analytics.json"
echo '{}' > "$HOME/.aider/installs.json"
echo '# aider chat started' >> .aider.chat.history.md
echo '+fix it' >> .aider.input.history
mkdir -p .aider.tags.cache.v4 && echo x > .aider.tags.cache.v4/cache.db
echo 'read: [CONVENTIONS.md]' > .aider.conf.yml
"#;
    run_clean(&w, "aider", script);
}

/// Each host of `targets`, with an address of its own from TEST-NET-2 (as if looked up).
fn with_addresses(targets: &mut [NetTarget]) -> Vec<(String, u16, IpAddr)> {
    let mut out = Vec::new();
    for (i, t) in targets.iter_mut().enumerate() {
        if let NetTarget::Host { name, port, addrs } = t {
            let ip = IpAddr::V4(Ipv4Addr::new(
                198,
                51,
                100,
                u8::try_from(i + 1).expect("few"),
            ));
            *addrs = vec![ip];
            out.push((name.clone(), port.unwrap_or(443), ip));
        }
    }
    out
}

fn connect_verdict(p: &policy::Policy, ip: IpAddr, port: u16) -> Action {
    let addr = NetAddr::Inet(SocketAddr::new(ip, port));
    policy::decide(
        p,
        &Request {
            addr: Some(&addr),
            ..Request::new(Op::Connect)
        },
    )
    .action
}

fn lookup_verdict(p: &policy::Policy, name: &str) -> Action {
    policy::decide(
        p,
        &Request {
            name: Some(name),
            ..Request::new(Op::Dns)
        },
    )
    .action
}

#[test]
fn each_agents_api_hosts_are_judged_allowed_by_its_profile_and_refused_by_agent() {
    let vars = Vars {
        workspace: "/ws".into(),
        home: Some(PathBuf::from("/home/u")),
        tmp: "/tmp/guard-run".into(),
        state: "/var/guard".into(),
    };
    let agent = policy::load(&["agent".into()], &vars).expect("agent");
    let agent_hosts: Vec<String> = agent
        .net
        .connect
        .iter()
        .filter_map(|t| match t {
            NetTarget::Host { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let expected: [(&str, &[&str]); 4] = [
        (
            "claude-code",
            &[
                "api.anthropic.com",
                "claude.ai",
                "statsig.anthropic.com",
                "sentry.io",
            ],
        ),
        (
            "codex",
            &["api.openai.com", "chatgpt.com", "auth.openai.com"],
        ),
        (
            "gemini",
            &[
                "generativelanguage.googleapis.com",
                "cloudcode-pa.googleapis.com",
                "oauth2.googleapis.com",
            ],
        ),
        (
            "aider",
            &["api.openai.com", "api.anthropic.com", "openrouter.ai"],
        ),
    ];
    for (name, hosts) in expected {
        let mut p = policy::load(&[name.into()], &vars).expect(name);
        let resolved = with_addresses(&mut p.net.connect);
        for host in hosts {
            let (_, port, ip) = resolved
                .iter()
                .find(|(h, _, _)| h == host)
                .unwrap_or_else(|| panic!("{name}: {host} is in net.connect"));
            assert_eq!(
                connect_verdict(&p, *ip, *port),
                Action::Allow,
                "{name}: {host}"
            );
            // Its name may be looked up under the profile, not under plain agent.
            assert_eq!(
                lookup_verdict(&p, host),
                Action::Allow,
                "{name}: lookup {host}"
            );
            assert_eq!(
                lookup_verdict(&agent, host),
                Action::Deny,
                "agent: lookup {host}"
            );
            assert_eq!(
                connect_verdict(&p, *ip, 80),
                Action::Deny,
                "{name}: {host}:80"
            );
            assert!(
                !agent_hosts.contains(&host.to_string()),
                "{host} is {name}'s own"
            );
            // The same address under plain agent (where no host resolves to it): refused.
            let mut a = agent.clone();
            with_addresses(&mut a.net.connect);
            let a_ip = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 9));
            assert_eq!(
                connect_verdict(&a, a_ip, *port),
                Action::Deny,
                "agent: {host}"
            );
        }
        // Everything agent allows still holds.
        assert!(p.net.connect.len() > agent.net.connect.len(), "{name}");
        assert!(p.rules.len() >= agent.rules.len(), "{name}");
    }
}
