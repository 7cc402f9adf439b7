//! A query as a stub resolver sends it: one question, optionally an EDNS OPT record.

use super::{be16, read_name, DnsError, HEADER, TYPE_OPT};

/// Header flags guard keeps when it rebuilds a query: recursion desired, authentic data,
/// checking disabled.
const KEPT_FLAGS: u16 = 0x0100 | 0x0020 | 0x0010;
/// The EDNS flag guard keeps: DNSSEC OK.
const EDNS_DO: u16 = 0x8000;
/// QR (response) and the opcode bits of the header flags.
const QR: u16 = 0x8000;
const OPCODE: u16 = 0x7800;

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    /// The header flags as sent.
    pub flags: u16,
    /// The question name, lowercase, labels joined by dots, without the final dot (the root is
    /// the empty name).
    pub name: String,
    /// The question name as sent (its wire form, letter case kept).
    name_wire: Vec<u8>,
    pub qtype: u16,
    pub qclass: u16,
    /// The EDNS record: the requester's UDP payload size and the DO flag.
    pub edns: Option<(u16, bool)>,
}

impl Query {
    /// Parse `msg`, a whole query (without TCP's length prefix).
    pub fn parse(msg: &[u8]) -> Result<Query, DnsError> {
        if msg.len() < HEADER {
            return Err(DnsError::Short);
        }
        let word = |i: usize| be16(msg, 2 * i).unwrap_or(0);
        let (id, flags) = (word(0), word(1));
        if flags & (QR | OPCODE) != 0 {
            return Err(DnsError::NotAQuery);
        }
        let (qd, an, ns, ar) = (word(2), word(3), word(4), word(5));
        if qd != 1 {
            return Err(DnsError::Questions(qd));
        }
        if an != 0 || ns != 0 || ar > 1 {
            return Err(DnsError::Records);
        }
        let (end, name) = read_name(msg, HEADER, false)?;
        let name_wire = msg[HEADER..end].to_vec();
        let qtype = be16(msg, end).ok_or(DnsError::Truncated("the question"))?;
        let qclass = be16(msg, end + 2).ok_or(DnsError::Truncated("the question"))?;
        let mut pos = end + 4;
        let mut edns = None;
        if ar == 1 {
            // The OPT pseudo-record: root name, type 41, class = payload size, TTL = extended
            // rcode, version and flags, then its options (dropped when guard rebuilds).
            if msg.get(pos) != Some(&0) || be16(msg, pos + 1) != Some(TYPE_OPT) {
                return Err(DnsError::NotEdns);
            }
            let size = be16(msg, pos + 3).ok_or(DnsError::Truncated("the EDNS record"))?;
            let eflags = be16(msg, pos + 7).ok_or(DnsError::Truncated("the EDNS record"))?;
            let rdlen = be16(msg, pos + 9).ok_or(DnsError::Truncated("the EDNS record"))?;
            pos += 11 + usize::from(rdlen);
            if pos > msg.len() {
                return Err(DnsError::Truncated("the EDNS options"));
            }
            edns = Some((size, eflags & EDNS_DO != 0));
        }
        if pos != msg.len() {
            return Err(DnsError::Trailing);
        }
        Ok(Query {
            id,
            flags,
            name,
            name_wire,
            qtype,
            qclass,
            edns,
        })
    }

    /// The query guard sends in place of the caller's: the same id, question (letter case
    /// kept) and EDNS payload size, and nothing else (no EDNS options, no other flags).
    pub fn to_wire(&self) -> Vec<u8> {
        let mut out = self.header(self.flags & KEPT_FLAGS, u16::from(self.edns.is_some()));
        if let Some((size, dnssec_ok)) = self.edns {
            out.push(0);
            out.extend_from_slice(&TYPE_OPT.to_be_bytes());
            out.extend_from_slice(&size.max(512).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&(if dnssec_ok { 0x8000u16 } else { 0 }).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
        out
    }

    /// A response to this query with `rcode` and no records (REFUSED for a name the policy
    /// refuses, SERVFAIL when the nameserver did not answer).
    pub fn refused(&self, rcode: u8) -> Vec<u8> {
        // QR, recursion desired as asked, recursion available.
        let flags = QR | (self.flags & 0x0100) | 0x0080 | u16::from(rcode & 0x0f);
        self.header(flags, 0)
    }

    /// A header with `flags` and `additional` records announced, and the question.
    fn header(&self, flags: u16, additional: u16) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.name_wire.len() + 4 + 11);
        for w in [self.id, flags, 1, 0, 0, additional] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out.extend_from_slice(&self.name_wire);
        out.extend_from_slice(&self.qtype.to_be_bytes());
        out.extend_from_slice(&self.qclass.to_be_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` of type A, class IN, with an OPT record when `edns`.
    pub(crate) fn query(id: u16, name: &str, edns: bool) -> Vec<u8> {
        let mut m = Vec::new();
        for w in [id, 0x0100, 1, 0, 0, u16::from(edns)] {
            m.extend_from_slice(&w.to_be_bytes());
        }
        for label in name.split('.').filter(|l| !l.is_empty()) {
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&[0, 1, 0, 1]);
        if edns {
            // OPT, size 1232, DO, one option (cookie, 8 bytes).
            m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 12]);
            m.extend_from_slice(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
        }
        m
    }

    #[test]
    fn a_stub_query_parses_and_is_rebuilt_without_options() {
        let q = Query::parse(&query(0x1234, "Api.GitHub.com", true)).expect("parses");
        assert_eq!(q.id, 0x1234);
        assert_eq!(q.name, "api.github.com");
        assert_eq!((q.qtype, q.qclass), (1, 1));
        assert_eq!(q.edns, Some((1232, true)));
        let wire = q.to_wire();
        let again = Query::parse(&wire).expect("rebuilt parses");
        assert_eq!(again.name, "api.github.com");
        assert_eq!(again.edns, Some((1232, true)));
        // The cookie option is gone; the case of the name is kept.
        assert_eq!(
            wire.len(),
            query(0x1234, "Api.GitHub.com", false).len() + 11
        );
        assert!(wire.windows(3).any(|w| w == b"Api"));
        let plain = Query::parse(&query(7, "crates.io", false)).expect("parses");
        assert_eq!(plain.edns, None);
        assert_eq!(plain.to_wire(), query(7, "crates.io", false));
    }

    #[test]
    fn a_refusal_echoes_the_question() {
        let q = Query::parse(&query(9, "secret.example", false)).expect("parses");
        let r = q.refused(super::super::RCODE_REFUSED);
        assert_eq!(&r[..2], &[0, 9]);
        assert_eq!(r[3] & 0x0f, 5);
        assert_eq!(r[2] & 0x80, 0x80, "a response");
        assert_eq!(&r[12..], &query(9, "secret.example", false)[12..]);
    }

    #[test]
    fn garbage_is_refused() {
        let good = query(1, "a.example", false);
        assert_eq!(Query::parse(&good[..11]), Err(DnsError::Short));
        assert!(matches!(
            Query::parse(&good[..good.len() - 1]),
            Err(DnsError::Truncated(_))
        ));
        let mut two = good.clone();
        two[5] = 2;
        assert_eq!(Query::parse(&two), Err(DnsError::Questions(2)));
        let mut response = good.clone();
        response[2] |= 0x80;
        assert_eq!(Query::parse(&response), Err(DnsError::NotAQuery));
        let mut answers = good.clone();
        answers[7] = 1;
        assert_eq!(Query::parse(&answers), Err(DnsError::Records));
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(Query::parse(&trailing), Err(DnsError::Trailing));
        let mut pointer = good[..12].to_vec();
        pointer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert_eq!(Query::parse(&pointer), Err(DnsError::Compressed));
        let odd = query(1, "a b.example", false);
        assert!(matches!(Query::parse(&odd), Err(DnsError::BadLabel(_))));
        let mut dotted = query(1, "ab.example", false);
        dotted[14] = b'.';
        assert_eq!(
            Query::parse(&dotted),
            Err(DnsError::BadLabel("a.".into())),
            "a dot inside a label would hide the label boundary"
        );
        let mut m = query(1, "x.example", false);
        m[12] = 64;
        assert_eq!(Query::parse(&m), Err(DnsError::LongLabel));
        let many: Vec<String> = (0..50).map(|_| "abcde".to_string()).collect();
        assert_eq!(
            Query::parse(&query(1, &many.join("."), false)),
            Err(DnsError::LongName)
        );
        let mut not_opt = query(1, "a.example", true);
        let opt = not_opt.len() - 23;
        not_opt[opt + 2] = 1;
        assert_eq!(Query::parse(&not_opt), Err(DnsError::NotEdns));
    }
}
