//! `guard::dns::Query::parse` and `guard::dns::Answer::parse` on arbitrary bytes, as a program
//! in the sandbox may send them to a nameserver (and a nameserver may answer).
//!
//! Properties: never panics; a message shorter than the 12-byte header is refused; a query
//! that parses has one question and a name made only of letters, digits, `-`, `_` and dots
//! (no empty label, at most 255 bytes on the wire), lowercase; the query guard forwards in its
//! place (`to_wire`) parses again to the same id, name, type, class and EDNS size, and is never
//! longer than the input plus an OPT record; a refusal built from it parses as an answer with
//! the query's id, the refusal's code, the same name and no address. An answer that parses
//! carries at most 64 addresses.
#![no_main]

use guard::dns::{Answer, Query, RCODE_REFUSED};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let query = Query::parse(data);
    if data.len() < 12 {
        assert!(query.is_err(), "{} bytes parsed as a query", data.len());
    }
    if let Ok(q) = query {
        assert!(
            q.name.is_empty()
                || q.name.split('.').all(|l| !l.is_empty()
                    && l.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'-'
                        || b == b'_')),
            "name {:?}",
            q.name
        );
        assert!(q.name.len() <= 255);
        let wire = q.to_wire();
        assert!(wire.len() <= data.len() + 11, "the rebuilt query grew");
        let again = Query::parse(&wire).expect("the rebuilt query parses");
        assert_eq!(
            (again.id, &again.name, again.qtype, again.qclass),
            (q.id, &q.name, q.qtype, q.qclass)
        );
        assert_eq!(again.edns.map(|e| e.0.max(512)), q.edns.map(|e| e.0.max(512)));
        let refused = Answer::parse(&q.refused(RCODE_REFUSED)).expect("a refusal parses");
        assert_eq!(refused.id, q.id);
        assert_eq!(refused.rcode, RCODE_REFUSED);
        assert_eq!(refused.name.as_deref(), Some(q.name.as_str()));
        assert!(refused.addrs.is_empty());
    }
    if let Ok(a) = Answer::parse(data) {
        assert!(a.addrs.len() <= 64);
    }
});
