//! guard's entry point: parse the command line, run, map errors to exit status 125. A closed
//! stdout (`guard log | head -1`) ends guard quietly with status 0.

// guard starts at its own `main`, not through Rust's runtime start, which cost every start of
// guard some 45 µs for a stack-overflow message (see `guard::sys::process::runtime_start`).
#![no_main]
#![deny(unsafe_code)]

use std::error::Error;

/// A bump arena in front of `malloc` (see `guard::sys::alloc`).
#[global_allocator]
static ALLOCATOR: guard::sys::alloc::Arena<{ guard::sys::alloc::SIZE }> =
    guard::sys::alloc::Arena::new();

/// The C library calls this after the `.init_array` functions (which note what guard
/// inherited before anything changes it). A panic is reported by the panic hook and ends guard
/// with status 101, as from Rust's own start.
// The C library finds the entry point by its unmangled name; nothing else here is unsafe.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    guard::sys::process::runtime_start();
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    std::process::exit(code)
}

fn run() -> i32 {
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
    code
}
