//! `guard::audit::encode`/`decode` on `decision` events whose paths, argv, comm and strings come
//! from fuzz bytes (paths and argv need not be UTF-8).
//!
//! Input layout: byte 0 picks the verdict and which optional fields are present, bytes 1..17
//! give seq, pid and latency, byte 17..25 a time; the rest is split on 0xff into run id, comm,
//! exe, syscall, op, path, path2, argv (split on NUL), addr, cwd, errno, rule, reason. Strings
//! are the lossy UTF-8 of their bytes.
//!
//! Properties: the line has no newline or carriage return, is one valid JSON object with
//! `"v":1` and `"type":"decision"`, and `decode` gives back exactly the event and run id that
//! were encoded (so path and argv bytes round-trip exactly); with `encode_at`, the time
//! round-trips too.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use guard::audit::{self, Decision, Event, PathText, Timestamp, Verdict};
use libfuzzer_sys::fuzz_target;

fn text(bytes: &[u8]) -> PathText {
    PathText::from(OsString::from_vec(bytes.to_vec()))
}

fn string(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_at_checked(25) else {
        return;
    };
    let flags = head[0];
    let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
    let has = |bit: u8| flags & (1 << bit) != 0;
    let mut fields = rest.split(|&b| b == 0xff);
    let mut next = || fields.next().unwrap_or(&[]);
    let run = string(next());
    let comm = text(next());
    let exe = next();
    let (syscall, op) = (string(next()), string(next()));
    let (path, path2, argv, addr, cwd) = (next(), next(), next(), next(), next());
    let (errno, rule, reason) = (next(), string(next()), next());

    let event = Event::Decision(Decision {
        seq: word(1),
        pid: word(9) as u32,
        comm,
        exe: has(2).then(|| text(exe)),
        syscall,
        op,
        path: has(3).then(|| text(path)),
        path2: has(4).then(|| text(path2)),
        argv: has(5).then(|| argv.split(|&b| b == 0).map(text).collect()),
        addr: has(6).then(|| string(addr)),
        name: has(6).then(|| string(addr)),
        cwd: has(7).then(|| text(cwd)),
        verdict: Verdict::ALL[usize::from(flags) % Verdict::ALL.len()],
        errno: (!errno.is_empty()).then(|| string(errno)),
        rule,
        reason: (!reason.is_empty()).then(|| string(reason)),
        latency_us: word(9) >> 32 | word(1) << 32,
    });

    let line = audit::encode(&event, &run);
    check_line(&line, &event, &run);
    let time = Timestamp::from_unix_micros(word(17) as i64);
    let stamped = audit::encode_at(&event, &run, time);
    let record = check_line(&stamped, &event, &run);
    assert_eq!(record.time, time, "time changed in {stamped}");
});

fn check_line(line: &str, event: &Event, run: &str) -> audit::Record {
    assert!(!line.contains(['\n', '\r']), "more than one line: {line:?}");
    let value: serde_json::Value = serde_json::from_str(line).expect("encode writes valid JSON");
    assert_eq!(value["v"], audit::VERSION, "{line}");
    assert_eq!(value["type"], "decision", "{line}");
    let record = audit::decode(line).expect("decode reads what encode wrote");
    assert_eq!(record.run, run, "run id changed in {line}");
    assert_eq!(&record.event, event, "event changed in {line}");
    if let (Event::Decision(a), Event::Decision(b)) = (&record.event, event) {
        let bytes = |p: &Option<PathText>| p.as_ref().map(|t| t.as_bytes().to_vec());
        assert_eq!(
            bytes(&a.path),
            bytes(&b.path),
            "path bytes changed in {line}"
        );
        assert_eq!(
            bytes(&a.path2),
            bytes(&b.path2),
            "path2 bytes changed in {line}"
        );
    }
    record
}
