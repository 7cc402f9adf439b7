//! `guard doctor`: what this kernel offers, what guard will enforce here and what it degrades,
//! with hints. Exit status 0 when guard can run here with full enforcement (features newer than
//! any release guard knows may be missing), 1 when it runs degraded, 2 when it cannot run at all.

use std::io::Write;

use super::CliError;
use crate::confine::features::{Feature, Features, Status};

pub fn run(json: bool) -> Result<i32, CliError> {
    let f = Features::probe();
    let mut out = std::io::stdout().lock();
    let code = if !f.available(Feature::SeccompNotify) {
        2
    } else if f
        .iter()
        .any(|x| !x.status.is_available() && x.feature.since().is_some())
    {
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
            if f.kernel_landlock_abi > 0 {
                format!("ABI {}", f.kernel_landlock_abi)
            } else {
                "not available".into()
            }
        ),
    )?;
    w(&mut out, String::new())?;
    for x in f.iter() {
        let mark = match x.status {
            Status::Available => "ok  ",
            Status::Off { .. } => "off ",
            Status::Absent { .. } => "MISS",
        };
        let detail = if x.detail.is_empty() {
            String::new()
        } else {
            format!(" [{}]", x.detail)
        };
        let name = x.feature.name();
        w(
            &mut out,
            format!("{mark} {name:<28} {}{detail}", x.feature.purpose()),
        )?;
        if !x.status.is_available() {
            w(&mut out, format!("     {:<28} {}", "", x.status.why()))?;
            w(
                &mut out,
                format!("     {:<28} without it: {}", "", x.feature.without()),
            )?;
            if !x.status.hint().is_empty() {
                w(
                    &mut out,
                    format!("     {:<28} hint: {}", "", x.status.hint()),
                )?;
            }
        }
    }
    w(&mut out, String::new())?;
    w(&mut out, match code {
        0 if f.iter().all(|x| x.status.is_available()) => {
            "guard enforces everything it can on this machine".to_string()
        }
        0 => "guard enforces everything it can on this machine; the features marked MISS come with newer kernels".to_string(),
        1 => "guard runs here, degraded as listed above".to_string(),
        _ => "guard cannot run here: seccomp user notification is missing\nhint: use Linux 5.0 or newer with CONFIG_SECCOMP_FILTER".to_string(),
    })?;
    Ok(code)
}
