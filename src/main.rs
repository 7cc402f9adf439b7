//! guard's entry point: parse the command line, run, map errors to exit status 125.

use std::error::Error;

use clap::Parser;

fn main() {
    let cli = guard::cli::Cli::parse();
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
            guard::launch::EXIT_GUARD_ERROR
        }
    };
    std::process::exit(code);
}
