//! DNS messages, as much of them as guard needs to judge a query by the name it asks for
//! (RFC 1035, with RFC 6891's OPT record): a strict parser for queries ([`Query::parse`]), the
//! normalised query guard forwards in place of the caller's bytes ([`Query::to_wire`]), the
//! answer guard gives a refused query ([`Query::refused`]), and the addresses an answer carries
//! ([`Answer::parse`]), which become the addresses a host rule allows.
//!
//! Everything here is pure and bounded, never panics on any input (the `dns_message` fuzz
//! target checks it), and refuses what a stub resolver does not send: several questions,
//! records in the answer or authority sections, compression in a query, labels with bytes
//! other than letters, digits, `-` and `_`. What is refused is not forwarded, so nothing but
//! a question name guard judged (and its type and class) leaves in a query.

mod answer;
mod query;

pub use answer::{build as answer_for, Answer};
pub use query::Query;

/// Why a message is not one guard forwards.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    #[error("message shorter than its header")]
    Short,
    #[error("message truncated inside {0}")]
    Truncated(&'static str),
    #[error("not a standard query")]
    NotAQuery,
    #[error("{0} questions (a stub resolver asks one)")]
    Questions(u16),
    #[error("records where a query has none")]
    Records,
    #[error("a query name with compression")]
    Compressed,
    #[error("a label longer than 63 bytes")]
    LongLabel,
    #[error("a name longer than 255 bytes")]
    LongName,
    #[error("a label with bytes a host name does not have: {0}")]
    BadLabel(String),
    #[error("an additional record that is not EDNS")]
    NotEdns,
    #[error("bytes after the message")]
    Trailing,
    #[error("a compression loop")]
    Loop,
}

/// The DNS header's fixed size.
const HEADER: usize = 12;
/// The largest name on the wire (RFC 1035 2.3.4).
const NAME_MAX: usize = 255;
/// Record types guard reads in answers.
pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
const TYPE_OPT: u16 = 41;
/// Response codes guard sends.
pub const RCODE_SERVFAIL: u8 = 2;
pub const RCODE_REFUSED: u8 = 5;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Read the (possibly compressed) name at `at` in `msg`: its end in the message (after the
/// name's own bytes, not after a pointer's target) and its labels, joined by dots, lowercase.
/// Bounded: at most [`NAME_MAX`] bytes of labels and as many pointer hops as the message has
/// bytes before `at`.
fn read_name(msg: &[u8], at: usize, allow_pointers: bool) -> Result<(usize, String), DnsError> {
    let mut pos = at;
    let mut end = None;
    let mut name = String::new();
    let mut wire_len = 1usize;
    let mut hops = 0usize;
    loop {
        let len = *msg.get(pos).ok_or(DnsError::Truncated("a name"))? as usize;
        match len & 0xc0 {
            0x00 if len == 0 => {
                return Ok((end.unwrap_or(pos + 1), name));
            }
            0x00 => {
                let label = msg
                    .get(pos + 1..pos + 1 + len)
                    .ok_or(DnsError::Truncated("a label"))?;
                wire_len += len + 1;
                if wire_len > NAME_MAX {
                    return Err(DnsError::LongName);
                }
                if !label
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
                {
                    return Err(DnsError::BadLabel(escape(label)));
                }
                if !name.is_empty() {
                    name.push('.');
                }
                name.extend(label.iter().map(|b| char::from(b.to_ascii_lowercase())));
                pos += 1 + len;
            }
            0xc0 if allow_pointers => {
                let target =
                    (be16(msg, pos).ok_or(DnsError::Truncated("a pointer"))? & 0x3fff) as usize;
                end.get_or_insert(pos + 2);
                hops += 1;
                // A pointer must point backwards; more hops than bytes is a loop.
                if target >= pos || hops > msg.len() {
                    return Err(DnsError::Loop);
                }
                pos = target;
            }
            0xc0 => return Err(DnsError::Compressed),
            _ => return Err(DnsError::LongLabel),
        }
    }
}

/// `bytes` for a message: printable ASCII as is, everything else as `\xNN`.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeds mutated at random (bytes flipped, cut, grown): parsing never panics, and what
    /// parses as a query survives guard's rebuilding (the `dns_message` fuzz target's
    /// properties, on a budget every `cargo test` can afford).
    #[test]
    fn mutated_messages_never_panic_and_queries_rebuild_faithfully() {
        let mut seeds: Vec<Vec<u8>> = Vec::new();
        let mut q = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1];
        for label in ["api", "github", "com"] {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 28, 0, 1, 0, 0, 41, 4, 0xd0, 0, 0, 0x80, 0, 0, 0]);
        seeds.push(q.clone());
        seeds.push(answer_for(&q, &["10.0.0.1".parse().expect("ip")]));
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..20_000 {
            let mut m = seeds[i % seeds.len()].clone();
            for _ in 0..(next() % 4) {
                match next() % 3 {
                    0 if !m.is_empty() => {
                        let at = (next() as usize) % m.len();
                        m[at] = next() as u8;
                    }
                    1 => m.truncate((next() as usize) % (m.len() + 1)),
                    _ => m.push(next() as u8),
                }
            }
            if let Ok(q) = Query::parse(&m) {
                let again = Query::parse(&q.to_wire()).expect("rebuilt query parses");
                assert_eq!(
                    (again.id, &again.name, again.qtype),
                    (q.id, &q.name, q.qtype)
                );
                let refused = Answer::parse(&q.refused(RCODE_REFUSED)).expect("refusal parses");
                assert_eq!(refused.name.as_deref(), Some(q.name.as_str()));
            }
            let _ = Answer::parse(&m);
        }
    }
}
