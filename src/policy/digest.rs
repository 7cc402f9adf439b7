//! The digest of a profile chain (`Policy::digest`). A file of its own because build.rs
//! includes it too: it computes the digest of each built-in profile's chain once, with this
//! same code, so that a run on a built-in profile hashes nothing (`policy::builtin`).

use sha2::{Digest, Sha256};

/// sha256 (lowercase hex) over the spec list and the chain's profiles in order, each as its
/// key (`builtin:NAME`, `file:PATH`) and its source text.
pub fn of<'a>(
    specs: impl IntoIterator<Item = &'a str>,
    units: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut hasher = Sha256::new();
    for spec in specs {
        hasher.update(b"spec\0");
        hasher.update(spec.as_bytes());
        hasher.update(b"\0");
    }
    for (key, text) in units {
        hasher.update(b"unit\0");
        hasher.update(key.as_bytes());
        hasher.update(b"\0");
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in hasher.finalize() {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}
