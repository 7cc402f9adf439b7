//! What guard reads in a nameserver's answer: its id, response code, truncation flag, and the
//! A and AAAA records of its answer section (the addresses of the name asked for, through
//! any CNAME chain the nameserver followed).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{be16, read_name, DnsError, HEADER, TYPE_A, TYPE_AAAA};

/// At most this many addresses are taken from one answer.
const ADDRS_MAX: usize = 64;

/// The parts of a response guard uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub id: u16,
    pub rcode: u8,
    /// TC: the answer did not fit (the client asks again over TCP).
    pub truncated: bool,
    /// The question name (lowercase, without the final dot), when there is one question.
    pub name: Option<String>,
    pub addrs: Vec<IpAddr>,
}

impl Answer {
    /// Parse the response `msg` (without TCP's length prefix).
    pub fn parse(msg: &[u8]) -> Result<Answer, DnsError> {
        if msg.len() < HEADER {
            return Err(DnsError::Short);
        }
        let word = |i: usize| be16(msg, 2 * i).unwrap_or(0);
        let (id, flags) = (word(0), word(1));
        if flags & 0x8000 == 0 {
            return Err(DnsError::NotAQuery);
        }
        let (qd, an) = (word(2), word(3));
        let mut pos = HEADER;
        let mut name = None;
        for _ in 0..qd {
            let (end, n) = read_name(msg, pos, true)?;
            if qd == 1 {
                name = Some(n);
            }
            pos = end + 4;
            if pos > msg.len() {
                return Err(DnsError::Truncated("the question"));
            }
        }
        let mut addrs = Vec::new();
        for _ in 0..an {
            let (end, _) = read_name(msg, pos, true)?;
            let rtype = be16(msg, end).ok_or(DnsError::Truncated("a record"))?;
            let rdlen = usize::from(be16(msg, end + 8).ok_or(DnsError::Truncated("a record"))?);
            let data = msg
                .get(end + 10..end + 10 + rdlen)
                .ok_or(DnsError::Truncated("a record's data"))?;
            let addr = match (rtype, data.len()) {
                (TYPE_A, 4) => Some(IpAddr::V4(Ipv4Addr::new(
                    data[0], data[1], data[2], data[3],
                ))),
                (TYPE_AAAA, 16) => {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(data);
                    Some(IpAddr::V6(Ipv6Addr::from(o)))
                }
                _ => None,
            };
            if let Some(a) = addr {
                if addrs.len() < ADDRS_MAX && !addrs.contains(&a) {
                    addrs.push(a);
                }
            }
            pos = end + 10 + rdlen;
        }
        Ok(Answer {
            id,
            rcode: (flags & 0x000f) as u8,
            truncated: flags & 0x0200 != 0,
            name,
            addrs,
        })
    }
}

/// A response to `query` (a whole query message) carrying `addrs` as A/AAAA records, with the
/// names compressed to the question. For tests and the fuzz target's seeds.
pub fn build(query: &[u8], addrs: &[IpAddr]) -> Vec<u8> {
    let mut out = query.to_vec();
    if out.len() < HEADER {
        return out;
    }
    out[2] |= 0x80;
    out[3] |= 0x80;
    out[6..8].copy_from_slice(&(addrs.len() as u16).to_be_bytes());
    // Drop any additional record the query had: the answer carries none.
    out[10..12].copy_from_slice(&[0, 0]);
    let question_end = read_name(&out, HEADER, false).map_or(out.len(), |(end, _)| end + 4);
    out.truncate(question_end);
    for a in addrs {
        out.extend_from_slice(&[0xc0, 12]);
        let (rtype, data): (u16, Vec<u8>) = match a {
            IpAddr::V4(v4) => (TYPE_A, v4.octets().to_vec()),
            IpAddr::V6(v6) => (TYPE_AAAA, v6.octets().to_vec()),
        };
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(&data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str) -> Vec<u8> {
        let mut m = vec![0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        m
    }

    #[test]
    fn addresses_are_read_through_compression() {
        let addrs: Vec<IpAddr> = vec!["10.1.2.3".parse().unwrap(), "fd00::7".parse().unwrap()];
        let a = Answer::parse(&build(&query("api.github.com"), &addrs)).expect("parses");
        assert_eq!(a.id, 0xabcd);
        assert_eq!(a.rcode, 0);
        assert!(!a.truncated);
        assert_eq!(a.name.as_deref(), Some("api.github.com"));
        assert_eq!(a.addrs, addrs);
    }

    #[test]
    fn garbage_and_loops_are_refused() {
        let good = build(&query("a.example"), &["10.0.0.1".parse().unwrap()]);
        for cut in 12..good.len() {
            assert!(Answer::parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        // A pointer to itself.
        let mut looped = good.clone();
        let at = looped.len() - 16;
        looped[at..at + 2].copy_from_slice(&[0xc0, at as u8]);
        assert_eq!(Answer::parse(&looped), Err(DnsError::Loop));
        // A query is not an answer.
        assert_eq!(Answer::parse(&query("a.example")), Err(DnsError::NotAQuery));
    }
}
