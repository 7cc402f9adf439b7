//! Audit events sent to an OpenTelemetry collector (`--audit-otlp`): a receiver on loopback,
//! in this test process, decodes the requests with the official protobuf definitions
//! (opentelemetry-proto) and must hold every line of the local log, in order, byte for byte,
//! with the resource attributes a fleet needs. With the receiver down, the run goes on and the
//! log counts what was not delivered (`suppressed`, `what: otlp`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;

use crate::util::Workspace;

/// One export request as received.
struct Received {
    path: String,
    content_type: String,
    request: ExportLogsServiceRequest,
}

/// An OTLP/HTTP receiver on 127.0.0.1: it accepts requests until dropped.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (got, stop) = (Arc::clone(&got), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Ok(stream) = stream {
                        if let Some(r) = serve(stream) {
                            got.lock().expect("lock").push(r);
                        }
                    }
                }
            })
        };
        Receiver {
            addr,
            got,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP/1.1 request, answers 200 and closes the connection.
fn serve(stream: TcpStream) -> Option<Received> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let path = request_line.split_whitespace().nth(1)?.to_string();
    let (mut length, mut content_type, mut chunked) = (0usize, String::new(), false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "content-type" => content_type = value.trim().to_string(),
            "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body).ok()?;
    }
    let request = ExportLogsServiceRequest::decode(&body[..]).expect("a valid OTLP request");
    let mut out = stream;
    out.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .ok()?;
    Some(Received {
        path,
        content_type,
        request,
    })
}

fn string_of(kv: &[KeyValue], key: &str) -> Option<String> {
    kv.iter()
        .find(|a| a.key == key)
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

/// A run with refusals and changes, under `agent`: deletes of files that exist outside the
/// write roots (a missing one would get the kernel's ENOENT, which is no refusal).
fn run_with_events(w: &Workspace, otlp: &str, count: usize) -> crate::util::Out {
    for i in 0..count {
        std::fs::write(w.outside.join(format!("x{i}")), "x").expect("outside file");
    }
    let script = format!(
        "i=0; while [ $i -lt {count} ]; do {probe} unlink {out}/x$i >/dev/null; i=$((i+1)); done; {probe} mkdir {ws}/d",
        probe = w.probe(),
        out = w.outside.display(),
        ws = w.ws.display(),
    );
    w.exec(&["agent"])
        .args(["--audit-otlp", otlp])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_RUN_ID", "4242")
        .env("RUNNER_NAME", "runner-a")
        .run(&["sh", "-c", &script])
}

fn local_log(w: &Workspace) -> Vec<String> {
    let runs: Vec<_> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    std::fs::read_to_string(runs[0].path().join("audit.jsonl"))
        .expect("log")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_collector_receives_every_line_of_the_local_log() {
    let receiver = Receiver::start();
    let w = Workspace::new();
    run_with_events(&w, &receiver.url(), 5).expect_code(0);
    let lines = local_log(&w);
    let got = receiver.got.lock().expect("lock");
    assert!(!got.is_empty(), "no request reached the receiver");
    let mut bodies = Vec::new();
    for r in got.iter() {
        assert_eq!(r.path, "/v1/logs");
        assert_eq!(r.content_type, "application/x-protobuf");
        for rl in &r.request.resource_logs {
            let attrs = &rl.resource.as_ref().expect("resource").attributes;
            let run: serde_json::Value = serde_json::from_str(&lines[0]).expect("json");
            assert_eq!(
                string_of(attrs, "guard.run.id").as_deref(),
                run["run"].as_str()
            );
            assert_eq!(string_of(attrs, "service.name").as_deref(), Some("guard"));
            assert!(string_of(attrs, "host.name").is_some_and(|h| !h.is_empty()));
            assert!(string_of(attrs, "user.id").is_some());
            assert_eq!(
                string_of(attrs, "ci.provider").as_deref(),
                Some("github-actions")
            );
            assert_eq!(
                string_of(attrs, "ci.GITHUB_RUN_ID").as_deref(),
                Some("4242")
            );
            assert_eq!(
                string_of(attrs, "cicd.pipeline.run.id").as_deref(),
                Some("4242")
            );
            assert_eq!(
                string_of(attrs, "cicd.worker.name").as_deref(),
                Some("runner-a")
            );
            for sl in &rl.scope_logs {
                for record in &sl.log_records {
                    match record.body.as_ref().and_then(|b| b.value.as_ref()) {
                        Some(Any::StringValue(s)) => bodies.push((s.clone(), record.clone())),
                        other => panic!("body is not the line: {other:?}"),
                    }
                }
            }
        }
    }
    let received: Vec<&String> = bodies.iter().map(|(b, _)| b).collect();
    assert_eq!(received.len(), lines.len(), "every event, no more");
    assert_eq!(
        received,
        lines.iter().collect::<Vec<_>>(),
        "the same lines, in order"
    );
    // The records carry what a pipeline routes on.
    let denial = bodies
        .iter()
        .find(|(b, _)| b.contains("\"verdict\":\"deny\""))
        .map(|(_, r)| r)
        .expect("a refusal");
    assert_eq!(denial.severity_text, "WARN");
    assert_eq!(denial.event_name, "guard.decision");
    assert_eq!(
        string_of(&denial.attributes, "guard.rule").as_deref(),
        Some("fs.write-roots")
    );
    assert!(denial.time_unix_nano > 0);
    let end: serde_json::Value =
        serde_json::from_str(lines.last().expect("run-end")).expect("json");
    assert_eq!(end["type"], "run-end");
    assert_eq!(end["otlp_dropped"], 0);
}

#[test]
fn a_collector_that_is_down_costs_a_count_not_the_run() {
    // A loopback port nobody listens on: every connection is refused.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let w = Workspace::new();
    let out = run_with_events(&w, &format!("http://{closed}"), 40);
    out.expect_code(0);
    assert!(out.stderr().contains("cannot export"), "{}", out.stderr());
    let lines = local_log(&w);
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let decisions = events.iter().filter(|e| e["type"] == "decision").count();
    assert!(
        decisions >= 40,
        "the command ran in full: {decisions} decisions"
    );
    // Every line written before the last count was counted as not delivered.
    let otlp: Vec<(usize, u64)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "suppressed" && e["what"] == "otlp")
        .map(|(i, e)| (i, e["count"].as_u64().expect("count")))
        .collect();
    let (last, _) = *otlp.last().expect("a suppressed line for otlp");
    let counted: u64 = otlp.iter().map(|(_, c)| c).sum();
    assert_eq!(counted, last as u64, "{otlp:?}");
    let end = events.last().expect("run-end");
    assert_eq!(end["type"], "run-end");
    assert_eq!(end["otlp_dropped"], counted);
    assert_eq!(end["suppressed"], 0, "the local log lost nothing");
    let verify = w.guard().args(["log", "--verify"]).output();
    verify.expect_code(0);
}
