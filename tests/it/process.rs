//! The process side: exit status pass-through, signals, many processes trapping at once, and
//! what happens when guard itself is killed.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{lacks, Workspace};

#[test]
fn exit_status_passes_through() {
    let w = Workspace::new();
    w.exec(&["agent"])
        .run(&["sh", "-c", "exit 7"])
        .expect_code(7);
    w.exec(&["agent"]).run(&["true"]).expect_code(0);
}

#[test]
fn death_by_signal_is_128_plus_n() {
    let w = Workspace::new();
    w.exec(&["agent"])
        .run(&["sh", "-c", "kill -TERM $$"])
        .expect_code(128 + 15);
}

#[test]
fn missing_command_is_127_and_names_it() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&["no-such-command-xyz"]);
    out.expect_code(127);
    assert!(
        out.stderr().contains("no-such-command-xyz"),
        "{}",
        out.stderr()
    );
}

#[test]
fn guard_errors_are_125() {
    let w = Workspace::new();
    let out = w.exec(&["no-such-profile"]).run(&["true"]);
    out.expect_code(125);
    assert!(out.stderr().contains("no-such-profile"), "{}", out.stderr());
}

#[test]
fn sigterm_sent_to_guard_reaches_the_command() {
    let w = Workspace::new();
    let mut g = w.exec(&["agent"]);
    g.cmd.arg("--").args([
        "sh",
        "-c",
        "trap 'echo got-term; exit 42' TERM; echo ready; while :; do sleep 0.05; done",
    ]);
    g.cmd.stdout(Stdio::piped());
    let mut child = g.cmd.spawn().expect("spawn guard");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 6];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("ready line");
    assert_eq!(&first, b"ready\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .expect("kill");
    let status = child.wait().expect("wait");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("rest");
    assert_eq!(status.code(), Some(42), "the command's trap ran");
    assert!(rest.contains("got-term"));
}

#[test]
fn two_hundred_processes_trapping_at_once_all_complete() {
    let w = Workspace::new();
    let script =
        "for i in $(seq 1 200); do (echo $i > f$i; mv f$i g$i; rm g$i) & done; wait; ls | wc -l";
    let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert_eq!(out.stdout().trim(), "0", "every process finished its work");
    let judged = w.decisions().len();
    assert!(
        judged >= 600,
        "every create, rename and delete was judged: {judged}"
    );
}

#[test]
fn background_processes_are_killed_when_the_command_ends() {
    let w = Workspace::new();
    let marker = w.ws.join("late");
    let out = w
        .exec(&["agent"])
        .run(&["sh", "-c", "(sleep 1; touch late) & exit 0"]);
    out.expect_code(0);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !marker.exists(),
        "a leftover background process must not outlive the run"
    );
}

#[test]
fn killing_guard_leaves_no_sandboxed_process_able_to_change_files() {
    let w = Workspace::new();
    let target = w.ws.join("grow.txt");
    // The direct child dies with guard (PDEATHSIG); the grandchild keeps trying to write.
    let script = format!(
        "{probe} sleep-then-write {t} 60 & echo started; wait",
        probe = w.probe(),
        t = target.display()
    );
    let mut g = w.exec(&["agent"]);
    g.cmd
        .arg("--")
        .args(["sh", "-c", &script])
        .stdout(Stdio::piped());
    let mut child = g.cmd.spawn().expect("spawn guard");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 8];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("started");
    // Let it write a few times under a live guard.
    std::thread::sleep(Duration::from_millis(400));
    assert!(target.exists(), "writes work while guard runs");
    child.kill().expect("kill -9 guard");
    child.wait().expect("reap guard");
    std::thread::sleep(Duration::from_millis(200));
    let size = std::fs::metadata(&target).expect("meta").len();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        std::fs::metadata(&target).expect("meta").len(),
        size,
        "no change after guard died"
    );
    // Clean up whatever is left (the orphan ends on its own after its tries).
    let _ = Command::new("pkill")
        .args(["-f", &target.display().to_string()])
        .status();
}

#[test]
fn many_threads_trapping_at_once_are_all_answered() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "threads", "32", "50"]);
    out.expect_code(0);
    assert_eq!(
        crate::util::probe_result(&out),
        "ok",
        "every call succeeded"
    );
    let judged = w
        .decisions()
        .iter()
        .filter(|d| d["syscall"] == "unlink" || d["syscall"] == "openat")
        .count();
    assert_eq!(
        judged,
        32 * 50 * 2,
        "every open and unlink was judged and recorded"
    );
}

#[test]
fn a_slow_judged_call_does_not_hold_up_other_processes() {
    // Process A opens a 48 MiB workspace file for writing: the journal copies its pre-image
    // first, which takes a while. Process B meanwhile creates and deletes files in the private
    // tmp. B's calls must be answered while A's is still being handled: the audit log shows B
    // decisions completed inside A's handling window (received = time - latency).
    let w = Workspace::new();
    let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i % 251) as u8).collect();
    let mut big = Vec::with_capacity(48 * chunk.len());
    for _ in 0..48 {
        big.extend_from_slice(&chunk);
    }
    std::fs::write(w.ws.join("big.bin"), &big).expect("big file");
    let script = format!(
        "cd \"$TMPDIR\" && {p} threads 1 3000 & sleep 0.05; {p} write \"$GUARD_WORKSPACE/big.bin\" x; wait",
        p = w.probe()
    );
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
    let decisions = w.decisions();
    let micros = |d: &serde_json::Value| {
        let t = d["time"].as_str().expect("time");
        // HH:MM:SS.ffffff of the same run: compare as microseconds of the day.
        let hms = &t[11..26];
        let (h, rest) = hms.split_at(2);
        let (m, rest) = rest[1..].split_at(2);
        let (s, f) = rest[1..].split_at(2);
        ((h.parse::<u64>().expect("h") * 60 + m.parse::<u64>().expect("m")) * 60
            + s.parse::<u64>().expect("s"))
            * 1_000_000
            + f[1..].parse::<u64>().expect("us")
    };
    let a = decisions
        .iter()
        .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with("big.bin")))
        .expect("A's open was judged");
    let a_end = micros(a);
    let a_start = a_end - a["latency_us"].as_u64().expect("latency");
    let inside = decisions
        .iter()
        .filter(|d| d["path"].as_str().is_some_and(|p| p.contains("thread-0")))
        .filter(|d| {
            let t = micros(d);
            t > a_start && t < a_end
        })
        .count();
    assert!(
        inside > 0,
        "no call of B was answered while A's ({} us) was handled",
        a_end - a_start
    );
}

#[test]
fn killing_guard_ends_the_whole_tree_even_processes_holding_open_files() {
    // A grandchild that opened its file before guard died keeps a writable descriptor; the
    // sandbox's init must end it when guard dies, so the file stops changing.
    let w = Workspace::new();
    let target = w.ws.join("held.txt");
    let script = "(exec 3>>held.txt; while :; do echo x >&3; sleep 0.02; done) & \
                  (sh -c 'sleep 300') & echo started; wait";
    let mut g = w.exec(&["agent"]);
    g.cmd
        .arg("--")
        .args(["sh", "-c", script])
        .stdout(Stdio::piped());
    let mut child = g.cmd.spawn().expect("spawn guard");
    let mut first = [0u8; 8];
    std::io::Read::read_exact(child.stdout.as_mut().expect("stdout"), &mut first).expect("started");
    std::thread::sleep(Duration::from_millis(300));
    assert!(target.exists(), "the writer ran under guard");
    child.kill().expect("kill -9 guard");
    child.wait().expect("reap guard");
    // Every process of the tree is gone within a bounded time.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with_cwd_in(&w.ws);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "processes outlived guard: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let size = std::fs::metadata(&target).expect("meta").len();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        std::fs::metadata(&target).expect("meta").len(),
        size,
        "nothing writes after guard died"
    );
}

/// Processes (not zombies) whose working directory is `dir` or below it.
fn processes_with_cwd_in(dir: &std::path::Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(true);
            !zombie
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
        })
        .collect()
}

/// A call that keeps the supervisor busy (here the pre-image copy of a 256 MiB file, before
/// its first write) holds up only what must wait for it: another process's judged calls
/// outside the workspace (creations in the private tmp) are answered meanwhile, by a standby
/// thread the supervisor starts when a call is slow. The second process makes files until the
/// first one's write-open is done: with no standby, its first creation would wait for the
/// whole copy, and it would make one or two.
#[test]
fn a_slow_call_holds_up_only_what_waits_for_it() {
    let made = made_during_a_slow_write_open(&["big.bin"], "");
    assert!(
        made >= 20,
        "the second process's calls waited for the first one's copy: {made} made"
    );
}

/// The standbys, started by a first slow call, park while no call is slow and are woken
/// when the next one is: the same two processes as above, after a first slow write-open and a
/// pause, get the second one's creations answered while it copies. (Woken only by their
/// park's one-second timeout, the standbys would most often still be parked for the whole
/// copy.)
#[test]
fn a_later_slow_call_wakes_the_parked_standbys() {
    let made =
        made_during_a_slow_write_open(&["first.bin", "big.bin"], ": >> first.bin; sleep 0.3; ");
    assert!(
        made >= 20,
        "the second process's calls waited for the second copy: {made} made"
    );
}

/// How many files a process makes in the private tmp while another write-opens `big.bin`, a
/// 256 MiB file whose pre-image is copied first, after `before` (a script); `files` are made
/// first, each 256 MiB of real data (a copy of holes would be quick).
fn made_during_a_slow_write_open(files: &[&str], before: &str) -> u32 {
    use std::io::Write as _;
    let w = Workspace::new();
    let chunk = vec![0xabu8; 1 << 20];
    for name in files {
        let mut big = std::fs::File::create(w.ws.join(name)).expect("create");
        for _ in 0..256 {
            big.write_all(&chunk).expect("write");
        }
    }
    let p = w.root.join("big-preimages.toml");
    std::fs::write(
        &p,
        "name = \"big\"\n[transaction]\nmax-preimage-size = \"1GiB\"\n",
    )
    .expect("write profile");
    // No exec in the loop: an exec takes a checkpoint, and so waits for the journal.
    let script = format!(
        "{before}(j=0; while [ $j -lt 2000 ] && [ ! -e \"$TMPDIR/a-done\" ]; do \
            j=$((j+1)); : > \"$TMPDIR/b-$j\"; done; echo \"made $j\") & \
         : >> big.bin; : > \"$TMPDIR/a-done\"; wait"
    );
    let out = w
        .exec(&["agent", &p.display().to_string()])
        .run(&["sh", "-c", &script]);
    out.expect_code(0);
    out.stdout()
        .lines()
        .find_map(|l| l.strip_prefix("made "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {}{}", out.stdout(), out.stderr()))
}

/// Field `n` (1-based, as proc(5) numbers them) of a /proc stat line.
fn stat_field(stat: &str, n: usize) -> Option<String> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n - 3).map(String::from)
}

/// The receiving supervisor thread asks the scheduler for a quick turn once woken: nice -5
/// where that is allowed (root here), else the kernel's shortest time slice (the unprivileged
/// user). The command's processes keep the nice and slice they have bare.
#[test]
fn the_supervisor_is_favoured_and_the_command_is_not() {
    let script = "cut -d' ' -f19 /proc/self/stat; grep '^se.slice ' /proc/self/sched || echo no-slice; echo ready; read line; true";
    let bare = Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .expect("bare sh");
    let bare = String::from_utf8_lossy(&bare.stdout).to_string();
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let mut g = w.exec(&["agent"]);
        g.cmd.arg("--").args(["sh", "-c", script]);
        g.cmd.stdout(Stdio::piped()).stdin(Stdio::piped());
        let mut child = g.cmd.spawn().expect("spawn guard");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut seen = String::new();
        while !seen.ends_with("ready\n") {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut stdout, &mut line).expect("read") == 0 {
                break;
            }
            seen.push_str(&line);
        }
        assert_eq!(
            seen, bare,
            "the command's nice and slice, under guard and bare"
        );
        // guard's receiving worker is its first thread named guard-supervisor*.
        let tasks = format!("/proc/{}/task", child.id());
        let mut tids: Vec<u32> = std::fs::read_dir(&tasks)
            .expect("guard's threads")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        let worker = tids
            .into_iter()
            .find(|t| {
                std::fs::read_to_string(format!("{tasks}/{t}/comm"))
                    .is_ok_and(|c| c.starts_with("guard-superviso"))
            })
            .expect("a supervisor thread");
        let stat = std::fs::read_to_string(format!("{tasks}/{worker}/stat")).expect("stat");
        let sched = std::fs::read_to_string(format!("{tasks}/{worker}/sched"));
        if w.unprivileged {
            assert_eq!(stat_field(&stat, 19).as_deref(), Some("0"), "{stat}");
            match sched {
                Ok(s) => assert!(
                    s.lines()
                        .any(|l| l.starts_with("se.slice ") && l.ends_with(" 100000")),
                    "{s}"
                ),
                Err(e) => eprintln!("skipped the slice check: no {tasks}/{worker}/sched ({e})"),
            }
        } else {
            // Five below the nice the script shows bare (guard runs at the test's own).
            let bare_nice: i32 = bare
                .lines()
                .next()
                .and_then(|l| l.trim().parse().ok())
                .expect("nice");
            let favoured = (bare_nice - 5).max(-20).to_string();
            assert_eq!(
                stat_field(&stat, 19).as_deref(),
                Some(favoured.as_str()),
                "{stat}"
            );
        }
        drop(child.stdin.take());
        assert!(child.wait().expect("wait").success());
    }
}

/// guard's binary carries its own unwinder (build.rs, `static_unwinder`): the dynamic loader
/// maps no libgcc_s at its start, and a run still works. `LD_DEBUG=libs` is glibc's own
/// account of what it loads.
#[cfg(guard_static_unwinder)]
#[test]
fn guard_starts_without_loading_libgcc_s() {
    let out = Command::new(crate::bins::BUILT)
        .arg("--version")
        .env("LD_DEBUG", "libs")
        .output()
        .expect("guard --version");
    assert!(out.status.success());
    let loaded = String::from_utf8_lossy(&out.stderr);
    assert!(
        loaded.contains("libc.so.6"),
        "LD_DEBUG=libs names what is loaded:\n{loaded}"
    );
    assert!(!loaded.contains("libgcc_s"), "{loaded}");
    let w = Workspace::new();
    w.exec(&["agent"]).run(&["true"]).expect_code(0);
}

/// guard's binary has its relative relocations packed (build.rs, `packed_relocations`): its
/// dynamic section names a DT_RELR table, and what is left for the loader to read entry by
/// entry (`DT_RELASZ`, 24 bytes each) is the symbol relocations, not the thousands of
/// relative ones; and a run still works.
#[cfg(guard_packed_relocs)]
#[test]
fn guards_relative_relocations_are_packed() {
    const PT_DYNAMIC: u32 = 2;
    const DT_RELASZ: u64 = 8;
    const DT_RELRSZ: u64 = 35;
    let elf = std::fs::read(crate::bins::BUILT).expect("read guard's binary");
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| u32_at(ph) == PT_DYNAMIC)
        .expect("a dynamic section");
    let (start, size) = (u64_at(dynamic + 8) as usize, u64_at(dynamic + 32) as usize);
    let tags: Vec<(u64, u64)> = (start..start + size)
        .step_by(16)
        .map(|e| (u64_at(e), u64_at(e + 8)))
        .take_while(|&(tag, _)| tag != 0)
        .collect();
    let value = |tag: u64| tags.iter().find(|&&(t, _)| t == tag).map(|&(_, v)| v);
    assert!(value(DT_RELRSZ).is_some_and(|n| n > 0), "{tags:x?}");
    let rela = value(DT_RELASZ).unwrap_or(0) / 24;
    assert!(rela < 1000, "{rela} relocations left unpacked");
    let w = Workspace::new();
    w.exec(&["agent"]).run(&["true"]).expect_code(0);
}

/// The command finds ignored exactly the signals guard found ignored: SIGPIPE is not when
/// guard was started normally (Rust's runtime ignores it inside guard, and an ignored signal
/// survives exec), and is when guard's own parent ignored it; the others as they came.
/// `yes | head -1` shows the difference bare: `yes` ends by the signal (141), not with EPIPE
/// and a message (1). As root and as an unprivileged user.
#[test]
fn the_command_finds_ignored_the_signals_guard_found_ignored() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let pipeline = "yes | head -1 >/dev/null; echo \"${PIPESTATUS[0]}\"";
        let ignored = "grep SigIgn /proc/self/status";
        for (trap, status) in [("", "141"), ("trap '' PIPE; ", "1")] {
            let bare = Command::new("bash")
                .args(["-c", &format!("{trap}exec bash -c '{ignored}'")])
                .output()
                .expect("bare bash");
            let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
            for (script, want) in [(ignored, bare.trim()), (pipeline, status)] {
                // guard (or setpriv, which execs guard) started by a shell that ignores
                // SIGPIPE or not.
                let mut g = w.exec(&["agent"]);
                g.cmd.args(["--", "bash", "-c", script]);
                let mut cmd = Command::new("bash");
                cmd.args(["-c", &format!("{trap}exec \"$@\""), "bash"])
                    .arg(g.cmd.get_program())
                    .args(g.cmd.get_args())
                    .current_dir(&w.ws)
                    .stdin(Stdio::null());
                for (k, v) in g.cmd.get_envs() {
                    match v {
                        Some(v) => cmd.env(k, v),
                        None => cmd.env_remove(k),
                    };
                }
                let out = cmd.output().expect("guard");
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert_eq!(
                    stdout.trim(),
                    want,
                    "{trap:?} {script:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// A `make -j4` whose recipe runs `guard exec -- $(MAKE) -C sub` shares its job slots with the
/// make under guard, as it does bare: the jobserver's pipe that MAKEFLAGS names reaches the
/// command, so the inner make runs its four jobs with the outer's jobserver instead of saying
/// "jobserver unavailable: using -j1". Each job writes the MAKEFLAGS it got (make drops
/// `--jobserver-auth` from it when it falls back to -j1). As root and as an unprivileged user.
#[test]
fn a_recursive_make_under_guard_keeps_the_outer_makes_jobserver() {
    let Some(make) = crate::util::tool("make") else {
        eprintln!("skip: make is not installed");
        return;
    };
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let who = if w.unprivileged {
            "unprivileged"
        } else {
            "root"
        };
        // The guard command line a test runs, as a recipe's words.
        let g = w.exec(&["agent"]);
        let mut guard = vec![g.cmd.get_program().to_string_lossy().into_owned()];
        guard.extend(g.cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        let guard = guard.join(" ");
        for side in ["bare", "guard"] {
            w.write(
                &format!("{side}/sub/Makefile"),
                "all: a b c d\na b c d:\n\t@echo \"$$MAKEFLAGS\" > $@.flags\n",
            );
        }
        w.write(
            "Makefile",
            &format!(
                ".PHONY: all bare guard\nall: bare guard\nbare:\n\t+$(MAKE) -C bare/sub\nguard:\n\t+{guard} -- $(MAKE) -C guard/sub\n"
            ),
        );
        let out = Command::new(&make)
            .args(["-j4", "--no-print-directory"])
            .current_dir(&w.ws)
            .env("GUARD_STATE_DIR", &w.state)
            .env("HOME", &w.home)
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS")
            .output()
            .expect("make");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{who}: make failed: {stderr}");
        assert!(
            !stderr.contains("jobserver unavailable"),
            "{who}: the make under guard lost the jobserver: {stderr}"
        );
        for job in ["a", "b", "c", "d"] {
            let flags = |side: &str| {
                std::fs::read_to_string(w.ws.join(format!("{side}/sub/{job}.flags")))
                    .unwrap_or_else(|e| panic!("{who}: {side} job {job} ran: {e}"))
            };
            let (bare, guarded) = (flags("bare"), flags("guard"));
            assert!(
                bare.contains("--jobserver-auth="),
                "{who}: bare make is not recursive with a jobserver here: {bare}"
            );
            assert_eq!(guarded, bare, "{who}: job {job}'s MAKEFLAGS");
        }
    }
}

/// guard holds a descriptor for some processes it has met (a pidfd, to tell its credentials
/// and its parent while it lives) and no more than a few hundred at once. A shell loop that
/// starts 3,300 programs, the `sed -i` among them calling umask(2) (after which every create
/// looks its caller up), runs under guard with the usual soft limit of 1,024 descriptors as
/// it does bare: every command succeeds. Before, guard kept a pidfd for each of them until it
/// had 4,096, ran out of descriptors, failed calls with EMFILE and EBADF (2,040 of the
/// commands failed), and could leave a caller waiting for an answer for good (the `timeout`
/// ends that case).
#[test]
fn a_long_loop_of_programs_runs_within_the_usual_descriptor_limit() {
    long_loop_within_the_descriptor_limit(Workspace::new);
}

/// The same for an unprivileged guard (when the tests run as root).
#[test]
fn a_long_loop_of_programs_runs_within_the_usual_descriptor_limit_for_an_unprivileged_guard() {
    long_loop_within_the_descriptor_limit(Workspace::unprivileged);
}

fn long_loop_within_the_descriptor_limit(workspace: fn() -> Workspace) {
    if lacks(&["sed", "cp", "timeout"]) {
        return;
    }
    let w = workspace();
    w.write("f", "a\n");
    let (stdout, stderr) = edit_loop(&w, "ulimit -n 1024 && ", "", 1100, "rm");
    assert_eq!(stdout.trim(), "failures=0", "stderr:\n{stderr}");
    assert!(
        !stderr.contains("Too many open files") && !stderr.contains("Bad file descriptor"),
        "{stderr}"
    );
}

/// Below what its caches may hold (here `ulimit -n 300`), guard runs out of descriptors and
/// fails the calls it then cannot perform, but answers every one of them: the loop ends.
/// Before, a create whose caller's credentials could not be read was never answered and the
/// run hung (the `timeout` ends that case with status 124).
#[test]
fn past_its_descriptor_limit_guard_fails_calls_but_answers_every_one() {
    if lacks(&["sed", "cp", "timeout"]) {
        return;
    }
    let w = Workspace::new();
    w.write("f", "a\n");
    let (stdout, _) = edit_loop(&w, "ulimit -n 300 && ", "", 400, "rm -f");
    assert!(stdout.trim().starts_with("failures="), "{stdout}");
}

/// Runs under guard in `w`, behind `pre` and inside `timeout 300`, `first` and then a loop of
/// `rounds` rounds of `sed -i` (which calls umask(2)), `cp` and `{rm}` on the workspace's `f`,
/// counting the commands that fail (`failures=N`); asserts guard's status 0 (124: a caller was
/// never answered, its stderr's last 20 lines shown) and returns stdout and stderr.
fn edit_loop(w: &Workspace, pre: &str, first: &str, rounds: u32, rm: &str) -> (String, String) {
    let script = format!(
        "{first}fail=0; for i in $(seq {rounds}); do sed -i s/a/a/ f || fail=$((fail+1)); \
         cp f c$i || fail=$((fail+1)); {rm} c$i || fail=$((fail+1)); done; echo failures=$fail"
    );
    let out = bounded(&w.exec(&["agent"]).cmd, 300, pre)
        .args(["--", "bash", "-c", &script])
        .output()
        .expect("run guard");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail = stderr.lines().rev().take(20).collect::<Vec<_>>().join("\n");
    assert_eq!(
        out.status.code(),
        Some(0),
        "guard's status (124: a caller never answered), unprivileged: {}\n{stdout}\n{tail}",
        w.unprivileged
    );
    (stdout, stderr.into_owned())
}

/// `guard` (a `guard exec` command line, its environment and directory) run by `sh -c` after
/// `pre`, under `timeout secs`: a caller guard never answers ends the run with status 124
/// instead of holding up the suite.
fn bounded(guard: &Command, secs: u32, pre: &str) -> Command {
    let sh = format!("{pre}exec \"$@\"");
    crate::util::wrap("timeout", [&secs.to_string(), "sh", "-c", &sh, "sh"], guard)
}

/// A bug that makes guard panic while it judges a call (forced here through a debug build's
/// `GUARD_DEBUG_PANIC_ON`) fails that call with EIO; the worker goes on, and so do the command
/// and the run. Before, the worker unwound and the caller, and every later one, waited for good.
#[test]
fn a_panic_while_judging_a_call_fails_that_call_and_the_run_goes_on() {
    if !cfg!(debug_assertions) || crate::util::tool("timeout").is_none() {
        eprintln!("skipped: needs a debug build of guard and timeout(1)");
        return;
    }
    let w = Workspace::new();
    let mut g = w.exec(&["agent"]);
    g.cmd.env("GUARD_DEBUG_PANIC_ON", "mkdir");
    let out = bounded(&g.cmd, 60, "")
        .args([
            "--",
            "sh",
            "-c",
            "mkdir d; echo mkdir=$?; touch e && echo touch=$?",
        ])
        .output()
        .expect("run guard");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["mkdir=1", "touch=0"],
        "{stderr}"
    );
    assert!(stderr.contains("Input/output error"), "{stderr}");
    assert!(!w.ws.join("d").exists());
    assert!(w.ws.join("e").exists());
    // The call has its record, as every judged call does.
    let failed: Vec<_> = w
        .audit()
        .into_iter()
        .filter(|e| e["type"] == "decision" && e["errno"] == "EIO")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0]["syscall"]
            .as_str()
            .is_some_and(|s| s.starts_with("mkdir")),
        "{failed:?}"
    );
    assert_eq!(failed[0]["verdict"], "deny", "{failed:?}");
    assert!(
        failed[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("guard failed while judging")),
        "{failed:?}"
    );
}

/// The command line and the environment reach the command whole however large they are: the
/// init reads them from a file guard writes while the child confines itself, where a datagram
/// of the launch channel holds about 200 KB. 3,000 arguments and eight variables of 120,000
/// bytes (960 KB, half of what `execve` takes with the usual 8 MB stack), as root and as an
/// unprivileged user; the command sees what it sees bare.
#[test]
fn a_megabyte_of_command_line_and_environment_reaches_the_command() {
    let big = "x".repeat(120_000);
    let script = "echo \"$#\" \"${3000}\"; printf %s \"$BIG_7\" | wc -c; env | grep -c '^BIG_'";
    let args: Vec<String> = (1..=3000).map(|i| i.to_string()).collect();
    let mut bare = Command::new("sh");
    bare.args(["-c", script, "sh"]).args(&args);
    for i in 0..8 {
        bare.env(format!("BIG_{i}"), &big);
    }
    let bare = bare.output().expect("bare sh");
    let want = String::from_utf8_lossy(&bare.stdout).into_owned();
    assert_eq!(
        want.split_whitespace().collect::<Vec<_>>(),
        ["3000", "3000", "120000", "8"]
    );
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let mut g = w.exec(&["agent"]);
        for i in 0..8 {
            g.env(&format!("BIG_{i}"), &big);
        }
        let mut argv = vec!["sh".to_string(), "-c".into(), script.into(), "sh".into()];
        argv.extend(args.iter().cloned());
        let out = g.run(&argv);
        out.expect_code(0);
        assert_eq!(out.stdout(), want, "unprivileged: {}", w.unprivileged);
    }
}

/// Every voluntary context switch so far of the threads of process `pid`.
fn wakeups_of(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|status| {
            status
                .lines()
                .filter_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// While the command makes no judged call (it waits on the network, on a person), guard
/// sleeps: its threads wake a few dozen times a second (the coordinating thread every 50 ms,
/// the audit writer every 250 ms), where they woke about 250 times (every 5 and every 20 ms).
/// Counted over a second of `sleep`, after the start's calls, as root and as an unprivileged
/// user.
#[test]
fn an_idle_run_lets_guard_sleep() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let mut g = w.exec(&["agent"]);
        g.cmd.args(["--", "sleep", "3"]);
        let mut child = g.cmd.spawn().expect("spawn guard");
        // setpriv (the unprivileged wrapper) execs guard: the pid is guard's either way.
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(800));
        let (t0, before) = (std::time::Instant::now(), wakeups_of(pid));
        std::thread::sleep(Duration::from_millis(1000));
        let (seconds, after) = (t0.elapsed().as_secs_f64(), wakeups_of(pid));
        let status = child.wait().expect("wait");
        assert!(status.success(), "{status:?}");
        let rate = (after - before) as f64 / seconds;
        assert!(
            rate < 60.0,
            "{rate:.0} wake-ups a second (unprivileged: {})",
            w.unprivileged
        );
    }
}

/// guard's own descriptors (a pidfd for each caller it keeps, the directories it keeps, one
/// per call in hand) count against a soft limit of guard's own, raised to the hard limit once
/// the command is forked: the command keeps the soft limit guard was given. Under a soft limit
/// of 64, a loop of 300 `sed -i`, `cp` and `rm` runs with every command succeeding, and the
/// command sees 64, and the hard limit, as it would bare; without the raise guard ran out at
/// once and failed calls. As root and as an unprivileged user.
#[test]
fn a_low_soft_descriptor_limit_is_the_commands_not_guards() {
    if lacks(&["sed", "cp", "timeout"]) {
        return;
    }
    let pre = "ulimit -S -n 64 && ";
    let limits = "ulimit -S -n; ulimit -H -n";
    let bare = Command::new("sh")
        .args(["-c", &format!("{pre}{limits}")])
        .output()
        .expect("bare sh");
    let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
    assert!(bare.starts_with("64\n"), "{bare}");
    for w in [Workspace::new(), Workspace::unprivileged()] {
        w.write("f", "a\n");
        let (stdout, stderr) = edit_loop(&w, pre, &format!("{limits}; "), 300, "rm");
        assert_eq!(
            stdout,
            format!("{bare}failures=0\n"),
            "unprivileged: {}; stderr:\n{stderr}",
            w.unprivileged
        );
    }
}

/// The command runs on the CPUs it would run on bare: the init pins itself to its CPU to fork
/// the command there (a new process otherwise went to guard's busy CPU and waited), and the
/// command takes back the affinity the init had before it execs. Started as it is, and under
/// `taskset` to the first and to the last CPU, as root and as an unprivileged user.
#[test]
fn the_command_runs_on_the_cpus_it_would_run_on_bare() {
    if lacks(&["taskset"]) {
        return;
    }
    let script = "grep Cpus_allowed_list /proc/self/status; nproc";
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let masks = [None, Some("0".to_string()), Some((cpus - 1).to_string())];
    for w in [Workspace::new(), Workspace::unprivileged()] {
        for mask in &masks {
            let mut bare = Command::new("sh");
            bare.args(["-c", script]);
            let mut g = w.exec(&["agent"]);
            g.cmd.args(["--", "sh", "-c", script]);
            let (bare, guarded) = match mask {
                None => (bare, g.cmd),
                Some(m) => (
                    crate::util::wrap("taskset", ["-c", m.as_str()], &bare),
                    crate::util::wrap("taskset", ["-c", m.as_str()], &g.cmd),
                ),
            };
            let run = |mut c: Command| {
                let out = c.output().expect("run");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let want = run(bare);
            assert!(want.starts_with("Cpus_allowed_list:"), "{want}");
            assert_eq!(
                run(guarded),
                want,
                "taskset {mask:?}, unprivileged: {}",
                w.unprivileged
            );
        }
    }
}
