//! Embeds the commit guard is built from in `guard --version`: `GUARD_COMMIT` from the
//! environment if set (release builds, packagers), else `git describe` when building from a
//! git checkout, else nothing (a tarball build shows the crate version alone). Cargo reruns
//! this only when HEAD or the branch it points to moves, so ordinary builds do not pay for it.
//!
//! It converts the built-in profiles (`profiles/*.toml`) to JSON for the start to read (see
//! [`builtin_profiles`]), and on glibc targets it links the unwinder into the `guard` binary from libgcc_eh.a
//! instead of loading libgcc_s.so.1 at every start (see [`static_unwinder`]) and packs its
//! relative relocations where the linker and the C library can (see [`packed_relocations`]).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=GUARD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let version = env!("CARGO_PKG_VERSION");
    let commit = match std::env::var("GUARD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_owned()),
        _ => {
            // Only a checkout of guard itself counts, not a repository guard's sources sit in.
            let top = git(&["rev-parse", "--show-toplevel"]).map(PathBuf::from);
            let here = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
            if top.is_some() && top == here {
                for name in ["HEAD", "packed-refs"] {
                    if let Some(p) = git(&["rev-parse", "--git-path", name]) {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
                        println!("cargo:rerun-if-changed={p}");
                    }
                }
                git(&["describe", "--always", "--tags", "--abbrev=12"])
            } else {
                None
            }
        }
    };
    let long = match commit {
        Some(c) => format!("{version} ({c})"),
        None => version.to_owned(),
    };
    println!("cargo:rustc-env=GUARD_VERSION={long}");
    builtin_profiles();
    static_unwinder();
    packed_relocations();
}

/// Every `guard exec` parses its built-in profiles (`agent` and `base`: 14 KB, most of it
/// comments for people). Parsed here once instead, and written as JSON to `OUT_DIR/profiles/`
/// for `policy::builtin` to embed beside the TOML text (which `guard profile show` prints):
/// the same values, read by the same serde definitions. A built-in profile that is not valid
/// TOML fails the build here, naming the file.
fn builtin_profiles() {
    let src = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("profiles");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("profiles");
    println!("cargo:rerun-if-changed={}", src.display());
    std::fs::create_dir_all(&out).expect("create OUT_DIR/profiles");
    let entries = std::fs::read_dir(&src).expect("read profiles/");
    let mut argv = std::collections::BTreeSet::new();
    let mut profiles = std::collections::BTreeMap::new();
    for entry in entries {
        let path = entry.expect("list profiles/").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).expect("read a built-in profile");
        let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| {
            panic!("built-in profile {} is not valid TOML: {e}", path.display())
        });
        argv.extend(argv_elements(&value));
        let json = serde_json::to_string(&value).expect("a TOML value has a JSON form");
        let name = path.file_stem().expect("a file name");
        std::fs::write(out.join(name).with_extension("json"), json)
            .expect("write OUT_DIR/profiles");
        let extends = value
            .get("extends")
            .and_then(toml::Value::as_str)
            .map(str::to_owned);
        profiles.insert(name.to_string_lossy().into_owned(), (text, extends));
    }
    std::fs::write(out.join("chain_digests.rs"), chain_digests(&profiles))
        .expect("write OUT_DIR/profiles/chain_digests.rs");
    let list: String = argv.iter().map(|e| format!("    {e:?},\n")).collect();
    std::fs::write(out.join("argv_elements.rs"), format!("&[\n{list}]\n"))
        .expect("write OUT_DIR/profiles/argv_elements.rs");
}

#[path = "src/policy/digest.rs"]
mod digest;

/// The digest of each built-in profile's chain run on its own (`policy::chain::digest`):
/// the profile and those it extends, base first, keyed `builtin:NAME`. A run on a built-in
/// profile then hashes nothing at its start.
fn chain_digests(
    profiles: &std::collections::BTreeMap<String, (String, Option<String>)>,
) -> String {
    let mut list = String::from("&[\n");
    for name in profiles.keys() {
        let mut chain = vec![name.as_str()];
        while let Some(parent) = profiles[*chain.last().expect("one")].1.as_deref() {
            assert!(
                profiles.contains_key(parent) && !chain.contains(&parent),
                "built-in profile {name}: extends {parent}, which is no built-in or makes a cycle"
            );
            chain.push(parent);
        }
        let keys: Vec<String> = chain.iter().rev().map(|n| format!("builtin:{n}")).collect();
        let units = keys
            .iter()
            .zip(chain.iter().rev())
            .map(|(key, n)| (key.as_str(), profiles[*n].0.as_str()));
        let digest = digest::of([name.as_str()], units);
        list.push_str(&format!("    ({name:?}, {digest:?}),\n"));
    }
    list.push_str("]\n");
    list
}

/// Every element of the built-in rules' `argv` patterns, for `policy::argv` (in byte order):
/// `ArgvPattern::check` parses a glob to refuse a bad one, and the built-in profiles' own are
/// parsed once by a test instead of at every start (the glob parser's first use, some 25 µs of
/// each start here).
fn argv_elements(profile: &toml::Value) -> Vec<String> {
    let rules = profile.get("rule").and_then(toml::Value::as_array);
    rules
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("argv")?.as_array())
        .flatten()
        .filter_map(toml::Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// Rust's standard library takes its unwinder (panics, backtraces) from libgcc_s.so.1 on glibc
/// targets. Loading it costs every start of guard a shared object, and its constructor probes
/// the CPU with `cpuid`, which traps to the hypervisor on a VM: 170 µs per start of
/// `guard --version` on this project's machine (1.31 -> 1.14 ms, hyperfine medians). The same
/// unwinder, built to be linked statically, is libgcc_eh.a (what `crt-static` builds use): the
/// whole archive goes into the binary, so libgcc_s is no longer needed and `--as-needed`
/// leaves it out. Skipped, with the shared library used as before, where the C compiler
/// cannot name the archive (another toolchain) or the target is not glibc.
fn static_unwinder() {
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    println!("cargo:rustc-check-cfg=cfg(guard_static_unwinder)");
    if !glibc_target() || features.split(',').any(|f| f == "crt-static") {
        return;
    }
    let Ok(out) = Command::new(c_compiler())
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // A compiler that does not know the file prints its bare name back.
    if !out.status.success() || !path.is_absolute() || !path.is_file() {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,--whole-archive");
    println!("cargo:rustc-link-arg-bins={}", path.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-whole-archive");
    // For the test that checks it (tests/it/process.rs).
    println!("cargo:rustc-cfg=guard_static_unwinder");
}

/// The dynamic loader applies guard's relative relocations at every start: some 5,100 of them,
/// read from a 126 KB table (`.rela.dyn`, 24 bytes each). Packed (`-z pack-relative-relocs`,
/// DT_RELR: a bitmap of the words to adjust) the table is under 2 KB: `guard --version` went
/// from 1.447 / 1.488 / 1.483 ms to 1.422 / 1.378 / 1.341 ms (`perf stat -r 300`, the two
/// builds alternated three times), 11 page faults fewer.
///
/// A binary with packed relocations runs only on glibc 2.36 or later (it requires
/// `GLIBC_ABI_DT_RELR`), and only binutils 2.38, lld 15 or mold link it. So it is used only when
/// building for the machine the build runs on (not cross-compiling) and a test program linked
/// the same way by the C compiler runs here; otherwise, and with `GUARD_NO_PACKED_RELOCS` set
/// (a linker of one's own choosing that does not know the option), the relocations stay as
/// the linker lays them out by default.
fn packed_relocations() {
    println!("cargo:rerun-if-env-changed=GUARD_NO_PACKED_RELOCS");
    println!("cargo:rustc-check-cfg=cfg(guard_packed_relocs)");
    if !glibc_target()
        || std::env::var("HOST").ok() != std::env::var("TARGET").ok()
        || std::env::var_os("GUARD_NO_PACKED_RELOCS").is_some()
    {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let src = out.join("relr-probe.c");
    let bin = out.join("relr-probe");
    // Pointers in initialized data: relative relocations for the linker to pack.
    let program = "static int x;\nint *p[] = {&x, &x, &x, &x};\n\
                   int main(void) { return *p[3]; }\n";
    if std::fs::write(&src, program).is_err() {
        return;
    }
    let linked = Command::new(c_compiler())
        .args(["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success());
    let runs = linked && Command::new(&bin).status().is_ok_and(|s| s.success());
    if !runs {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    // For the test that checks it (tests/it/process.rs).
    println!("cargo:rustc-cfg=guard_packed_relocs");
}

/// Whether the target is Linux with glibc, where the link options above apply.
fn glibc_target() -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu"
}

/// The C compiler that links the binaries: `$CC`, else `cc`.
fn c_compiler() -> String {
    println!("cargo:rerun-if-env-changed=CC");
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}
