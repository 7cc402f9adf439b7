//! A program that embeds guard: it runs one command under a built-in profile in a temporary
//! workspace, then prints the outcome and every call the sandbox refused, read back from the
//! run's audit log.
//!
//! ```text
//! cargo run --example embed                       # a demonstration command
//! cargo run --example embed -- strict -- CMD ...  # your own command under a profile
//! cargo run --example embed -- --cwd DIR strict -- CMD ...  # started in DIR, not the workspace
//! ```
//!
//! Nothing outside the temporary directories is written: the run's records go to a temporary
//! state directory as well.

use std::error::Error;
use std::ffi::OsString;

use guard::audit::{self, Event, Verdict};

/// Writes a file in the workspace (allowed), then tries to create a file in /etc and a
/// directory in /usr (both outside the write roots: refused), then carries on.
const DEMO: &str = "echo hello > greeting.txt; \
                    touch /etc/guard-embed-example; \
                    mkdir /usr/guard-embed-example; \
                    echo carried on";

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("embed: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            std::process::exit(125);
        }
    }
}

/// Run the command; returns the exit status (the temporary directories are gone by then).
fn run() -> Result<i32, Box<dyn Error>> {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let cwd = match args.first() {
        Some(flag) if flag == "--cwd" && args.len() > 1 => {
            let dir = args.remove(1);
            args.remove(0);
            Some(std::path::PathBuf::from(dir))
        }
        _ => None,
    };
    let (profile, command) = match args.iter().position(|a| a == "--") {
        Some(i) => {
            let command = args.split_off(i + 1);
            let profile = args.first().and_then(|p| p.to_str()).unwrap_or("agent");
            (profile.to_string(), command)
        }
        None => (
            "agent".to_string(),
            ["sh", "-c", DEMO].iter().map(OsString::from).collect(),
        ),
    };

    let workspace = tempfile::tempdir()?;
    let state = tempfile::tempdir()?;
    let running = guard::Run::builder(profile.as_str())
        .workspace(workspace.path())
        .current_dir(cwd.as_deref().unwrap_or(workspace.path()))
        .state_dir(state.path())
        .notices(|notice| eprintln!("embed: {notice}"))
        .spawn(&command)?;
    println!("run {} started: pid {}", running.run_id(), running.pid());
    let outcome = running.wait()?;
    // A run leaves no child of this program behind: the sandbox's init is reaped by `wait`.
    let left = match nix::sys::wait::waitpid(None, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
        Err(nix::errno::Errno::ECHILD) => "none".to_string(),
        other => format!("{other:?}"),
    };
    println!("children left: {left}");

    println!(
        "outcome: {:?}, status {}, exit code {}",
        outcome.kind,
        outcome.status,
        outcome.exit_code()
    );
    let counts = outcome.counts();
    println!(
        "decisions: {} allowed, {} denied, {} risky, {} killed",
        counts.allow, counts.deny, counts.risky, counts.kill
    );
    for entry in std::fs::read_dir(workspace.path())? {
        println!("workspace: {}", entry?.file_name().to_string_lossy());
    }
    let log = std::fs::read_to_string(&outcome.audit_log)?;
    for line in log.lines() {
        let Ok(record) = audit::decode(line) else {
            continue;
        };
        if let Event::Decision(d) = record.event {
            if matches!(d.verdict, Verdict::Deny | Verdict::Kill) {
                let target = d
                    .path
                    .as_ref()
                    .map(|p| p.as_os_str().to_string_lossy().into_owned())
                    .or(d.addr.clone())
                    .unwrap_or_default();
                println!(
                    "refused: {} {} {} ({}, rule {})",
                    d.syscall,
                    d.op,
                    target,
                    d.errno.as_deref().unwrap_or("-"),
                    d.rule
                );
            }
        }
    }
    Ok(outcome.exit_code())
}
