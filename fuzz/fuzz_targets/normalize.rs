//! `guard::policy::normalize` on arbitrary bytes (not necessarily UTF-8).
//!
//! Properties: never panics; idempotent; never empty; an absolute input gives an absolute
//! result with no `.` or `..` component; a relative result keeps `..` only as a leading run and
//! never has `.` unless it is exactly `.`; no empty component (`//`) and no trailing slash
//! except for `/`; and the result equals an independent byte-level model of the documented
//! rules (drop `.` and empty components, `..` pops a name, `/..` stays `/`, a relative path
//! keeps the `..` it cannot resolve).
#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use guard::policy::normalize;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = Path::new(OsStr::from_bytes(data));
    let once = normalize(input);
    let twice = normalize(&once);
    assert_eq!(once, twice, "not idempotent for {input:?}");

    let bytes = once.as_os_str().as_bytes();
    assert!(!bytes.is_empty(), "empty result for {input:?}");
    assert_eq!(
        once.is_absolute(),
        input.is_absolute(),
        "absoluteness changed for {input:?} -> {once:?}"
    );
    if bytes != b"/" {
        assert!(!bytes.ends_with(b"/"), "trailing slash in {once:?}");
    }
    assert!(
        !bytes.windows(2).any(|w| w == b"//"),
        "empty component in {once:?}"
    );

    let mut seen_name = false;
    for comp in once.components() {
        match comp {
            Component::CurDir => assert_eq!(bytes, b".", "`.` left in {once:?}"),
            Component::ParentDir => {
                assert!(!once.is_absolute(), "`..` left in absolute {once:?}");
                assert!(!seen_name, "`..` after a name in {once:?}");
            }
            Component::Normal(_) => seen_name = true,
            Component::RootDir | Component::Prefix(_) => {}
        }
    }

    assert_eq!(
        bytes,
        model(data).as_slice(),
        "model disagrees for {input:?}"
    );
});

/// The documented rules, written over bytes without `std::path`.
fn model(path: &[u8]) -> Vec<u8> {
    let absolute = path.first() == Some(&b'/');
    let mut stack: Vec<&[u8]> = Vec::new();
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => match stack.last() {
                Some(&top) if top != b".." => {
                    stack.pop();
                }
                _ if absolute => {}
                _ => stack.push(part),
            },
            name => stack.push(name),
        }
    }
    let mut out = Vec::new();
    if absolute {
        out.push(b'/');
    }
    out.extend_from_slice(&stack.join(&b'/'));
    if out.is_empty() {
        out.push(b'.');
    }
    out
}
