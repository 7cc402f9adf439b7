//! Every way out is judged: UDP sendto/sendmsg/sendmmsg, unix datagrams, TCP Fast Open,
//! servers in the sandbox, DNS queries by name (through the probe's hand-made queries, glibc's
//! resolver and a Go-style connect + write), and host rules with wildcards. Listeners are on
//! loopback ports the test profile does not allow, or in a network namespace the test makes.
//! Each refusal is asserted from inside (the probe's errno), from outside (the listener got
//! nothing) and in the audit log.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

use serde_json::Value;

use crate::netns::{resolv_conf, DnsServer, NetNs, TcpSink, UdpSink};
use crate::util::*;

/// A profile layer whose `net.connect` is exactly `connect`.
fn layer(w: &Workspace, name: &str, connect: &[String]) -> String {
    let list: Vec<String> = connect.iter().map(|c| format!("\"{c}\"")).collect();
    w.profile_file(
        name,
        &format!(
            "name = \"{name}\"\nreplace = [\"net.connect\"]\n[net]\nconnect = [{}]\n",
            list.join(", ")
        ),
    )
}

/// The decision events of the newest run whose `syscall` is `syscall`.
fn decisions_of(w: &Workspace, syscall: &str) -> Vec<Value> {
    w.decisions()
        .into_iter()
        .filter(|d| d["syscall"] == syscall)
        .collect()
}

/// Panic unless the newest run has a refusal of `syscall` for `addr` (and `name`).
fn assert_refusal_logged(w: &Workspace, syscall: &str, addr: &str, name: Option<&str>) {
    let all = w.decisions();
    let hit = all.iter().any(|d| {
        d["syscall"] == syscall
            && d["verdict"] == "deny"
            && d["addr"].as_str().is_some_and(|a| a.contains(addr))
            && name.is_none_or(|n| d["name"].as_str().is_some_and(|got| got.contains(n)))
    });
    assert!(
        hit,
        "no refusal of {syscall} to {addr} ({name:?}) in the audit log:\n{}",
        all.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn datagrams_to_a_port_the_profile_does_not_allow_are_refused_logged_and_never_arrive() {
    let w = Workspace::new();
    let sink = UdpSink::start(UdpSocket::bind("127.0.0.1:0").expect("bind"));
    let to = sink.addr.to_string();
    // The layer allows one other loopback port only.
    let other = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let allowed = other.local_addr().expect("addr").to_string();
    let l = layer(&w, "udp", std::slice::from_ref(&allowed));
    for profile in ["agent", "strict"] {
        for op in ["udp-sendto", "udp-sendmsg", "udp-sendmmsg"] {
            let out = w.exec(&[profile, &l]).run(&[
                w.probe(),
                op.into(),
                to.clone(),
                "marker-udp".into(),
            ]);
            out.expect_code(0);
            assert_eq!(probe_result(&out), "errno 13 EACCES", "{profile} {op}");
            let syscall = op.strip_prefix("udp-").expect("udp op");
            assert_refusal_logged(&w, syscall, &to, None);
        }
    }
    assert!(sink.received().is_empty(), "a refused datagram arrived");

    // The same calls to the allowed port are sent, whole.
    let allowed_sink = UdpSink::start(other);
    for op in ["udp-sendto", "udp-sendmsg"] {
        let out =
            w.exec(&["agent", &l])
                .run(&[w.probe(), op.into(), allowed.clone(), "hello".into()]);
        assert_eq!(probe_result(&out), "ok sent=5", "{op}");
    }
    let out = w.exec(&["agent", &l]).run(&[
        w.probe(),
        "udp-sendmmsg".into(),
        allowed.clone(),
        "hello".into(),
    ]);
    assert_eq!(
        probe_result(&out),
        "ok sent=2 lens=5,5",
        "msg_len written back"
    );
    let got = allowed_sink.received();
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got.iter().all(|d| d == b"hello"));
}

#[test]
fn a_unix_datagram_to_a_socket_outside_is_refused() {
    let w = Workspace::new();
    let path = w.outside.join("inbox.sock");
    let inbox = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
    inbox.set_nonblocking(true).expect("nonblocking");
    for profile in ["agent", "strict"] {
        let out = w.exec(&[profile]).run(&[
            w.probe(),
            "unix-sendto".into(),
            path.display().to_string(),
            "marker-unix".into(),
        ]);
        assert_eq!(probe_result(&out), "errno 13 EACCES", "{profile}");
        assert_refusal_logged(&w, "sendto", &path.display().to_string(), None);
    }
    let mut buf = [0u8; 64];
    assert!(inbox.recv(&mut buf).is_err(), "a refused datagram arrived");
}

#[test]
fn sends_guard_performs_keep_their_meaning() {
    let w = Workspace::new();
    let file = w.write("passed.txt", "passed over a socket\n");
    let run = |args: &[&str]| {
        let mut argv = vec![w.probe()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let bare = probe_result(&Out(std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .expect("run the probe bare")));
        let guarded = probe_result(&w.exec(&["agent"]).run(&argv));
        (bare, guarded)
    };
    // SCM_RIGHTS: the receiver gets the very file that was sent.
    let (bare, guarded) = run(&["pass-fd", &file.display().to_string()]);
    assert_eq!(
        (bare.as_str(), guarded.as_str()),
        ("ok same-file", "ok same-file")
    );
    // A broken pipe: EPIPE, and one SIGPIPE on the caller (not on guard).
    let (bare, guarded) = run(&["sigpipe"]);
    assert_eq!(bare, "errno 32 OTHER sigpipe=1");
    assert_eq!(guarded, bare);
    // A blocking send waits for room and sends everything, in one call.
    let (bare, guarded) = run(&["blocking-send"]);
    assert_eq!(bare, "ok sent=1048576 received=1048576");
    assert_eq!(guarded, bare);
    // None of these named a destination: nothing was judged, nothing recorded.
    assert!(decisions_of(&w, "sendmsg").is_empty());
}

#[test]
fn tcp_fast_open_is_judged_like_connect() {
    let w = Workspace::new();
    let denied = TcpSink::start(TcpListener::bind("127.0.0.1:0").expect("bind"));
    let allowed = TcpSink::start(TcpListener::bind("127.0.0.1:0").expect("bind"));
    let l = layer(&w, "tfo", &[allowed.addr.to_string()]);
    for profile in ["agent", "strict"] {
        let out = w.exec(&[profile, &l]).run(&[
            w.probe(),
            "tfo".into(),
            denied.addr.to_string(),
            "marker-tfo".into(),
        ]);
        assert_eq!(probe_result(&out), "errno 13 EACCES", "{profile}");
        assert_refusal_logged(&w, "sendto", &denied.addr.to_string(), None);
    }
    assert_eq!(denied.count(), 0, "a refused Fast Open connect arrived");
    let out = w.exec(&["agent", &l]).run(&[
        w.probe(),
        "tfo".into(),
        allowed.addr.to_string(),
        "hello-tfo".into(),
    ]);
    assert_eq!(probe_result(&out), "ok sent=9");
    assert_eq!(allowed.count(), 1);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(allowed.bytes.lock().expect("lock").as_slice(), b"hello-tfo");
}

/// Run `g` on `argv` (a probe that serves), wait for its `listening` line, call `meanwhile`
/// with the lines before it, and return the probe's last line. A probe that fails before it
/// listens just returns its line.
fn serving(g: Guard, argv: &[String], meanwhile: impl FnOnce(&[String])) -> String {
    use std::io::BufRead;
    let mut cmd = g.cmd;
    cmd.arg("--")
        .args(argv)
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn guard");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut before = Vec::new();
    let mut last = String::new();
    for line in lines.by_ref() {
        let line = line.expect("read the probe");
        if line == "listening" {
            meanwhile(&before);
            break;
        }
        last.clone_from(&line);
        before.push(line);
    }
    for line in lines {
        last = line.expect("read the probe");
    }
    child.wait().expect("wait for guard");
    last
}

/// Whether a TCP client in the namespace reaches `ip:port` (1 s at most).
fn reaches(ns: &NetNs, ip: &'static str, port: u16) -> bool {
    ns.enter(move || {
        let to = std::net::SocketAddr::new(ip.parse().expect("ip"), port);
        std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(1)).is_ok()
    })
}

#[test]
fn a_server_in_the_sandbox_is_reached_from_loopback_only() {
    let Some(ns) = NetNs::new("a_server_in_the_sandbox_is_reached_from_loopback_only") else {
        return;
    };
    let w = Workspace::new();
    let resolv = resolv_conf(&w.root, Ipv4Addr::LOCALHOST);
    let probe = |args: &[&str]| -> Vec<String> {
        std::iter::once(w.probe())
            .chain(args.iter().map(|a| a.to_string()))
            .collect()
    };
    // A non-loopback address, under agent; anything, under strict.
    for (profile, op, at) in [
        ("agent", "serve", "192.0.2.1:8000"),
        ("strict", "serve", "0.0.0.0:8002"),
        ("strict", "serve", "127.0.0.1:8003"),
        ("strict", "udp-recv", "0.0.0.0:8004"),
    ] {
        let out = ns.wrap(w.exec(&[profile]), &resolv).run(&probe(&[op, at]));
        assert_eq!(probe_result(&out), "bind errno 13 EACCES", "{profile} {at}");
        assert_refusal_logged(&w, "bind", at, None);
    }
    let out = ns
        .wrap(w.exec(&["strict"]), &resolv)
        .run(&probe(&["listen-unbound"]));
    assert_eq!(probe_result(&out), "listen errno 13 EACCES");
    assert_refusal_logged(&w, "listen", "0.0.0.0:0", None);

    // agent: a server on every address is fenced to loopback peers. A client coming from
    // 192.0.2.1 gets nowhere; one on loopback is served.
    let last = serving(
        ns.wrap(w.exec(&["agent"]), &resolv),
        &probe(&["serve", "0.0.0.0:8001"]),
        |_| {
            assert!(!reaches(&ns, "192.0.2.1", 8001), "reached from outside");
            assert!(reaches(&ns, "127.0.0.1", 8001), "loopback is served");
        },
    );
    assert_eq!(last, "ok accepted");
    // listen() on an unbound socket binds every address: fenced the same way.
    let last = serving(
        ns.wrap(w.exec(&["agent"]), &resolv),
        &probe(&["listen-unbound"]),
        |before| {
            let port: u16 = before
                .iter()
                .find_map(|l| l.strip_prefix("port "))
                .and_then(|p| p.parse().ok())
                .expect("the probe's port");
            assert!(!reaches(&ns, "192.0.2.1", port), "reached from outside");
            assert!(reaches(&ns, "127.0.0.1", port), "loopback is served");
        },
    );
    assert_eq!(last, "ok accepted");
    // UDP: the datagram from outside is dropped, the one from loopback arrives.
    let last = serving(
        ns.wrap(w.exec(&["agent"]), &resolv),
        &probe(&["udp-recv", "0.0.0.0:8004"]),
        |_| {
            ns.enter(|| {
                let outside = UdpSocket::bind("192.0.2.1:0").expect("bind");
                outside.send_to(b"outside", "192.0.2.1:8004").expect("send");
                std::thread::sleep(std::time::Duration::from_millis(100));
                let inside = UdpSocket::bind("127.0.0.1:0").expect("bind");
                inside.send_to(b"inside", "127.0.0.1:8004").expect("send");
            });
        },
    );
    assert_eq!(last, "ok got inside");

    // agent may serve on loopback; a profile that lists an address may serve there.
    let out = ns
        .wrap(w.exec(&["agent"]), &resolv)
        .run(&probe(&["bind-udp", "127.0.0.1:8005"]));
    assert_eq!(probe_result(&out), "ok bound");
    let open = w.profile_file(
        "open",
        "name = \"open\"\n[net]\nbind = [\"192.0.2.1:8006\"]\n",
    );
    let out = ns
        .wrap(w.exec(&["agent", &open]), &resolv)
        .run(&probe(&["bind-udp", "192.0.2.1:8006"]));
    assert_eq!(probe_result(&out), "ok bound");
}

/// The DNS world of the namespace: the test's nameserver at 127.0.0.1:53 (in resolv.conf and
/// so allowed by `dns = true`), another at 127.0.0.2:53 that no profile allows.
struct Dns {
    ns: NetNs,
    allowed: DnsServer,
    other: DnsServer,
    resolv: std::path::PathBuf,
}

fn dns_world(test: &str, w: &Workspace, table: &'static [(&'static str, Ipv4Addr)]) -> Option<Dns> {
    let ns = NetNs::new(test)?;
    let (a, b) = ns.enter(|| {
        let bind = |ip: &str| {
            (
                UdpSocket::bind((ip, 53)).expect("udp 53"),
                TcpListener::bind((ip, 53)).expect("tcp 53"),
            )
        };
        (bind("127.0.0.1"), bind("127.0.0.2"))
    });
    Some(Dns {
        allowed: DnsServer::start(a.0, a.1, table),
        other: DnsServer::start(b.0, b.1, table),
        resolv: resolv_conf(&w.root, Ipv4Addr::LOCALHOST),
        ns,
    })
}

const TABLE: &[(&str, Ipv4Addr)] = &[
    ("allowed.test", Ipv4Addr::new(127, 0, 0, 9)),
    ("api.wild.test", Ipv4Addr::new(127, 0, 0, 7)),
];

#[test]
fn dns_queries_are_judged_by_the_name_they_ask_for() {
    let w = Workspace::new();
    let Some(d) = dns_world("dns_queries_are_judged_by_the_name_they_ask_for", &w, TABLE) else {
        return;
    };
    let l = layer(&w, "dns", &["allowed.test:443".into()]);
    let run = |profile: &str, args: &[&str]| {
        let mut argv = vec![w.probe()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let out = d.ns.wrap(w.exec(&[profile, &l]), &d.resolv).run(&argv);
        probe_result(&out)
    };
    // An allowed name, each way a resolver asks: sendto (musl), connect + write (Go), TCP.
    for op in ["dns-sendto", "dns-write", "dns-tcp"] {
        assert_eq!(
            run("agent", &[op, "127.0.0.1:53", "allowed.test"]),
            "ok answer rcode=0 addrs=127.0.0.9",
            "{op}"
        );
    }
    // A secret in a name does not leave, however it is sent.
    let r = run(
        "agent",
        &["dns-sendto", "127.0.0.1:53", "sk-marker1.evil.test"],
    );
    assert_eq!(r, "errno 13 EACCES");
    assert_refusal_logged(&w, "sendto", "127.0.0.1:53", Some("sk-marker1.evil.test"));
    for (op, marker) in [("dns-write", "sk-marker2"), ("dns-tcp", "sk-marker3")] {
        let name = format!("{marker}.evil.test");
        assert_eq!(
            run("agent", &[op, "127.0.0.1:53", &name]),
            "ok answer rcode=5 addrs=",
            "{op}: REFUSED by guard's relay"
        );
        assert_refusal_logged(&w, "relay", "127.0.0.1:53", Some(&name));
    }
    // Another nameserver is not reachable at all.
    assert_eq!(
        run("agent", &["dns-sendto", "127.0.0.2:53", "allowed.test"]),
        "errno 13 EACCES"
    );
    assert_refusal_logged(&w, "sendto", "127.0.0.2:53", None);
    assert_eq!(
        run("agent", &["dns-write", "127.0.0.2:53", "allowed.test"]),
        "connect errno 13 EACCES"
    );
    // strict: no DNS at all.
    for op in ["dns-sendto", "dns-write"] {
        let r = run("strict", &[op, "127.0.0.1:53", "sk-marker4.evil.test"]);
        assert!(r.ends_with("errno 13 EACCES"), "strict {op}: {r}");
    }

    // glibc's resolver (getent, Python), through the system's resolver path.
    let getent = |profile: &str, name: &str| {
        d.ns.wrap(w.exec(&[profile, &l]), &d.resolv)
            .run(&["getent", "hosts", name])
    };
    let out = getent("agent", "allowed.test");
    out.expect_code(0);
    assert!(out.stdout().starts_with("127.0.0.9"), "{}", out.stdout());
    let relayed = decisions_of(&w, "relay");
    assert!(
        relayed
            .iter()
            .any(|e| e["name"] == "allowed.test" && e["verdict"] == "allow"),
        "glibc's query was judged at the relay: {relayed:?}"
    );
    let out = getent("agent", "sk-marker5.evil.test");
    assert_eq!(out.code(), 2, "not found: {}", out.stderr());
    assert_refusal_logged(&w, "relay", "127.0.0.1:53", Some("sk-marker5.evil.test"));
    let out = getent("strict", "sk-marker6.evil.test");
    assert_ne!(out.code(), 0);
    if std::path::Path::new("/usr/bin/python3").exists() {
        let out = d.ns.wrap(w.exec(&["agent", &l]), &d.resolv).run(&[
            "/usr/bin/python3",
            "-c",
            "import socket,sys\nprint(sorted({a[4][0] for a in socket.getaddrinfo(sys.argv[1], 80)}))\n\
             try:\n socket.getaddrinfo(sys.argv[2], 80)\n print('leaked')\nexcept OSError as e:\n print('refused')",
            "allowed.test",
            "sk-marker7.evil.test",
        ]);
        assert_eq!(out.stdout(), "['127.0.0.9']\nrefused\n", "{}", out.stderr());
    } else {
        eprintln!("skipped the python part: no /usr/bin/python3");
    }

    for marker in [
        "sk-marker1",
        "sk-marker2",
        "sk-marker3",
        "sk-marker4",
        "sk-marker5",
        "sk-marker6",
        "sk-marker7",
    ] {
        assert!(!d.allowed.saw(marker), "{marker} reached the nameserver");
        assert!(
            !d.other.saw(marker),
            "{marker} reached the other nameserver"
        );
    }
    assert!(
        !d.other.saw("allowed.test"),
        "the other nameserver was reached"
    );
}

#[test]
fn a_wildcard_rule_admits_only_what_an_allowed_name_resolved_to() {
    let w = Workspace::new();
    let Some(d) = dns_world(
        "a_wildcard_rule_admits_only_what_an_allowed_name_resolved_to",
        &w,
        TABLE,
    ) else {
        return;
    };
    let target =
        d.ns.enter(|| TcpListener::bind("127.0.0.7:8443").expect("listener"));
    let sink = TcpSink::start(target);
    let l = layer(&w, "wild", &["*.wild.test:8443".into()]);
    let run = |args: &[&str]| {
        let mut argv = vec![w.probe()];
        argv.extend(args.iter().map(|a| a.to_string()));
        probe_result(&d.ns.wrap(w.exec(&["agent", &l]), &d.resolv).run(&argv))
    };
    // Nothing resolved to it in this run: refused.
    assert_eq!(run(&["connect", "127.0.0.7:8443"]), "errno 13 EACCES");
    assert_refusal_logged(&w, "connect", "127.0.0.7:8443", None);
    assert_eq!(sink.count(), 0);
    // Resolved through glibc (judged at the relay): allowed.
    assert_eq!(
        run(&["resolve-connect", "api.wild.test", "8443"]),
        "ok connected=127.0.0.7:8443"
    );
    assert_eq!(sink.count(), 1);
    // Asked with sendto (musl's way, answered by the nameserver itself): guard asked the
    // same question first and learned the answer.
    assert_eq!(
        run(&[
            "dns-sendto-connect",
            "127.0.0.1:53",
            "api.wild.test",
            "8443"
        ]),
        "ok connected=127.0.0.7:8443"
    );
    assert_eq!(sink.count(), 2);
    // A name outside the wildcard is not even asked.
    assert!(run(&["resolve", "wild.test"]).starts_with("resolve-failed"));
    let asked = d.allowed.asked.lock().expect("lock").clone();
    assert!(!asked.iter().any(|n| n == "wild.test"), "{asked:?}");
}

#[test]
fn a_connect_to_a_unix_socket_does_not_wait_for_the_host_lookups() {
    // A host entry of net.connect stands for IP addresses; its lookup begins at the command's
    // first network call, and a TCP connect waits for it (at most 5 s). A connect to a unix
    // socket cannot match a host entry: it is judged at once. It used to wait as well (and
    // hold up every other call meanwhile): `ls -l` or `id`, whose C library connects to
    // nscd's socket, took 5 s under guard wherever a nameserver was slow.
    let test = "a_connect_to_a_unix_socket_does_not_wait_for_the_host_lookups";
    let python = "/usr/bin/python3";
    if !std::path::Path::new(python).exists() {
        eprintln!("skipped {test}: no {python}");
        return;
    }
    let w = Workspace::new();
    let Some(ns) = NetNs::new(test) else {
        return;
    };
    // A nameserver that never answers: the lookup of slow.test takes the resolver's whole
    // timeout (2 x 4 s), longer than a connect would wait for it.
    let silent = ns.enter(|| UdpSocket::bind(("127.0.0.1", 53)).expect("udp 53"));
    let resolv = w.root.join("resolv-silent.conf");
    std::fs::write(
        &resolv,
        "nameserver 127.0.0.1\noptions timeout:4 attempts:2\n",
    )
    .expect("write resolv.conf");
    let sock = w.ws.join("service.sock");
    let l = layer(
        &w,
        "slow-names",
        &["slow.test:443".into(), sock.display().to_string()],
    );
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX)\n\
                  try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print('connect', e.errno)\n\
                  open('after.txt', 'w').write('done')\n";
    let out = ns.wrap(w.exec(&["agent", &l]), &resolv).run(&[
        python,
        "-c",
        script,
        &sock.display().to_string(),
    ]);
    out.expect_code(0);
    // Allowed, and the socket is not there: the kernel's own ENOENT.
    assert_eq!(out.stdout().trim(), "connect 2", "{}", out.stderr());
    assert!(
        !out.stderr().contains("still running"),
        "the unix connect waited for the lookups: {}",
        out.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(w.ws.join("after.txt")).expect("after"),
        "done"
    );
    let connects = decisions_of(&w, "connect");
    assert!(
        connects
            .iter()
            .any(|d| d["verdict"] == "allow"
                && d["addr"].as_str() == Some(&*sock.display().to_string())),
        "the connect was judged: {connects:?}"
    );
    drop(silent);
}

#[test]
fn a_tcp_connect_waits_for_the_host_lookups_and_is_judged_on_them() {
    // The other side of the test above: the command's first network call is a TCP connect to
    // the address a host entry resolves to. It begins the lookups and waits for them, so it
    // is allowed on the entry, not refused for want of its addresses.
    let test = "a_tcp_connect_waits_for_the_host_lookups_and_is_judged_on_them";
    let w = Workspace::new();
    let Some(d) = dns_world(test, &w, TABLE) else {
        return;
    };
    let sink =
        d.ns.enter(|| TcpSink::start(TcpListener::bind("127.0.0.9:8443").expect("bind")));
    let l = layer(&w, "named", &["allowed.test:8443".into()]);
    let out = d.ns.wrap(w.exec(&["agent", &l]), &d.resolv).run(&[
        &w.probe(),
        "connect",
        "127.0.0.9:8443",
    ]);
    assert_eq!(probe_result(&out), "ok", "{}", out.stderr());
    assert_eq!(sink.count(), 1, "the connect reached the listener");
    let connects = decisions_of(&w, "connect");
    assert!(
        connects
            .iter()
            .any(|e| e["verdict"] == "allow" && e["addr"] == "127.0.0.9:8443"),
        "{connects:?}"
    );
    // A port the entry does not name stays refused.
    let out = d.ns.wrap(w.exec(&["agent", &l]), &d.resolv).run(&[
        &w.probe(),
        "connect",
        "127.0.0.9:8444",
    ]);
    assert!(
        probe_result(&out).starts_with("errno 13"),
        "{}",
        out.stdout()
    );
}

/// A server the command starts on a unix socket in its TMPDIR (a test suite's own: Python's
/// asyncio and socket tests, a database started for the tests) is reached under `agent` and
/// `ci` as bare, as root and unprivileged; a socket listened on outside the run stays refused.
#[test]
fn a_unix_socket_server_in_the_runs_tmpdir_is_reached_and_one_outside_is_not() {
    // The system's interpreter: every user can run it, and agent lets it be read.
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.exists() {
        eprintln!("skipped: /usr/bin/python3 is not installed");
        return;
    }
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let outside = w.outside.join("daemon.sock");
        let daemon = std::os::unix::net::UnixListener::bind(&outside).expect("bind outside");
        daemon.set_nonblocking(true).expect("nonblocking");
        if w.unprivileged {
            let status = std::process::Command::new("chown")
                .arg(format!("{UNPRIV_USER}:"))
                .arg(&outside)
                .status()
                .expect("chown");
            assert!(status.success());
        }
        let script = format!(
            r#"
import os, socket
def connect(p):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(p)
        return "ok"
    except OSError as e:
        return os.strerror(e.errno)
p = os.path.join(os.environ["TMPDIR"], "server.sock")
srv = socket.socket(socket.AF_UNIX)
srv.bind(p)
srv.listen()
print("tmpdir:", connect(p))
print("outside:", connect({outside:?}))
"#
        );
        for profile in ["agent", "ci"] {
            let out = w.exec(&[profile]).run(&[
                python.display().to_string(),
                "-c".into(),
                script.clone(),
            ]);
            assert_eq!(
                out.stdout(),
                "tmpdir: ok\noutside: Permission denied\n",
                "{profile}, unprivileged {}: {}",
                w.unprivileged,
                out.stderr()
            );
            assert_refusal_logged(&w, "connect", &outside.display().to_string(), None);
        }
        assert!(
            daemon.accept().is_err(),
            "a refused connect reached the daemon"
        );
    }
}
