//! A small host's limits on the real binary: a file size limit (`ulimit
//! -f`), a descriptor limit (`ulimit -n`), no process left to fork, a disk
//! where nothing can be saved; set as a hook would inherit them from
//! herdr. Each must end in a clear message, with no name lost and no `off`
//! forgotten.

mod support;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Output, Stdio};
use std::time::Duration;

use support::cowbell::{self, Cowbell};
use support::fake_herdr::Options;

const SECOND: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
enum Limit {
    /// `ulimit -f`, in bytes.
    FileSize(u64),
    /// `ulimit -n`.
    Descriptors(u64),
    /// No new process: fork fails with EAGAIN, as at a process limit
    /// (which does not bind root, who runs CI).
    #[cfg(target_os = "linux")]
    NoFork,
}

/// `cowbell <args>` as herdr runs a hook for `event`, under `limit`.
/// The startup hook (`daemon --replace`) under `limit`.
fn startup_limited(cb: &Cowbell, limit: Limit) -> Output {
    limited(cb, &["daemon", "--replace"], "startup", limit)
}

fn limited(cb: &Cowbell, args: &[&str], event: &str, limit: Limit) -> Output {
    let mut command = cb.launched(args, event);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(move || {
            let (resource, value) = match limit {
                Limit::FileSize(bytes) => (libc::RLIMIT_FSIZE, bytes),
                Limit::Descriptors(n) => (libc::RLIMIT_NOFILE, n),
                #[cfg(target_os = "linux")]
                Limit::NoFork => return deny_fork(),
            };
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.output().unwrap()
}

/// A seccomp filter that fails every syscall making a process with
/// EAGAIN, kept across the exec. Async-signal-safe, for `pre_exec`.
#[cfg(target_os = "linux")]
fn deny_fork() -> std::io::Result<()> {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xC000_003E; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xC000_00B7; // AUDIT_ARCH_AARCH64
    #[cfg(target_arch = "x86_64")]
    const FORKS: [i64; 4] = [
        libc::SYS_clone,
        libc::SYS_clone3,
        libc::SYS_fork,
        libc::SYS_vfork,
    ];
    #[cfg(target_arch = "aarch64")]
    const FORKS: [i64; 2] = [libc::SYS_clone, libc::SYS_clone3];
    const LOAD_WORD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const ALLOW: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
    const ERRNO: u32 = 0x0005_0000; // SECCOMP_RET_ERRNO
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let n = FORKS.len() as u8;
    // seccomp_data: the syscall number at offset 0, the arch at 4. Any
    // other arch passes; each listed number jumps to the refusal.
    let mut program = [op(0, 0, 0, 0); 4 + 4 + 2];
    program[0] = op(LOAD_WORD, 0, 0, 4);
    program[1] = op(JUMP_IF_EQUAL, 0, n + 1, ARCH);
    program[2] = op(LOAD_WORD, 0, 0, 0);
    for (i, nr) in FORKS.iter().enumerate() {
        let i = i as u8;
        program[3 + i as usize] = op(JUMP_IF_EQUAL, n - i, 0, *nr as u32);
    }
    let len = 3 + FORKS.len();
    program[len] = op(RETURN, 0, 0, ALLOW);
    program[len + 1] = op(RETURN, 0, 0, ERRNO | libc::EAGAIN as u32);
    let filter = libc::sock_fprog {
        len: (len + 2) as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: prctl with valid arguments; the program outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &filter as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// "api", blocked, with its icon, and the daemon's pid.
fn blocked_api(scale: f64) -> (Cowbell, String, String, u32) {
    let cb = Cowbell::with(Options::default(), scale);
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🔴 api", 3 * SECOND);
    cb.wait_state_saved(&[&tab]);
    (cb, tab, pane, pid)
}

/// "api", blocked, with its icon and its state.json from a `sync`: no
/// daemon runs.
fn synced_api() -> (Cowbell, String) {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    assert!(cb.run(&["sync"]).status.success());
    (cb, tab)
}

fn server_files(cb: &Cowbell) -> Vec<String> {
    std::fs::read_dir(cb.server_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A command short of descriptors cannot open state.json: the file is not
/// corrupt and must not be moved aside (every remembered name and an
/// `off` went with it), and the command says what it could not do.
#[test]
fn a_state_file_that_cannot_be_read_just_now_is_not_moved_aside() {
    let (cb, tab) = synced_api();
    let sync = limited(&cb, &["sync"], "action", Limit::Descriptors(4));
    let stderr = String::from_utf8_lossy(&sync.stderr);
    let files = server_files(&cb);
    assert_eq!(sync.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("state.json just now"), "{stderr}");
    assert!(
        files.iter().all(|f| !f.contains("corrupt")),
        "moved aside: {files:?}"
    );
    assert!(cb.state_json().contains("\"base\":\"api\""));
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    assert_eq!(cb.herdr.label(&tab), "api", "{}", off.stdout);
}

/// The startup hook short of descriptors: before it asks the old daemon
/// to hand over, it makes sure it has what a start needs after that (the
/// state's read, the new daemon's log, signal pipe and /dev/null), or the
/// old daemon would leave with none to follow it, and the icons freeze.
/// Why no daemon started goes to the log, since herdr shows no hook's
/// output.
#[test]
fn a_start_short_of_descriptors_keeps_the_old_daemon() {
    let (cb, tab, pane, old) = blocked_api(1.0);
    let mut status = "working";
    for limit in 4..=7 {
        let replace = startup_limited(&cb, Limit::Descriptors(limit));
        let stderr = String::from_utf8_lossy(&replace.stderr).into_owned();
        cb.herdr.set_status(&pane, status);
        let label = if status == "working" {
            "🟡 api"
        } else {
            "🔴 api"
        };
        let followed = cb.herdr.wait_until(3 * SECOND, |s| s.label(&tab) == label);
        let alive = cowbell::alive(old);
        if !followed || !alive {
            for pid in cb.daemons() {
                cowbell::signal(pid, libc::SIGKILL);
            }
        }
        assert!(alive, "ulimit -n {limit}: the old daemon left; {stderr}");
        assert!(followed, "ulimit -n {limit}: icon frozen; {stderr}");
        assert_eq!(replace.status.code(), Some(1), "{stderr}");
        assert!(!stderr.contains("cowbell.pid"), "{stderr}");
        status = if status == "working" {
            "blocked"
        } else {
            "working"
        };
    }
    let log = cb.log();
    cowbell::signal(old, libc::SIGKILL);
    assert!(
        log.contains("no daemon started: too few file descriptors"),
        "{log}"
    );
}

/// A command short of descriptors reads the pidfile but cannot read the
/// boot id that says where the pid means something: it must not take this
/// host's daemon for a holder with no pid to signal (a command, a daemon on
/// another host), wait for it and say so, only fail for want of
/// descriptors.
#[test]
fn a_command_short_of_descriptors_does_not_take_the_daemon_for_a_pidless_holder() {
    let (cb, _, _, pid) = blocked_api(1.0);
    for limit in 3..=8 {
        let sync = limited(&cb, &["sync"], "action", Limit::Descriptors(limit));
        let stderr = String::from_utf8_lossy(&sync.stderr);
        assert!(
            !stderr.contains("without a pid") && !stderr.contains("another host"),
            "ulimit -n {limit}: {stderr}"
        );
    }
    assert!(cowbell::alive(pid));
    cowbell::signal(pid, libc::SIGKILL);
}

/// `status` short of descriptors, while the daemon runs: it must not say
/// that no daemon runs (a person would start one, or look for a crash);
/// it cannot tell, and says so.
#[test]
fn status_short_of_descriptors_does_not_say_the_daemon_is_not_running() {
    let (cb, _, _, pid) = blocked_api(1.0);
    for limit in 3..=8 {
        let status = limited(&cb, &["status"], "action", Limit::Descriptors(limit));
        let stdout = String::from_utf8_lossy(&status.stdout);
        assert!(
            !stdout.contains("daemon: not running"),
            "ulimit -n {limit}, exit {:?}: {stdout}{}",
            status.status.code(),
            String::from_utf8_lossy(&status.stderr)
        );
    }
    cowbell::signal(pid, libc::SIGKILL);
}

/// A start that had its reserve of descriptors and asked the old daemon
/// to go lets the reserve go before it reads the state: it never fails
/// that read for want of descriptors, which would leave no daemon at all.
#[test]
fn a_start_that_had_its_reserve_can_read_the_state() {
    let (cb, _, _, _) = blocked_api(1.0);
    for limit in 8..=12 {
        let replace = startup_limited(&cb, Limit::Descriptors(limit));
        let stderr = String::from_utf8_lossy(&replace.stderr).into_owned();
        assert!(!stderr.contains("just now"), "ulimit -n {limit}: {stderr}");
        if cb.daemons().is_empty() {
            assert!(cb.watchdog().status.success());
            cb.wait_for_daemon(2 * SECOND);
        }
    }
    for pid in cb.daemons() {
        cowbell::signal(pid, libc::SIGKILL);
    }
}

/// The short commands write state.json too: a file size limit must make
/// that write fail with a message, not kill the command with SIGXFSZ
/// before it says anything.
#[test]
fn a_file_size_limit_fails_a_command_with_a_message_not_a_signal() {
    let cb = Cowbell::new();
    for i in 0..40 {
        let (_, pane) = cb.tab(Some(&format!("a fairly long tab name, number {i:02}")));
        cb.herdr.set_status(&pane, "blocked");
    }
    let sync = limited(&cb, &["sync"], "action", Limit::FileSize(4096));
    let stderr = String::from_utf8_lossy(&sync.stderr);
    assert_eq!(sync.status.signal(), None, "killed: {:?}", sync.status);
    assert_eq!(sync.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("state.json"), "{stderr}");
}

/// At a descriptor limit the status subscription may find no descriptor
/// free: it is tried again after a backoff, not at every resync, which
/// filled the log at hundreds of lines a second.
#[test]
fn a_status_subscription_that_cannot_connect_backs_off() {
    // Scale 60: the 30 s backoff cap is half a second.
    let (cb, _, _, old) = blocked_api(60.0);
    let replace = startup_limited(&cb, Limit::Descriptors(9));
    assert!(replace.status.success(), "{replace:?}");
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    let pid = cb.wait_for_daemon(2 * SECOND);
    let before = cb.log().lines().count();
    std::thread::sleep(3 * SECOND);
    let log = cb.log();
    let lines = log.lines().count() - before;
    cowbell::signal(pid, libc::SIGKILL);
    // The pane list's own connection is closed before its answer opens
    // the subscription: nine descriptors are just enough for that.
    assert!(
        log.contains(&format!("[{pid}] status subscription for 1 panes")),
        "{log}"
    );
    assert!(
        lines < 100,
        "{lines} log lines in 3 s:\n{}",
        &log[log.len().saturating_sub(3000)..]
    );
}

/// A log already past a file size limit (but under cowbell's 1 MiB cap)
/// is rotated at the limit: it never reached the cap, so it was never
/// rotated, and every line a daemon wrote was lost.
#[test]
fn a_log_at_the_file_size_limit_is_rotated_there() {
    let (cb, tab, pane, old) = blocked_api(1.0);
    let log = cb.server_dir().join("cowbell.log");
    let filler = "2026-01-01T00:00:00Z [1] a line from an earlier run\n".repeat(2000);
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut file, filler.as_bytes()).unwrap();
    let replace = startup_limited(&cb, Limit::FileSize(64 * 1024));
    assert!(replace.status.success(), "{replace:?}");
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "working");
    cb.expect_label(&tab, "🟡 api", 3 * SECOND);
    let said = format!("[{pid}] renamed");
    let logged = cb
        .herdr
        .wait_until(3 * SECOND, |_| cb.log().contains(&said));
    cowbell::signal(pid, libc::SIGKILL);
    let kept = std::fs::metadata(cb.server_dir().join("cowbell.log.1")).map_or(0, |m| m.len());
    assert!(
        logged,
        "the new daemon's lines are lost: {:?}",
        cb.log().len()
    );
    assert!(
        kept > 60 * 1024,
        "the old lines were not kept: {kept} bytes"
    );
}

/// The startup hook's new daemon cannot write its pid (a full disk; here
/// a file size limit of 0): it must not run, since nothing could stop it,
/// but the old daemon has handed it the tabs already, so it gives their
/// names back rather than leave icons nobody keeps right.
#[test]
fn a_new_daemon_that_cannot_write_its_pid_gives_the_names_back() {
    let (cb, tab, _, old) = blocked_api(1.0);
    let replace = startup_limited(&cb, Limit::FileSize(0));
    assert!(replace.status.success(), "{replace:?}");
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    let back = cb.herdr.wait_until(5 * SECOND, |s| s.label(&tab) == "api");
    let gone = cb.wait_for_no_daemon(5 * SECOND);
    for pid in cb.daemons() {
        cowbell::signal(pid, libc::SIGKILL);
    }
    assert!(back, "the icon stayed: {:?}", cb.herdr.label(&tab));
    assert!(gone, "a daemon without a pid ran on");
}

/// The startup hook cannot make a process for the new daemon (a process
/// limit) after the old one handed over: the hook gives the names back
/// and says so, rather than leave icons nobody keeps right.
#[cfg(target_os = "linux")]
#[test]
fn a_start_that_cannot_fork_gives_the_names_back() {
    let (cb, tab, _, old) = blocked_api(1.0);
    let replace = startup_limited(&cb, Limit::NoFork);
    let stderr = String::from_utf8_lossy(&replace.stderr);
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    assert_eq!(replace.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 tab name given back"), "{stderr}");
    assert_eq!(cb.herdr.label(&tab), "api");
    assert!(cb.daemons().is_empty(), "{:?}", cb.daemons());
}

/// …and records that it did: state.json keeps no icon for a tab whose
/// name it gave back (as after a stop), so nothing later takes the tab for
/// one that still wears cowbell's label.
#[cfg(target_os = "linux")]
#[test]
fn a_start_that_cannot_fork_records_the_names_it_gave_back() {
    let (cb, tab, _, old) = blocked_api(1.0);
    assert!(cb.state_json().contains("🔴"), "{}", cb.state_json());
    let replace = startup_limited(&cb, Limit::NoFork);
    let stderr = String::from_utf8_lossy(&replace.stderr);
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    assert_eq!(cb.herdr.label(&tab), "api", "{stderr}");
    let state = cb.state_json();
    assert!(!state.contains("🔴"), "{state}");
}

/// `off` when nothing can be saved (here a directory where the temp file
/// goes; a full disk does the same): the names come back, but off is not
/// on record, and the person must hear that the next hook turns cowbell
/// back on, not only that a write failed.
#[test]
fn an_off_that_cannot_be_recorded_says_what_that_means() {
    let (cb, tab, _, pid) = blocked_api(1.0);
    std::fs::create_dir(cb.server_dir().join(".state.json.tmp")).unwrap();
    let off = cb.action("off");
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    assert_eq!(cb.herdr.label(&tab), "api");
    assert_eq!(off.status.code(), Some(1), "{}", off.stderr);
    assert!(
        off.stderr.contains("off is not on record"),
        "{}",
        off.stderr
    );
    // An action: herdr shows nothing it prints, so a notification says it.
    let notes = cb.herdr.notifications();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let body = notes[0].body.as_deref().unwrap_or("");
    assert!(body.contains("off is not on record"), "{body}");
}

/// …and when the state cannot be written afterwards either (a full disk):
/// the message still counts the names it gave back, in one line.
#[cfg(target_os = "linux")]
#[test]
fn a_start_that_cannot_fork_or_save_still_counts_the_names_given_back() {
    let (cb, tab, _, old) = blocked_api(1.0);
    std::fs::create_dir(cb.server_dir().join(".state.json.tmp")).unwrap();
    let replace = startup_limited(&cb, Limit::NoFork);
    let stderr = String::from_utf8_lossy(&replace.stderr);
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    assert_eq!(cb.herdr.label(&tab), "api", "{stderr}");
    assert!(stderr.contains("1 tab name given back"), "{stderr}");
    assert!(!stderr.contains(": cowbell: "), "{stderr}");
}

/// A daemon that cannot write its pid gives the names back for as long as
/// its restore takes (up to 10 s when herdr refuses renames); an `off`
/// meanwhile, which cannot signal it, waits for it and is recorded.
#[test]
fn an_off_waits_for_a_daemon_giving_back_without_a_pid() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.herdr.fail_next_renames(1000);
    let replace = startup_limited(&cb, Limit::FileSize(0));
    assert!(replace.status.success(), "{replace:?}");
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    // Renames work again once the off has waited past its old 5 s.
    let off = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(6 * SECOND);
            cb.herdr.fail_next_renames(0);
        });
        cb.action("off")
    });
    let state = cb.state_json();
    assert!(cb.wait_for_no_daemon(5 * SECOND));
    assert!(off.status.success(), "{}", off.stderr);
    assert!(state.contains("\"off\":true"), "{state}");
    assert_eq!(cb.herdr.label(&tab), "api");
}

/// Under a file size limit smaller than a line every write fails: the log
/// rotated once must not be rotated again, an empty file over the old
/// daemon's lines.
#[test]
fn a_file_size_limit_below_a_line_keeps_the_rotated_log() {
    let (cb, _, _, old) = blocked_api(1.0);
    let replace = startup_limited(&cb, Limit::FileSize(0));
    assert!(replace.status.success(), "{replace:?}");
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    assert!(cb.wait_for_no_daemon(5 * SECOND));
    let rotated =
        std::fs::read_to_string(cb.server_dir().join("cowbell.log.1")).unwrap_or_default();
    let said = format!("[{old}] started");
    assert!(
        rotated.contains(&said) || cb.log().contains(&said),
        "the old daemon's lines are gone: log.1 has {} bytes",
        rotated.len()
    );
}

/// A start that cannot fork after the launcher moved a corrupt state.json
/// aside: the warning must not go with the state it read.
#[cfg(target_os = "linux")]
#[test]
fn a_start_that_cannot_fork_still_tells_of_a_corrupt_state() {
    let (cb, _) = synced_api();
    std::fs::write(cb.server_dir().join("state.json"), "{ not json").unwrap();
    let start = limited(&cb, &["daemon"], "startup", Limit::NoFork);
    let stderr = String::from_utf8_lossy(&start.stderr);
    assert!(server_files(&cb).iter().any(|f| f.contains("corrupt")));
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert!(cb.log().contains("corrupt"), "{}", cb.log());
}

/// A daemon on another host (or in another pid namespace) holds the lock
/// for good: `off` must not wait the 15 s meant for a local daemon
/// without a pid, and must name that possibility.
#[test]
fn an_off_against_another_hosts_daemon_fails_soon_and_says_why() {
    use std::io::Write as _;
    use std::os::fd::AsRawFd;
    let (cb, _) = synced_api();
    let mut elsewhere = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(elsewhere.as_raw_fd(), libc::LOCK_EX) },
        0
    );
    writeln!(elsewhere, "{} elsewhere pid:[1]", std::process::id()).unwrap();
    let asked = std::time::Instant::now();
    let off = cb.action("off");
    let took = asked.elapsed();
    assert_eq!(off.status.code(), Some(1), "{}", off.stderr);
    assert!(took < 10 * SECOND, "off took {took:?}");
    assert!(off.stderr.contains("another host"), "{}", off.stderr);
}

/// "Cowbell: on" whose daemon cannot write its pid (a full disk; here a
/// file size limit of 0): the daemon gives the names back and exits at
/// once, so "on" would be untrue.
#[test]
fn an_on_whose_daemon_did_not_stay_up_says_so() {
    let (cb, tab, _, old) = blocked_api(1.0);
    let on = limited(&cb, &["on"], "action", Limit::FileSize(0));
    let stdout = String::from_utf8_lossy(&on.stdout);
    let stderr = String::from_utf8_lossy(&on.stderr);
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    assert!(cb.wait_for_no_daemon(5 * SECOND));
    assert_eq!(cb.herdr.label(&tab), "api");
    assert_eq!(on.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("did not stay up"), "{stdout}{stderr}");
}

/// "Cowbell: on" with a corrupt state.json: moved aside by `on` itself,
/// the warning went only to the action's output, which herdr does not
/// show; the daemon's start moves it aside and logs it.
#[test]
fn an_on_with_a_corrupt_state_leaves_the_word_in_the_log() {
    let (cb, _) = synced_api();
    std::fs::write(cb.server_dir().join("state.json"), "{ not json").unwrap();
    let on = cb.action("on");
    let pid = cb.wait_for_daemon(2 * SECOND);
    let log = cb.log();
    cowbell::signal(pid, libc::SIGKILL);
    assert!(on.status.success(), "{}", on.stderr);
    assert!(log.contains("corrupt"), "{log}");
}
