//! `guard log`: read one run's audit log, query across runs, follow a live run, or verify the
//! hash chain of a log. Which runs: RUN (an id, a prefix of one, or a log file), every run with
//! `--all` (or, without `--follow`, when only `--since`/`--until` narrow the search), else the
//! newest run that started. Printing only; reading, querying and verifying live in `audit`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::audit::{self, chain, Query, Timestamp};
use crate::journal;

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The run id or a prefix of it (default: the newest run that started), or a path to an
    /// audit log file.
    pub run: Option<String>,
    /// Every recorded run, oldest first.
    #[arg(long, conflicts_with_all = ["run", "follow"])]
    pub all: bool,
    /// Only refused calls (verdict deny or kill).
    #[arg(long)]
    pub denied: bool,
    /// Only events at or after TIME: RFC 3339 (2026-05-01T08:00:00Z, any offset), a date
    /// (2026-05-01, UTC midnight) or a span back from now (30m, 2h, 7d, 1w). Without RUN, looks
    /// at every run.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only events before TIME (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Only decisions by this rule (fs.write-roots, net.connect, a profile rule id); repeatable.
    #[arg(long, value_name = "ID")]
    pub rule: Vec<String>,
    /// Only decisions with this verdict: allow, deny, risky, kill, error; repeatable.
    #[arg(long, value_name = "VERDICT", value_parser = ["allow", "deny", "risky", "kill", "error"])]
    pub verdict: Vec<String>,
    /// Only decisions on this system call (connect, unlinkat, openat, execve...); repeatable.
    #[arg(long, value_name = "NAME")]
    pub syscall: Vec<String>,
    /// Only decisions whose path (or rename/link target) matches GLOB; `*` stays within a
    /// directory, `**` crosses them; a relative GLOB matches at any depth; repeatable.
    #[arg(long, value_name = "GLOB")]
    pub path: Vec<String>,
    /// Print the JSON lines as written (one event per line, for jq).
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events until the run ends (waits for the log to appear).
    #[arg(long)]
    pub follow: bool,
    /// Check the log's hash chain instead of printing it; exit status 1 names the first line
    /// that does not hold.
    #[arg(long, conflicts_with = "follow")]
    pub verify: bool,
}

/// Exit status of `guard log --verify` when a chain does not hold.
const EXIT_VERIFY_FAILED: i32 = 1;

/// A log to read, and the run directory it belongs to (absent for a file given by path).
struct Source {
    path: PathBuf,
    run: Option<journal::RunDir>,
}

fn sources(args: &LogArgs) -> Result<Vec<Source>, CliError> {
    if let Some(r) = &args.run {
        let p = PathBuf::from(r);
        if p.is_file() {
            return Ok(vec![Source { path: p, run: None }]);
        }
    }
    // --follow reads one run; --since/--until without RUN look at every run otherwise.
    let across = args.all
        || (!args.follow && args.run.is_none() && (args.since.is_some() || args.until.is_some()));
    if across {
        let state = journal::state_dir()?;
        let mut runs = journal::list_runs(&state);
        runs.reverse();
        return Ok(runs
            .into_iter()
            .filter(|r| r.audit_log().is_file())
            .map(|r| Source {
                path: r.audit_log(),
                run: Some(r),
            })
            .collect());
    }
    let run = super::txn::find_run(args.run.as_deref())?;
    Ok(vec![Source {
        path: run.audit_log(),
        run: Some(run),
    }])
}

fn query(args: &LogArgs) -> Result<Query, CliError> {
    let now = Timestamp::now();
    let bound = |flag: &str, text: &Option<String>| -> Result<Option<Timestamp>, CliError> {
        text.as_deref()
            .map(|t| {
                Timestamp::parse_bound(t, now).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--{flag} {t}: not a time\nhint: RFC 3339 (2026-05-01T08:00:00Z), a date (2026-05-01) or a span back from now (30m, 2h, 7d)"
                    ))
                })
            })
            .transpose()
    };
    let paths = if args.path.is_empty() {
        None
    } else {
        Some(
            audit::PathGlobs::new(&args.path)
                .map_err(|e| CliError::Usage(format!("--path: {e}")))?,
        )
    };
    Ok(Query {
        denied_only: args.denied,
        since: bound("since", &args.since)?,
        until: bound("until", &args.until)?,
        verdicts: args.verdict.clone(),
        rules: args.rule.clone(),
        syscalls: args.syscall.clone(),
        paths,
    })
}

pub fn run(args: LogArgs) -> Result<i32, CliError> {
    let sources = sources(&args)?;
    if args.verify {
        return verify(&sources);
    }
    let query = query(&args)?;
    let mut out = std::io::stdout().lock();
    if args.follow {
        let Some(source) = sources.first() else {
            return Err(CliError::Usage("no run to follow".into()));
        };
        if !source.path.exists() {
            eprintln!(
                "guard: waiting for {} to appear",
                audit::escape_for_terminal(source.path.as_os_str().as_encoded_bytes())
            );
        }
        // A run that failed to start will never write its log.
        let run = source.run.clone();
        let stop = move || {
            run.as_ref()
                .is_some_and(|r| r.read_meta().is_ok_and(|m| m.state == "failed"))
        };
        if args.json {
            audit::follow_with(&source.path, &query, &stop, &mut |l| {
                writeln!(out, "{}", l.text)?;
                out.flush()
            })?;
        } else {
            audit::follow(&source.path, &query, &mut out, &stop)?;
        }
        return Ok(0);
    }
    let several = sources.len() > 1;
    for source in &sources {
        let mut header = several && !args.json;
        for line in audit::read_lines(&source.path)? {
            if !query.matches(&line.value) {
                continue;
            }
            if std::mem::take(&mut header) {
                let id = source.run.as_ref().map_or("?", |r| r.id.as_str());
                writeln!(out, "== run {id}").map_err(CliError::Stdout)?;
            }
            if args.json {
                writeln!(out, "{}", line.text)
            } else {
                writeln!(out, "{}", audit::format_human(&line.value))
            }
            .map_err(CliError::Stdout)?;
        }
    }
    Ok(0)
}

/// `guard log --verify`: every chain in every selected log holds, reaches `run-end`, and ends
/// where the run's summary says it does.
fn verify(sources: &[Source]) -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    let mut failed = false;
    for source in sources {
        let shown = audit::escape_for_terminal(source.path.as_os_str().as_encoded_bytes());
        let lines = match audit::read_lines(&source.path) {
            Ok(lines) => lines,
            Err(audit::AuditError::Parse { line, .. }) => {
                failed = true;
                eprintln!("guard: {shown}: line {line}: not a JSON event (changed or cut)");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let verdict = match chain::verify(&lines) {
            Err(broken) => Err(format!("{shown}: {broken}")),
            Ok(runs) if runs.is_empty() => Err(format!("{shown}: no events")),
            Ok(runs) => {
                let summary_head = source
                    .run
                    .as_ref()
                    .and_then(|r| audit::Summary::read(&r.summary()).ok())
                    .and_then(|s| s.audit_chain_head);
                let running = source
                    .run
                    .as_ref()
                    .is_some_and(|r| r.read_meta().is_ok_and(|m| m.state == "running"));
                let last = lines.last().map_or(0, |l| l.number);
                let mut problems = Vec::new();
                for r in &runs {
                    if summary_head.as_ref().is_some_and(|h| *h != r.head) {
                        problems.push(format!(
                            "{shown}: run {}: the log ends at line {last}, but the run's summary.json records another last line: lines were removed from the end",
                            r.run
                        ));
                    } else if !r.ended && !running {
                        problems.push(format!(
                            "{shown}: run {}: the chain holds but ends without run-end at line {last}: lines were removed from the end, or guard was killed",
                            r.run
                        ));
                    }
                }
                if problems.is_empty() {
                    Ok(runs
                        .iter()
                        .map(|r| {
                            format!(
                                "{shown}: run {}: ok, {} lines chained{} (head {})",
                                r.run,
                                r.lines,
                                if r.ended {
                                    " to run-end"
                                } else {
                                    " so far (running)"
                                },
                                r.head
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n"))
                } else {
                    Err(problems.join("\n"))
                }
            }
        };
        match verdict {
            Ok(text) => writeln!(out, "{text}").map_err(CliError::Stdout)?,
            Err(text) => {
                failed = true;
                eprintln!("guard: {text}");
            }
        }
    }
    Ok(if failed { EXIT_VERIFY_FAILED } else { 0 })
}
