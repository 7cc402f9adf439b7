//! [`render`]: a readable, TOML-like dump of a resolved [`Policy`] for
//! `guard profile show NAME --resolved`. It shows what the policy is after `extends`,
//! merging and variable expansion; it is meant for people, not for parsing back.

use std::fmt::Write as _;

use super::errno;
use super::model::*;

/// Renders the resolved policy: sources, digest, mode, fs, net, transaction, env, git, rules.
pub fn render(policy: &Policy) -> String {
    let mut out = String::new();
    let w = &mut out;
    line(
        w,
        format_args!("# resolved from: {}", policy.sources.join(" <- ")),
    );
    line(w, format_args!("# digest: sha256:{}", policy.digest));
    if !policy.guard_files.is_empty() {
        let files: Vec<String> = policy
            .guard_files
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        line(
            w,
            format_args!(
                "# guard's own configuration (the command cannot change it): {}",
                files.join(", ")
            ),
        );
    }
    line(w, format_args!("name = {}", quote(&policy.name)));
    if let Some(d) = &policy.description {
        line(w, format_args!("description = {}", quote(d)));
    }
    let mode = match policy.mode {
        Mode::Enforce => "enforce",
        Mode::Observe => "observe",
    };
    line(w, format_args!("mode = \"{mode}\""));

    line(w, format_args!("\n[fs]"));
    list(
        w,
        "read",
        policy.fs.read.iter().map(|p| p.display().to_string()),
    );
    list(
        w,
        "write",
        policy.fs.write.iter().map(|p| p.display().to_string()),
    );
    list(
        w,
        "list",
        policy.fs.list.iter().map(|p| p.display().to_string()),
    );
    list(
        w,
        "shared",
        policy.fs.shared.iter().map(|p| p.display().to_string()),
    );
    list(w, "protect", policy.fs.protect.iter().cloned());
    list(
        w,
        "# protect anchors",
        policy
            .fs
            .protect_anchors
            .iter()
            .map(|p| p.display().to_string()),
    );
    list(w, "hide", policy.fs.hide.iter().cloned());
    line(w, format_args!("allow-setid = {}", policy.fs.allow_setid));

    line(w, format_args!("\n[net]"));
    list(w, "connect", policy.net.connect.iter().map(target));
    let mut bind: Vec<String> = match &policy.net.bind {
        None => vec!["\"*\"".into()],
        Some(ports) => ports.iter().map(u16::to_string).collect(),
    };
    bind.extend(policy.net.bind_addrs.iter().map(|t| quote(&target(t))));
    line(w, format_args!("bind = [{}]", bind.join(", ")));
    list(w, "resolve", policy.net.resolve.iter().cloned());
    line(w, format_args!("dns = {}", policy.net.dns));

    let tx = &policy.transaction;
    line(w, format_args!("\n[transaction]"));
    let on_deny = match tx.on_deny {
        OnDeny::Errno => "errno",
        OnDeny::Rollback => "rollback",
        OnDeny::Kill => "kill",
    };
    let on_failure = match tx.on_failure {
        OnFailure::Keep => "keep",
        OnFailure::Rollback => "rollback",
    };
    line(w, format_args!("on-deny = \"{on_deny}\""));
    line(w, format_args!("on-failure = \"{on_failure}\""));
    list(w, "exclude", tx.exclude.iter().cloned());
    line(
        w,
        format_args!("max-preimage-size = {}", tx.max_preimage_bytes),
    );
    let oversize = match tx.oversize {
        Oversize::Record => "record",
        Oversize::Deny => "deny",
    };
    line(w, format_args!("oversize = \"{oversize}\""));
    line(w, format_args!("fsync = {}", tx.fsync));
    let md = &tx.mass_delete;
    line(
        w,
        format_args!(
            "mass-delete = {{ action = \"{}\", min-entries = {}, share = {} }}",
            md.action.as_str(),
            md.min_entries,
            md.share
        ),
    );

    line(w, format_args!("\n[env]"));
    list(w, "keep", policy.env.keep.iter().cloned());
    list(w, "drop", policy.env.drop.iter().cloned());
    list(w, "allow", policy.env.allow.iter().cloned());
    let set: Vec<String> = policy
        .env
        .set
        .iter()
        .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
        .collect();
    line(w, format_args!("set = {{ {} }}", set.join(", ")));

    line(w, format_args!("\n[git]"));
    line(
        w,
        format_args!("refuse-hooks = {}", policy.git.refuse_hooks),
    );
    line(
        w,
        format_args!(
            "refuse-destructive-push = {}",
            policy.git.refuse_destructive_push
        ),
    );
    list(w, "refuse-keys", policy.git.refuse_keys.iter().cloned());
    list(w, "allow-keys", policy.git.allow_keys.iter().cloned());

    line(w, format_args!("\n[home]"));
    line(w, format_args!("private = {}", policy.home.private));
    for (key, vars) in [
        ("locate", &policy.home.locate),
        ("redact", &policy.home.redact),
    ] {
        let vars: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("{} = {}", quote(k), quote(&v.display().to_string())))
            .collect();
        line(w, format_args!("{key} = {{ {} }}", vars.join(", ")));
    }

    line(w, format_args!("\n[report]"));
    let denials = match policy.report.denials {
        Denials::Stderr => "stderr",
        Denials::None => "none",
    };
    line(w, format_args!("denials = \"{denials}\""));

    for rule in &policy.rules {
        line(w, format_args!("\n[[rule]]  # first match wins"));
        line(w, format_args!("id = {}", quote(&rule.id)));
        let when: Vec<String> = rule.when.iter().map(|op| quote(op.as_str())).collect();
        line(w, format_args!("when = [{}]", when.join(", ")));
        if !rule.path.is_empty() {
            list(w, "path", rule.path.iter().cloned());
        }
        if !rule.argv.is_empty() {
            let argv: Vec<String> = rule.argv.iter().map(|a| quote(a)).collect();
            line(w, format_args!("argv = [{}]", argv.join(", ")));
        }
        if !rule.addr.is_empty() {
            list(w, "addr", rule.addr.iter().map(target));
        }
        line(w, format_args!("action = \"{}\"", rule.action.as_str()));
        if matches!(rule.action, Action::Deny | Action::Kill) {
            match errno::name_of(rule.errno) {
                Some(name) => line(w, format_args!("errno = \"{name}\"")),
                None => line(w, format_args!("errno = {}", rule.errno)),
            }
        }
        if let Some(reason) = &rule.reason {
            line(w, format_args!("reason = {}", quote(reason)));
        }
    }
    out
}

fn line(out: &mut String, args: std::fmt::Arguments) {
    // Writing to a String cannot fail.
    let _ = out.write_fmt(args);
    out.push('\n');
}

fn list(out: &mut String, key: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.map(|i| quote(&i)).collect();
    if items.is_empty() {
        line(out, format_args!("{key} = []"));
        return;
    }
    line(out, format_args!("{key} = ["));
    for item in items {
        line(out, format_args!("    {item},"));
    }
    line(out, format_args!("]"));
}

fn quote(s: &str) -> String {
    format!("{s:?}")
}

fn target(t: &NetTarget) -> String {
    let port = |p: &Option<u16>| p.map(|p| format!(":{p}")).unwrap_or_default();
    match t {
        NetTarget::Cidr {
            addr,
            prefix,
            port: p,
        } => {
            let full = if addr.is_ipv4() { 32 } else { 128 };
            let net = if *prefix == full {
                addr.to_string()
            } else {
                format!("{addr}/{prefix}")
            };
            match (addr.is_ipv6(), p) {
                (true, Some(p)) => format!("[{net}]:{p}"),
                _ => format!("{net}{}", port(p)),
            }
        }
        NetTarget::AnyHost { port } => format!("*:{port}"),
        NetTarget::Host {
            name,
            port: p,
            addrs,
        } => {
            if addrs.is_empty() {
                format!("{name}{}", port(p))
            } else {
                let addrs: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
                format!("{name}{} ({})", port(p), addrs.join(" "))
            }
        }
        NetTarget::UnixPath(p) => p.clone(),
        NetTarget::Abstract(n) => format!("@{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::load;

    #[test]
    fn renders_every_section_in_order() {
        let vars = Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/t".into(),
            state: "/s".into(),
        };
        let p = load(&["agent".into()], &vars).unwrap();
        let text = render(&p);
        let pos = |s: &str| {
            text.find(s)
                .unwrap_or_else(|| panic!("missing {s} in\n{text}"))
        };
        assert!(pos("# resolved from: agent <- base") < pos("[fs]"));
        assert!(pos("[fs]") < pos("[net]"));
        assert!(pos("[net]") < pos("[transaction]"));
        assert!(pos("[transaction]") < pos("[env]"));
        assert!(pos("[env]") < pos("[git]"));
        assert!(pos("[git]") < pos("[[rule]]"));
        assert!(pos("\"core.hooksPath\"") > pos("refuse-keys"));
        assert!(pos("\"/etc/shadow\"") > pos("hide"));
        assert!(pos("mass-delete = { action = \"risky\"") > 0);
        assert!(pos("\"/home/u/.cargo\"") > 0);
        assert!(pos("\"127.0.0.0/8\"") > 0 && pos("\"::1\"") > 0);
        assert!(pos("id = \"no-rm-workspace\"") > 0 && pos("errno = \"EPERM\"") > 0);
    }
}
