//! Progress for long work (rollbacks of thousands of entries) on a terminal: one line on
//! stderr, rewritten at most ten times a second; nothing when stderr is not a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A progress callback `(done, total)` labelled `what`.
pub fn reporter(what: &'static str) -> impl FnMut(u64, u64) {
    let tty = std::io::stderr().is_terminal();
    let mut last: Option<Instant> = None;
    move |done, total| {
        if !tty || total < 1000 {
            return;
        }
        let now = Instant::now();
        let finished = done >= total;
        if !finished && last.is_some_and(|t| now.duration_since(t) < Duration::from_millis(100)) {
            return;
        }
        last = Some(now);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\rguard: {what}: {done}/{total}");
        if finished {
            let _ = writeln!(err);
        }
    }
}
