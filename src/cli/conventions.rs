//! What command-line users expect of any tool, in one place: diagnostics on stderr coloured
//! only for a terminal and never under `NO_COLOR`, shell completions and man pages generated
//! from the same clap definitions as the parser (`guard completions`, `guard man`).

use std::io::{IsTerminal, Write};
use std::path::Path;

use clap::CommandFactory;

use super::{Cli, CliError};

/// Whether diagnostics on stderr may use colour: never when `NO_COLOR` is set (to anything but
/// the empty string, as no-color.org says), always when `CLICOLOR_FORCE` is, otherwise only on
/// a terminal that is not `TERM=dumb`. clap's own help and errors follow the same variables.
pub fn stderr_color() -> bool {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0");
    if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if set("CLICOLOR_FORCE") {
        return true;
    }
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Sets up `tracing` diagnostics on stderr at `level` (`warn` when the level does not parse).
///
/// A plain level, not `tracing-subscriber`'s per-module directives: those pull in the
/// compilation of regular expressions into full DFAs, which every glob set of a profile then
/// paid for at each start.
pub fn init_diagnostics(level: &str) {
    let level = level
        .trim()
        .parse::<tracing_subscriber::filter::LevelFilter>()
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(stderr_color())
        .with_target(false)
        .without_time()
        .init();
}

/// `guard completions SHELL`.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, CliError> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "guard", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .map_err(CliError::Stdout)?;
    Ok(0)
}

/// `guard man [-o DIR]`: guard.1 on stdout, or every page into DIR.
pub fn man(out_dir: Option<&Path>) -> Result<i32, CliError> {
    let mut cmd = Cli::command();
    cmd.build();
    let Some(dir) = out_dir else {
        let page = render(&cmd)?;
        std::io::stdout()
            .lock()
            .write_all(&page)
            .map_err(CliError::Stdout)?;
        return Ok(0);
    };
    let write = |name: String, page: Vec<u8>| -> Result<(), CliError> {
        let path = dir.join(name);
        std::fs::write(&path, page).map_err(|source| CliError::Write { path, source })
    };
    std::fs::create_dir_all(dir).map_err(|source| CliError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    write("guard.1".into(), render(&cmd)?)?;
    let mut stack: Vec<(String, clap::Command)> = cmd
        .get_subcommands()
        .map(|s| (format!("guard-{}", s.get_name()), s.clone()))
        .collect();
    while let Some((name, sub)) = stack.pop() {
        if sub.get_name() == "help" {
            continue;
        }
        for nested in sub.get_subcommands() {
            stack.push((format!("{name}-{}", nested.get_name()), nested.clone()));
        }
        // Each page names the guard it documents, with its version (and a VERSION section).
        let page = render(&sub.version(env!("GUARD_VERSION")))?;
        write(format!("{name}.1"), page)?;
    }
    Ok(0)
}

fn render(cmd: &clap::Command) -> Result<Vec<u8>, CliError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .source(format!("guard {}", env!("GUARD_VERSION")))
        .render(&mut page)
        .map_err(CliError::Stdout)?;
    Ok(page)
}
