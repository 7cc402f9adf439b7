//! `guard doctor`: what this kernel offers, what guard will enforce here and what it degrades,
//! with hints. Exit status 0 when guard can run here with full enforcement, 1 when it runs
//! degraded, 2 when it cannot run at all.

use std::io::Write;

use super::CliError;
use crate::confine::features;

pub fn run(json: bool) -> Result<i32, CliError> {
    let f = features::probe();
    let mut out = std::io::stdout().lock();
    let required_missing = f
        .features
        .iter()
        .any(|x| x.name == "seccomp-notify" && !x.available);
    let degraded = f.features.iter().any(|x| !x.available);
    let code = if required_missing {
        2
    } else if degraded {
        1
    } else {
        0
    };
    if json {
        let text = serde_json::to_string_pretty(&f).unwrap_or_default();
        writeln!(out, "{text}").map_err(CliError::Stdout)?;
        return Ok(code);
    }
    let w =
        |out: &mut std::io::StdoutLock, s: String| writeln!(out, "{s}").map_err(CliError::Stdout);
    w(&mut out, format!("kernel     {} ({})", f.kernel, f.arch))?;
    w(
        &mut out,
        format!(
            "landlock   {}",
            f.landlock_abi
                .map(|a| format!("ABI {a}"))
                .unwrap_or_else(|| "not available".into())
        ),
    )?;
    w(&mut out, String::new())?;
    for x in &f.features {
        let mark = if x.available { "ok  " } else { "MISS" };
        let detail = if x.detail.is_empty() || x.detail == "yes" {
            String::new()
        } else {
            format!(" [{}]", x.detail)
        };
        w(
            &mut out,
            format!("{mark} {:<18} {}{}", x.name, x.purpose, detail),
        )?;
        if !x.available {
            w(
                &mut out,
                format!("     {:<18} without it: {}", "", x.without),
            )?;
        }
    }
    w(&mut out, String::new())?;
    w(&mut out, match code {
        0 => "guard enforces everything it can on this machine".to_string(),
        1 => "guard runs here, degraded as listed above".to_string(),
        _ => "guard cannot run here: seccomp user notification is missing\nhint: use Linux 5.0 or newer with CONFIG_SECCOMP_FILTER".to_string(),
    })?;
    Ok(code)
}
