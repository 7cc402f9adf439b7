//! `guard learn` on a command that looks a name up and connects to what it resolved to, in a
//! network namespace of the test's own (its DNS server on 127.0.0.1:53, a service on
//! 192.0.2.1): under the base the lookup is refused at guard's relay (rule net.dns) and the
//! connect by net.connect; the learned profile lists the name in `net.resolve` and the address
//! in `net.connect`, and under it the same command resolves, connects, and is refused nothing.
//! `guard explain --connect NAME:PORT` judges the lookup first, as the runs did.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

use crate::learn_agree::explain_agrees;
use crate::netns::{resolv_conf, DnsServer, NetNs};
use crate::util::Workspace;

const TABLE: &[(&str, Ipv4Addr)] = &[("api.learned.test", Ipv4Addr::new(192, 0, 2, 1))];

#[test]
fn a_learned_profile_resolves_the_names_the_command_looked_up_and_reaches_their_address() {
    let test = "a_learned_profile_resolves_the_names_the_command_looked_up";
    let w = Workspace::new();
    let Some(ns) = NetNs::new(test) else {
        return;
    };
    let (dns, service) = ns.enter(|| {
        (
            (
                UdpSocket::bind(("127.0.0.1", 53)).expect("udp 53"),
                TcpListener::bind(("127.0.0.1", 53)).expect("tcp 53"),
            ),
            TcpListener::bind(("192.0.2.1", 8443)).expect("the service"),
        )
    });
    let server = DnsServer::start(dns.0, dns.1, TABLE);
    let resolv = resolv_conf(&w.root, Ipv4Addr::LOCALHOST);
    let script = format!(
        "getent hosts api.learned.test | cut -d ' ' -f 1; {} connect 192.0.2.1:8443",
        w.probe()
    );
    let last_lines = |out: &crate::util::Out| {
        out.stdout()
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
    };

    // Under the base: the name is not agent's, nor the address.
    let out = ns
        .wrap(w.exec(&["agent"]), &resolv)
        .run(&["sh", "-c", &script]);
    assert!(
        !last_lines(&out).starts_with("192.0.2.1"),
        "{}",
        out.stdout()
    );
    let rules: Vec<String> = w
        .decisions()
        .iter()
        .filter(|d| d["verdict"] == "deny")
        .filter_map(|d| d["rule"].as_str().map(str::to_string))
        .collect();
    assert!(rules.iter().any(|r| r == "net.dns"), "{rules:?}");

    // Learned.
    let learned = w.root.join("api.toml");
    let mut g = w.guard();
    g.arg("learn")
        .arg("-o")
        .arg(&learned)
        .args(["-p", "agent", "-p"])
        .arg(&w.profile)
        .arg("-w")
        .arg(&w.ws);
    let out = ns.wrap(g, &resolv).run(&["sh", "-c", &script]);
    out.expect_code(0);
    assert_eq!(last_lines(&out), "192.0.2.1 ok", "{}", out.stderr());
    let text = std::fs::read_to_string(&learned).expect("the learned profile");
    assert!(
        text.contains("resolve = [") && text.contains("\"api.learned.test\","),
        "{text}"
    );
    assert!(text.contains("\"192.0.2.1:8443\","), "{text}");
    w.guard()
        .args(["profile", "check"])
        .arg(&learned)
        .output()
        .expect_code(0);

    // Under the base and the learned profile: resolved, connected, nothing refused.
    let spec = learned.display().to_string();
    let out = ns
        .wrap(w.exec(&["agent", &spec]), &resolv)
        .run(&["sh", "-c", &script]);
    out.expect_code(0);
    assert_eq!(last_lines(&out), "192.0.2.1 ok", "{}\n{text}", out.stderr());
    let decisions = w.decisions();
    let refused: Vec<_> = decisions
        .iter()
        .filter(|d| d["verdict"] == "deny" || d["verdict"] == "kill")
        .collect();
    assert!(refused.is_empty(), "{refused:#?}\n{text}");
    assert!(
        decisions.iter().any(|d| d["op"] == "dns"
            && d["name"] == "api.learned.test"
            && d["verdict"] == "allow"),
        "the lookup was judged and allowed: {decisions:#?}"
    );
    assert!(server.saw("api.learned.test"));
    // explain agrees on the connect (and the execs) of that run.
    let agreed = explain_agrees(&w, &["agent", &spec], &[], &decisions, 40);
    assert!(agreed.ops.contains_key("connect"), "{agreed:?}");

    // And on a connect by name, lookup first: refused at the lookup under the base, as the
    // base run was; allowed under the learned profile.
    let explain = |profiles: &[&str]| -> serde_json::Value {
        let mut g = w.guard();
        g.args(["explain", "--json"]);
        for p in profiles {
            g.arg("-p").arg(p);
        }
        g.arg("-p").arg(&w.profile);
        g.args(["--connect", "api.learned.test:8443"]);
        let out = ns.wrap(g, &resolv).output();
        serde_json::from_str(out.stdout().trim())
            .unwrap_or_else(|e| panic!("{e}: {}{}", out.stdout(), out.stderr()))
    };
    let e = explain(&["agent"]);
    assert_eq!(
        (&e["verdict"], &e["rule"], &e["target"]),
        (
            &serde_json::json!("deny"),
            &serde_json::json!("net.dns"),
            &serde_json::json!("api.learned.test")
        ),
        "{e}"
    );
    let e = explain(&["agent", &spec]);
    assert_eq!(
        (&e["verdict"], &e["rule"], &e["target"]),
        (
            &serde_json::json!("allow"),
            &serde_json::json!("net.connect"),
            &serde_json::json!("192.0.2.1:8443")
        ),
        "{e}"
    );
    drop(service);
}
