//! Settings found without a flag: the workspace's `.guard.toml` (once trusted) and the user's
//! `$XDG_CONFIG_HOME/guard/config.toml` are layered into the run, `guard profile show
//! --resolved` names them, and the command can change neither (rule `fs.guard-config`), nor
//! create a `.guard.toml` anywhere.

use crate::util::{probe_result, Workspace};

#[test]
fn a_trusted_guard_toml_is_picked_up_and_a_write_to_it_from_inside_is_refused() {
    let w = Workspace::new();
    let extra = w.root.join("extra");
    std::fs::create_dir_all(&extra).expect("mkdir");
    let text = format!(
        "# this workspace's settings\n[fs]\nwrite = [\"{}\"]\n",
        extra.display()
    );
    let config = w.write(".guard.toml", &text);
    let target = extra.join("made-by-the-command");
    let write = |w: &Workspace| {
        w.exec(&["agent"]).run(&[
            w.probe(),
            "write".into(),
            target.display().to_string(),
            "x".into(),
        ])
    };

    // Not trusted yet: not used, and guard says so.
    let out = write(&w);
    out.expect_code(0);
    assert!(probe_result(&out).starts_with("errno"), "{}", out.stdout());
    assert!(out.stderr().contains("not trusted"), "{}", out.stderr());
    assert!(!target.exists());

    let trust = w.guard().args(["profile", "trust"]).output();
    trust.expect_code(0);
    assert!(trust.stdout().starts_with("trusted "), "{}", trust.stdout());
    let shown = w.guard().args(["profile", "show", "--resolved"]).output();
    shown.expect_code(0);
    assert!(
        shown.stdout().contains(&config.display().to_string()),
        "show --resolved names the file: {}",
        shown.stdout()
    );
    assert!(
        shown.stdout().contains(&extra.display().to_string()),
        "{}",
        shown.stdout()
    );

    let out = write(&w);
    assert_eq!(probe_result(&out), "ok", "{}", out.stderr());
    assert!(target.exists(), "the file's write root is in effect");

    // From inside: no write, rename, delete or replacement of it, and no new one anywhere.
    let p = w.probe();
    let c = config.display().to_string();
    let ws = w.ws.display().to_string();
    std::fs::create_dir_all(w.ws.join("sub")).expect("mkdir");
    for (what, argv) in [
        (
            "write",
            vec![
                p.clone(),
                "write".into(),
                c.clone(),
                "[fs]\nwrite = [\"/\"]\n".into(),
            ],
        ),
        ("truncate", vec![p.clone(), "truncate".into(), c.clone()]),
        ("unlink", vec![p.clone(), "unlink".into(), c.clone()]),
        (
            "rename away",
            vec![p.clone(), "rename".into(), c.clone(), format!("{ws}/moved")],
        ),
        ("chmod", vec![p.clone(), "chmod".into(), c.clone()]),
        (
            "create elsewhere",
            vec![
                p.clone(),
                "write".into(),
                format!("{ws}/sub/.guard.toml"),
                "x".into(),
            ],
        ),
    ] {
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(
            probe_result(&out),
            "errno 1 EPERM",
            "{what}: {}",
            out.stderr()
        );
        let d = w
            .decisions()
            .into_iter()
            .find(|d| d["verdict"] == "deny")
            .unwrap_or_else(|| panic!("{what}: a denial is logged"));
        assert_eq!(d["rule"], "fs.guard-config", "{what}: {d}");
        assert!(
            out.stderr()
                .contains("guard's own configuration (fs.guard-config)"),
            "{what}: explained: {}",
            out.stderr()
        );
    }
    std::fs::write(
        w.ws.join("other.toml"),
        text.replace("[fs]", "[fs] # other"),
    )
    .expect("write");
    let out = w.exec(&["agent"]).run(&[
        p.clone(),
        "rename".into(),
        format!("{ws}/other.toml"),
        c.clone(),
    ]);
    assert_eq!(
        probe_result(&out),
        "errno 1 EPERM",
        "renamed over it: {}",
        out.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("read"),
        text,
        "byte-identical"
    );
    assert!(!w.ws.join("sub/.guard.toml").exists());
    // Still trusted: nothing changed it.
    let out = write(&w);
    assert!(!out.stderr().contains("not trusted"), "{}", out.stderr());
}

#[test]
fn the_user_config_layers_under_p_and_its_directory_is_out_of_reach() {
    let w = Workspace::new();
    let xdg = w.root.join("xdg");
    let dir = xdg.join("guard");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let extra = w.root.join("user-extra");
    std::fs::create_dir_all(&extra).expect("mkdir");
    // The user's file adds a write root and narrows nothing; with -p ci, ci's scalars win.
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "[fs]\nwrite = [\"{}\"]\n[transaction]\non-failure = \"rollback\"\n",
            extra.display()
        ),
    )
    .expect("write");
    let shown = w
        .guard()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["profile", "show", "ci", "--resolved"])
        .output();
    shown.expect_code(0);
    let text = shown.stdout();
    assert!(
        text.contains(&dir.join("config.toml").display().to_string()),
        "{text}"
    );
    assert!(text.contains(&extra.display().to_string()), "{text}");
    assert!(
        text.contains("on-failure = \"keep\""),
        "-p wins over the file: {text}"
    );
    let shown = w
        .guard()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["profile", "show", "--resolved"])
        .output();
    assert!(
        shown.stdout().contains("on-failure = \"rollback\""),
        "without -p the file refines agent: {}",
        shown.stdout()
    );
    assert!(
        shown.stdout().contains("name = \"agent\""),
        "{}",
        shown.stdout()
    );

    // A layer that makes the config directory writable still cannot touch guard's own files.
    let open = w.profile_file("open", &format!("[fs]\nwrite = [\"{}\"]\n", xdg.display()));
    let out = w
        .exec(&["agent", &open])
        .env("XDG_CONFIG_HOME", &xdg)
        .run(&[
            w.probe(),
            "write".into(),
            dir.join("config.toml").display().to_string(),
            "x".into(),
        ]);
    assert_eq!(probe_result(&out), "errno 1 EPERM", "{}", out.stderr());
    let out = w
        .exec(&["agent", &open])
        .env("XDG_CONFIG_HOME", &xdg)
        .run(&[
            w.probe(),
            "rename".into(),
            dir.display().to_string(),
            xdg.join("moved").display().to_string(),
        ]);
    assert_eq!(probe_result(&out), "errno 1 EPERM", "{}", out.stderr());
    assert!(dir.join("config.toml").is_file());
    // --no-config leaves it out.
    let shown = w
        .guard()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["profile", "show", "--resolved", "--no-config"])
        .output();
    assert!(
        !shown.stdout().contains(&extra.display().to_string()),
        "{}",
        shown.stdout()
    );
}
