//! guard's entry point: parse the command line, run, map errors to exit status 125. A closed
//! stdout (`guard log | head -1`) ends guard quietly with status 0.

use std::error::Error;

fn main() {
    // Before any thread starts: every thread of guard's then blocks the signal a broken lease
    // sends (see the function). Failing it costs one system call per kept deletion, no more.
    let _ = guard::sys::fs::block_lease_signal();
    let cli = match guard::cli::Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not errors; usage errors are guard's own (125).
            std::process::exit(if e.use_stderr() {
                guard::launch::EXIT_GUARD_ERROR
            } else {
                0
            });
        }
    };
    guard::cli::init_diagnostics(&cli.log_level);
    let code = match guard::cli::run(cli) {
        Ok(code) => code,
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            eprintln!("guard: error: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            e.exit_code()
        }
    };
    std::process::exit(code);
}
