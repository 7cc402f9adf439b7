//! `guard diff [RUN] [--stat] [--patch] [--json]`: what a run changed in its workspace, as
//! [`History::diff`] and [`History::patch`] find it in the journal: the paths by kind, lines
//! added and removed per file, or a unified diff against the pre-images.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::txn::{line, show};
use super::CliError;
use crate::audit;
use crate::run::{Content, FilePatch, History, RunRecord};

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The run (default: the newest).
    pub run: Option<String>,
    /// Lines added and removed per file, with a total (binary files by size).
    #[arg(long)]
    pub stat: bool,
    /// A unified diff of each text file against its pre-image in the journal (binary files
    /// named); `patch -p1` in the workspace's state before the run redoes the run's edits.
    #[arg(long, short = 'p')]
    pub patch: bool,
    /// One JSON object: the changed paths by kind; with --stat or --patch, each file's counts
    /// and unified diff.
    #[arg(long)]
    pub json: bool,
}

/// `guard diff [RUN] [--stat] [--patch] [--json]`: what the run changed in its workspace, from
/// the journal.
pub fn run(args: DiffArgs) -> Result<i32, CliError> {
    let history = History::open()?;
    let run = history.find(args.run.as_deref())?;
    let d = history.diff(&run)?;
    let files = if args.stat || args.patch {
        history.patch(&run)?
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        return print_diff_json(&mut out, &run, &d, &files, &args);
    }
    if args.stat {
        print_stat(&mut out, &files, &d.metadata)?;
    }
    if args.patch {
        for f in &files {
            write!(out, "{}", f.unified()).map_err(CliError::Stdout)?;
        }
    }
    if args.stat || args.patch {
        return Ok(0);
    }
    let ws = run.workspace().map(show).unwrap_or_default();
    line(&mut out, format!("run {} in {ws}", run.id))?;
    for (mark, list) in [
        ("A", &d.added),
        ("M", &d.modified),
        ("D", &d.deleted),
        ("m", &d.metadata),
    ] {
        for p in list {
            line(&mut out, format!("{mark} {}", show(p)))?;
        }
    }
    let total = d.added.len() + d.modified.len() + d.deleted.len() + d.metadata.len();
    line(
        &mut out,
        format!(
            "{total} change(s): {} added, {} modified, {} deleted, {} metadata only",
            d.added.len(),
            d.modified.len(),
            d.deleted.len(),
            d.metadata.len()
        ),
    )?;
    if !d.excluded.is_empty() {
        line(
            &mut out,
            format!(
                "not journaled (transaction.exclude): {}",
                d.excluded.join(", ")
            ),
        )?;
    }
    Ok(0)
}

/// `--stat`, as git prints it: ` path | N +++--`, then the totals.
fn print_stat(
    out: &mut impl Write,
    files: &[FilePatch],
    metadata: &[PathBuf],
) -> Result<(), CliError> {
    const BAR: usize = 40;
    let width = files
        .iter()
        .map(|f| show(&f.path).chars().count())
        .chain(metadata.iter().map(|p| show(p).chars().count()))
        .max()
        .unwrap_or(0);
    let counts: Vec<Option<(usize, usize)>> = files.iter().map(FilePatch::counts).collect();
    let most = counts
        .iter()
        .flatten()
        .map(|(a, r)| a + r)
        .max()
        .unwrap_or(0);
    let (mut insertions, mut deletions) = (0, 0);
    for (f, c) in files.iter().zip(&counts) {
        let what = match (c, &f.old, &f.new) {
            (Some((a, r)), _, _) => {
                insertions += a;
                deletions += r;
                let (pa, pr) = if a + r > BAR {
                    let scale = |n: usize| (n * BAR).div_ceil(most.max(1));
                    (scale(*a), scale(*r))
                } else {
                    (*a, *r)
                };
                format!("{:>5} {}{}", a + r, "+".repeat(pa), "-".repeat(pr))
            }
            (None, old, new) => format!("Bin {} -> {} bytes", size(old), size(new)),
        };
        line(out, format!(" {:<width$} | {what}", show(&f.path)))?;
    }
    for p in metadata {
        line(out, format!(" {:<width$} | metadata only", show(p)))?;
    }
    line(
        out,
        format!(
            " {} file(s) changed, {insertions} insertion(s)(+), {deletions} deletion(s)(-)",
            files.len() + metadata.len()
        ),
    )
}

/// A side's size for `--stat` of a binary (or unknown) file.
fn size(c: &Content) -> String {
    match c {
        Content::Absent => "0".into(),
        Content::Text(t) => t.len().to_string(),
        Content::Binary(n) => n.to_string(),
        Content::Other(_) | Content::Unknown(_) => "?".into(),
    }
}

fn print_diff_json(
    out: &mut impl Write,
    run: &RunRecord,
    d: &crate::run::Diff,
    files: &[FilePatch],
    args: &DiffArgs,
) -> Result<i32, CliError> {
    use serde_json::{json, Value};
    let paths = |list: &[PathBuf]| -> Vec<Value> {
        list.iter()
            .map(|p| json!(audit::PathText::from(p.as_path())))
            .collect()
    };
    let mut v = json!({
        "run": run.id,
        "workspace": run.workspace().map(audit::PathText::from),
        "added": paths(&d.added),
        "modified": paths(&d.modified),
        "deleted": paths(&d.deleted),
        "metadata": paths(&d.metadata),
        "excluded": d.excluded,
    });
    if args.stat || args.patch {
        let list: Vec<Value> = files
            .iter()
            .map(|f| {
                let counts = f.counts();
                let mut o = json!({
                    "path": audit::PathText::from(f.path.as_path()),
                    "binary": counts.is_none(),
                    "insertions": counts.map(|c| c.0),
                    "deletions": counts.map(|c| c.1),
                });
                if args.patch {
                    o["patch"] = json!(f.unified());
                }
                o
            })
            .collect();
        v["files"] = Value::Array(list);
    }
    line(out, v)?;
    Ok(0)
}
