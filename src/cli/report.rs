//! `guard report [RUN] [--format markdown|github|gitlab]`: a run's refusals for CI. `github`
//! prints one `::error` annotation per refused call, appends the Markdown summary to
//! `$GITHUB_STEP_SUMMARY` and the run's id, status and refusal count to `$GITHUB_OUTPUT` when
//! those are set (as on a GitHub Actions runner); `markdown` prints the summary; `gitlab`
//! prints a Code Quality report. The reading and formatting live in `audit::report`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::CliError;
use crate::audit::{self, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A Markdown summary with a table of refused calls.
    Markdown,
    /// GitHub Actions: annotations, job summary and step outputs.
    Github,
    /// A GitLab Code Quality report (JSON).
    Gitlab,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run id or a prefix of it (default: the newest run that started), or a path to an
    /// audit log file (such as one written with --audit-log).
    pub run: Option<String>,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: Format,
    /// List at most N refused calls (annotations, table rows).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max: usize,
}

fn append(var: &str, text: &str) -> Result<(), CliError> {
    let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let path = PathBuf::from(path);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)?;
        f.write_all(text.as_bytes())
    };
    write().map_err(|source| CliError::Write { path, source })
}

pub fn run(args: ReportArgs) -> Result<i32, CliError> {
    let path = match &args.run {
        Some(r) if Path::new(r).is_file() => PathBuf::from(r),
        run => super::txn::find_run(run.as_deref())?.audit_log(),
    };
    let events = audit::read_events(&path)?;
    let report = Report::from_events(&events);
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Markdown => write!(out, "{}", report.markdown(args.max)),
        Format::Gitlab => writeln!(out, "{}", report.gitlab_code_quality()),
        Format::Github => {
            let base = std::env::var("GITHUB_WORKSPACE").ok();
            append("GITHUB_STEP_SUMMARY", &(report.markdown(args.max) + "\n"))?;
            let status = report.status.map(|s| s.to_string()).unwrap_or_default();
            append(
                "GITHUB_OUTPUT",
                &format!(
                    "run-id={}\nstatus={status}\nrefused={}\n",
                    report.run,
                    report.refusals.len()
                ),
            )?;
            write!(
                out,
                "{}",
                report.github_annotations(base.as_deref(), args.max)
            )
        }
    }
    .map_err(CliError::Stdout)?;
    Ok(0)
}
