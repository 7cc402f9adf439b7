//! The hash chain that makes a local audit log tamper-evident. Every line carries, in `prev`,
//! the link to the line of the same run written before it: `sha256:` and the lowercase hex
//! SHA-256 of that line's exact bytes as written (the whole JSON object, without its newline).
//! A run's first line links to [`ANCHOR`]. [`verify`] walks a log and names the first line
//! whose link does not hold: a changed line breaks the link of the line after it, a removed or
//! moved line breaks the link where it was.
//!
//! What it proves, and what not: anyone who can write the file can also rewrite every link
//! after an edit, so the chain proves integrity only against a head kept elsewhere: the run's
//! `summary.json` (`audit_chain_head`) and the copy sent to a collector (see `otlp`).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::reader::LogLine;

/// What a run's first line carries in `prev`.
pub const ANCHOR: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The link to `line` (its exact text, without the newline).
pub fn link(line: &str) -> String {
    format!("sha256:{:x}", Sha256::digest(line.as_bytes()))
}

/// The chain of one run in a verified log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunChain {
    /// The run's id, as its lines' `run` field gives it.
    pub run: String,
    /// Lines of this run.
    pub lines: usize,
    /// The link to the run's last line.
    pub head: String,
    /// Whether the last line is the run's `run-end`.
    pub ended: bool,
}

/// The first line at which a chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct Broken {
    /// The 1-based line number in the file.
    pub line: usize,
    /// What does not hold there, for a human.
    pub why: String,
}

/// Per run: the head so far, the line it came from, and every earlier line's link.
struct State {
    head: String,
    head_line: usize,
    seen: HashMap<String, usize>,
    chain: RunChain,
}

/// Checks every run's chain in `lines` (a log may hold several runs, even interleaved).
/// Returns the runs in order of first appearance, or the first broken link.
///
/// # Errors
///
/// [`Broken`]: the first line at which a run's chain does not hold, and why.
pub fn verify(lines: &[LogLine]) -> Result<Vec<RunChain>, Broken> {
    let mut runs: Vec<String> = Vec::new();
    let mut states: HashMap<String, State> = HashMap::new();
    for l in lines {
        let broken = |why: String| Broken {
            line: l.number,
            why,
        };
        let run = l.value["run"].as_str().unwrap_or_default().to_owned();
        let Some(prev) = l.value["prev"].as_str() else {
            return Err(broken(
                "no `prev`: the line is not chained (written by a guard without the chain, or the field was removed)".into(),
            ));
        };
        let state = match states.get_mut(&run) {
            Some(state) => state,
            None => {
                if prev != ANCHOR {
                    return Err(broken(format!(
                        "the first line of run {run} in this file does not start its chain: the lines before it were removed, or it was changed"
                    )));
                }
                runs.push(run.clone());
                states.entry(run.clone()).or_insert(State {
                    head: ANCHOR.to_owned(),
                    head_line: 0,
                    seen: HashMap::new(),
                    chain: RunChain {
                        run: run.clone(),
                        lines: 0,
                        head: ANCHOR.to_owned(),
                        ended: false,
                    },
                })
            }
        };
        if prev != state.head {
            let why = match state.seen.get(prev) {
                Some(&earlier) => format!(
                    "follows line {earlier}, not line {}: lines were moved or removed",
                    state.head_line
                ),
                None if prev == ANCHOR => format!(
                    "starts run {run} again after line {}: lines were moved",
                    state.head_line
                ),
                None => format!(
                    "does not follow line {}: line {} was changed, or lines were removed or moved",
                    state.head_line, state.head_line
                ),
            };
            return Err(broken(why));
        }
        let this = link(&l.text);
        state.seen.insert(this.clone(), l.number);
        state.head = this.clone();
        state.head_line = l.number;
        state.chain.lines += 1;
        state.chain.head = this;
        state.chain.ended = l.value["type"] == "run-end";
    }
    Ok(runs
        .into_iter()
        .filter_map(|r| states.remove(&r).map(|s| s.chain))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::tests::{decision, run_end};
    use crate::audit::event::{encode_chained, Event, Verdict};
    use crate::audit::time::Timestamp;

    /// A chained log of `n` decisions and a run-end for `run`.
    fn log(run: &str, n: u64) -> Vec<String> {
        let mut prev = ANCHOR.to_owned();
        let mut out = Vec::new();
        let t = Timestamp::from_unix_micros(1_796_209_352_123_456);
        let events = (0..n)
            .map(|i| Event::Decision(decision(i, Verdict::Allow)))
            .chain([Event::RunEnd(run_end())]);
        for e in events {
            let line = encode_chained(&e, run, t, &prev);
            prev = link(&line);
            out.push(line);
        }
        out
    }

    fn lines(texts: &[String]) -> Vec<LogLine> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| LogLine {
                number: i + 1,
                text: t.clone(),
                value: serde_json::from_str(t).expect("json"),
            })
            .collect()
    }

    #[test]
    fn an_intact_log_verifies_with_its_head() {
        let texts = log("r1", 5);
        let runs = verify(&lines(&texts)).expect("intact");
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].lines, 6);
        assert!(runs[0].ended);
        assert_eq!(runs[0].head, link(&texts[5]));
    }

    #[test]
    fn interleaved_runs_each_keep_their_chain() {
        let (a, b) = (log("a", 3), log("b", 3));
        let mixed: Vec<String> = a
            .iter()
            .zip(&b)
            .flat_map(|(x, y)| [x.clone(), y.clone()])
            .collect();
        let runs = verify(&lines(&mixed)).expect("intact");
        assert_eq!(
            runs.iter().map(|r| r.run.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(runs.iter().all(|r| r.ended && r.lines == 4));
    }

    #[test]
    fn a_changed_line_breaks_the_next_link() {
        let mut texts = log("r1", 5);
        texts[2] = texts[2].replace("/ws/x", "/ws/y");
        let err = verify(&lines(&texts)).expect_err("changed");
        assert_eq!(err.line, 4);
        assert!(err.why.contains("line 3 was changed"), "{err}");
    }

    #[test]
    fn a_removed_line_breaks_where_it_was() {
        let mut texts = log("r1", 5);
        texts.remove(2);
        let err = verify(&lines(&texts)).expect_err("removed");
        assert_eq!(err.line, 3);
        let mut texts = log("r1", 5);
        texts.remove(0);
        assert_eq!(verify(&lines(&texts)).expect_err("first removed").line, 1);
    }

    #[test]
    fn moved_lines_are_named() {
        let mut texts = log("r1", 5);
        texts.swap(2, 3);
        let err = verify(&lines(&texts)).expect_err("swapped");
        assert_eq!(err.line, 3);
        let mut texts = log("r1", 5);
        let moved = texts.remove(1);
        texts.insert(4, moved);
        let err = verify(&lines(&texts)).expect_err("moved down");
        assert_eq!(err.line, 2);
    }

    #[test]
    fn an_unchained_line_is_reported() {
        let t = Timestamp::from_unix_micros(0);
        let line = crate::audit::event::encode_at(&Event::RunEnd(run_end()), "r", t);
        let err = verify(&lines(&[line])).expect_err("unchained");
        assert!(err.why.contains("not chained"), "{err}");
    }
}
