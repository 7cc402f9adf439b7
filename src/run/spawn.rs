//! Starting a run, in the order of `docs/launch.md`: everything that can fail with a clear
//! message happens before the command starts, most of it before the fork (`prepare.rs`), the
//! rest (guard's share of the Landlock rules, the command line, the journal) while the child
//! confines itself; the process is single-threaded when it forks; the threads (audit writer,
//! supervisor) start after. On an error the run directory is marked failed, the private
//! temporary directory removed, and a tree already started is killed.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;
use std::time::Instant;

use super::builder::{NoticeFn, RunBuilder};
use super::prepare::{cstring, dirs, policy};
use super::running::{Active, ProcessState, Running};
use super::{home, start, Notice, RunError};
use crate::audit::{self, AuditWriter, Event};
use crate::confine::{self, features, Feature, Features};
use crate::journal::{self, Journal, RunMeta};
use crate::launch::{self, LaunchSpec, RunTree};
use crate::policy;
use crate::supervisor::{Inject, RootPid, Setup, Shared, Supervisor};
use crate::sys;

fn notify(notices: &mut Option<NoticeFn>, notice: Notice) {
    match notices {
        Some(handler) => handler(&notice),
        None => tracing::warn!("{notice}"),
    }
}

/// Start the run (see the module documentation).
pub(super) fn spawn(mut b: RunBuilder, argv: Vec<OsString>) -> Result<Running, RunError> {
    let started = Instant::now();
    if argv.is_empty() {
        return Err(launch::CommandError::Empty.into());
    }
    let mut d = dirs(&b)?;
    d.command = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    d.profile = b.profiles.describe();
    let (policy, untrusted) = policy(&mut b, &d)?;
    if let Some(path) = untrusted {
        notify(&mut b.notices, Notice::UntrustedConfig { path });
    }
    home::create_write_roots(&policy);
    let otlp = audit::OtlpConfig::detect(b.audit_otlp.as_deref(), &d.run_dir.id, &|name| {
        std::env::var(name).ok()
    })
    .map_err(audit::AuditError::from)?;
    for run in journal::interrupted_runs(&d.state, &d.workspace) {
        let workspace = d.workspace.clone();
        notify(&mut b.notices, Notice::InterruptedRun { run, workspace });
    }

    // 4. The confinement, built in the parent, from one probe of the kernel.
    let kernel = features::Kernel::probe();
    let sizes = kernel
        .notif_sizes
        .map_err(|errno| RunError::NoNotify(io::Error::from_raw_os_error(errno)))?;
    let features = Features::of_kernel(&kernel, &b.features);
    let mut plan = confine::landlock::plan(&policy, &features)?;
    let protect_init = plan.ruleset.is_some() && features.available(Feature::LandlockScopeSignal);
    // Who adds the rules. Where the init is fenced off by a layer of its own, the run's
    // ruleset is enforced by the command alone, which the init forks only after guard's
    // go-ahead (`go_ahead`): guard adds its rules after the fork, through a descriptor
    // of its own, while the child adds one root that `fs.hide` expands entry by entry (for a
    // root guard, `/etc`'s 150 entries) and sets itself up. Otherwise every rule is in before
    // the fork.
    let mut after_fork = None;
    if protect_init {
        after_fork = plan.ruleset.as_ref().and_then(|r| r.try_clone().ok());
    }
    let mut grants = plan.grants.take();
    let share = match after_fork {
        Some(_) => grants
            .as_mut()
            .and_then(confine::landlock::Grants::split_off),
        None => None,
    };
    let mut hidden = 0;
    if after_fork.is_none() {
        if let (Some(ruleset), Some(grants)) = (plan.ruleset.as_mut(), grants.take()) {
            hidden = grants.grant(ruleset, &mut plan.report)?;
        }
    }
    let exec_roots = plan.ruleset.is_some().then(|| {
        confine::landlock::fs_roots(&policy)
            .filter(|(_, list)| *list != confine::RootList::List)
            .map(|(root, _)| root.to_path_buf())
            .collect::<Vec<_>>()
    });
    let mut spec = confine::seccomp::FilterSpec::for_policy(&policy);
    if b.learning {
        // Learning sees every open, and keeps the deny list the profile will run under.
        spec.trap_reads = true;
        spec.deny_list = true;
    }
    let filter = confine::seccomp::build(&spec)?;
    let filter: Vec<libc::sock_filter> = filter.into_iter().map(libc::sock_filter::from).collect();

    // 5. run.json.
    let start_time = audit::Timestamp::now();
    let meta = RunMeta {
        v: 1,
        id: d.run_dir.id.clone(),
        workspace: d.workspace.clone(),
        command: argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        profile: policy.name.clone(),
        started: start_time.to_string(),
        guard_pid: std::process::id(),
        state: "running".into(),
        status: None,
        tmp: Some(d.tmp.clone()),
    };

    // 6. Process-wide settings the caller asked for, then fork while single-threaded.
    let process = ProcessState::enter(b.forward_signals, b.subreaper)?;
    let spec = LaunchSpec {
        filter,
        protect_init,
        landlock: plan.ruleset.take(),
        share: share.clone(),
        drop_caps: !b.keep_caps,
        cwd: b
            .current_dir
            .as_ref()
            .map(|c| cstring(c.as_os_str().as_bytes().to_vec())),
    };
    let mut spawned = launch::spawn(spec)?;
    let tree = spawned.tree.clone();
    let abandon = |tree: &RunTree| {
        tree.kill();
        let _ = tree.reap();
    };
    // guard's share of the rules, while the child adds its own; both are in before guard's
    // go-ahead to the child (`go_ahead`).
    if let (Some(mut ruleset), Some(grants)) = (after_fork, grants) {
        match grants.grant(&mut ruleset, &mut plan.report) {
            Ok(n) => hidden = n,
            Err(e) => {
                abandon(&tree);
                return Err(e.into());
            }
        }
    }
    // 3. The command and its environment, made while the child confines itself: it reads
    // them once guard has its listener and its supervisor runs (`go_ahead`).
    let command = (|| -> Result<_, RunError> {
        let base_env: Vec<(OsString, OsString)> = match b.environment.take() {
            Some(env) => env,
            None => std::env::vars_os().collect(),
        };
        let path_var = base_env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let name = match &b.current_dir {
            // A relative program path names a file in the command's working directory.
            Some(cwd) if argv[0].as_bytes().contains(&b'/') => cwd.join(&argv[0]).into_os_string(),
            _ => argv[0].clone(),
        };
        let program = launch::resolve_program(&name, path_var.as_deref())?;
        let res_options = base_env
            .iter()
            .find(|(k, _)| k == "RES_OPTIONS")
            .map(|(_, v)| v.as_os_str());
        let mut extra = vec![
            ("TMPDIR".to_string(), d.tmp.as_os_str().to_os_string()),
            ("GUARD_RUN".to_string(), OsString::from(&d.run_dir.id)),
            (
                "GUARD_WORKSPACE".to_string(),
                d.workspace.as_os_str().to_os_string(),
            ),
        ];
        if let Some(v) = crate::supervisor::resolver_options(
            &policy,
            res_options,
            crate::sys::process::glibc_version(),
        ) {
            extra.push(("RES_OPTIONS".to_string(), v));
        }
        extra.extend(home::private_home(&policy, &d.tmp)?);
        let mut envp = launch::sanitize_env(base_env, &policy.env, &extra);
        let made = home::tool_variables(&policy, &d.tmp, &mut envp)?;

        let command = launch::CommandLine {
            program: cstring(program.as_os_str().as_bytes().to_vec()),
            argv: argv.iter().map(|a| cstring(a.clone().into_vec())).collect(),
            envp,
        };
        Ok((program, command, made))
    })();
    let (program, command, tmp_files) = match command {
        Ok(triple) => triple,
        Err(e) => {
            abandon(&tree);
            return Err(e);
        }
    };
    // With `verify`, record the tree's digest to prove a rollback afterwards. Nothing of the
    // command has run yet: it cannot exec before the supervisor answers.
    let digest_before = if b.verify {
        journal::tree_digest(&d.workspace, &policy.transaction.exclude).ok()
    } else {
        None
    };
    // The journal: every change inside the workspace is recorded before it happens.
    let journal = Journal::create(
        &d.run_dir.path,
        &d.workspace,
        &policy.transaction,
        policy.transaction.fsync,
    )
    .and_then(|mut j| j.checkpoint("run start", None).map(|c| (j, c)));
    let (journal, run_start) = match journal {
        Ok(pair) => pair,
        Err(e) => {
            abandon(&tree);
            return Err(e.into());
        }
    };
    // While the child confines itself (Landlock, the filter): run.json and the audit log's
    // files. The command cannot start before the supervisor answers its execve.
    if let Err(e) = d.run_dir.write_meta(&meta) {
        abandon(&tree);
        return Err(e.into());
    }

    // 7. The audit writer, then the supervisor's threads. The writer's files are opened now (a
    // log that cannot be opened stops the run before the command starts); its thread starts
    // once the command runs (below): started here, it took this CPU from the launch.
    let mut sinks = vec![d.run_dir.audit_log()];
    sinks.extend(b.audit_log.clone());
    let mut writer =
        match AuditWriter::open_with(sinks, d.run_dir.id.clone(), audit::Limits::default(), otlp) {
            Ok(w) => w,
            Err(e) => {
                abandon(&tree);
                return Err(e.into());
            }
        };
    // The matchers of `fs.protect` and the rules, compiled while the child confines itself
    // (tens of microseconds: path globs need no regex, argv globs compile theirs on their first
    // match), so the supervisor's first calls find them ready.
    policy.compile_matchers();
    // The child is confined once its listener is here (or says which step failed).
    let granted = match spawned.receive_listener() {
        Ok(granted) => granted,
        Err(launch::LaunchError::Child {
            stage: launch::Stage::LandlockShare,
            source,
        }) => {
            let path = share.map(|s| s.root().to_path_buf()).unwrap_or_default();
            return Err(confine::ConfineError::AddEntryRule { path, source }.into());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(share) = &share {
        hidden += granted.hidden as usize;
        if granted.missing {
            plan.report.skipped_paths.push(share.root().to_path_buf());
        }
    }
    plan.note_hidden(hidden);
    let listener_fd = spawned
        .listener
        .take()
        .expect("receive_listener keeps the listener");
    let listener = sys::Listener::new(listener_fd, sizes);
    let caps = features::probe_listener(&listener, b.features.sync_wake_up);
    let features = features.with_listener(Some(&caps), &b.features);
    let inject = if features.available(Feature::AddFdSend) {
        Inject::AddFdSend
    } else if features.available(Feature::AddFd) {
        Inject::AddFd
    } else {
        Inject::Continue
    };
    let handle = writer.handle();
    handle.emit(Event::RunStart(start::run_start(
        &policy,
        &d.workspace,
        &argv,
        &features,
        &plan.report,
    )));
    handle.emit(Event::Checkpoint(audit::Checkpoint {
        id: run_start.0.to_string(),
        reason: "run start".into(),
        pid: None,
    }));
    let shared = Arc::new(Shared::default());
    let (stop_r, stop_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(pair) => pair,
        Err(e) => {
            abandon(&tree);
            return Err(RunError::Setup {
                what: "create the stop pipe",
                source: e.into(),
            });
        }
    };
    // Started before the init is told to fork the command (below), whose exec, a judged call,
    // follows at once: made after that go-ahead, the supervisor's thread was still being
    // created when the exec came, which then waited for it (about 150 µs, by a temporary
    // timer). The init reports the command's pid once it has forked it.
    let root = RootPid::pending();
    let supervisor = Supervisor::new(Setup {
        listener,
        policy: Arc::clone(&policy),
        audit: handle.clone(),
        shared: Arc::clone(&shared),
        stop: stop_r,
        inject,
        journal: Some(journal),
        root: root.clone(),
        tree: tree.clone(),
        exec_roots,
        record_reads: b.learning,
    })
    .spawn();
    let supervisor = match supervisor {
        Ok(s) => s,
        Err(source) => {
            abandon(&tree);
            return Err(RunError::Setup {
                what: "start the supervisor thread",
                source,
            });
        }
    };
    // Every rule of guard's is in, and the supervisor answers: the init may fork the command.
    if let Err(e) = spawned.go_ahead(&command) {
        // The tree is killed and reaped (`go_ahead`); no worker waits for a pid.
        root.set(0);
        return Err(e.into());
    }
    // The command's pid: the sandbox's init forked it (launch/init.rs).
    let command_pid = match spawned.command_pid() {
        Ok(pid) => {
            root.set(pid as u32);
            pid
        }
        Err(e) => {
            // No worker waits for a pid that will not come; the tree's end ends them.
            root.set(0);
            abandon(&tree);
            return Err(e.into());
        }
    };

    // 8. Did the command start?
    let mut exec_failed = false;
    if let Err(launch::ExecFailed(error)) = spawned.wait_exec() {
        exec_failed = true;
        let hint = (error.raw_os_error() == Some(libc::EACCES))
            .then(|| outside_roots_hint(&policy, &program))
            .flatten();
        notify(
            &mut b.notices,
            Notice::ExecFailed {
                program,
                error,
                hint,
            },
        );
    }
    // The command runs; this thread has nothing to do until it ends. What the run's end
    // would do first is done now: the audit lines queued so far written, the files of the
    // last run.json and of the summary made (empty). For a short command, that is time
    // the run's end no longer waits.
    writer.drain_now();
    if let Err(e) = writer.spawn() {
        // The lines stay queued for the run's end, which writes them on this thread.
        tracing::warn!("{e}; the audit log is written at the run's end");
    }
    // The pruning of older journals goes on while the command runs; started before, its thread
    // too took a CPU from the launch (some 700 µs of a start, by a temporary timer).
    let pruning = super::prune::Pruning::start(&d.state, b.keep_runs);
    d.run_dir.prepare_meta();
    audit::Summary::prepare(&d.run_dir.summary());
    d.armed = false;
    Ok(Running::new(Active {
        workspace: std::mem::take(&mut d.workspace),
        state: std::mem::take(&mut d.state),
        run_dir: d.run_dir.clone(),
        tmp: std::mem::take(&mut d.tmp),
        tmp_files,
        argv,
        policy,
        tree,
        command_pid,
        process,
        writer: Some(writer),
        handle,
        supervisor: Some(supervisor),
        shared,
        stop: stop_w,
        exec_failed,
        run_start,
        digest_before,
        verify: b.verify,
        started,
        start_time,
        meta,
        summary_path: b.summary.take(),
        pruning,
        notices: b.notices.take(),
        progress: b.progress.take(),
    }))
}

/// Why Landlock refused to execute `program`, when it is because the program lies outside
/// every read and write root (the kernel does not tell guard; it can see it for itself).
fn outside_roots_hint(policy: &policy::Policy, program: &std::path::Path) -> Option<String> {
    if policy.mode != policy::Mode::Enforce {
        return None;
    }
    let real = std::fs::canonicalize(program).ok()?;
    let inside = policy
        .fs
        .read
        .iter()
        .chain(&policy.fs.write)
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .any(|root| real.starts_with(root));
    if inside {
        return None;
    }
    let dir = real.parent().unwrap_or(&real);
    Some(format!(
        "{} lies outside the profile's read roots (Landlock refused it); to allow, add {} to [fs] read",
        real.display(),
        dir.display()
    ))
}
