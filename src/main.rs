//! guard's entry point: parse the command line, run, map errors to exit status 125.

use std::error::Error;

use clap::Parser;

fn main() {
    let cli = match guard::cli::Cli::try_parse() {
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
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
    let code = match guard::cli::run(cli) {
        Ok(code) => code,
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
