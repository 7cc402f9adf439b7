//! Test network plumbing: a network namespace of the test's own ([`NetNs`]: loopback, with
//! 192.0.2.1 on it too, a documentation address that exists only in the namespace), a tiny
//! DNS server ([`DnsServer`], UDP and TCP, answering A records from a table and remembering
//! every name it was asked), listeners that count what reaches them, and a way to run guard
//! inside the namespace with a resolv.conf naming the test's DNS server.
//!
//! Nothing here sends to any address outside the namespace or the loopback of the test.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::{is_root, tool, Guard};

/// A network namespace, deleted on drop.
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    /// A fresh namespace with loopback up and 192.0.2.1 on it; `None` (the
    /// caller skips, saying why) without root or `ip`.
    pub fn new(test: &str) -> Option<NetNs> {
        if !is_root() {
            eprintln!("skipped {test}: a network namespace needs root");
            return None;
        }
        if tool("ip").is_none() {
            eprintln!("skipped {test}: no `ip` command");
            return None;
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "guard-it-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let ip = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().expect("run ip");
            assert!(st.success(), "ip {args:?} failed");
        };
        ip(&["netns", "add", &name]);
        let ns = NetNs { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        // A non-loopback address (no dummy or veth driver is needed for it).
        ip(&["-n", &ns.name, "addr", "add", "192.0.2.1/32", "dev", "lo"]);
        Some(ns)
    }

    /// Run `f` on a thread that has entered the namespace (sockets it opens live there).
    pub fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).expect("open the namespace");
            nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            f()
        })
        .join()
        .expect("thread in the namespace")
    }

    /// `g` (a `guard` command) run inside the namespace, with `/etc/resolv.conf` replaced by
    /// `resolv` in its own mount namespace.
    pub fn wrap(&self, g: Guard, resolv: &Path) -> Guard {
        let sh = "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"";
        let args = ["netns", "exec", &self.name, "sh", "-c", sh].map(OsStr::new);
        let mut cmd =
            crate::util::wrap("ip", args.iter().chain([resolv.as_os_str()].iter()), &g.cmd);
        cmd.stdin(std::process::Stdio::null());
        Guard { cmd }
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A resolv.conf naming `ns` only, in `dir`.
pub fn resolv_conf(dir: &Path, ns: Ipv4Addr) -> PathBuf {
    let p = dir.join("resolv.conf");
    std::fs::write(
        &p,
        format!("nameserver {ns}\noptions timeout:2 attempts:1\n"),
    )
    .expect("write resolv.conf");
    p
}

/// A DNS server on UDP and TCP port `addr`: A records from `table`, NXDOMAIN otherwise.
pub struct DnsServer {
    pub asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl DnsServer {
    /// Serve on `udp` and `tcp` (already bound, in whatever namespace they were opened).
    pub fn start(udp: UdpSocket, tcp: TcpListener, table: &[(&str, Ipv4Addr)]) -> DnsServer {
        let table: HashMap<String, Ipv4Addr> =
            table.iter().map(|(n, a)| (n.to_string(), *a)).collect();
        let table = Arc::new(table);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        tcp.set_nonblocking(true).expect("nonblocking");
        let answer = {
            let (table, asked) = (Arc::clone(&table), Arc::clone(&asked));
            move |msg: &[u8]| -> Option<Vec<u8>> {
                let q = guard::dns::Query::parse(msg).ok()?;
                asked.lock().expect("lock").push(q.name.clone());
                let addrs: Vec<std::net::IpAddr> = match table.get(&q.name) {
                    Some(a) if q.qtype == 1 => vec![(*a).into()],
                    _ => Vec::new(),
                };
                let mut reply = guard::dns::answer_for(msg, &addrs);
                if !table.contains_key(&q.name) {
                    reply[3] = (reply[3] & 0xf0) | 3;
                }
                Some(reply)
            }
        };
        let (s1, a1) = (Arc::clone(&stop), answer.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s1.load(Ordering::Relaxed) {
                if let Ok((n, from)) = udp.recv_from(&mut buf) {
                    if let Some(r) = a1(&buf[..n]) {
                        let _ = udp.send_to(&r, from);
                    }
                }
            }
        });
        let s2 = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let Ok((mut c, _)) = tcp.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let a = answer.clone();
                std::thread::spawn(move || {
                    let _ = c.set_nonblocking(false);
                    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                    loop {
                        let mut len = [0u8; 2];
                        if c.read_exact(&mut len).is_err() {
                            return;
                        }
                        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                        if c.read_exact(&mut msg).is_err() {
                            return;
                        }
                        let Some(r) = a(&msg) else { return };
                        let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&r);
                        if c.write_all(&framed).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        DnsServer { asked, stop }
    }

    /// Whether any name it was asked contains `marker`.
    pub fn saw(&self, marker: &str) -> bool {
        self.asked
            .lock()
            .expect("lock")
            .iter()
            .any(|n| n.contains(marker))
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Everything a UDP socket receives until dropped.
pub struct UdpSink {
    pub got: Arc<Mutex<Vec<Vec<u8>>>>,
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl UdpSink {
    pub fn start(sock: UdpSocket) -> UdpSink {
        let addr = sock.local_addr().expect("local address");
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("timeout");
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, s) = (Arc::clone(&got), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !s.load(Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    g.lock().expect("lock").push(buf[..n].to_vec());
                }
            }
        });
        UdpSink { got, addr, stop }
    }

    /// What arrived, after a moment for datagrams in flight.
    pub fn received(&self) -> Vec<Vec<u8>> {
        std::thread::sleep(Duration::from_millis(100));
        self.got.lock().expect("lock").clone()
    }
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Counts the connections (and bytes) a TCP listener accepts until dropped.
pub struct TcpSink {
    pub accepted: Arc<AtomicUsize>,
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl TcpSink {
    pub fn start(l: TcpListener) -> TcpSink {
        let addr = l.local_addr().expect("local address");
        l.set_nonblocking(true).expect("nonblocking");
        let accepted = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b, s) = (Arc::clone(&accepted), Arc::clone(&bytes), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        a.fetch_add(1, Ordering::Relaxed);
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_millis(300)));
                        let mut buf = Vec::new();
                        let _ = c.read_to_end(&mut buf);
                        b.lock().expect("lock").extend(buf);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TcpSink {
            accepted,
            bytes,
            addr,
            stop,
        }
    }

    pub fn count(&self) -> usize {
        std::thread::sleep(Duration::from_millis(100));
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for TcpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
