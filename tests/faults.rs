//! Faults, bad input and hostile files (issue 5): the real binary against
//! the fake herdr server, one test per fault. Each test ends with the
//! invariants of `support::invariants`: the daemon is alive (or exited for
//! a reason the specification gives), every tab shows the icon of its
//! status within 2 s of the fault clearing, and after a restore every tab
//! carries exactly the name it had before cowbell touched it.

mod support;

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::cowbell::{self, Cowbell, bin};
use support::fake_herdr::{Options, quote};
use support::hooks;
use support::invariants::{
    Names, assert_icons, assert_invariants, assert_one_daemon, assert_restore, log_tail,
};

const SECOND: Duration = Duration::from_secs(1);
/// The invariant's bound: icons right this long after a fault clears.
const CLEAR: Duration = Duration::from_secs(2);
/// herdr's request timeout in cowbell (`herdr::REQUEST_TIMEOUT`, not
/// scaled): a request sent during a fault may still be waiting for it when
/// the fault clears, so bounds that follow a slow or silent server add it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// The scene most tests start from
// ---------------------------------------------------------------------------

/// Three tabs: "api" (blocked), "docs" (working) and one herdr named by its
/// position (blocked, so an icon there would be a bug), with a daemon
/// running and the icons in place.
struct Scene {
    cb: Cowbell,
    names: Names,
    tabs: Vec<String>,
    panes: Vec<String>,
    /// Bumped by `poke`, to pick the next statuses.
    round: usize,
}

fn scene() -> Scene {
    scene_with(Options::default(), 1.0)
}

fn scene_with(options: Options, scale: f64) -> Scene {
    let cb = Cowbell::with(options, scale);
    let mut names = Names::new();
    let (t1, p1) = names.tab(&cb, Some("api"));
    let (t2, p2) = names.tab(&cb, Some("docs"));
    let (t3, p3) = names.tab(&cb, None);
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "working");
    cb.herdr.set_status(&p3, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    Scene {
        cb,
        names,
        tabs: vec![t1, t2, t3],
        panes: vec![p1, p2, p3],
        round: 0,
    }
}

impl Scene {
    /// Gives every pane a new status, so every named tab needs a rename.
    fn poke(&mut self) {
        const CYCLE: [&str; 3] = ["working", "blocked", "idle"];
        self.round += 1;
        for (i, pane) in self.panes.iter().enumerate() {
            if self.cb.herdr.panes().iter().any(|p| &p.pane_id == pane) {
                let status = CYCLE[(self.round + i) % CYCLE.len()];
                self.cb.herdr.set_status(pane, status);
            }
        }
    }

    fn pid(&self) -> u32 {
        self.cb
            .daemon_pid()
            .unwrap_or_else(|| panic!("no daemon; log:\n{}", log_tail(&self.cb, 40)))
    }

    fn icons_within(&self, timeout: Duration) {
        assert_icons(&self.cb, &self.names, timeout);
    }

    fn invariants(&self) {
        assert_invariants(&self.cb, &self.names);
    }

    /// The fault changed nothing lasting: the same daemon, all invariants.
    fn still_well(&self, pid: u32) {
        assert_eq!(self.pid(), pid);
        self.invariants();
    }

    /// Every tab carries exactly its name again (after `off`, a SIGTERM,
    /// `remove-icons`) within `timeout`; `after` says after what.
    fn names_back_within(&self, timeout: Duration, after: &str) {
        let ok = self
            .cb
            .herdr
            .wait_until(timeout, |snap| self.names.name_mismatches(snap).is_empty());
        assert!(
            ok,
            "{after}: names not restored: {:?}\nlog:\n{}",
            self.names.name_mismatches(&self.cb.herdr.snapshot()),
            log_tail(&self.cb, 30)
        );
    }

    /// Both subscriptions are back (lifecycle and status).
    /// Both subscriptions are up, the status one covering every pane (an
    /// older one of fewer panes stays until herdr acknowledges it).
    fn resubscribed_within(&self, timeout: Duration) {
        let herdr = &self.cb.herdr;
        let subscribed = herdr.wait_until(timeout, |snap| {
            herdr.subscriber_count() == 2 && herdr.status_subscription_sizes() == [snap.panes.len()]
        });
        assert!(
            subscribed,
            "not subscribed again; log:\n{}",
            log_tail(&self.cb, 40)
        );
    }
}

/// Waits until the log contains `text`.
fn wait_log(cb: &Cowbell, text: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cb.log().contains(text) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn expect_log(cb: &Cowbell, text: &str, timeout: Duration) {
    assert!(
        wait_log(cb, text, timeout),
        "the log never said {text:?} within {timeout:?}; log:\n{}",
        log_tail(cb, 40)
    );
}

fn count_in_log(cb: &Cowbell, text: &str) -> usize {
    cb.log().matches(text).count()
}

/// Waits until the log says `text` more than the `before` times it had, for
/// a line that an earlier one would satisfy.
fn expect_log_again(cb: &Cowbell, text: &str, before: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while count_in_log(cb, text) <= before {
        assert!(
            Instant::now() < deadline,
            "the log never said {text:?} again within {timeout:?}; log:\n{}",
            log_tail(cb, 40)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number of requests of `method` the server has seen so far.
fn requests(cb: &Cowbell, method: &str) -> usize {
    cb.herdr.requests_of(method).len()
}

/// Waits until the server has seen more than `before` requests of `method`.
fn wait_request(cb: &Cowbell, method: &str, before: usize, timeout: Duration) {
    let ok = cb.herdr.wait_until(timeout, |s| {
        s.requests.iter().filter(|r| r.method == method).count() > before
    });
    assert!(
        ok,
        "no new {method} request within {timeout:?}; log:\n{}",
        log_tail(cb, 40)
    );
}

fn wait_exit(cb: &Cowbell, pid: u32, timeout: Duration) {
    assert!(
        cowbell::wait_dead(pid, timeout),
        "daemon {pid} still runs after {timeout:?}; log:\n{}",
        log_tail(cb, 40)
    );
}

// ---------------------------------------------------------------------------
// The server dies
// ---------------------------------------------------------------------------

#[test]
fn server_dies_mid_line_of_an_event() {
    let mut s = scene();
    let pid = s.pid();
    let connected = count_in_log(&s.cb, "connected to ");
    s.cb.herdr.die_mid_line(br#"{"data":{"label":"half a rena"#);
    std::thread::sleep(Duration::from_millis(300));
    s.cb.herdr.start_again(true);
    expect_log_again(&s.cb, "connected to ", connected, SECOND);
    s.resubscribed_within(3 * SECOND);
    // A restart loses every reported state; the icons must follow.
    s.icons_within(CLEAR);
    s.poke();
    s.icons_within(CLEAR);
    assert_eq!(s.pid(), pid, "the daemon must survive, not be replaced");
    s.invariants();
}

#[test]
fn half_an_answer_then_a_closed_connection_is_retried() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.answer_raw(
        "tab.list",
        2,
        br#"{"id":"r9","result":{"type":"tab_list","tabs":[{"tab_id":"w1:t1","work"#,
    );
    s.poke();
    s.icons_within(CLEAR);
    assert_eq!(s.cb.herdr.canned_left(), 0, "both half answers were read");
    expect_log(&s.cb, "malformed line from herdr", SECOND);
    s.still_well(pid);
}

#[test]
fn server_dies_mid_response() {
    let mut s = scene();
    s.cb.herdr.set_response_delay(Duration::from_millis(500));
    let before = requests(&s.cb, "tab.list");
    s.poke();
    wait_request(&s.cb, "tab.list", before, 2 * SECOND);
    // The answer is on its way (delayed): the server dies now.
    s.cb.herdr.stop();
    std::thread::sleep(Duration::from_millis(300));
    s.cb.herdr.set_response_delay(Duration::ZERO);
    s.cb.herdr.start_again(true);
    s.poke();
    s.icons_within(CLEAR + SECOND);
    s.invariants();
}

#[test]
fn server_dies_mid_subscription() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.drop_subscriptions();
    s.resubscribed_within(3 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

/// Scale 10: the reconnect backoff is 50 ms up to 3 s, so 20 restarts in
/// 10 s cannot push it out of the invariant's 2 s.
#[test]
fn twenty_restarts_in_ten_seconds() {
    let mut s = scene_with(Options::default(), 10.0);
    let pid = s.pid();
    for _ in 0..20 {
        s.cb.herdr.stop();
        std::thread::sleep(Duration::from_millis(250));
        s.cb.herdr.start_again(true);
        s.poke();
        std::thread::sleep(Duration::from_millis(250));
    }
    s.poke();
    s.icons_within(CLEAR);
    assert_eq!(s.pid(), pid, "the daemon must ride out the restarts");
    s.invariants();
}

#[test]
fn server_comes_back_with_different_tabs() {
    let mut s = scene();
    let (t1, t2) = (s.tabs[0].clone(), s.tabs[1].clone());
    s.cb.herdr.stop();
    // While it is down: a tab closes, one is renamed, one is new.
    s.cb.herdr.close_tab(&t2);
    s.names.forget(&t2);
    s.names.rename(&s.cb.herdr, &t1, "renamed while down");
    let (t4, p4) = s.names.tab(&s.cb, Some("new"));
    s.cb.herdr.start_again(true);
    s.panes.push(p4);
    s.poke();
    s.icons_within(CLEAR);
    let ok = s.cb.herdr.wait_until(2 * SECOND, |_| {
        let state = s.cb.state_json();
        !state.contains(&format!("\"{t2}\"")) && state.contains(&format!("\"{t4}\""))
    });
    assert!(ok, "state.json keeps the closed tab: {}", s.cb.state_json());
    s.invariants();
}

#[test]
fn server_comes_back_as_an_empty_session_with_new_tabs() {
    let mut s = scene();
    s.cb.herdr.start_again(false);
    // The same ids come back with other names: w1:t1 is no longer "api".
    let ws = s.cb.herdr.add_workspace("beta");
    let mut names = Names::new();
    let mut panes = Vec::new();
    for name in ["notes", "build"] {
        let tab = s.cb.herdr.add_tab(&ws, Some(name));
        names.set(&tab, name);
        panes.push(s.cb.herdr.panes_of(&tab)[0].clone());
    }
    s.cb.herdr.set_status(&panes[0], "blocked");
    s.cb.herdr.set_status(&panes[1], "working");
    assert_eq!(s.tabs[0], names.0.keys().next().unwrap().as_str());
    assert_icons(&s.cb, &names, CLEAR + SECOND);
    assert_invariants(&s.cb, &names);
}

// ---------------------------------------------------------------------------
// Garbage from the server
// ---------------------------------------------------------------------------

#[test]
fn garbage_lines_on_the_subscription_are_logged_and_skipped() {
    let mut s = scene();
    let pid = s.pid();
    for garbage in [
        &b"not json at all\n"[..],
        b"\xff\xfe\xfd invalid utf-8 \xc3\x28\n",
        b"[1,2,3]\n",
        b"{\"event\":5}\n",
        b"\"just a string\"\n",
        b"{\"data\":\"x\",\"event\":\"tab_renamed\"}\n",
        b"{\"data\":{\"tab_id\":7,\"label\":[]},\"event\":\"tab_renamed\"}\n",
        b"null\n",
        b"{}\n",
        b"\n",
        b"{\"id\":\"x\",\"result\":{\"type\":\"tab_list\",\"tabs\":\"no\"}}\n",
    ] {
        s.cb.herdr.push_raw(garbage);
    }
    expect_log(&s.cb, "malformed line from herdr", 2 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

/// A line under the 4 MiB cap that opens four million arrays: miniserde
/// would take some 170 MB to skip it. On a small host (here a 64 MiB
/// address space) that killed the daemon, without a word in its log.
/// (prlimit, which limits a running process, is Linux's.)
#[cfg(target_os = "linux")]
#[test]
fn a_line_nested_millions_deep_is_skipped_on_a_small_host() {
    let mut s = scene();
    let pid = s.pid();
    let limit = libc::rlimit {
        rlim_cur: 64 << 20,
        rlim_max: 64 << 20,
    };
    // SAFETY: prlimit reads `limit` and writes nothing (null old limit).
    let set = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_AS,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
    s.poke();
    s.icons_within(CLEAR);
    let mut line = br#"{"event":"tab_focused","data":{"junk":"#.to_vec();
    line.resize((4 << 20) - 1024, b'[');
    line.push(b'\n');
    std::thread::scope(|scope| {
        scope.spawn(|| s.cb.herdr.push_raw(&line));
    });
    expect_log(&s.cb, "malformed line from herdr", 3 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

#[test]
fn a_ten_mebibyte_event_line_drops_the_connection_and_reconnects() {
    let mut s = scene();
    let pid = s.pid();
    let connected = count_in_log(&s.cb, "connected to");
    std::thread::scope(|scope| {
        // push_raw blocks until the daemon stops reading.
        scope.spawn(|| s.cb.herdr.push_raw(&vec![b'x'; 10 << 20]));
    });
    expect_log(&s.cb, "longer than", 3 * SECOND);
    let ok = s.cb.herdr.wait_until(3 * SECOND, |_| {
        count_in_log(&s.cb, "connected to") > connected
    });
    assert!(ok, "no reconnection; log:\n{}", log_tail(&s.cb, 40));
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

#[test]
fn a_ten_mebibyte_answer_is_refused_and_retried() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.answer_raw("tab.list", 1, &vec![b'x'; 10 << 20]);
    s.poke();
    s.icons_within(CLEAR + SECOND);
    expect_log(&s.cb, "longer than", SECOND);
    s.still_well(pid);
}

#[test]
fn answers_of_the_wrong_shape_are_survived() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.answer_raw(
        "tab.list",
        1,
        b"{\"id\":\"r\",\"result\":{\"type\":\"tab_list\",\"tabs\":{\"a\":1}}}\n",
    );
    s.cb.herdr.answer_raw(
        "tab.list",
        1,
        b"{\"id\":\"r\",\"result\":{\"type\":\"pane_list\",\"panes\":[]}}\n",
    );
    s.cb.herdr
        .answer_raw("tab.list", 1, b"[{\"tab_id\":\"w1:t1\"}]\n");
    s.cb.herdr
        .answer_raw("pane.list", 1, b"{\"id\":\"r\",\"result\":42}\n");
    s.poke();
    s.icons_within(CLEAR + SECOND);
    s.cb.herdr.answer_raw(
        "tab.rename",
        2,
        b"{\"id\":\"r\",\"result\":{\"type\":\"tab_info\",\"tab\":null}}\n",
    );
    s.poke();
    s.icons_within(CLEAR + SECOND);
    s.still_well(pid);
}

/// An empty tab list (a server that lost its session for a moment) makes
/// cowbell forget every tab; the next list brings them back with their
/// names intact, taken from the labels.
#[test]
fn an_empty_tab_list_loses_no_name() {
    let mut s = scene();
    s.cb.herdr.answer_raw(
        "tab.list",
        1,
        b"{\"id\":\"r\",\"result\":{\"type\":\"tab_list\",\"tabs\":[]}}\n",
    );
    s.poke();
    s.icons_within(CLEAR);
    s.poke();
    s.icons_within(CLEAR);
    s.invariants();
}

/// herdr 0.9 ends a subscription that fell behind its event history with
/// an error line: that is no refusal, and the log says what it is.
#[test]
fn an_error_line_after_the_subscription_started_is_not_called_a_refusal() {
    let s = scene();
    let pid = s.pid();
    // Both started: the line goes to each.
    s.resubscribed_within(2 * SECOND);
    s.cb.herdr.push_raw(
        b"{\"id\":\"sub\",\"error\":{\"code\":\"events_lost\",\"message\":\"event subscription fell behind retained history\"}}\n",
    );
    expect_log(
        &s.cb,
        "herdr ended the event subscription: events_lost",
        2 * SECOND,
    );
    expect_log(
        &s.cb,
        "herdr ended the status subscription: events_lost",
        2 * SECOND,
    );
    assert!(
        !s.cb.log().contains("refused"),
        "log:\n{}",
        log_tail(&s.cb, 20)
    );
    s.still_well(pid);
}

#[test]
fn unknown_event_types_and_unknown_fields_are_ignored_silently() {
    let mut s = scene();
    let pid = s.pid();
    let lists = requests(&s.cb, "tab.list");
    s.cb.herdr.push_raw(
        b"{\"data\":{\"what\":{\"deep\":[1,{\"x\":null}]},\"type\":\"workspace_exploded\"},\"event\":\"workspace_exploded\"}\n",
    );
    // A known event with fields herdr may add one day: still a resync hint.
    s.cb.herdr.push_raw(
        b"{\"data\":{\"brand_new\":[1,2],\"tab_id\":\"w1:t1\",\"type\":\"tab_focused\",\"workspace_id\":\"w1\"},\"event\":\"tab_focused\",\"extra\":true}\n",
    );
    wait_request(&s.cb, "tab.list", lists, 2 * SECOND);
    // A tab list with unknown fields everywhere and a status from the future.
    let t1 = s.tabs[0].clone();
    s.cb.herdr.set_status(&s.panes[0], "working");
    let label = s.cb.herdr.label(&t1);
    let line = format!(
        "{{\"id\":\"r\",\"result\":{{\"type\":\"tab_list\",\"new_top\":1,\"tabs\":[\
         {{\"tab_id\":\"{t1}\",\"workspace_id\":\"w1\",\"number\":1,\"label\":{label:?},\"focused\":true,\
         \"pane_count\":1,\"agent_status\":\"working\",\"colour\":\"red\",\"nested\":{{\"a\":[]}}}}]}}}}\n"
    );
    s.cb.herdr.answer_raw("tab.list", 1, line.as_bytes());
    s.cb.expect_label(&t1, "🟡 api", CLEAR);
    assert!(
        !s.cb.log().contains("malformed"),
        "unknown types and fields must pass silently; log:\n{}",
        log_tail(&s.cb, 40)
    );
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

#[test]
fn a_rename_refused_because_the_tab_closed_is_forgotten() {
    let mut s = scene();
    let t2 = s.tabs[1].clone();
    s.cb.herdr.fail_next_renames(1);
    let before = s.cb.herdr.renames_of(&t2);
    s.cb.herdr.set_status(&s.panes[1], "blocked");
    assert!(
        s.cb.herdr
            .wait_until(2 * SECOND, |snap| snap.renames_of(&t2) > before),
        "no rename of {t2}"
    );
    // The tab closes (the reason herdr said tab_not_found).
    s.cb.herdr.close_tab(&t2);
    s.names.forget(&t2);
    s.panes.remove(1);
    s.tabs.remove(1);
    expect_log(&s.cb, "tab_not_found", SECOND);
    let ok = s.cb.herdr.wait_until(2 * SECOND, |_| {
        !s.cb.state_json().contains(&format!("\"{t2}\""))
    });
    assert!(ok, "state keeps the closed tab: {}", s.cb.state_json());
    s.poke();
    s.icons_within(CLEAR);
    s.invariants();
}

/// herdr refused one rename (the fault), then works again: the tab must
/// get its icon without waiting for the next event or the 60 s heartbeat.
/// (Once the scene has settled: the resync after the status
/// subscription's acknowledgement must not be what brings the icon.)
#[test]
fn a_refused_rename_is_tried_again() {
    let s = scene();
    let t2 = s.tabs[1].clone();
    std::thread::sleep(Duration::from_millis(500));
    s.cb.herdr.fail_next_renames(1);
    let before = s.cb.herdr.renames_of(&t2);
    s.cb.herdr.set_status(&s.panes[1], "blocked");
    assert!(
        s.cb.herdr
            .wait_until(2 * SECOND, |snap| snap.renames_of(&t2) > before),
        "no rename of {t2}"
    );
    expect_log(&s.cb, "tab_not_found", SECOND);
    // Nothing else happens now: only a retry can bring the icon.
    s.cb.expect_label(&t2, "🔴 docs", CLEAR);
    s.invariants();
}

/// `off` waits up to 15 s for a daemon it signalled to give the names
/// back: a restore that herdr holds up for several seconds (refused
/// renames, each round tried again 1 s later) is no failure at 5 s.
#[test]
fn off_waits_for_a_restore_that_takes_several_seconds() {
    let s = scene();
    // Two tracked tabs: six rounds of refused renames, about 6 s.
    s.cb.herdr.fail_next_renames(12);
    let start = Instant::now();
    let outcome = s.cb.run_as(&["off"], "action");
    let took = start.elapsed();
    assert!(
        outcome.status.success(),
        "after {took:?}: {}\nlog:\n{}",
        outcome.stderr,
        log_tail(&s.cb, 30)
    );
    assert!(took > 5 * SECOND, "the restore took only {took:?}");
    s.names_back_within(CLEAR, "off");
}

/// A hook that finds the pidfile held without a pid (a short command
/// such as `sync` holds it a moment) gives the holder a moment to let go,
/// then starts the daemon: a command is no daemon.
#[test]
fn a_watchdog_while_a_command_holds_the_lock_still_starts_the_daemon() {
    a_watchdog_after_a_crash_beside(libc::LOCK_EX);
}

/// A `status` looks with a shared lock and leaves the crashed daemon's
/// pid in the file: that pid, alone, is no daemon either.
#[test]
fn a_watchdog_while_a_status_looks_after_a_crash_still_starts_the_daemon() {
    a_watchdog_after_a_crash_beside(libc::LOCK_SH);
}

/// Kills the daemon, holds its pidfile's lock as a short command does
/// (`LOCK_EX`, emptying the file) or as `status` does (`LOCK_SH`, the
/// dead pid left in it) for 200 ms, and runs the watchdog meanwhile.
fn a_watchdog_after_a_crash_beside(how: libc::c_int) {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    assert_eq!(flock(&file, how | libc::LOCK_NB), 0);
    if how == libc::LOCK_EX {
        file.set_len(0).unwrap();
    }
    let command = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(file);
    });
    assert!(cb.watchdog().status.success());
    command.join().unwrap();
    // Not `wait_for_daemon`: the killed daemon may linger as a zombie.
    let deadline = Instant::now() + 2 * SECOND;
    while cb.daemons().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(cb.daemons().len(), 1, "log:\n{}", cb.log());
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", CLEAR);
}

/// CPU time (user + system, in clock ticks) a process has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    // utime and stime are fields 14 and 15; field 3 is the first here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// After a signal the daemon sleeps again: its self-pipe is emptied, or
/// poll(2) would find it readable forever, a busy loop.
#[test]
fn after_a_sighup_the_daemon_sleeps_again() {
    let s = scene();
    let pid = s.pid();
    cowbell::signal(pid, libc::SIGHUP);
    expect_log(&s.cb, "SIGHUP", SECOND);
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(pid);
    std::thread::sleep(SECOND);
    let used = cpu_ticks(pid) - before;
    assert!(used < 20, "{used} clock ticks of CPU in a quiet second");
    s.still_well(pid);
}

/// A file size limit (`ulimit -f`) makes the log's writes fail; it must
/// not kill the daemon with SIGXFSZ.
#[test]
fn a_file_size_limit_does_not_kill_the_daemon() {
    use std::os::unix::process::CommandExt;
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    let mut command = cb.launched(&["daemon", "--replace"], "startup");
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    assert!(command.status().unwrap().success());
    let pid = cb.wait_for_daemon(2 * SECOND);
    // Each reload is a line in the log: it soon reaches the limit.
    for _ in 0..100 {
        cowbell::signal(pid, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(20));
        if cb.log().len() >= 4000 {
            break;
        }
    }
    assert!(
        cb.log().len() >= 4000,
        "the log stayed short:\n{}",
        cb.log()
    );
    // Past the limit now: these lines cannot be written.
    for _ in 0..5 {
        cowbell::signal(pid, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    // Not a zombie either (no one may have reaped it yet).
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let running = state
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'));
    assert!(running, "the daemon died at the file size limit");
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", CLEAR);
}

/// The event subscription drops while a request of the resync under way
/// (`method`) waits for its answer: once reconnected, the daemon resyncs
/// again, and goes on doing so. A resync that died with the connection
/// must not be counted as running, nor its renames as outstanding.
fn connection_lost_in_the_middle_of_a_resync(method: &str) {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.set_silent_method(Some(method));
    let before = requests(&s.cb, method);
    s.poke();
    wait_request(&s.cb, method, before, 2 * SECOND);
    s.cb.herdr.drop_subscriptions();
    s.cb.herdr.set_silent_method(None);
    s.resubscribed_within(3 * SECOND);
    s.icons_within(CLEAR);
    for _ in 0..2 {
        s.poke();
        s.icons_within(CLEAR);
    }
    s.still_well(pid);
}

#[test]
fn a_connection_lost_while_the_tab_list_is_unanswered_does_not_stop_resyncs() {
    connection_lost_in_the_middle_of_a_resync("tab.list");
}

#[test]
fn a_connection_lost_while_renames_are_unanswered_does_not_stop_resyncs() {
    connection_lost_in_the_middle_of_a_resync("tab.rename");
}

/// herdr refuses the next `times` status subscriptions, as it does when a
/// pane closed between `pane.list` and the subscription.
fn refuse_status_subscriptions(cb: &Cowbell, times: usize) {
    cb.herdr.answer_raw_if(
        "events.subscribe",
        Some("pane.agent_status_changed"),
        times,
        b"{\"id\":\"sub:sub:0:probe\",\"error\":{\"code\":\"pane_not_found\",\"message\":\"pane w1:p99 not found\"}}\n",
    );
}

/// A new tab with a pane changes the pane set: cowbell subscribes again.
fn new_pane_set(s: &mut Scene) -> String {
    let (_tab, pane) = s.names.tab(&s.cb, Some("fresh"));
    s.panes.push(pane.clone());
    pane
}

/// The status subscription is back: a change only it delivers shows.
fn status_subscription_works(s: &mut Scene, pane: &str, within: Duration) {
    s.resubscribed_within(within);
    s.cb.herdr.set_status(pane, "blocked");
    s.icons_within(CLEAR);
}

#[test]
fn an_error_line_to_the_status_subscription_is_retried() {
    let mut s = scene();
    let pid = s.pid();
    refuse_status_subscriptions(&s.cb, 1);
    let pane = new_pane_set(&mut s);
    expect_log(&s.cb, "pane_not_found", 3 * SECOND);
    status_subscription_works(&mut s, &pane, 3 * SECOND);
    s.still_well(pid);
}

/// herdr probes every pane of a status subscription before it answers: a
/// thousand panes on a slow server take longer than one request may. The
/// ack is waited for, not given up on and asked for again at the same cost
/// (which never ended: every try took as long).
#[test]
fn a_status_subscription_of_many_panes_acknowledged_late_is_kept() {
    // 1005 panes at 2.5 ms each: the ack comes 2.5 s after the request.
    let s = a_slow_ack_of_many_panes(Duration::from_micros(2500), 10 * SECOND);
    assert!(
        !s.cb.log().contains("status subscription not acknowledged"),
        "log:\n{}",
        log_tail(&s.cb, 30)
    );
}

/// A server slower than cowbell's guess per pane: each ack that did not
/// come in time doubles the wait for the next.
#[test]
fn a_status_subscription_slower_than_the_guess_per_pane_is_kept_in_the_end() {
    // 5 s for the ack of 1005 panes, where 4 s are allowed at first.
    let s = a_slow_ack_of_many_panes(Duration::from_millis(5), 20 * SECOND);
    assert_eq!(
        count_in_log(&s.cb, "status subscription not acknowledged"),
        1,
        "log:\n{}",
        log_tail(&s.cb, 30)
    );
}

/// A thousand more panes, each `probe_time` for herdr to look at before it
/// acknowledges the status subscription: within `within`, cowbell holds a
/// subscription of them all, and a change only it delivers shows.
fn a_slow_ack_of_many_panes(probe_time: Duration, within: Duration) -> Scene {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.set_probe_time(probe_time);
    let (tab, _pane) = s.names.tab(&s.cb, Some("many"));
    let quiet: Vec<String> = (0..1000)
        .map(|_| s.cb.herdr.add_pane_unannounced(&tab, "idle"))
        .collect();
    // One more pane that herdr announces, so cowbell looks at the panes.
    s.panes.push(s.cb.herdr.add_pane(&tab));
    let total = s.cb.herdr.panes().len();
    let subscribed = s.cb.herdr.wait_until(within, |_| {
        s.cb.herdr.status_subscription_sizes().contains(&total)
    });
    assert!(
        subscribed,
        "no status subscription of all {total} panes was kept; log:\n{}",
        log_tail(&s.cb, 30)
    );
    // Only the large subscription covers this pane.
    s.cb.herdr.set_status(&quiet[500], "blocked");
    s.icons_within(CLEAR);
    s.cb.herdr.set_probe_time(Duration::ZERO);
    s.still_well(pid);
    s
}

/// herdr probes every pane before it acknowledges a status subscription.
/// Meanwhile the subscription it replaces goes on: an agent in another tab
/// that goes blocked shows at once, not when the probe of 1000 panes ends.
#[test]
fn a_changed_pane_set_keeps_the_old_status_subscription_until_the_new_one_is_acknowledged() {
    let (s, tab, quiet) = many_quiet_panes(Duration::from_micros(3500));
    let pid = s.pid();
    let extra = s.cb.herdr.add_pane(&tab);
    let total = s.cb.herdr.panes().len();
    assert!(
        s.cb.herdr.wait_until(15 * SECOND, |_| {
            s.cb.herdr.status_subscription_sizes().contains(&total)
        }),
        "log:\n{}",
        log_tail(&s.cb, 30)
    );
    // The set changes: the new subscription's probe takes 3.5 s.
    let before = status_subscribes(&s.cb);
    s.cb.herdr.close_pane(&extra);
    assert!(
        s.cb.herdr
            .wait_until(5 * SECOND, |_| status_subscribes(&s.cb) > before)
    );
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    s.cb.herdr.set_status(&quiet[500], "blocked");
    let shown =
        s.cb.herdr
            .wait_until(10 * SECOND, |snap| snap.label(&tab).starts_with('🔴'));
    let took = asked.elapsed();
    assert!(shown, "log:\n{}", log_tail(&s.cb, 30));
    assert!(
        took < 2 * SECOND,
        "the icon took {took:?}, as long as the probe; log:\n{}",
        log_tail(&s.cb, 30)
    );
    // And the new subscription takes over.
    assert!(s.cb.herdr.wait_until(10 * SECOND, |_| {
        s.cb.herdr.status_subscription_sizes() == [total - 1]
    }));
    s.cb.herdr.set_probe_time(Duration::ZERO);
    s.still_well(pid);
}

/// Panes created faster than herdr probes a subscription of them all: each
/// new one is subscribed once the one before was acknowledged, instead of
/// a probe started over at every pane, which nothing ever acknowledged.
#[test]
fn panes_created_faster_than_herdr_probes_them_still_get_subscribed() {
    let (mut s, tab, quiet) = many_quiet_panes(Duration::from_micros(2500));
    let pid = s.pid();
    let mut largest = 0;
    // A pane a second for 8 s (an orchestrator starting agents); the
    // probe of a thousand panes takes 2.5 s.
    for _ in 0..8 {
        s.panes.push(s.cb.herdr.add_pane(&tab));
        let next = Instant::now() + SECOND;
        while Instant::now() < next {
            let sizes = s.cb.herdr.status_subscription_sizes();
            largest = sizes.into_iter().fold(largest, usize::max);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(
        largest > quiet.len(),
        "no subscription of the new panes acknowledged in 8 s; log:\n{}",
        log_tail(&s.cb, 30)
    );
    let total = s.cb.herdr.panes().len();
    assert!(
        s.cb.herdr.wait_until(15 * SECOND, |_| {
            s.cb.herdr.status_subscription_sizes() == [total]
        }),
        "log:\n{}",
        log_tail(&s.cb, 30)
    );
    s.cb.herdr.set_probe_time(Duration::ZERO);
    s.still_well(pid);
}

/// The scene, and a tab with 1000 more panes herdr did not announce, each
/// taking `probe_time` to probe.
fn many_quiet_panes(probe_time: Duration) -> (Scene, String, Vec<String>) {
    let mut s = scene();
    s.cb.herdr.set_probe_time(probe_time);
    let (tab, _pane) = s.names.tab(&s.cb, Some("many"));
    let quiet = (0..1000)
        .map(|_| s.cb.herdr.add_pane_unannounced(&tab, "idle"))
        .collect();
    (s, tab, quiet)
}

/// How many status subscriptions cowbell has asked for so far.
fn status_subscribes(cb: &Cowbell) -> usize {
    cb.herdr
        .requests_of("events.subscribe")
        .iter()
        .filter(|r| r.line.contains("pane.agent_status_changed"))
        .count()
}

/// The backoff holds while events keep coming: each resync's pane count
/// differs from the (empty) subscribed set, which must not bring a fresh
/// `pane.list` and subscription every time.
#[test]
fn a_refused_status_subscription_backs_off_under_a_stream_of_events() {
    let mut s = scene();
    refuse_status_subscriptions(&s.cb, 10_000);
    let before = status_subscribes(&s.cb);
    let _pane = new_pane_set(&mut s);
    // Someone clicks between two tabs every 200 ms for 3 s.
    let (a, b) = (s.tabs[0].clone(), s.tabs[1].clone());
    let end = Instant::now() + 3 * SECOND;
    let mut flip = false;
    while Instant::now() < end {
        s.cb.herdr.focus_tab(if flip { &a } else { &b });
        flip = !flip;
        std::thread::sleep(Duration::from_millis(200));
    }
    let refused = status_subscribes(&s.cb) - before;
    s.cb.herdr.clear_canned();
    assert!(
        (1..=6).contains(&refused),
        "{refused} status subscriptions in 3 s (0.5 s doubling allows about 4); log:\n{}",
        log_tail(&s.cb, 30)
    );
}

#[test]
fn a_status_subscription_refused_again_and_again_is_retried_with_a_backoff() {
    let mut s = scene();
    let pid = s.pid();
    refuse_status_subscriptions(&s.cb, 10_000);
    let before = status_subscribes(&s.cb);
    let pane = new_pane_set(&mut s);
    std::thread::sleep(3 * SECOND);
    // Without a backoff: one refusal per debounce, about 25 in 3 s. With
    // it (0.5 s doubling): 4.
    let refused = status_subscribes(&s.cb) - before;
    assert!(
        (1..=6).contains(&refused),
        "{refused} status subscriptions in 3 s; log:\n{}",
        log_tail(&s.cb, 20)
    );
    s.cb.herdr.clear_canned();
    status_subscription_works(&mut s, &pane, 10 * SECOND);
    s.still_well(pid);
}

/// The waits before each new `pane.list` after a refused status
/// subscription, as the log gives them.
fn resubscribe_waits(cb: &Cowbell) -> Vec<u64> {
    cb.log()
        .lines()
        .filter_map(|line| line.split("listing panes again in ").nth(1))
        .filter_map(|rest| rest.strip_suffix(" ms"))
        .filter_map(|ms| ms.parse().ok())
        .collect()
}

/// The status subscription's backoff grows like the reconnect one: from
/// 0.5 s, doubling, up to 30 s, and starts over once herdr accepts it.
#[test]
fn a_refused_status_subscription_backs_off_from_half_a_second_to_thirty() {
    // Scale 10: 0.5 s .. 30 s become 50 ms .. 3 s.
    let mut s = scene_with(Options::default(), 10.0);
    refuse_status_subscriptions(&s.cb, 10_000);
    let pane = new_pane_set(&mut s);
    std::thread::sleep(Duration::from_millis(8500));
    let waits = resubscribe_waits(&s.cb);
    assert!(waits.len() >= 7, "{waits:?}\n{}", log_tail(&s.cb, 30));
    assert_eq!(
        &waits[..7],
        [50, 100, 200, 400, 800, 1600, 3000],
        "{}",
        log_tail(&s.cb, 30)
    );
    assert!(waits.iter().all(|ms| *ms <= 3000), "{waits:?}");
    s.cb.herdr.clear_canned();
    status_subscription_works(&mut s, &pane, 5 * SECOND);
    // Accepted: the next refusal waits 0.5 s again, not 30.
    let before = resubscribe_waits(&s.cb).len();
    refuse_status_subscriptions(&s.cb, 1);
    new_pane_set(&mut s);
    // The earlier refusals are in the log already: wait for this one's.
    let deadline = Instant::now() + 3 * SECOND;
    while resubscribe_waits(&s.cb).len() <= before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        resubscribe_waits(&s.cb).get(before),
        Some(&50),
        "{}",
        log_tail(&s.cb, 30)
    );
}

/// A `pane.list` that gets no answer is tried again: without it there is
/// no status subscription, and a status change shows only at the next
/// lifecycle event or the 60 s heartbeat.
#[test]
fn a_pane_list_that_times_out_is_tried_again() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    // An agent reported already: no pane_agent_detected will come.
    cb.herdr.set_status(&pane, "idle");
    cb.herdr.focus_tab(&tab);
    cb.herdr.set_silent_method(Some("pane.list"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    wait_request(&cb, "pane.list", 0, 2 * SECOND);
    cb.expect_steady(&tab, "api", Duration::from_millis(500));
    let unanswered = requests(&cb, "pane.list");
    cb.herdr.set_silent_method(None);
    // Those time out after 2 s; the retry comes 1 s later.
    wait_request(&cb, "pane.list", unanswered, REQUEST_TIMEOUT + 2 * SECOND);
    assert!(
        cb.herdr.wait_for_subscribers(2, SECOND),
        "no status subscription; log:\n{}",
        log_tail(&cb, 30)
    );
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", CLEAR);
}

/// herdr accepts the event subscription but never acknowledges it: the
/// daemon gives up on it and subscribes again, rather than wait forever.
#[test]
fn an_event_subscription_never_acknowledged_is_made_again() {
    let mut s = scene();
    let pid = s.pid();
    let before = requests(&s.cb, "events.subscribe");
    s.cb.herdr.set_silent_method(Some("events.subscribe"));
    s.cb.herdr.drop_subscriptions();
    wait_request(&s.cb, "events.subscribe", before, 2 * SECOND);
    std::thread::sleep(Duration::from_millis(300));
    s.cb.herdr.set_silent_method(None);
    s.resubscribed_within(REQUEST_TIMEOUT + 3 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

/// The same for the status subscription: one herdr never acknowledged
/// is made again, or status changes would go unseen.
#[test]
fn a_status_subscription_never_acknowledged_is_made_again() {
    let mut s = scene();
    let pid = s.pid();
    let before = status_subscribes(&s.cb);
    s.cb.herdr.set_silent_method(Some("events.subscribe"));
    let pane = new_pane_set(&mut s);
    assert!(
        s.cb.herdr.wait_until(2 * SECOND, |snap| {
            snap.requests
                .iter()
                .filter(|r| r.line.contains("pane.agent_status_changed"))
                .count()
                > before
        }),
        "no status subscription asked for"
    );
    s.cb.herdr.set_silent_method(None);
    status_subscription_works(&mut s, &pane, REQUEST_TIMEOUT + 3 * SECOND);
    s.still_well(pid);
}

#[test]
fn an_error_line_to_the_lifecycle_subscription_is_retried() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.answer_raw_if(
        "events.subscribe",
        Some("tab.created"),
        2,
        b"{\"id\":\"sub\",\"error\":{\"code\":\"internal\",\"message\":\"try later\"}}\n",
    );
    s.cb.herdr.drop_subscriptions();
    expect_log(&s.cb, "refused the event subscription", 3 * SECOND);
    s.resubscribed_within(5 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.still_well(pid);
}

/// herdr's `pane_count` is any u64 on the wire. Two tabs whose counts add
/// up past u64::MAX must not kill the daemon (the counts are summed to
/// notice a pane set that changed without its event); a debug build
/// panicked on the overflow.
#[test]
fn pane_counts_that_add_up_past_u64_max_do_not_kill_the_daemon() {
    let cb = Cowbell::new();
    let mut names = Names::new();
    let (_, p1) = names.tab(&cb, Some("api"));
    let (_, p2) = names.tab(&cb, Some("docs"));
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "working");
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    let tabs: Vec<String> = cb
        .herdr
        .tabs()
        .iter()
        .map(|t| {
            format!(
                r#"{{"tab_id":{},"workspace_id":{},"number":{},"label":{},"focused":false,"pane_count":{},"agent_status":{}}}"#,
                quote(&t.tab_id),
                quote(&t.workspace_id),
                t.number,
                quote(&t.label),
                u64::MAX,
                quote(&t.status)
            )
        })
        .collect();
    let answer = format!(
        r#"{{"id":"r","result":{{"type":"tab_list","tabs":[{}]}}}}"#,
        tabs.join(",")
    ) + "\n";
    cb.herdr.answer_raw("tab.list", 1, answer.as_bytes());
    // Any event makes the daemon list the tabs.
    cb.herdr.set_status(&p1, "idle");
    let used = cb
        .herdr
        .wait_until(3 * SECOND, |_| cb.herdr.canned_left() == 0);
    assert!(used, "the canned tab.list was never asked for");
    std::thread::sleep(SECOND / 2);
    assert!(
        cb.daemons().contains(&pid),
        "the daemon died; log:\n{}",
        log_tail(&cb, 20)
    );
    cb.herdr.set_status(&p2, "blocked");
    assert_icons(&cb, &names, 3 * SECOND);
}

// ---------------------------------------------------------------------------
// A slow server and a silent one
// ---------------------------------------------------------------------------

#[test]
fn a_slow_server_times_requests_out_and_signals_are_still_served() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.set_response_delay(5 * SECOND);
    s.poke();
    std::thread::sleep(Duration::from_millis(300));
    cowbell::signal(pid, libc::SIGHUP);
    expect_log(&s.cb, "SIGHUP", SECOND);
    expect_log(&s.cb, "timed out", REQUEST_TIMEOUT + SECOND);
    s.cb.herdr.set_response_delay(Duration::ZERO);
    s.icons_within(CLEAR + REQUEST_TIMEOUT);
    s.still_well(pid);
}

#[test]
fn a_silent_server_times_requests_out_and_sigterm_still_ends_the_daemon() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.set_silent(true);
    s.poke();
    expect_log(&s.cb, "timed out", REQUEST_TIMEOUT + 2 * SECOND);
    cowbell::signal(pid, libc::SIGHUP);
    expect_log(&s.cb, "SIGHUP", SECOND);
    s.cb.herdr.set_silent(false);
    s.icons_within(CLEAR + REQUEST_TIMEOUT);
    assert_eq!(s.pid(), pid);
    // Silent again: a stop cannot restore, but must still end the daemon,
    // once its 10 s of tries are up.
    s.cb.herdr.set_silent(true);
    s.poke();
    cowbell::signal(pid, libc::SIGTERM);
    wait_exit(&s.cb, pid, 10 * SECOND + REQUEST_TIMEOUT + 2 * SECOND);
    s.cb.herdr.set_silent(false);
    // The names come back from state.json.
    let outcome = s.cb.run_as(&["remove-icons"], "action");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    s.names_back_within(SECOND, "remove-icons");
}

#[test]
fn a_replace_that_gave_up_leaves_the_old_daemon_running() {
    // A daemon stopped longer than `--replace` waits (SIGSTOP here; a
    // frozen cgroup, a very slow fsync): the startup hook gives up, but its
    // SIGUSR1 stays pending. Handing over to nobody once it runs again
    // would leave cowbell on with no daemon.
    let mut s = scene();
    let pid = s.pid();
    for (signaller, args) in [
        ("startup hook", &["daemon", "--replace"][..]),
        ("on", &["on"]),
    ] {
        let carried_on = count_in_log(&s.cb, "has given up waiting: carrying on");
        cowbell::signal(pid, libc::SIGSTOP);
        let gave_up = s.cb.run(args);
        cowbell::signal(pid, libc::SIGCONT);
        assert_eq!(
            gave_up.status.code(),
            Some(1),
            "{signaller}: {}",
            gave_up.stderr
        );
        assert!(
            gave_up.stderr.contains("it stays the daemon"),
            "{}",
            gave_up.stderr
        );
        expect_log_again(
            &s.cb,
            "has given up waiting: carrying on",
            carried_on,
            2 * SECOND + REQUEST_TIMEOUT,
        );
        // Still the daemon a while later.
        std::thread::sleep(SECOND);
        assert_eq!(s.pid(), pid, "after the {signaller} gave up");
        s.poke();
        s.icons_within(CLEAR);
    }
    s.invariants();
}

/// A blocked "api" tab, and in place of its daemon a stand-in: a process
/// to signal (`sleep`, which the handover's SIGUSR1 ends: it has decided)
/// and the lock, with that pid written as the daemon writes it. Once
/// asked, the stand-in empties the pidfile, as a daemon that decided does,
/// and lets go of the lock `hold` later. Its thread returns how `sleep`
/// ended.
fn a_stand_in_daemon(hold: Duration) -> (Cowbell, String, std::thread::JoinHandle<ExitStatus>) {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    let first = cb.wait_for_daemon(2 * SECOND);
    let pidfile = cb.server_dir().join("cowbell.pid");
    // Where this pid means something, as the daemon wrote it.
    let written = std::fs::read_to_string(&pidfile).unwrap();
    let scope = written
        .split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ");
    cowbell::signal(first, libc::SIGKILL);
    assert!(cowbell::wait_dead(first, 2 * SECOND));
    let mut old = Command::new("sleep").arg("60").spawn().unwrap();
    let mut held = std::fs::OpenOptions::new()
        .write(true)
        .open(&pidfile)
        .unwrap();
    assert_eq!(flock(&held, libc::LOCK_EX), 0);
    held.set_len(0).unwrap();
    writeln!(held, "{} {scope}", old.id()).unwrap();
    let stand_in = std::thread::spawn(move || {
        let decided = old.wait().unwrap();
        held.set_len(0).unwrap();
        std::thread::sleep(hold);
        drop(held);
        decided
    });
    (cb, tab, stand_in)
}

/// An old daemon that decided to hand over but lets go of its lock only
/// after the 5 s a replacing start waits (renames in flight, then a slow
/// sync of its last save): it empties its pidfile when it decides, and the
/// start waits for such a holder, or no daemon would be left.
#[test]
fn a_replace_waits_for_an_old_daemon_that_decided_to_go() {
    let (cb, tab, stand_in) = a_stand_in_daemon(6 * SECOND);
    let replace = cb.run(&["daemon", "--replace"]);
    let decided = stand_in.join().unwrap();
    assert!(!decided.success(), "the stand-in was never asked to go");
    assert!(
        replace.status.success(),
        "exit {:?}: {}",
        replace.status.code(),
        replace.stderr
    );
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
}

/// Stops `pid` (a starting cowbell) in its first sleep: the 20 ms it
/// takes to trust a pid, after it found one and before it signals, as
/// Ctrl-Z might. Linux on x86-64 and ARM64, where /proc shows the call.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn stop_at_first_sleep(pid: u32) -> bool {
    // nanosleep and clock_nanosleep.
    #[cfg(target_arch = "x86_64")]
    const SLEEPS: [i64; 2] = [35, 230];
    #[cfg(target_arch = "aarch64")]
    const SLEEPS: [i64; 2] = [101, 115];
    // On a busy machine this thread may not run while the start sleeps,
    // and the start is done before it is seen: then nothing is tested,
    // and the caller tries again. ("running" while it is not in a call.)
    let deadline = Instant::now() + 2 * SECOND;
    loop {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
            return false;
        };
        let call = text
            .split_whitespace()
            .next()
            .and_then(|call| call.parse::<i64>().ok());
        if call.is_some_and(|call| SLEEPS.contains(&call)) {
            break;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
    cowbell::signal(pid, libc::SIGSTOP);
    true
}

/// A `daemon --replace` stopped at its first sleep for `paused`, then let
/// go on, to its end.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn a_replace_stopped_before_its_signal(
    cb: &Cowbell,
    paused: Duration,
) -> (bool, std::process::Output) {
    let taker = cb
        .launched(&["daemon", "--replace"], "startup")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stopped = stop_at_first_sleep(taker.id());
    if stopped {
        std::thread::sleep(paused);
        cowbell::signal(taker.id(), libc::SIGCONT);
    }
    (stopped, taker.wait_with_output().unwrap())
}

/// The same, with the start stopped (Ctrl-Z) 12 s before it signalled:
/// its wait for a daemon that decided counts from the signal too.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn a_start_resumed_late_waits_for_an_old_daemon_that_decided_to_go() {
    for _ in 0..3 {
        let (cb, tab, stand_in) = a_stand_in_daemon(8 * SECOND);
        let (stopped, replaced) = a_replace_stopped_before_its_signal(&cb, 12 * SECOND);
        let decided = stand_in.join().unwrap();
        if !stopped {
            continue;
        }
        assert!(!decided.success(), "the stand-in was never asked to go");
        assert!(
            replaced.status.success(),
            "exit {:?}: {}",
            replaced.status.code(),
            String::from_utf8_lossy(&replaced.stderr)
        );
        cb.wait_for_daemon(2 * SECOND);
        cb.expect_label(&tab, "🔴 api", 2 * SECOND);
        return;
    }
    panic!("the start never slept where this test could stop it");
}

fn flock(file: &std::fs::File, how: libc::c_int) -> libc::c_int {
    // SAFETY: flock on a descriptor this test owns.
    unsafe { libc::flock(file.as_raw_fd(), how) }
}

/// A `daemon --replace` launched with its stderr kept, once the old daemon
/// has decided to hand over: its pidfile is empty while it still holds the
/// lock. Its last save is slow meanwhile, for as long as the directory's
/// lock, returned, is held (a save waits for it up to a second). None
/// when the pidfile kept the old pid to the end.
fn a_decided_handover(cb: &Cowbell, old: u32) -> (Option<std::fs::File>, std::process::Child) {
    let pidfile = cb.server_dir().join("cowbell.pid");
    let dir = std::fs::File::open(cb.server_dir()).unwrap();
    assert_eq!(flock(&dir, libc::LOCK_EX), 0);
    let replace = cb
        .launched(&["daemon", "--replace"], "startup")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + 3 * SECOND;
    while Instant::now() < deadline {
        let look = std::fs::File::open(&pidfile).unwrap();
        let held = flock(&look, libc::LOCK_SH | libc::LOCK_NB) != 0;
        if held && look.metadata().unwrap().len() == 0 && cowbell::alive(old) {
            return (Some(dir), replace);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (None, replace)
}

/// The old daemon's half of the above: once it has decided to hand over,
/// its pidfile is empty while it still holds the lock, through its last
/// save.
#[test]
fn a_daemon_that_decided_to_hand_over_empties_its_pidfile_first() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let (decided, replace) = a_decided_handover(&cb, old);
    let emptied_while_held = decided.is_some();
    drop(decided);
    let replaced = replace.wait_with_output().unwrap();
    assert!(
        emptied_while_held,
        "the pidfile kept the old pid to the end\n{}",
        cb.log()
    );
    assert!(replaced.status.success());
    assert_ne!(cb.wait_for_daemon(2 * SECOND), old);
}

/// A daemon that decided to hand over, then was stopped in its last save
/// (a frozen cgroup, a hung NFS server) past the taker's 15 s: the taker
/// must not say that the old daemon stays, since it goes once it runs.
#[test]
fn a_taker_that_gave_up_on_a_decided_daemon_does_not_say_it_stays() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let (decided, replace) = a_decided_handover(&cb, old);
    assert!(decided.is_some(), "{}", cb.log());
    cowbell::signal(old, libc::SIGSTOP);
    let replaced = replace.wait_with_output().unwrap();
    drop(decided);
    cowbell::signal(old, libc::SIGCONT);
    let stderr = String::from_utf8_lossy(&replaced.stderr);
    assert!(cowbell::wait_dead(old, 3 * SECOND), "the old daemon stayed");
    assert!(
        !stderr.contains("it stays the daemon") && stderr.contains("on its way out"),
        "exit {:?}: {stderr}",
        replaced.status.code()
    );
}

/// Two replacing starts at once (the startup hook beside "Cowbell: on"),
/// the second looking once the old daemon has decided for the first: it
/// finds the pidfile empty, and must keep the daemon the first one starts,
/// not replace it again.
#[test]
fn a_second_replace_during_a_handover_keeps_the_fresh_daemon() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let (decided, first) = a_decided_handover(&cb, old);
    assert!(decided.is_some(), "{}", cb.log());
    let second = cb
        .launched(&["daemon", "--replace"], "startup")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the second to start and look while the old daemon
    // is still held here: 500 ms was not always, with the faults suite's
    // tests beside it on two cores (CI saw the second look after the fresh
    // daemon had started, which a later replace rightly replaces).
    std::thread::sleep(Duration::from_millis(1500));
    drop(decided);
    let (first, second) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    let fresh = cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(SECOND);
    let log = cb.log();
    assert!(
        first.status.success() && second.status.success(),
        "{first:?}\n{second:?}"
    );
    assert_eq!(
        log.matches("takes over").count(),
        1,
        "the fresh daemon was replaced again\n{log}"
    );
    assert_eq!(cb.daemons(), [fresh]);
}

/// A blocked "api" whose daemon was killed, and its pidfile locked and
/// emptied by the test, as a short cowbell command holds it.
fn pidfile_held_without_a_daemon() -> (Cowbell, String, String, std::fs::File) {
    let (cb, tab, pane, old) = blocked_api(1.0);
    cowbell::signal(old, libc::SIGKILL);
    assert!(cowbell::wait_dead(old, 2 * SECOND));
    let held = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    assert_eq!(flock(&held, libc::LOCK_EX), 0);
    (cb, tab, pane, held)
}

/// A startup hook beside a command that holds the lock and never lets go
/// (a `cowbell sync` stopped with Ctrl-Z): the hook waits the 15 s a
/// command against a slow herdr may take, then gives up and says why.
#[test]
fn a_replace_beside_a_stuck_command_gives_up_after_fifteen_seconds() {
    let (cb, _, _, _held) = pidfile_held_without_a_daemon();
    let asked = Instant::now();
    let replace = cb.run(&["daemon", "--replace"]);
    let took = asked.elapsed();
    assert_eq!(replace.status.code(), Some(1), "{}", replace.stderr);
    assert!(
        took >= 14 * SECOND
            && took < 18 * SECOND
            && replace.stderr.contains("a cowbell command under way"),
        "took {took:?}: {}",
        replace.stderr
    );
}

/// Agents detected in many panes while a command holds the lock with no
/// pid (a `cowbell sync` against a slow herdr, here the test): each
/// watchdog leaves the wait to a detached process, so none holds one of
/// herdr's 32 command slots for up to 15 s, and one of those processes
/// becomes the daemon once the command lets go.
#[test]
fn watchdogs_beside_a_slow_command_finish_and_one_daemon_starts_after_it() {
    let (cb, tab, pane, held) = pidfile_held_without_a_daemon();
    let watchdogs: Vec<_> = (0..20)
        .map(|_| {
            let env = cb.env("pane.agent_detected");
            let root = cb.plugin_root.clone();
            std::thread::spawn(move || {
                hooks::run_hook(&root, &[cowbell::bin(), "watchdog"], &env)
                    .status
                    .success()
            })
        })
        .collect();
    // Each looks for half a second before it takes the holder for a
    // command, then hands the wait on.
    let deadline = Instant::now() + 5 * SECOND;
    while watchdogs.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = watchdogs.iter().filter(|w| !w.is_finished()).count();
    assert_eq!(running, 0, "watchdogs still waiting for the command");
    assert!(watchdogs.into_iter().all(|w| w.join().unwrap()));
    assert!(cb.daemon_pid().is_none(), "a daemon beside the command");
    drop(held);
    let pid = cb.wait_for_daemon(3 * SECOND);
    // The other waiters find it and leave.
    let one = cb.herdr.wait_until(3 * SECOND, |_| cb.daemons() == [pid]);
    assert!(one, "{pid} and {:?}", cb.daemons());
    cb.herdr.set_status(&pane, "working");
    cb.expect_label(&tab, "🟡 api", 2 * SECOND);
}

/// The same wait, from a launcher that leaks one more descriptor onto the
/// pipe it reads (see `the_daemon_keeps_no_inherited_descriptor_open`):
/// the detached waiter lets go of it at once, not when its wait ends.
#[test]
fn a_watchdog_waiting_detached_keeps_no_inherited_descriptor_open() {
    let (cb, _, _, held) = pidfile_held_without_a_daemon();
    let leaked = run_leaking_fd_3(&cb, &["watchdog"], "pane.agent_detected");
    assert!(
        reaches_end_of_file(leaked, 3 * SECOND),
        "the waiting watchdog keeps the launcher's fd 3 open"
    );
    drop(held);
    cb.wait_for_daemon(3 * SECOND);
}

/// A `--replace` while the daemon gives names back for `off` against a
/// slow herdr: the restore goes on and the daemon exits after it, so the
/// hook must not say only that the old daemon stays.
#[test]
fn a_replace_beside_a_slow_off_says_the_old_daemon_may_be_giving_names_back() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    cb.herdr.set_silent_method(Some("tab.rename"));
    let off = cb
        .launched(&["off"], "action")
        .env("HERDR_PLUGIN_ACTION_ID", "off")
        .spawn()
        .unwrap();
    expect_log(&cb, "cowbell turned off: restoring tab names", 3 * SECOND);
    let replace = cb.run(&["daemon", "--replace"]);
    let gone = cowbell::wait_dead(old, 10 * SECOND);
    cb.herdr.set_silent_method(None);
    let _ = off.wait_with_output();
    assert!(gone, "the old daemon stayed");
    assert!(
        replace.stderr.contains("giving names back"),
        "exit {:?}: {}",
        replace.status.code(),
        replace.stderr
    );
}

/// `sync` while a daemon that decided to hand over is stopped in its last
/// save: the message must not blame a cowbell command alone.
#[test]
fn sync_beside_a_decided_handover_does_not_blame_a_command_alone() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let (decided, replace) = a_decided_handover(&cb, old);
    assert!(decided.is_some(), "{}", cb.log());
    cowbell::signal(old, libc::SIGSTOP);
    let sync = cb.run(&["sync"]);
    cowbell::signal(old, libc::SIGCONT);
    drop(decided);
    let _ = replace.wait_with_output();
    assert!(
        sync.stderr.contains("on its way out"),
        "exit {:?}: {}",
        sync.status.code(),
        sync.stderr
    );
}

/// A daemon stopped past the start's 5 s: the start gives up and exits,
/// and its parent (herdr, busy) has not reaped it yet when the daemon runs
/// again. A zombie is not a start still waiting: the daemon carries on.
#[cfg(target_os = "linux")]
#[test]
fn a_start_that_gave_up_and_is_not_yet_reaped_is_not_handed_over_to() {
    let (cb, tab, _, old) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    cowbell::signal(old, libc::SIGSTOP);
    let mut taker = cb
        .launched(&["daemon", "--replace"], "startup")
        .spawn()
        .unwrap();
    let zombie = || {
        std::fs::read_to_string(format!("/proc/{}/stat", taker.id())).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    };
    let deadline = Instant::now() + 8 * SECOND;
    while !zombie() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    cowbell::signal(old, libc::SIGCONT);
    std::thread::sleep(3 * SECOND);
    let _ = taker.wait();
    assert_eq!(cb.daemon_pid(), Some(old), "{}", cb.log());
}

/// A start stopped (Ctrl-Z) after it found the daemon's pid but before it
/// signalled (in the 20 ms it takes to trust a pid), and resumed more than
/// 5 s later: it must not ask the daemon to go and give up at once, which
/// left no daemon. Linux on x86-64 and ARM64, where the test can see the
/// start's sleep in /proc.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
#[test]
fn a_start_resumed_after_its_wait_does_not_ask_and_leave() {
    for _ in 0..3 {
        let (cb, tab, _, old) = blocked_api(1.0);
        cb.wait_state_saved(&[&tab]);
        let (stopped, replaced) = a_replace_stopped_before_its_signal(&cb, 6 * SECOND);
        if !stopped {
            continue;
        }
        let pid = cb.wait_for_daemon(3 * SECOND);
        assert!(
            replaced.status.success() && pid != old,
            "exit {:?}: {}\n{}",
            replaced.status.code(),
            String::from_utf8_lossy(&replaced.stderr),
            cb.log()
        );
        return;
    }
    panic!("the start never slept where this test could stop it");
}

#[test]
fn a_sigterm_or_off_beside_a_handover_that_gave_up_is_not_lost() {
    // A stopped daemon with a given-up `--replace`'s SIGUSR1 pending and a
    // SIGTERM (or `off`'s SIGUSR2): the handover must not swallow the stop
    // when the daemon then carries on.
    for stop in ["SIGTERM", "off"] {
        let s = scene();
        let pid = s.pid();
        cowbell::signal(pid, libc::SIGSTOP);
        let gave_up = s.cb.run(&["daemon", "--replace"]);
        assert_eq!(gave_up.status.code(), Some(1), "{}", gave_up.stderr);
        if stop == "SIGTERM" {
            cowbell::signal(pid, libc::SIGTERM);
            cowbell::signal(pid, libc::SIGCONT);
        } else {
            // `off` waits for the stopped daemon, gives up, and leaves its
            // SIGUSR2 pending too.
            let _ = s.cb.action("off");
            cowbell::signal(pid, libc::SIGCONT);
        }
        wait_exit(&s.cb, pid, 3 * SECOND + REQUEST_TIMEOUT);
        s.names_back_within(SECOND, stop);
    }
}

#[test]
fn carrying_on_after_a_handover_with_renames_queued_still_resyncs() {
    // More renames than go out at once (16): the handover drops the queued
    // ones mid-resync. Carrying on must start over, not wait for them.
    let cb = Cowbell::new();
    let mut names = Names::new();
    let mut panes = Vec::new();
    for i in 0..20 {
        let (_, pane) = names.tab(&cb, Some(&format!("t{i}")));
        cb.herdr.set_status(&pane, "blocked");
        panes.push(pane);
    }
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    cb.herdr.set_silent_method(Some("tab.rename"));
    let before = requests(&cb, "tab.rename");
    for pane in &panes {
        cb.herdr.set_status(pane, "working");
    }
    assert!(cb.herdr.wait_until(3 * SECOND, |snap| {
        snap.requests
            .iter()
            .filter(|r| r.method == "tab.rename")
            .count()
            >= before + 16
    }));
    // A `--replace` interrupted while it waits (Ctrl-C on `cowbell on`).
    let mut requester = cb
        .launched(&["daemon", "--replace"], "startup")
        .spawn()
        .unwrap();
    expect_log(&cb, "another cowbell daemon takes over", SECOND);
    requester.kill().unwrap();
    requester.wait().unwrap();
    expect_log(
        &cb,
        "has given up waiting: carrying on",
        REQUEST_TIMEOUT + SECOND,
    );
    cb.herdr.set_silent_method(None);
    assert_eq!(cb.daemon_pid(), Some(pid));
    for pane in &panes {
        cb.herdr.set_status(pane, "idle");
    }
    assert_icons(&cb, &names, CLEAR + REQUEST_TIMEOUT);
}

#[test]
fn a_persons_kill_usr1_hands_over_even_when_the_sender_is_gone() {
    // The check above is for cowbell's own requests only: `kill -USR1`
    // from a process that exits at once (/bin/kill, pkill, a script)
    // still means "exit without touching names".
    let s = scene();
    let pid = s.pid();
    cowbell::signal(pid, libc::SIGSTOP);
    let sent = Command::new("sh")
        .args(["-c", &format!("kill -USR1 {pid}")])
        .status()
        .unwrap();
    assert!(sent.success());
    cowbell::signal(pid, libc::SIGCONT);
    wait_exit(&s.cb, pid, 2 * SECOND + REQUEST_TIMEOUT);
    // Without touching names: the icons are still there.
    s.icons_within(SECOND);
}

#[test]
fn off_against_a_server_that_does_not_answer_returns_within_seconds() {
    // The daemon's restore tried its list for 10 s before it let `off`
    // (which waits for it, then tries itself) go on: 12 s in all.
    let s = scene();
    s.cb.herdr.set_silent(true);
    let started = Instant::now();
    let off = s.cb.action("off");
    let took = started.elapsed();
    s.cb.herdr.set_silent(false);
    assert!(
        took < 2 * REQUEST_TIMEOUT + 2 * SECOND,
        "off took {took:?}: {}\nlog:\n{}",
        off.stderr,
        log_tail(&s.cb, 20)
    );
    assert!(s.cb.daemons().is_empty());
    assert!(
        s.cb.state_json().contains("\"off\":true"),
        "{}",
        s.cb.state_json()
    );
    // The names are in state.json; the next start gives them back.
    s.cb.startup();
    s.names_back_within(CLEAR + REQUEST_TIMEOUT, "the startup hook after off");
}

#[test]
fn a_server_whose_queue_is_full_cannot_hang_a_command() {
    // A hung herdr: it listens but never accepts, and its listen queue is
    // full, so a blocking connect would wait for ever.
    let mut cb = Cowbell::new();
    cb.herdr.stop();
    let listener = std::os::unix::net::UnixListener::bind(&cb.socket).unwrap();
    // SAFETY: listen() on a socket this test owns; a queue of one fills at once.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let _queued = std::os::unix::net::UnixStream::connect(&cb.socket).unwrap();
    for command in ["status", "sync", "remove-icons"] {
        let start = Instant::now();
        let outcome = cb.run_as(&[command], "action");
        assert!(
            start.elapsed() < REQUEST_TIMEOUT + 3 * SECOND,
            "{command} took {:?}",
            start.elapsed()
        );
        let said = format!("{}{}", outcome.stdout, outcome.stderr);
        assert!(said.contains("accepts no connections"), "{command}: {said}");
        assert_eq!(outcome.status.code(), Some(3), "{command}: {said}");
    }
    drop(listener);
}

/// A daemon killed over `n` tabs with icons: state.json holds their names,
/// so `remove-icons` has `n` renames to make.
fn killed_over_icons(n: usize) -> (Cowbell, Vec<(String, String)>) {
    let cb = Cowbell::new();
    let names: Vec<String> = (0..n).map(|i| format!("tab{i}")).collect();
    let tabs: Vec<(String, String)> = names.iter().map(|name| cb.tab(Some(name))).collect();
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    for ((tab, _), name) in tabs.iter().zip(&names) {
        cb.expect_label(tab, &format!("🔴 {name}"), 2 * SECOND);
    }
    let ids: Vec<&str> = tabs.iter().map(|(tab, _)| tab.as_str()).collect();
    cb.wait_state_saved(&ids);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    (cb, tabs)
}

/// A menu action must finish (herdr runs at most 32 plugin commands and
/// waits for each): a herdr that lists the tabs and then stops answering
/// renames costs one request's 2 s, not 2 s per tab, and the names not
/// given back stay in state.json for the next try.
#[test]
fn a_command_stops_renaming_when_herdr_stops_answering() {
    let (cb, tabs) = killed_over_icons(8);
    cb.herdr.set_silent_method(Some("tab.rename"));
    let start = Instant::now();
    let outcome = cb.run_as(&["remove-icons"], "action");
    let took = start.elapsed();
    assert!(
        took < REQUEST_TIMEOUT + 3 * SECOND,
        "remove-icons took {took:?}"
    );
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("herdr stopped answering: 7 more tabs not renamed"),
        "{}",
        outcome.stderr
    );
    let state = cb.state_json();
    for (tab, _) in &tabs {
        assert!(
            state.contains(&format!("\"{tab}\"")),
            "{tab} forgotten: {state}"
        );
    }
    // herdr answers again: the next try gives every name back.
    cb.herdr.set_silent_method(None);
    let outcome = cb.run_as(&["remove-icons"], "action");
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    for (i, (tab, _)) in tabs.iter().enumerate() {
        assert_eq!(cb.herdr.label(tab), format!("tab{i}"));
    }
}

/// The startup hook while a `cowbell sync` holds the lock against a slow
/// herdr (a list and 5 s of renames): the hook waits for it and starts the
/// daemon, rather than giving up after 5 s and leaving none.
#[test]
fn the_startup_hook_waits_for_a_slow_command_and_starts_the_daemon() {
    let cb = Cowbell::new();
    let tabs: Vec<(String, String)> = (0..4).map(|i| cb.tab(Some(&format!("t{i}")))).collect();
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.herdr.set_response_delay(Duration::from_millis(1500));
    let env = cb.env("action");
    let root = cb.plugin_root.clone();
    let sync = std::thread::spawn(move || hooks::run_hook(&root, &[cowbell::bin(), "sync"], &env));
    // The sync holds the lock before the hook looks.
    std::thread::sleep(Duration::from_millis(300));
    let hook = cb.run(&["daemon", "--replace"]);
    let synced = sync.join().unwrap();
    assert_eq!(
        hook.status.code(),
        Some(0),
        "startup hook: {}\nsync: {}",
        hook.stderr,
        synced.stderr
    );
    cb.herdr.set_response_delay(Duration::ZERO);
    cb.wait_for_daemon(2 * SECOND);
    for (i, (tab, _)) in tabs.iter().enumerate() {
        cb.expect_label(tab, &format!("🔴 t{i}"), 3 * SECOND);
    }
}

/// A herdr that answers, but slowly, gets the rest of a command's renames
/// left for the next try once 5 s are spent, rather than holding the
/// command for a second and a half per tab.
#[test]
fn a_command_gives_up_renaming_on_a_slow_herdr_after_five_seconds() {
    let (cb, tabs) = killed_over_icons(10);
    cb.herdr.set_response_delay(Duration::from_millis(1500));
    let start = Instant::now();
    let outcome = cb.run_as(&["remove-icons"], "action");
    let took = start.elapsed();
    // One list, renames for 5 s, the one under way: about 8 s, where one
    // rename after another took 16.5 s.
    assert!(took < 11 * SECOND, "remove-icons took {took:?}");
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("herdr is slow"),
        "{}",
        outcome.stderr
    );
    // Every rename was answered: nothing may say otherwise.
    assert!(
        !outcome.stderr.contains("no answer within"),
        "{}",
        outcome.stderr
    );
    let state = cb.state_json();
    let kept = tabs
        .iter()
        .filter(|(tab, _)| state.contains(&format!("\"{tab}\"")))
        .count();
    assert!(kept > 0 && kept < tabs.len(), "{kept} kept: {state}");
}

/// A tab closed between the command's tab.list and its rename has no name
/// left to give back: herdr's tab_not_found is no failure. The tab stays
/// tracked all the same, in case it is still there: the next try's list
/// tells (and drops it if it is gone).
#[test]
fn a_tab_closed_before_its_restore_is_not_a_failure() {
    let (cb, tabs) = killed_over_icons(2);
    cb.herdr.fail_next_renames(1);
    let outcome = cb.run_as(&["off"], "action");
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert_eq!(cb.herdr.label(&tabs[1].0), "tab1");
    // The fake refused a tab that is still there: the startup hook, which
    // finishes an off's restore, gives it its name.
    cb.startup();
    assert_eq!(cb.herdr.label(&tabs[0].0), "tab0", "{}", cb.state_json());
}

/// A connection herdr drops at once costs no time, and may be a passing
/// hiccup (herdr refuses connections beyond a limit while every plugin's
/// startup hook runs): the other tabs still get their names.
#[test]
fn one_dropped_rename_does_not_abandon_the_other_tabs() {
    let (cb, tabs) = killed_over_icons(6);
    cb.herdr.answer_raw("tab.rename", 1, b"");
    let outcome = cb.run_as(&["remove-icons"], "action");
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.stderr);
    let kept: Vec<&str> = tabs
        .iter()
        .enumerate()
        .filter(|(i, (tab, _))| cb.herdr.label(tab) != format!("tab{i}"))
        .map(|(_, (tab, _))| tab.as_str())
        .collect();
    assert_eq!(kept.len(), 1, "icons left on {kept:?}");
}

/// A menu action whose renames herdr refuses: herdr shows nothing an
/// action prints, so a notification says which names are not back.
#[test]
fn an_action_whose_renames_herdr_refuses_says_so_in_a_notification() {
    let (cb, tabs) = killed_over_icons(2);
    cb.herdr.answer_raw(
        "tab.rename",
        1,
        b"{\"id\":\"\",\"error\":{\"code\":\"invalid_request\",\"message\":\"no\"}}\n",
    );
    let outcome = cb.action("remove-icons");
    assert_eq!(outcome.status.code(), Some(3), "{}", outcome.stderr);
    let notes = cb.herdr.notifications();
    assert_eq!(notes.len(), 1, "{notes:?}\n{}", outcome.stderr);
    let body = notes[0].body.as_deref().unwrap_or("");
    assert!(body.contains("1 tab name not back yet"), "{body}");
    let back = tabs
        .iter()
        .enumerate()
        .filter(|(i, (tab, _))| cb.herdr.label(tab) == format!("tab{i}"))
        .count();
    assert_eq!(back, 1);
}

/// With state.json lost, `off` takes the icon off every tab; the ones
/// herdr did not rename must be written down all the same, so the startup
/// hook gives them their names once herdr answers again.
#[test]
fn off_with_a_lost_state_keeps_the_tabs_it_could_not_rename() {
    let (cb, tabs) = killed_over_icons(4);
    std::fs::write(cb.server_dir().join("state.json"), "garbage").unwrap();
    cb.herdr.set_silent_method(Some("tab.rename"));
    assert_eq!(cb.run_as(&["off"], "action").status.code(), Some(3));
    cb.herdr.set_silent_method(None);
    cb.startup();
    for (i, (tab, _)) in tabs.iter().enumerate() {
        assert_eq!(
            cb.herdr.label(tab),
            format!("tab{i}"),
            "state.json: {}",
            cb.state_json()
        );
    }
}

// ---------------------------------------------------------------------------
// Replay of the server's last 512 events
// ---------------------------------------------------------------------------

#[test]
fn replayed_events_bring_no_wrong_base_no_fight_and_no_rename_storm() {
    // Delivery at once, so 512 replayed events arrive in a moment.
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let mut names = Names::new();
    let (t1, p1) = names.tab(&cb, Some("api"));
    let (_t2, p2) = names.tab(&cb, Some("docs"));
    // Before cowbell runs, the user renamed t1 over and over: the buffer is
    // full of tab_renamed events with old labels.
    for n in 0..300 {
        cb.herdr.rename_tab(&t1, &format!("old name {n}"));
    }
    names.rename(&cb.herdr, &t1, "final");
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "working");
    let buffered = cb.herdr.events().len();
    assert!(
        buffered >= 300,
        "the buffer should be full: {buffered} events"
    );
    cb.startup();
    assert_icons(&cb, &names, 3 * SECOND);
    let renames_after_icons = requests(&cb, "tab.rename");
    std::thread::sleep(SECOND);
    assert_eq!(
        requests(&cb, "tab.rename"),
        renames_after_icons,
        "renames after the icons were right: a rename storm from the replay"
    );
    // A new daemon replays it all again, cowbell's own echoes included.
    cb.startup();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        requests(&cb, "tab.rename"),
        renames_after_icons,
        "the replacement daemon renamed tabs that were right"
    );
    let state = cb.state_json();
    assert!(state.contains("\"base\":\"final\""), "{state}");
    assert!(
        !state.contains("old name"),
        "an old label became a base: {state}"
    );
    assert!(
        !state.contains("\"fights_ms\":[1"),
        "a false fight: {state}"
    );
    assert!(!cb.log().contains(": a fight ("), "{}", cb.log());
    assert_icons(&cb, &names, CLEAR);
    assert_invariants(&cb, &names);
}

// ---------------------------------------------------------------------------
// A killed daemon
// ---------------------------------------------------------------------------

const AUTO_NAMED: &str = r#"{"include_auto_named": true}"#;

#[test]
fn after_sigkill_the_watchdog_starts_a_daemon_that_adopts_state() {
    let cb = Cowbell::new();
    cb.write_config(AUTO_NAMED);
    let (t1, p1) = cb.tab(Some("api"));
    let (t2, p2) = cb.tab(None);
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "blocked");
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&t1, "🔴 api", 2 * SECOND);
    cb.expect_label(&t2, "🔴 2", 2 * SECOND);
    cb.wait_state_saved(&[&t1, &t2]);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    // While no daemon runs, the auto-named tab moves to position 1. Only
    // state.json knows that its "2" was a position, not a name.
    cb.herdr.move_tab(&t2, 1);
    let outcome = cb.watchdog();
    assert!(outcome.status.success(), "{}", outcome.stderr);
    let new_pid = cb.wait_for_daemon(2 * SECOND);
    assert_ne!(new_pid, pid);
    cb.expect_label(&t2, "🔴 1", CLEAR);
    cb.expect_label(&t1, "🔴 api", CLEAR);
    assert_one_daemon(&cb);
    let outcome = cb.run_as(&["off"], "action");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    cb.expect_label(&t1, "api", CLEAR);
    cb.expect_label(&t2, "1", CLEAR);
}

#[test]
fn remove_icons_without_a_daemon_restores_every_name_from_state() {
    let cb = Cowbell::new();
    cb.write_config(AUTO_NAMED);
    let (t1, p1) = cb.tab(Some("api"));
    let (t2, p2) = cb.tab(None);
    let (t3, p3) = cb.tab(Some("docs"));
    for pane in [&p1, &p2, &p3] {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&t2, "🔴 2", 2 * SECOND);
    cb.expect_label(&t3, "🔴 docs", 2 * SECOND);
    cb.expect_label(&t1, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&t1, &t2, &t3]);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    cb.herdr.move_tab(&t2, 3);
    let outcome = cb.run_as(&["remove-icons"], "action");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(cb.daemons().is_empty(), "remove-icons started a daemon");
    cb.expect_label(&t1, "api", SECOND);
    cb.expect_label(&t3, "docs", SECOND);
    // Its position now, not the "2" its label showed.
    cb.expect_label(&t2, "3", SECOND);
}

// ---------------------------------------------------------------------------
// Signals at awkward times
// ---------------------------------------------------------------------------

#[test]
fn sigterm_during_a_resync_restores_every_name() {
    for stage in ["tab.list", "tab.rename"] {
        let mut s = scene();
        let pid = s.pid();
        s.cb.herdr.set_response_delay(Duration::from_millis(400));
        let before = requests(&s.cb, stage);
        s.poke();
        wait_request(&s.cb, stage, before, 3 * SECOND);
        cowbell::signal(pid, libc::SIGTERM);
        wait_exit(&s.cb, pid, 12 * SECOND);
        s.cb.herdr.set_response_delay(Duration::ZERO);
        s.names_back_within(SECOND, &format!("SIGTERM during {stage}"));
        // And no late rename puts an icon back.
        std::thread::sleep(SECOND);
        assert!(
            s.names.name_mismatches(&s.cb.herdr.snapshot()).is_empty(),
            "SIGTERM during {stage}: an icon came back after the restore: {:?}\nlog:\n{}",
            s.names.name_mismatches(&s.cb.herdr.snapshot()),
            log_tail(&s.cb, 30)
        );
    }
}

/// The restore's own requests fail once: its `tab.list` answer is lost,
/// or herdr refuses its first rename. Within the stop's 10 s the restore
/// tries again rather than leaving the icons.
#[test]
fn a_restore_whose_request_fails_once_tries_again() {
    for failure in ["tab.list", "tab.rename"] {
        let s = scene();
        let pid = s.pid();
        match failure {
            "tab.list" => s.cb.herdr.answer_raw("tab.list", 1, b""),
            _ => s.cb.herdr.fail_next_renames(1),
        }
        cowbell::signal(pid, libc::SIGTERM);
        wait_exit(&s.cb, pid, 12 * SECOND);
        s.names_back_within(SECOND, &format!("a failed {failure}"));
    }
}

#[test]
fn a_burst_of_a_hundred_sighups_reloads_and_keeps_serving() {
    let s = scene();
    let pid = s.pid();
    let (t1, t2) = (s.tabs[0].clone(), s.tabs[1].clone());
    let renames = requests(&s.cb, "tab.rename");
    s.cb.write_config(r#"{"preset": "ascii"}"#);
    for _ in 0..100 {
        cowbell::signal(pid, libc::SIGHUP);
    }
    s.cb.expect_label(&t1, "[!] api", CLEAR);
    s.cb.expect_label(&t2, "[~] docs", CLEAR);
    std::thread::sleep(Duration::from_millis(500));
    let made = requests(&s.cb, "tab.rename") - renames;
    assert!(made <= 4, "{made} renames for 2 label changes: a storm");
    assert_eq!(s.pid(), pid);
    std::fs::remove_file(s.cb.config_dir.join("config.json")).unwrap();
    cowbell::signal(pid, libc::SIGHUP);
    s.icons_within(CLEAR);
    s.invariants();
}

#[test]
fn sigterm_while_disconnected_exits_and_keeps_state_for_remove_icons() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.stop();
    expect_log(&s.cb, "disconnected", 2 * SECOND);
    cowbell::signal(pid, libc::SIGTERM);
    wait_exit(&s.cb, pid, 2 * SECOND);
    assert!(
        s.cb.state_json().contains("\"base\":\"api\""),
        "state.json must keep the names for later: {}",
        s.cb.state_json()
    );
    s.cb.herdr.start_again(true);
    let outcome = s.cb.run_as(&["remove-icons"], "action");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    s.names_back_within(SECOND, "remove-icons");
}

/// herdr came back while the daemon still waits out its reconnect backoff
/// (up to 30 s): a SIGTERM then gives the names back rather than leaving
/// the icons because the daemon has not reconnected yet.
#[test]
fn sigterm_during_the_reconnect_backoff_restores_names_once_herdr_is_back() {
    // Real time: the backoff grows 0.5, 1, 2, 4 s.
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.stop();
    std::thread::sleep(Duration::from_millis(4000));
    s.cb.herdr.start_again(true);
    std::thread::sleep(Duration::from_millis(300));
    cowbell::signal(pid, libc::SIGTERM);
    wait_exit(&s.cb, pid, 12 * SECOND);
    s.names_back_within(2 * SECOND, "SIGTERM in the backoff");
}

/// A launcher that leaks one more descriptor onto the pipe it reads (a
/// shell's `cowbell on 3>&1 | cat`): the daemon must not keep it, or the
/// reader never sees end of file.
#[test]
fn the_daemon_keeps_no_inherited_descriptor_open() {
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    let leaked = run_leaking_fd_3(&cb, &["daemon", "--replace"], "startup");
    cb.wait_for_daemon(2 * SECOND);
    assert!(
        reaches_end_of_file(leaked, 3 * SECOND),
        "the daemon keeps the launcher's fd 3 open"
    );
}

/// Runs cowbell `args` as herdr runs `event`'s command, with one more
/// descriptor, 3, on a pipe; gives the pipe's read end back once the
/// command has exited and the test's write end is closed.
fn run_leaking_fd_3(cb: &Cowbell, args: &[&str], event: &str) -> std::os::fd::OwnedFd {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two ints; no CLOEXEC, so the child inherits.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let write_raw = write.as_raw_fd();
    let mut command = cb.launched(args, event);
    // SAFETY: dup2 is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(move || {
            libc::dup2(write_raw, 3);
            Ok(())
        });
    }
    assert!(command.status().unwrap().success());
    read
}

/// Whether every writer of `read` lets go of it within `timeout`.
fn reaches_end_of_file(read: std::os::fd::OwnedFd, timeout: Duration) -> bool {
    use std::io::Read;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = std::fs::File::from(read).read_to_end(&mut Vec::new());
        let _ = done.send(());
    });
    finished.recv_timeout(timeout).is_ok()
}

/// A launcher that blocks signals (the mask survives fork and exec) must
/// not leave a daemon that can be neither replaced nor turned off.
#[test]
fn a_daemon_started_with_signals_blocked_can_still_be_turned_off() {
    use std::os::unix::process::CommandExt;
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    let mut command = cb.launched(&["on"], "action");
    // SAFETY: the sigset calls are async-signal-safe, as pre_exec requires,
    // and work on a local plain-data set.
    unsafe {
        command.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in [libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2, libc::SIGHUP] {
                libc::sigaddset(&mut set, signal);
            }
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    assert!(command.status().unwrap().success());
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    let pid = cb.wait_for_daemon(SECOND);
    let outcome = cb.action("off");
    let dead = cowbell::wait_dead(pid, SECOND);
    if !dead {
        cowbell::signal(pid, libc::SIGKILL);
    }
    assert!(dead && outcome.status.success(), "off: {}", outcome.stderr);
    assert_eq!(cb.herdr.label(&tab), "api");
}

/// A daemon at time scale `scale` over one tab, "api", whose pane is
/// blocked: its icon is up. Returns the tab, its pane and the daemon.
fn blocked_api(scale: f64) -> (Cowbell, String, String, u32) {
    let cb = Cowbell::with(Options::default(), scale);
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    let pid = cb.wait_for_daemon(SECOND);
    (cb, tab, pane, pid)
}

/// The README says the state directory may be deleted to forget
/// everything. Deleted under a running daemon, its lock stays on a file
/// nobody finds: a watchdog then starts a second daemon, and `off` must
/// still leave no daemon and every name back.
#[test]
fn deleting_the_state_directory_never_leaves_two_daemons() {
    // Scale 60: the heartbeat, which looks at the pidfile, every second.
    let (cb, tab, _, first) = blocked_api(60.0);
    cb.delete_state_dir();
    assert!(cb.watchdog().status.success());
    // Mostly a second daemon starts; the first finds the new pidfile held
    // at its next heartbeat and leaves. (Should that heartbeat come before
    // the watchdog, the first locks the new pidfile and no second starts.)
    let second = cb.wait_for_daemon(2 * SECOND);
    let alone = (0..150).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        cb.daemons() == [second]
    });
    let outcome = cb.action("off");
    // The daemon lets go of its lock, which `off` waits for, a moment
    // before its process is gone.
    let none_left = cb.wait_for_no_daemon(3 * SECOND);
    let left = cb.daemons();
    for pid in &left {
        cowbell::signal(*pid, libc::SIGKILL);
    }
    assert!(alone, "two daemons ({first}, {second}):\n{}", cb.log());
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(none_left, "still running after off: {left:?}");
    assert_eq!(cb.herdr.label(&tab), "api");
}

/// The state directory deleted under a running daemon, then `off` before
/// the daemon's next heartbeat: `off` finds a free lock and only records
/// the flag; the daemon, at its heartbeat, must take that off, not go on
/// putting icons up and overwrite the flag with its next save.
#[test]
fn off_after_the_state_directory_was_deleted_stays_off() {
    // Scale 20: the heartbeat every 3 s.
    let (cb, tab, pane, pid) = blocked_api(20.0);
    cb.delete_state_dir();
    let outcome = cb.action("off");
    // Three heartbeats, and a status change the daemon would show.
    std::thread::sleep(7 * SECOND);
    cb.herdr.set_status(&pane, "working");
    std::thread::sleep(SECOND);
    let alive = cb.daemons().contains(&pid);
    if alive {
        cowbell::signal(pid, libc::SIGKILL);
    }
    let state = cb.state_json();
    assert!(
        !alive,
        "off said {:?} (exit {:?}) yet the daemon {pid} still runs; label {:?}; state {state}\n{}",
        outcome.stdout,
        outcome.status.code(),
        cb.herdr.label(&tab),
        cb.log()
    );
    assert_eq!(cb.herdr.label(&tab), "api");
    assert!(state.contains("\"off\":true"), "{state}");
}

/// The state directory deleted under a running daemon: once the daemon
/// has locked a new pidfile, state.json must hold the names again (the
/// daemon still knows them), or a crash now loses them, and `status`
/// shows every tab as not tracked.
#[test]
fn state_json_comes_back_with_the_new_pidfile() {
    let (cb, tab, _, pid) = blocked_api(60.0);
    cb.wait_state_saved(&[&tab]);
    cb.delete_state_dir();
    // Three heartbeats.
    std::thread::sleep(3 * SECOND);
    let relocked = cb.daemon_pid() == Some(pid);
    let state = cb.state_json();
    let status = cb.run(&["status"]);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(relocked, "{}", cb.log());
    assert!(
        state.contains("\"base\":\"api\""),
        "state.json: {state:?}\nstatus:\n{}",
        status.stdout
    );
}

/// The state directory deleted, then a `sync` (which holds the new
/// pidfile's lock while it works, writing no pid) runs across the daemon's
/// heartbeat: a command is no daemon to leave the server to.
#[test]
fn a_sync_holding_the_new_pidfile_is_no_daemon_to_hand_over_to() {
    // Scale 60: the heartbeat every second.
    let (cb, _, _, pid) = blocked_api(60.0);
    cb.delete_state_dir();
    // A slow herdr keeps the sync (and its lock) going past a heartbeat.
    cb.herdr.set_response_delay(Duration::from_millis(1800));
    let sync = cb.run(&["sync"]);
    cb.herdr.set_response_delay(Duration::ZERO);
    std::thread::sleep(SECOND);
    let alive = cb.daemons().contains(&pid);
    let log = cb.log();
    if alive {
        cowbell::signal(pid, libc::SIGKILL);
    }
    assert!(
        alive,
        "the daemon left the server to a sync (exit {:?}); daemons now {:?}\n{log}",
        sync.status.code(),
        cb.daemons()
    );
}

/// A SIGTERM with no herdr at all, once the reconnect backoff has grown:
/// the restore's tab.list fails at once, and the daemon must exit then,
/// not linger (lock held) until its next deadline.
#[test]
fn sigterm_with_no_herdr_exits_at_once_even_late_in_the_backoff() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.stop();
    expect_log(&s.cb, "retrying in 4000 ms", 6 * SECOND);
    let asked = Instant::now();
    cowbell::signal(pid, libc::SIGTERM);
    wait_exit(&s.cb, pid, 2 * SECOND);
    assert!(asked.elapsed() < 2 * SECOND);
}

/// The same, with a resync before the heartbeat (any status change): its
/// save must not put a state.json with the flag off over the one `off`
/// wrote.
#[test]
fn off_after_the_state_directory_was_deleted_survives_a_resync() {
    off_survives_a_resync_after(Cowbell::delete_state_dir);
}

/// The same with only the files deleted (`rm <dir>/*`, or an `rm -rf`
/// that lost its race with a save and stopped at the directory): the
/// daemon locks a new pidfile in the same directory, and a save it began
/// before the deletion must not put its flag over the `off` given since.
#[test]
fn off_after_the_state_files_were_deleted_survives_a_resync() {
    off_survives_a_resync_after(delete_state_files);
}

/// A save that holds the server directory's lock (an old daemon's, begun
/// before its pidfile was deleted, and slow to sync) while `off` records
/// the flag under the new pidfile: `off` must write after that save, not
/// before it, or the old save lands last and the `off` is lost.
#[test]
fn off_writes_after_a_save_that_holds_the_directory() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    assert!(cb.run(&["sync"]).status.success());
    let old_save = cb.state_json();
    assert!(old_save.contains("\"off\":false"), "{old_save}");
    let dir = std::fs::File::open(cb.server_dir()).unwrap();
    assert_eq!(flock(&dir, libc::LOCK_EX), 0);
    let off = cb
        .launched(&["off"], "action")
        .env("HERDR_PLUGIN_ACTION_ID", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Well within the second a writer waits for the directory.
    std::thread::sleep(Duration::from_millis(500));
    // The old save lands, then lets go of the directory.
    let temp = cb.server_dir().join(".old-save.tmp");
    std::fs::write(&temp, &old_save).unwrap();
    std::fs::rename(&temp, cb.server_dir().join("state.json")).unwrap();
    drop(dir);
    let off = off.wait_with_output().unwrap();
    let state = cb.state_json();
    assert!(
        off.status.success() && state.contains("\"off\":true"),
        "off said {:?} {:?} (exit {:?}); state {state}",
        String::from_utf8_lossy(&off.stdout),
        String::from_utf8_lossy(&off.stderr),
        off.status.code()
    );
    assert_eq!(cb.herdr.label(&tab), "api");
}

/// A save kept out of the server directory past its second (another
/// writer stopped in its write): the daemon says so in the log, and saves
/// at the next chance once the directory is free again.
#[test]
fn a_save_kept_out_of_the_directory_says_so_and_saves_later() {
    let (cb, tab, pane, pid) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let dir = std::fs::File::open(cb.server_dir()).unwrap();
    assert_eq!(flock(&dir, libc::LOCK_EX), 0);
    cb.herdr.set_status(&pane, "working");
    cb.expect_label(&tab, "🟡 api", 3 * SECOND);
    let said = wait_log(&cb, "kept writing there", 3 * SECOND);
    drop(dir);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 3 * SECOND);
    let again = wait_log(&cb, "state saved again", 3 * SECOND);
    let log = cb.log();
    cowbell::signal(pid, libc::SIGKILL);
    assert!(said && again, "{log}");
}

fn delete_state_files(cb: &Cowbell) {
    for entry in std::fs::read_dir(cb.server_dir()).unwrap().flatten() {
        let _ = std::fs::remove_file(entry.path());
    }
}

fn off_survives_a_resync_after(delete: fn(&Cowbell)) {
    let (cb, tab, pane, pid) = blocked_api(20.0);
    delete(&cb);
    let outcome = cb.action("off");
    cb.herdr.set_status(&pane, "working");
    let gone = cowbell::wait_dead(pid, 7 * SECOND);
    if !gone {
        cowbell::signal(pid, libc::SIGKILL);
    }
    let state = cb.state_json();
    assert!(
        gone && cb.herdr.label(&tab) == "api" && state.contains("\"off\":true"),
        "off said {:?} {:?} (exit {:?}), yet the daemon ran on: label {:?}; state {state}\n{}",
        outcome.stdout,
        outcome.stderr,
        outcome.status.code(),
        cb.herdr.label(&tab),
        cb.log()
    );
}

/// The files deleted and the new pidfile held by a command stopped in its
/// write (Ctrl-Z), which holds the directory's lock too: the daemon, whose
/// pidfile this is no longer, writes nothing there, so it must not wait
/// for that lock at every save either.
#[test]
fn a_daemon_whose_pidfile_was_replaced_does_not_wait_to_save() {
    let (cb, tab, pane, pid) = blocked_api(1.0);
    delete_state_files(&cb);
    let command = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    assert_eq!(flock(&command, libc::LOCK_EX), 0);
    let dir = std::fs::File::open(cb.server_dir()).unwrap();
    assert_eq!(flock(&dir, libc::LOCK_EX), 0);
    let started = Instant::now();
    for status in ["working", "blocked", "working", "blocked"] {
        cb.herdr.set_status(&pane, status);
        let label = if status == "working" {
            "🟡 api"
        } else {
            "🔴 api"
        };
        cb.expect_label(&tab, label, 3 * SECOND);
    }
    let took = started.elapsed();
    let log = cb.log();
    cowbell::signal(pid, libc::SIGKILL);
    // Each save waiting out the lock would take 4 s and more.
    assert!(took < 3 * SECOND, "4 status changes took {took:?}\n{log}");
}

/// The same with herdr down, so no resync comes: the daemon's exit at the
/// idle time must not put its flag over the one `off` wrote, and the next
/// server start must find cowbell off.
#[test]
fn off_after_the_state_directory_was_deleted_survives_the_idle_exit() {
    // Scale 20: the idle exit after 6 s.
    let (mut cb, tab, pane, pid) = blocked_api(20.0);
    cb.wait_state_saved(&[&tab]);
    cb.herdr.stop();
    std::thread::sleep(SECOND);
    cb.delete_state_dir();
    let outcome = cb.action("off");
    let gone = cowbell::wait_dead(pid, 12 * SECOND);
    if !gone {
        cowbell::signal(pid, libc::SIGKILL);
    }
    let state = cb.state_json();
    cb.herdr.start_again(true);
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    // Processes, not the pidfile: a daemon just forked has not written it.
    let started = cb.daemons();
    for daemon in &started {
        cowbell::signal(*daemon, libc::SIGKILL);
    }
    assert!(gone, "no idle exit:\n{}", cb.log());
    assert!(
        state.contains("\"off\":true") && started.is_empty(),
        "off said {:?}; after the idle exit {state}; daemon started {started:?}",
        outcome.stdout
    );
}

/// The state directory deleted and herdr away, then a SIGTERM while a
/// command holds the new pidfile for a moment: the exiting daemon waits
/// for it, so the names it could not give back are on record.
#[test]
fn an_exit_while_a_command_holds_the_new_pidfile_keeps_the_names() {
    use std::os::unix::fs::OpenOptionsExt;
    let (mut cb, tab, _, pid) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let server_dir = cb.server_dir();
    cb.herdr.stop();
    std::thread::sleep(Duration::from_millis(300));
    cb.delete_state_dir();
    std::fs::create_dir_all(&server_dir).unwrap();
    std::fs::set_permissions(&server_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(server_dir.join("cowbell.pid"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    let command = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        drop(held);
    });
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 5 * SECOND));
    command.join().unwrap();
    let state = cb.state_json();
    assert!(
        state.contains(&format!("\"{tab}\"")),
        "names not on record: {state:?}\n{}",
        cb.log()
    );
}

/// `on` while cowbell is off and a short command holds the pidfile (a
/// watchdog's look for a moment; the startup hook giving names back to a
/// slow herdr, for seconds): `on` waits for it and turns cowbell on,
/// rather than leaving it off and blaming an `off` nobody ran.
#[test]
fn on_while_a_command_holds_the_pidfile_turns_cowbell_on() {
    on_beside_a_command_holding_the_pidfile(Duration::from_millis(200));
}

#[test]
fn on_beside_a_command_holding_the_pidfile_for_long_turns_cowbell_on() {
    on_beside_a_command_holding_the_pidfile(6 * SECOND);
}

fn on_beside_a_command_holding_the_pidfile(hold: Duration) {
    let (cb, tab, _, pid) = blocked_api(1.0);
    assert!(cb.action("off").status.success());
    assert!(cowbell::wait_dead(pid, 3 * SECOND));
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    assert_eq!(flock(&held, libc::LOCK_EX), 0);
    let command = std::thread::spawn(move || {
        std::thread::sleep(hold);
        drop(held);
    });
    let on = cb.action("on");
    command.join().unwrap();
    let state = cb.state_json();
    assert!(
        on.status.success() && state.contains("\"off\":false"),
        "on said {:?} {:?} (exit {:?}); state {state}",
        on.stdout,
        on.stderr,
        on.status.code()
    );
    cb.expect_label(&tab, "🔴 api", 3 * SECOND);
}

/// Whether `signal` waits, not yet taken, for the process `pid`.
#[cfg(target_os = "linux")]
fn pending(pid: u32, signal: libc::c_int) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("ShdPnd:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
}

/// "Cowbell: on" while a daemon runs, then "Cowbell: off" before `on` is
/// done (its handover under way): the `off`, given last, stands, whichever
/// of the two gets the lock first. Here `off` does.
#[cfg(target_os = "linux")]
#[test]
fn an_off_given_after_on_is_not_undone_by_on() {
    let (cb, tab, _, daemon) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    let wait_for = |what: &str, signal| {
        let deadline = Instant::now() + 3 * SECOND;
        while !pending(daemon, signal) {
            assert!(Instant::now() < deadline, "never saw {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    cowbell::signal(daemon, libc::SIGSTOP);
    let action = |id: &str| {
        cb.launched(&[id], "action")
            .env("HERDR_PLUGIN_ACTION_ID", id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let on = action("on");
    wait_for("on's SIGUSR1", libc::SIGUSR1);
    let off = action("off");
    wait_for("off's SIGUSR2", libc::SIGUSR2);
    cowbell::signal(on.id(), libc::SIGSTOP);
    cowbell::signal(daemon, libc::SIGCONT);
    let off = off.wait_with_output().unwrap();
    cowbell::signal(on.id(), libc::SIGCONT);
    let on = on.wait_with_output().unwrap();
    std::thread::sleep(2 * SECOND);
    let (state, left, label) = (cb.state_json(), cb.daemon_pid(), cb.herdr.label(&tab));
    if let Some(pid) = left {
        cowbell::signal(pid, libc::SIGKILL);
    }
    assert!(
        state.contains("\"off\":true") && left.is_none() && label == "api",
        "off said {:?}; on said {:?} {:?}; daemon {left:?}; label {label:?}; state {state}",
        String::from_utf8_lossy(&off.stdout),
        String::from_utf8_lossy(&on.stdout),
        String::from_utf8_lossy(&on.stderr)
    );
}

/// `on` beside a daemon on another host (its pid means nothing here, so
/// the lock looks held by nobody to signal): `on` does not wait for it as
/// for a short command, so it fails no later than its start does.
#[test]
fn on_beside_another_hosts_daemon_fails_no_later_than_its_start() {
    let cb = Cowbell::new();
    let (_, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    assert!(cb.run(&["sync"]).status.success());
    let mut elsewhere = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(cb.server_dir().join("cowbell.pid"))
        .unwrap();
    assert_eq!(flock(&elsewhere, libc::LOCK_EX), 0);
    writeln!(
        elsewhere,
        "{} 0d5e1f00-0000-4000-8000-000000000000 pid:[1]",
        std::process::id()
    )
    .unwrap();
    let asked = Instant::now();
    let on = cb.action("on");
    let took = asked.elapsed();
    assert_eq!(on.status.code(), Some(1), "{}", on.stderr);
    // The start's own wait is 5.5 s; twice that was the bug.
    assert!(took < 8 * SECOND, "on took {took:?}: {}", on.stderr);
    assert!(on.stderr.contains("another host"), "{}", on.stderr);
}

/// Once the daemon locked a new pidfile, its log is there again too.
#[test]
fn the_log_comes_back_with_the_new_pidfile() {
    let (cb, tab, pane, pid) = blocked_api(60.0);
    cb.wait_state_saved(&[&tab]);
    cb.delete_state_dir();
    std::thread::sleep(3 * SECOND);
    cb.herdr.set_status(&pane, "working");
    cb.expect_label(&tab, "🟡 api", 2 * SECOND);
    let relocked = cb.daemon_pid() == Some(pid);
    // The line comes after the rename's answer, a moment after the label.
    let logged = wait_log(&cb, "renamed", 3 * SECOND);
    let log = cb.log();
    cowbell::signal(pid, libc::SIGKILL);
    assert!(relocked, "the daemon did not relock");
    assert!(
        logged && log.contains("locked it again"),
        "the daemon's log after the relock: {log:?}"
    );
}

/// The state directory deleted, then a SIGTERM before the next heartbeat
/// while herdr does not answer renames: the names not given back must be
/// on record again, as the log says, not only in the deleted file.
#[test]
fn a_stop_that_cannot_restore_keeps_the_names_without_a_pidfile() {
    let (cb, tab, _, pid) = blocked_api(1.0);
    cb.wait_state_saved(&[&tab]);
    cb.delete_state_dir();
    cb.herdr.set_silent_method(Some("tab.rename"));
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 20 * SECOND));
    cb.herdr.set_silent_method(None);
    assert_eq!(cb.herdr.label(&tab), "🔴 api");
    let state = cb.state_json();
    assert!(
        state.contains("\"base\":\"api\""),
        "the icon stays, and state.json has no record of its name: {state:?}"
    );
}

/// Deleted with no second daemon started, the directory comes back: the
/// daemon locks a new pidfile, so `off` still finds and stops it.
#[test]
fn a_daemon_whose_state_directory_was_deleted_can_still_be_turned_off() {
    let (cb, tab, _, pid) = blocked_api(60.0);
    cb.delete_state_dir();
    assert_eq!(cb.wait_for_daemon(3 * SECOND), pid, "{}", cb.log());
    let outcome = cb.action("off");
    let dead = cowbell::wait_dead(pid, SECOND);
    if !dead {
        cowbell::signal(pid, libc::SIGKILL);
    }
    assert!(dead && outcome.status.success(), "{}", outcome.stderr);
    assert_eq!(cb.herdr.label(&tab), "api");
}

// ---------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------

#[test]
fn twenty_concurrent_watchdogs_leave_one_daemon() {
    let cb = Cowbell::new();
    let mut names = Names::new();
    let (_t1, p1) = names.tab(&cb, Some("api"));
    cb.herdr.set_status(&p1, "blocked");
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..20).map(|_| scope.spawn(|| cb.watchdog())).collect();
        for run in runs {
            let outcome = run.join().unwrap();
            assert!(outcome.status.success(), "{}", outcome.stderr);
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(cb.daemons().len(), 1, "{:?}", cb.daemons());
    assert_icons(&cb, &names, CLEAR);
    assert_invariants(&cb, &names);
}

#[test]
fn two_concurrent_replaces_leave_one_daemon() {
    let cb = Cowbell::new();
    let mut names = Names::new();
    let (_t1, p1) = names.tab(&cb, Some("api"));
    cb.herdr.set_status(&p1, "blocked");
    for round in 0..3 {
        std::thread::scope(|scope| {
            let runs: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| cb.run(&["daemon", "--replace"])))
                .collect();
            for run in runs {
                let outcome = run.join().unwrap();
                assert!(
                    outcome.status.success(),
                    "round {round}: {}",
                    outcome.stderr
                );
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(cb.daemons().len(), 1, "round {round}: {:?}", cb.daemons());
    }
    assert_icons(&cb, &names, CLEAR);
    assert_invariants(&cb, &names);
}

#[test]
fn a_daemon_that_exits_leaves_no_pid_behind() {
    // A pid left in the pidfile names some other process once the pid is
    // reused; paired with a lock a short command holds for a moment, it
    // would be signalled.
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 3 * SECOND));
    let text = std::fs::read_to_string(cb.server_dir().join("cowbell.pid")).unwrap();
    assert_eq!(
        text.trim(),
        "",
        "the pidfile still names the exited daemon {pid}"
    );
}

/// `sync` with no daemon holds the pidfile lock while it works (herdr is
/// slow here), and writes no pid: that is no daemon.
#[test]
fn a_sync_holding_the_lock_is_no_daemon_to_status_or_off() {
    let cb = Cowbell::new();
    let mut tabs = Vec::new();
    for name in ["api", "web", "docs"] {
        let (tab, pane) = cb.tab(Some(name));
        cb.herdr.set_status(&pane, "blocked");
        tabs.push((tab, name));
    }
    cb.herdr.set_response_delay(Duration::from_millis(400));
    std::thread::scope(|scope| {
        let sync = scope.spawn(|| cb.run(&["sync"]));
        std::thread::sleep(Duration::from_millis(200));
        let status = cb.run(&["status"]);
        assert!(
            status.stdout.contains("daemon: not running"),
            "no daemon runs, yet status says:\n{}",
            status.stdout
        );
        // `off` waits for the sync, then restores what it wrote.
        let off = cb.action("off");
        assert!(off.status.success(), "{}", off.stderr);
        assert!(sync.join().unwrap().status.success());
    });
    assert!(cb.daemons().is_empty());
    cb.herdr.set_response_delay(Duration::ZERO);
    for (tab, name) in &tabs {
        assert_eq!(cb.herdr.label(tab), *name);
    }
    assert!(
        cb.state_json().contains("\"off\":true"),
        "{}",
        cb.state_json()
    );
}

/// A process that must never be signalled; killed on drop.
struct Bystander(std::process::Child);

impl Bystander {
    fn start() -> Bystander {
        Bystander(
            Command::new("sleep")
                .arg("60")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn assert_alive(&mut self, after: &str) {
        assert!(
            self.0.try_wait().unwrap().is_none(),
            "a process named by a stale pidfile was signalled by {after}"
        );
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A state directory shared with another host or pid namespace (an NFS
/// home, a container with the home mounted): a daemon there holds the
/// lock, and the pid it wrote names an unrelated process here, which no
/// command may signal.
#[test]
fn a_pid_from_another_host_is_never_signalled() {
    use std::os::unix::fs::OpenOptionsExt;
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    let mut bystander = Bystander::start();
    // A daemon ran here once (so the server directory exists), and is gone.
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    let server_dir = cb.server_dir();
    let mut elsewhere = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(server_dir.join("cowbell.pid"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(elsewhere.as_raw_fd(), libc::LOCK_EX) },
        0
    );
    writeln!(elsewhere, "{} elsewhere pid:[1]", bystander.pid()).unwrap();
    for (args, event) in [
        (&["daemon", "--replace"][..], "startup"),
        (&["off"], "action"),
    ] {
        let outcome = cb.run_as(args, event);
        bystander.assert_alive(&args.join(" "));
        assert!(!outcome.status.success(), "{args:?}: {}", outcome.stdout);
    }
}

#[test]
fn a_stale_pidfile_naming_another_process_is_never_signalled() {
    let s = scene();
    let mut bystander = Bystander::start();
    let bystander_pid = bystander.pid();
    let pidfile = s.cb.server_dir().join("cowbell.pid");
    let kill_daemon_and_plant_pid = || {
        let pid = s.pid();
        cowbell::signal(pid, libc::SIGKILL);
        assert!(cowbell::wait_dead(pid, 2 * SECOND));
        std::fs::write(&pidfile, format!("{bystander_pid}\n")).unwrap();
    };
    kill_daemon_and_plant_pid();
    assert!(s.cb.watchdog().status.success());
    s.cb.wait_for_daemon(2 * SECOND);
    bystander.assert_alive("watchdog");
    kill_daemon_and_plant_pid();
    s.cb.startup();
    s.cb.wait_for_daemon(2 * SECOND);
    bystander.assert_alive("daemon --replace");
    kill_daemon_and_plant_pid();
    for command in ["sync", "status"] {
        let _ = s.cb.run_as(&[command], "action");
        bystander.assert_alive(command);
    }
    assert!(s.cb.run_as(&["off"], "action").status.success());
    bystander.assert_alive("off");
    assert!(s.cb.run_as(&["on"], "action").status.success());
    bystander.assert_alive("on");
    s.cb.wait_for_daemon(2 * SECOND);
    s.icons_within(CLEAR);
    s.invariants();
    bystander.assert_alive("the invariants");
}

// ---------------------------------------------------------------------------
// Hostile files
// ---------------------------------------------------------------------------

/// Runs a cowbell command with a timeout of our own (the hook runner waits
/// 30 s); `None` if it had to be killed.
fn run_with_timeout(
    cb: &Cowbell,
    args: &[&str],
    timeout: Duration,
) -> Option<std::process::ExitStatus> {
    let mut command = Command::new(bin());
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command.envs(cb.env("startup"));
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A scene whose daemon was SIGKILLed (icons still in the labels, bases in
/// state.json), so the next start reads the files the test prepares.
fn killed_scene() -> Scene {
    let s = scene();
    let tracked: Vec<&str> = s.tabs[..2].iter().map(String::as_str).collect();
    s.cb.wait_state_saved(&tracked);
    let pid = s.pid();
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    s
}

/// Starts a daemon on hostile files; it must run and keep the icons right.
fn start_on_hostile_files(mut s: Scene) -> Scene {
    let outcome = s.cb.watchdog();
    assert!(outcome.status.success(), "{}", outcome.stderr);
    s.cb.wait_for_daemon(2 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s
}

fn hostile_state(prepare: impl FnOnce(&Path), log_says: &str) -> Scene {
    let s = killed_scene();
    let state = s.cb.server_dir().join("state.json");
    let _ = std::fs::remove_file(&state);
    prepare(&state);
    let s = start_on_hostile_files(s);
    expect_log(&s.cb, log_says, SECOND);
    s
}

#[test]
fn a_truncated_state_file_is_moved_aside() {
    let s = killed_scene();
    let state = s.cb.server_dir().join("state.json");
    let text = std::fs::read(&state).unwrap();
    std::fs::write(&state, &text[..text.len() / 2]).unwrap();
    let s = start_on_hostile_files(s);
    expect_log(&s.cb, "state: ", SECOND);
    expect_log(&s.cb, "corrupt", SECOND);
    let aside = std::fs::read_dir(s.cb.server_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
    assert!(aside, "the corrupt file was not kept aside");
    s.invariants();
}

#[test]
fn off_with_a_corrupt_state_file_still_takes_every_icon_off() {
    let s = killed_scene();
    let state = s.cb.server_dir().join("state.json");
    let text = std::fs::read(&state).unwrap();
    std::fs::write(&state, &text[..text.len() - 3]).unwrap();
    let status = s.cb.run_as(&["status"], "action");
    assert!(
        status.stdout.contains("is corrupt"),
        "status:\n{}",
        status.stdout
    );
    let outcome = s.cb.run_as(&["off"], "action");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("corrupt"), "{}", outcome.stderr);
    let aside = std::fs::read_dir(s.cb.server_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
    assert!(aside, "the corrupt file was not kept aside");
    let snapshot = s.cb.herdr.snapshot();
    assert_eq!(s.names.name_mismatches(&snapshot), []);
}

#[test]
fn an_empty_state_file_is_survived() {
    let s = hostile_state(|path| std::fs::write(path, b"").unwrap(), "state: ");
    s.invariants();
}

#[test]
fn a_fifty_mebibyte_state_file_is_refused() {
    let s = hostile_state(
        |path| {
            let mut file = std::fs::File::create(path).unwrap();
            file.write_all(b"{\"version\":1,\"off\":false,\"tabs\":{\"x\":\"")
                .unwrap();
            file.write_all(&vec![b'a'; 50 << 20]).unwrap();
        },
        "state: ",
    );
    s.invariants();
}

#[test]
fn a_state_file_that_is_a_symlink_is_neither_followed_nor_written_through() {
    let precious_dir = support::tempdir::TempDir::new();
    let precious = precious_dir.join("precious.json");
    let original = b"{\"version\":1,\"off\":true,\"tabs\":{}}";
    std::fs::write(&precious, original).unwrap();
    let s = hostile_state(
        |path| std::os::unix::fs::symlink(&precious, path).unwrap(),
        "state: ",
    );
    let mut s = s;
    s.poke();
    s.icons_within(CLEAR);
    assert_eq!(
        std::fs::read(&precious).unwrap(),
        original,
        "cowbell wrote through a symlink"
    );
    s.invariants();
    assert_eq!(std::fs::read(&precious).unwrap(), original);
}

#[test]
fn a_state_file_that_is_a_directory_or_not_utf8_is_survived() {
    let s = hostile_state(|path| std::fs::create_dir(path).unwrap(), "state: ");
    s.invariants();
    let s = hostile_state(
        |path| std::fs::write(path, b"{\"version\":1,\xff\xfe}").unwrap(),
        "state: ",
    );
    s.invariants();
}

/// A FIFO never sends end of file: reading it blindly hangs the reader
/// (here the startup hook, which herdr then counts as running for ever).
#[test]
fn a_state_file_that_is_a_fifo_does_not_hang_the_hooks_or_the_daemon() {
    let s = killed_scene();
    let state = s.cb.server_dir().join("state.json");
    std::fs::remove_file(&state).unwrap();
    let path = std::ffi::CString::new(state.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo takes no other pointer.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let status = run_with_timeout(&s.cb, &["watchdog"], 5 * SECOND);
    if status.is_none() {
        // Unblock whatever still reads it, so the test can clean up.
        // (non-blocking: with no reader left, opening fails at once).
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&state);
    }
    assert!(
        status.is_some_and(|st| st.success()),
        "`cowbell watchdog` hung (or failed) on a FIFO state.json: {status:?}"
    );
    s.cb.wait_for_daemon(2 * SECOND);
    s.icons_within(CLEAR);
    s.invariants();
}

#[test]
fn the_log_file_unwritable_or_a_symlink_changes_nothing_else() {
    // A directory where the log should be: nothing can be logged.
    let s = killed_scene();
    let log = s.cb.server_dir().join("cowbell.log");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let s = start_on_hostile_files(s);
    s.invariants();
    // A symlink to a file that is not cowbell's: never written through.
    let s = killed_scene();
    let precious_dir = support::tempdir::TempDir::new();
    let precious = precious_dir.join("precious.txt");
    std::fs::write(&precious, b"keep me").unwrap();
    let log = s.cb.server_dir().join("cowbell.log");
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&precious, &log).unwrap();
    let s = start_on_hostile_files(s);
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    s.invariants();
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
}

#[test]
fn hostile_config_files_fall_back_to_defaults() {
    type Prepare = fn(&Path);
    let cases: [(&str, Prepare); 5] = [
        ("truncated", |p| {
            std::fs::write(p, b"{\"preset\": \"asc").unwrap()
        }),
        ("empty", |p| std::fs::write(p, b"").unwrap()),
        ("50 MiB", |p| {
            std::fs::write(p, vec![b' '; 50 << 20]).unwrap();
        }),
        ("a directory", |p| std::fs::create_dir(p).unwrap()),
        ("not UTF-8", |p| {
            std::fs::write(p, b"{\"preset\":\"\xff\"}").unwrap()
        }),
    ];
    for (what, prepare) in cases {
        let s = killed_scene();
        let config = s.cb.config_dir.join("config.json");
        prepare(&config);
        let s = start_on_hostile_files(s);
        assert!(
            wait_log(&s.cb, "config: ", SECOND),
            "config {what}: no word in the log; log:\n{}",
            log_tail(&s.cb, 20)
        );
        s.invariants();
    }
}

#[test]
fn a_config_file_that_is_a_symlink_is_read_and_never_written() {
    let s = killed_scene();
    let dotfiles = support::tempdir::TempDir::new();
    let target = dotfiles.join("cowbell.json");
    std::fs::write(&target, br#"{"preset": "ascii"}"#).unwrap();
    std::os::unix::fs::symlink(&target, s.cb.config_dir.join("config.json")).unwrap();
    let outcome = s.cb.watchdog();
    assert!(outcome.status.success());
    s.cb.wait_for_daemon(2 * SECOND);
    s.cb.expect_label(&s.tabs[0], "[!] api", CLEAR);
    assert_one_daemon(&s.cb);
    assert_restore(&s.cb, &s.names);
    assert_eq!(std::fs::read(&target).unwrap(), br#"{"preset": "ascii"}"#);
}

// --- as another user: the tests run as root, where mode bits stop nothing,
// so cowbell runs as `nobody` through setpriv(1) where they must bite.

const NOBODY: u32 = 65534;

fn setpriv() -> Option<&'static str> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The per-server directory cowbell derives from the socket path
/// (`paths::server_dir_name`: FNV-1a of the path).
fn server_dir_of(cb: &Cowbell) -> PathBuf {
    let hash = cb
        .socket
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
        });
    cb.state_dir.join(format!("socket-{hash:016x}"))
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs `cowbell <args>` as nobody, the way herdr runs a hook.
fn run_as_nobody(cb: &Cowbell, args: &[&str]) -> hooks::HookOutcome {
    let setpriv = setpriv().unwrap();
    let mut argv = vec![
        setpriv,
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        bin(),
    ];
    argv.extend_from_slice(args);
    hooks::run_hook(&cb.plugin_root, &argv, &cb.env("startup"))
}

/// A fixture cowbell-as-nobody can use: socket and directories reachable.
/// SIGTERM to the daemon (`off` would run as root here): every tab gets
/// exactly its own name back.
fn sigterm_restores_every_name(cb: &Cowbell, names: &Names) {
    let pid = cb.daemon_pid().unwrap();
    cowbell::signal(pid, libc::SIGTERM);
    wait_exit(cb, pid, 5 * SECOND);
    assert!(
        cb.herdr
            .wait_until(SECOND, |snap| names.name_mismatches(snap).is_empty()),
        "{:?}",
        names.name_mismatches(&cb.herdr.snapshot())
    );
}

fn nobody_scene() -> Option<(Cowbell, Names, Vec<String>)> {
    if !is_root() || setpriv().is_none() {
        eprintln!("skipped: needs root and setpriv(1) to run cowbell as another user");
        return None;
    }
    let cb = Cowbell::new();
    chmod(cb.dir.path(), 0o755);
    chmod(&cb.socket, 0o777);
    let mut names = Names::new();
    let (_t1, p1) = names.tab(&cb, Some("api"));
    let (_t2, p2) = names.tab(&cb, Some("docs"));
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "working");
    std::fs::create_dir_all(&cb.state_dir).unwrap();
    chown(&cb.state_dir, NOBODY);
    chown(&cb.config_dir, NOBODY);
    Some((cb, names, vec![p1, p2]))
}

/// The server directory belongs to root and is read-only for nobody; only
/// the pidfile and the log are left writable for it.
fn read_only_server_dir(cb: &Cowbell) -> PathBuf {
    let dir = server_dir_of(cb);
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    for file in ["cowbell.pid", "cowbell.log"] {
        std::fs::write(dir.join(file), b"").unwrap();
        chown(&dir.join(file), NOBODY);
        chmod(&dir.join(file), 0o600);
    }
    dir
}

#[test]
fn a_read_only_state_directory_still_gets_icons_and_says_state_cannot_be_saved() {
    let Some((cb, names, panes)) = nobody_scene() else {
        return;
    };
    let dir = read_only_server_dir(&cb);
    let outcome = run_as_nobody(&cb, &["daemon", "--replace"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    cb.herdr.set_status(&panes[0], "working");
    assert_icons(&cb, &names, CLEAR);
    expect_log(&cb, "cannot save", SECOND);
    assert!(!dir.join("state.json").exists());
    assert_one_daemon(&cb);
    // Without state.json the stop restores from what the daemon holds.
    sigterm_restores_every_name(&cb, &names);
}

#[test]
fn a_state_file_owned_by_another_user_and_unreadable_is_survived() {
    let Some((cb, names, _panes)) = nobody_scene() else {
        return;
    };
    let dir = server_dir_of(&cb);
    std::fs::create_dir_all(&dir).unwrap();
    chown(&dir, NOBODY);
    chmod(&dir, 0o700);
    let state = dir.join("state.json");
    std::fs::write(&state, b"{\"version\":1,\"off\":true,\"tabs\":{}}").unwrap();
    chmod(&state, 0o600); // root's, unreadable for nobody
    let outcome = run_as_nobody(&cb, &["daemon", "--replace"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    expect_log(&cb, "state: ", SECOND);
    // Moved aside, not replaced unread by the next save.
    let aside: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.starts_with("state.json.corrupt-").then_some(name)
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}\n{}", cb.log());
    assert_eq!(
        std::fs::read(dir.join(&aside[0])).unwrap(),
        b"{\"version\":1,\"off\":true,\"tabs\":{}}"
    );
    assert_one_daemon(&cb);
    sigterm_restores_every_name(&cb, &names);
}

#[test]
fn an_unreadable_config_file_falls_back_to_defaults() {
    let Some((cb, names, _panes)) = nobody_scene() else {
        return;
    };
    let config = cb.config_dir.join("config.json");
    std::fs::write(&config, br#"{"preset": "ascii"}"#).unwrap();
    chmod(&config, 0o600); // root's
    let outcome = run_as_nobody(&cb, &["daemon", "--replace"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    expect_log(&cb, "config: ", SECOND);
    assert_one_daemon(&cb);
    sigterm_restores_every_name(&cb, &names);
}

/// A state.json whose times are all u64::MAX (or 0), whose cool-down level
/// and fight count are u32::MAX: the panic audit's extremes. A new daemon
/// on it stays up and puts the icons right, status answers in both forms,
/// and off gives the names back.
#[test]
fn a_state_json_of_extreme_times_and_counts_is_survived() {
    for time in [u64::MAX, 0] {
        let cb = Cowbell::new();
        let mut names = Names::new();
        let (t1, p1) = names.tab(&cb, Some("api"));
        let (t2, p2) = names.tab(&cb, Some("docs"));
        cb.herdr.set_status(&p1, "blocked");
        cb.herdr.set_status(&p2, "working");
        cb.startup();
        let pid = cb.wait_for_daemon(2 * SECOND);
        assert_icons(&cb, &names, 3 * SECOND);
        cowbell::signal(pid, libc::SIGKILL);
        assert!(cowbell::wait_dead(pid, 2 * SECOND));
        let tabs = [(&t1, "api"), (&t2, "docs")]
            .iter()
            .map(|(tab, base)| {
                let label = quote(&cb.herdr.label(tab));
                format!(
                    r#"{}:{{"base":{},"written":{label},"seen":{label},"pending":null,"auto_named":false,"fights_ms":[0,1,{time},{time}],"last_own_rename_ms":{time},"cooldown_until_ms":{time},"last_cooldown_end_ms":{time},"last_cooldown_ms":{time},"cooldown_level":{max},"fights_total":{max}}}"#,
                    quote(tab),
                    quote(base),
                    max = u32::MAX
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        let state =
            format!(r#"{{"version":1,"off":false,"daemon_running":true,"tabs":{{{tabs}}}}}"#);
        std::fs::write(cb.server_dir().join("state.json"), &state).unwrap();
        cb.startup();
        let pid = cb.wait_for_daemon(2 * SECOND);
        cb.herdr.set_status(&p1, "working");
        cb.herdr.rename_tab(&t2, "web");
        names.set(&t2, "web");
        assert_icons(&cb, &names, 3 * SECOND);
        assert!(
            cb.daemons().contains(&pid),
            "the daemon died on {state}; log:\n{}",
            log_tail(&cb, 20)
        );
        for args in [&["status"][..], &["status", "--json"]] {
            let outcome = cb.run(args);
            assert!(outcome.status.success(), "{args:?}: {}", outcome.stderr);
        }
        assert!(cb.run(&["off"]).status.success());
        assert_eq!(cb.herdr.label(&t1), "api");
        assert_eq!(cb.herdr.label(&t2), "web");
    }
}

// ---------------------------------------------------------------------------
// Security
// ---------------------------------------------------------------------------

#[test]
fn files_are_private_and_nothing_is_written_outside_the_server_directory() {
    let mut s = scene();
    s.poke();
    s.icons_within(CLEAR);
    let dir = s.cb.server_dir();
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    // The icons are there once herdr applied the renames; the state is
    // saved a moment later, when the daemon has read the answers.
    let deadline = std::time::Instant::now() + 2 * SECOND;
    while !dir.join("state.json").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        // A save in progress has its temp file beside state.json, renamed
        // away perhaps before it could be looked at.
        let temp = name == ".state.json.tmp";
        let meta = match entry.metadata() {
            Err(e) if temp && e.kind() == std::io::ErrorKind::NotFound => continue,
            meta => meta.unwrap(),
        };
        assert!(meta.is_file(), "{name} is not a regular file");
        assert_eq!(meta.mode() & 0o777, 0o600, "{name} is not 0600");
        if !temp {
            seen.push(name);
        }
    }
    seen.sort();
    assert_eq!(seen, ["cowbell.log", "cowbell.pid", "state.json"]);
    // The state directory holds the server directory only; the config
    // directory and the test's directory are untouched.
    let state_entries: Vec<_> = std::fs::read_dir(&s.cb.state_dir).unwrap().collect();
    assert_eq!(state_entries.len(), 1);
    assert_eq!(std::fs::read_dir(&s.cb.config_dir).unwrap().count(), 0);
    let mut top: Vec<String> = std::fs::read_dir(s.cb.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["config", "herdr.sock", "state"]);
    // The daemon runs nothing: no child processes.
    let pid = s.pid();
    let children = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1));
            ppid == Some(&pid.to_string())
        })
        .count();
    assert_eq!(children, 0, "the daemon has child processes");
    s.invariants();
}

#[test]
fn a_socket_path_that_is_no_socket_gives_one_clear_line() {
    let cb = Cowbell::new();
    let file = cb.dir.join("not-a-socket");
    std::fs::write(&file, b"").unwrap();
    for socket in [file.clone(), cb.dir.join("missing.sock")] {
        // (`off` with nothing to restore needs no server, and rightly succeeds.)
        for command in ["sync", "remove-icons"] {
            let mut env = cb.env("action");
            for (key, value) in &mut env {
                if key == "HERDR_SOCKET_PATH" {
                    *value = cowbell::path_str(&socket);
                }
            }
            let outcome = hooks::run_hook(&cb.plugin_root, &[bin(), command], &env);
            let stderr = outcome.stderr.trim_end();
            assert!(
                !outcome.status.success(),
                "{command} with {}: exit 0",
                socket.display()
            );
            assert!(
                stderr.starts_with("cowbell: ") && !stderr.contains('\n'),
                "{command} with {}: want one line \"cowbell: ...\", got {stderr:?}",
                socket.display()
            );
        }
    }
}

#[test]
fn a_daemon_started_without_a_server_retries_until_it_comes() {
    let mut cb = Cowbell::new();
    let mut names = Names::new();
    let (_t1, p1) = names.tab(&cb, Some("api"));
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.stop();
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    expect_log(&cb, "retrying", 2 * SECOND);
    std::thread::sleep(SECOND);
    assert!(
        cowbell::alive(pid),
        "the daemon gave up on a missing server"
    );
    cb.herdr.start_again(true);
    cb.herdr.set_status(&p1, "blocked");
    // The backoff may have reached 2 s by now.
    assert_icons(&cb, &names, CLEAR + 2 * SECOND);
    assert_eq!(cb.daemon_pid(), Some(pid));
    assert_invariants(&cb, &names);
}

/// Scale 60: idle exit after 2 s without a server; the exit is one the
/// specification names, and the next server start brings cowbell back.
#[test]
fn without_a_server_for_the_idle_time_the_daemon_exits() {
    let mut s = scene_with(Options::default(), 60.0);
    let pid = s.pid();
    s.cb.herdr.stop();
    wait_exit(&s.cb, pid, 5 * SECOND);
    expect_log(&s.cb, "no herdr server", SECOND);
    s.cb.herdr.start_again(true);
    s.cb.startup();
    s.cb.wait_for_daemon(2 * SECOND);
    s.poke();
    s.icons_within(CLEAR);
    s.invariants();
}

// ---------------------------------------------------------------------------
// Hostile labels
// ---------------------------------------------------------------------------

#[test]
fn hostile_tab_names_get_one_icon_and_come_back_intact() {
    let cb = Cowbell::new();
    let long = "x".repeat(10 * 1024);
    // (the tab's name, its name once cowbell strips a leading icon)
    let cases: Vec<(String, String)> = [
        ("a\u{1}b\u{7f}c\td\u{1b}[31m", None),
        ("line one\nline two", None),
        ("\r\n", None),
        (long.as_str(), None),
        ("🔴", None),
        ("[!]", None),
        ("● symbols preset", Some("symbols preset")),
        ("[~] ascii preset", Some("ascii preset")),
        ("\u{f058} nerd preset", Some("nerd preset")),
        ("🔴\u{fe0f} with VS16", Some("with VS16")),
        ("🟡 🔵 doubled", Some("doubled")),
        ("👩\u{200d}💻 zwj", None),
        ("🏳\u{fe0f}\u{200d}🌈", None),
        ("\"quotes\" \\ and \\u0000", None),
        ("\u{202e}right to left", None),
        (" leading space", None),
    ]
    .into_iter()
    .map(|(name, stripped)| (name.to_string(), stripped.unwrap_or(name).to_string()))
    .collect();
    let mut names = Names::new();
    let mut panes = Vec::new();
    let mut tabs = Vec::new();
    for (name, stripped) in &cases {
        let (tab, pane) = cb.tab(Some(name));
        names.set(&tab, stripped);
        cb.herdr.set_status(&pane, "blocked");
        panes.push(pane);
        tabs.push(tab);
    }
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    assert_icons(&cb, &names, 3 * SECOND);
    for pane in &panes {
        cb.herdr.set_status(pane, "working");
    }
    assert_icons(&cb, &names, CLEAR);
    // The same names given by hand (a rename, not a first sight).
    for (tab, (name, stripped)) in tabs.iter().zip(&cases) {
        cb.herdr.rename_tab(tab, name);
        names.set(tab, stripped);
    }
    assert_icons(&cb, &names, CLEAR + SECOND);
    assert_invariants(&cb, &names);
}

/// Two blocked tabs, "api" and "docs", and a `sync` killed once herdr
/// applied api's rename (each answer takes 600 ms: the list, api's rename,
/// docs' rename), before it saved.
fn a_sync_killed_after_its_first_rename() -> (Cowbell, String, String) {
    let cb = Cowbell::new();
    let (api, api_pane) = cb.tab(Some("api"));
    let (docs, docs_pane) = cb.tab(Some("docs"));
    cb.herdr.set_status(&api_pane, "blocked");
    cb.herdr.set_status(&docs_pane, "blocked");
    // Each answer takes 600 ms: the list, api's rename, docs' rename.
    cb.herdr.set_response_delay(Duration::from_millis(600));
    let mut sync = cb.launched(&["sync"], "action").spawn().unwrap();
    cb.expect_label(&api, "🔴 api", 3 * SECOND);
    assert!(sync.try_wait().unwrap().is_none(), "sync finished early");
    sync.kill().unwrap();
    sync.wait().unwrap();
    cb.herdr.set_response_delay(Duration::ZERO);
    (cb, api, docs)
}

/// A `sync` killed between its renames and its save: the tabs it saw for
/// the first time must be in state.json already, or `off` leaves their icons.
#[test]
fn off_after_a_sync_killed_before_its_save_takes_the_icons_off() {
    let (cb, api, docs) = a_sync_killed_after_its_first_rename();
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    assert_eq!(cb.herdr.label(&api), "api", "off said: {}", off.stdout);
    assert_eq!(cb.herdr.label(&docs), "docs");
}

/// Tabs "tab0" to "tab16", blocked: one more than the daemon's 16
/// requests in flight, so the last rename waits for the first answer.
fn seventeen_blocked_tabs(cb: &Cowbell) -> Vec<String> {
    (0..17)
        .map(|i| {
            let (tab, pane) = cb.tab(Some(&format!("tab{i}")));
            cb.herdr.set_status(&pane, "blocked");
            tab
        })
        .collect()
}

/// The daemon saves once every rename of a resync is answered; killed
/// before, with a slow herdr, its first 16 renames would be in no
/// state.json if new tabs were not saved before their renames go out.
#[test]
fn off_after_a_daemon_killed_before_its_first_save_takes_the_icons_off() {
    let cb = Cowbell::new();
    let tabs = seventeen_blocked_tabs(&cb);
    cb.herdr.set_response_delay(Duration::from_millis(700));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    // Most renames land together; the pane.list out beside them holds one
    // of the 16 request slots, and the last go out only once the first
    // are answered, 700 ms behind them.
    cb.expect_label(&tabs[0], "🔴 tab0", 5 * SECOND);
    std::thread::sleep(Duration::from_millis(100));
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    // The kill came before the save that follows the last answer.
    let saved = cb.state_json();
    assert!(
        !saved.contains("\"written\":\"🔴 tab16\""),
        "killed after the daemon's save: nothing tested\n{saved}"
    );
    cb.herdr.set_response_delay(Duration::ZERO);
    // The fake still applies the renames the dead daemon left with it, each
    // 700 ms after it came (herdr would apply them at once). `off` must
    // come after them: one landing after its tab.list would leave an icon
    // no command can know of, whether or not this test looked in time.
    let sent = cb.herdr.requests_of("tab.rename").len();
    let landed = cb.herdr.wait_until(5 * SECOND, |snap| {
        tabs.iter()
            .filter(|tab| snap.label(tab).starts_with('🔴'))
            .count()
            == sent
    });
    assert!(landed, "the dead daemon's {sent} renames never all landed");
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    let left: Vec<String> = tabs
        .iter()
        .map(|tab| cb.herdr.label(tab))
        .filter(|label| label.starts_with('🔴'))
        .collect();
    assert!(left.is_empty(), "off left {left:?}; it said {}", off.stdout);
    // And no rename was still on its way to put one back (each would have
    // landed within 700 ms).
    std::thread::sleep(Duration::from_millis(800));
    let names: Vec<String> = tabs.iter().map(|tab| cb.herdr.label(tab)).collect();
    let want: Vec<String> = (0..17).map(|i| format!("tab{i}")).collect();
    assert_eq!(names, want, "an icon came back after off");
}

/// Against a slow herdr, the replayed pane events of a new subscription
/// must not send a pane.list each: every list out holds one of the 16
/// request slots, and the renames of the first resync wait behind them.
#[test]
fn a_slow_herdr_gets_one_pane_list_at_a_time() {
    let cb = Cowbell::new();
    let tabs = seventeen_blocked_tabs(&cb);
    let delay = Duration::from_millis(700);
    cb.herdr.set_response_delay(delay);
    cb.startup();
    for (i, tab) in tabs.iter().enumerate() {
        cb.expect_label(tab, &format!("🔴 tab{i}"), 10 * SECOND);
    }
    let lists: Vec<Instant> = cb
        .herdr
        .requests_of("pane.list")
        .iter()
        .map(|r| r.at)
        .collect();
    assert!(!lists.is_empty());
    for pair in lists.windows(2) {
        // A little slack for the answer's own delivery.
        assert!(
            pair[1] - pair[0] >= delay - Duration::from_millis(50),
            "a pane.list {:?} after the one before, which takes {delay:?} to answer",
            pair[1] - pair[0]
        );
    }
}

/// A pane made while a pane.list is out may be missing from its answer, and
/// the daemon sends no second list while one is out: it lists again after
/// the answer, or the new pane never gets its status subscription.
#[test]
fn a_pane_made_while_a_pane_list_is_out_is_listed_again() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "idle");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    assert!(cb.herdr.wait_for_subscribers(2, 3 * SECOND));
    std::thread::sleep(Duration::from_millis(1500));
    // Answered at once, read a second later.
    cb.herdr
        .set_late_answer(Some("pane.list"), Duration::from_secs(1));
    let before = requests(&cb, "pane.list");
    // A pane that comes and goes: the list it brings answers with the
    // panes already subscribed.
    let gone = cb.herdr.add_pane(&tab);
    cb.herdr.close_pane(&gone);
    wait_request(&cb, "pane.list", before, 2 * SECOND);
    std::thread::sleep(Duration::from_millis(100));
    cb.herdr.set_late_answer(None, Duration::ZERO);
    let fresh = cb.herdr.add_pane(&tab);
    cb.herdr.set_status(&fresh, "idle");
    std::thread::sleep(Duration::from_millis(2500));
    cb.herdr.set_status(&fresh, "blocked");
    cb.expect_label(&tab, "🔴 api", CLEAR);
}
/// A `sync` killed after its early save and after its rename
/// landed. The next `sync` must not take cowbell's own icon for someone
/// else's rename (a fight, a "new base").
#[test]
fn a_sync_killed_after_its_early_save_leaves_no_false_fight() {
    let (cb, _api, _docs) = a_sync_killed_after_its_first_rename();
    let again = cb.run_as(&["sync"], "action");
    assert!(again.status.success(), "{}", again.stderr);
    let state = cb.state_json();
    assert!(
        state.contains("\"fights_ms\":[]") && !state.contains("\"fights_total\":1"),
        "the second sync counted a fight against cowbell's own icon:\n{state}"
    );
}

/// a plugin wrapped cowbell's label while no daemon ran (killed);
/// `off` must give back the wrapped name without cowbell's icon inside.
#[test]
fn off_after_a_crash_unwraps_a_mark_put_in_front_of_the_icon() {
    let cb = Cowbell::new();
    let (api, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&api, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&api]);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    cb.herdr.rename_tab(&api, "★ 🔴 api");
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    assert_eq!(cb.herdr.label(&api), "★ api", "off said: {}", off.stdout);
}
/// Like `a_sync_killed_after_its_early_save_leaves_no_false_fight`,
/// but for a tab cowbell already tracked (its status changed): no early
/// save, so the label that landed is in no state.json. The next sync must
/// still know it for cowbell's (an icon in front of the saved base), or the
/// auto-named tab becomes a custom "1" whose icon no longer follows a move.
#[test]
fn a_sync_killed_after_a_status_rename_keeps_an_auto_named_tab_auto_named() {
    let cb = Cowbell::new();
    cb.write_config(AUTO_NAMED);
    let (t1, p1) = cb.tab(None);
    let (_t2, p2) = cb.tab(None);
    cb.herdr.set_status(&p1, "blocked");
    cb.herdr.set_status(&p2, "blocked");
    let first = cb.run_as(&["sync"], "action");
    assert!(first.status.success(), "{}", first.stderr);
    assert_eq!(cb.herdr.label(&t1), "🔴 1");
    // Now working: sync renames, herdr applies, the answer is slow, the
    // sync is killed before its save.
    cb.herdr.set_status(&p1, "working");
    cb.herdr.set_status(&p2, "working");
    cb.herdr.set_response_delay(Duration::from_millis(600));
    let mut sync = cb.launched(&["sync"], "action").spawn().unwrap();
    cb.expect_label(&t1, "🟡 1", 3 * SECOND);
    assert!(sync.try_wait().unwrap().is_none(), "sync finished early");
    sync.kill().unwrap();
    sync.wait().unwrap();
    cb.herdr.set_response_delay(Duration::ZERO);
    let again = cb.run_as(&["sync"], "action");
    assert!(again.status.success(), "{}", again.stderr);
    cb.herdr.move_tab(&t1, 2);
    let third = cb.run_as(&["sync"], "action");
    assert!(third.status.success(), "{}", third.stderr);
    assert_eq!(
        cb.herdr.label(&t1),
        "🟡 2",
        "state.json:\n{}",
        cb.state_json()
    );
}

/// Two auto-named tabs with include_auto_named on; the first, blocked,
/// turns working, and the daemon is killed after herdr applied its rename
/// to "🟡 1" but before the answer (and the save after it) came.
fn daemon_killed_after_herdr_applied_its_rename() -> (Cowbell, String) {
    let cb = Cowbell::new();
    cb.write_config(AUTO_NAMED);
    let (t1, p1) = cb.tab(None);
    let (_t2, _) = cb.tab(None);
    cb.herdr.set_status(&p1, "blocked");
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&t1, "🔴 1", 2 * SECOND);
    cb.wait_state_saved(&[&t1]);
    std::thread::sleep(Duration::from_millis(300));
    cb.herdr.set_silent_method(Some("tab.rename"));
    cb.herdr.set_status(&p1, "working");
    let deadline = Instant::now() + 2 * SECOND;
    while !cb
        .herdr
        .requests_of("tab.rename")
        .iter()
        .any(|r| r.param("label").as_deref() == Some("🟡 1"))
    {
        assert!(Instant::now() < deadline, "no rename to 🟡 1");
        std::thread::sleep(Duration::from_millis(5));
    }
    // herdr applied it; the answer has not come yet.
    cb.herdr.rename_tab(&t1, "🟡 1");
    std::thread::sleep(Duration::from_millis(100));
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    cb.herdr.set_silent_method(None);
    (cb, t1)
}

/// The daemon's form of the same window (only a resync with new tabs is
/// saved before its renames go out): herdr applies the rename and has not
/// answered yet when the daemon is killed.
#[test]
fn a_daemon_killed_after_a_status_rename_keeps_an_auto_named_tab_auto_named() {
    let (cb, t1) = daemon_killed_after_herdr_applied_its_rename();
    let lists = cb.herdr.requests_of("tab.list").len();
    cb.watchdog();
    cb.wait_for_daemon(2 * SECOND);
    // The move comes after the new daemon's first look.
    assert!(
        cb.herdr.wait_until(2 * SECOND, |s| s
            .requests
            .iter()
            .filter(|r| r.method == "tab.list")
            .count()
            > lists),
        "no first look"
    );
    std::thread::sleep(Duration::from_millis(200));
    cb.herdr.move_tab(&t1, 2);
    let moved = cb.herdr.wait_until(3 * SECOND, |s| s.label(&t1) == "🟡 2");
    assert!(
        moved,
        "label {:?}\nstate.json:\n{}\nlog:\n{}",
        cb.herdr.label(&t1),
        cb.state_json(),
        cb.log()
    );
}

/// The retry's backoff starts over at the first resync without a failed
/// request, also after a run of failed `tab.list`s (which never finish a
/// resync): the next one-off failure is tried again a second later.
#[test]
fn a_clean_resync_after_failed_lists_resets_the_backoff() {
    let mut s = scene();
    let pid = s.pid();
    s.cb.herdr.set_silent_method(Some("tab.list"));
    s.poke();
    // Lists time out at about 2, 5, 8, 11, 14 and 18 s (retries 1 s, then 2, 4 s).
    std::thread::sleep(Duration::from_secs(19));
    s.cb.herdr.set_silent_method(None);
    // The retry at about 22 s lists, renames, and succeeds.
    s.icons_within(6 * SECOND);
    std::thread::sleep(SECOND);
    // One refused rename: tried again a second later, as any first failure.
    s.cb.herdr.fail_next_renames(1);
    s.poke();
    let at = Instant::now();
    let ok =
        s.cb.herdr
            .wait_until(15 * SECOND, |snap| s.names.icon_mismatches(snap).is_empty());
    let took = at.elapsed();
    assert!(
        ok && took <= CLEAR + SECOND,
        "icons back after {took:?}\n{}",
        s.cb.log()
    );
    s.still_well(pid);
}

/// A `pane.list` herdr never answers (while `tab.list` answers at once)
/// backs off like any other request refused for good, although each
/// retry's resync finishes clean before the pane list times out.
#[test]
fn a_pane_list_that_never_answers_backs_off() {
    let s = scene();
    let pid = s.pid();
    s.cb.herdr.set_silent_method(Some("pane.list"));
    s.cb.herdr.add_pane(&s.tabs[0]);
    std::thread::sleep(Duration::from_secs(21));
    let from = s.cb.herdr.request_count();
    std::thread::sleep(Duration::from_secs(15));
    let lists =
        s.cb.herdr
            .requests_since(from)
            .iter()
            .filter(|r| r.method == "pane.list")
            .count();
    s.cb.herdr.set_silent_method(None);
    // Backing off: by 21 s the waits are 4 s and more (at most 3 tries
    // between 21 and 36 s). Without: one every 3 s, 5 of them.
    assert!(
        lists <= 3,
        "{lists} pane.lists from 21 to 36 s\n{}",
        s.cb.log()
    );
    s.still_well(pid);
}

/// `sync` in a state directory it cannot write puts the icons on all the
/// same, as the daemon does (see the test above).
#[test]
fn sync_in_a_read_only_state_directory_renames_like_the_daemon() {
    let Some((cb, names, _panes)) = nobody_scene() else {
        return;
    };
    read_only_server_dir(&cb);
    let outcome = run_as_nobody(&cb, &["sync"]);
    assert_icons(&cb, &names, SECOND);
    // The save that failed is said, once, and the exit code says it too.
    assert_eq!(outcome.status.code(), Some(1), "{}", outcome.stderr);
    assert_eq!(
        outcome.stderr.matches("state.json").count(),
        1,
        "{}",
        outcome.stderr
    );
}

/// As `a_daemon_killed_after_a_status_rename_keeps_an_auto_named_tab_auto_named`,
/// but the next run is `sync` (a host without a daemon after the crash): it
/// sees the dead daemon's pid and knows the label for cowbell's.
#[test]
fn sync_after_a_daemon_killed_mid_rename_keeps_an_auto_named_tab_auto_named() {
    let (cb, t1) = daemon_killed_after_herdr_applied_its_rename();
    let first = cb.run(&["sync"]);
    cb.herdr.move_tab(&t1, 2);
    let second = cb.run(&["sync"]);
    assert_eq!(
        cb.herdr.label(&t1),
        "🟡 2",
        "{}{}state.json:\n{}",
        first.stderr,
        second.stderr,
        cb.state_json(),
    );
}

/// The crash stays on record until a run looks past it: `status` (the
/// natural first look after a crash) and a `sync` that fails at its list
/// must not use it up, or the next sync takes the dead daemon's label for
/// someone else's.
#[test]
fn a_status_or_a_failed_sync_after_a_daemon_killed_mid_rename_loses_nothing() {
    let (cb, t1) = daemon_killed_after_herdr_applied_its_rename();
    let status = cb.run(&["status"]);
    assert!(status.status.success(), "{}", status.stderr);
    cb.herdr.answer_raw("tab.list", 1, b"garbage\n");
    let failed = cb.run(&["sync"]);
    assert!(!failed.status.success(), "{}", failed.stderr);
    let first = cb.run(&["sync"]);
    cb.herdr.move_tab(&t1, 2);
    let second = cb.run(&["sync"]);
    assert_eq!(
        cb.herdr.label(&t1),
        "🟡 2",
        "{}{}state.json:\n{}",
        first.stderr,
        second.stderr,
        cb.state_json()
    );
}

/// A daemon started after the crash that hands over before its first list
/// was answered (the watchdog and the startup hook at a server start) has
/// looked at no tab: the crash must stay on record for the next one.
#[test]
fn a_daemon_replaced_before_its_first_look_keeps_the_crash_on_record() {
    let (cb, t1) = daemon_killed_after_herdr_applied_its_rename();
    assert!(
        cb.state_json().contains("\"daemon_running\":true"),
        "{}",
        cb.state_json()
    );
    cb.herdr.set_silent_method(Some("tab.list"));
    cb.herdr.clear_requests();
    cb.watchdog();
    let early = cb.wait_for_daemon(2 * SECOND);
    let deadline = Instant::now() + 2 * SECOND;
    while cb.herdr.requests_of("tab.list").is_empty() {
        assert!(Instant::now() < deadline, "no tab.list from the new daemon");
        std::thread::sleep(Duration::from_millis(5));
    }
    cb.startup();
    assert!(cowbell::wait_dead(early, 2 * SECOND));
    cb.herdr.set_silent_method(None);
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(Duration::from_millis(1500));
    cb.herdr.move_tab(&t1, 2);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        cb.herdr.label(&t1),
        "🟡 2",
        "state.json:\n{}\nlog:\n{}",
        cb.state_json(),
        cb.log()
    );
}

/// A daemon started into a server run that has been busy (its 512-event
/// buffer full of cowbell's own echoes and of pane events) gets the lot
/// replayed, one event per type per 100 ms poll, for about a minute.
/// Each is a hint only: the daemon must not list the tabs again for every
/// one of them.
#[test]
fn a_replayed_buffer_brings_few_lists() {
    let cb = Cowbell::new();
    let mut panes = Vec::new();
    for i in 0..8 {
        let (_tab, pane) = cb.tab(Some(&format!("agent{i}")));
        panes.push(pane);
    }
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    // A busy hour in short: agents change state, cowbell renames, panes
    // come and go.
    for round in 0..40 {
        for (i, pane) in panes.iter().enumerate() {
            let status = ["working", "blocked", "idle"][(round + i) % 3];
            cb.herdr.set_status(pane, status);
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    std::thread::sleep(2 * SECOND);
    let buffered = cb.herdr.events().len();
    assert!(buffered >= 200, "only {buffered} events buffered");
    let before = requests(&cb, "tab.list");
    cb.startup();
    std::thread::sleep(10 * SECOND);
    // Most of the buffer is old echoes (176 of 512 here), which arrive
    // 100 ms apart: one list each made 51 in these 10 s, a lazy look
    // about a second apart makes 14.
    let lists = requests(&cb, "tab.list") - before;
    assert!(lists <= 25, "{lists} tab.list in 10 s of replay");
}

/// `cowbell daemon` or the watchdog beside a `sync` that holds the
/// pidfile's lock for longer than half a second (a slow herdr): no daemon
/// runs, so neither may take the sync for one; a daemon must run once the
/// sync has let go.
fn a_start_beside_a_slow_sync_starts_the_daemon(command: &str) {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.herdr.set_response_delay(Duration::from_millis(1500));
    let env = cb.env("action");
    let root = cb.plugin_root.clone();
    let sync = std::thread::spawn(move || hooks::run_hook(&root, &[cowbell::bin(), "sync"], &env));
    // The sync holds the lock (its tab.list takes 1.5 s) when the start looks.
    std::thread::sleep(Duration::from_millis(300));
    let start = cb.run(&[command]);
    let _ = sync.join().unwrap();
    cb.herdr.set_response_delay(Duration::ZERO);
    assert!(start.status.success(), "{}", start.stderr);
    let deadline = Instant::now() + 2 * SECOND;
    while cb.daemons().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        cb.daemons().len(),
        1,
        "{command}: no daemon; it said: {:?}\nlog:\n{}",
        start.stderr,
        cb.log()
    );
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
}

#[test]
fn a_daemon_start_beside_a_slow_sync_starts_the_daemon() {
    a_start_beside_a_slow_sync_starts_the_daemon("daemon");
}

#[test]
fn the_watchdog_beside_a_slow_sync_starts_the_daemon() {
    a_start_beside_a_slow_sync_starts_the_daemon("watchdog");
}

/// SIGTERM: the restore is under way (herdr answers slowly, but answers)
/// when herdr closes the event subscription. The restore's requests go on
/// connections of their own: every name must come back before the exit.
#[test]
fn a_restore_survives_the_event_subscription_closing() {
    let s = scene();
    let pid = s.pid();
    std::thread::sleep(Duration::from_millis(500));
    // The restore's list takes 300 ms.
    s.cb.herdr.set_response_delay(Duration::from_millis(300));
    cowbell::signal(pid, libc::SIGTERM);
    expect_log(&s.cb, "restoring tab names", SECOND);
    std::thread::sleep(Duration::from_millis(100));
    s.cb.herdr.drop_subscriptions();
    assert!(
        cowbell::wait_dead(pid, 12 * SECOND),
        "{}",
        log_tail(&s.cb, 20)
    );
    s.cb.herdr.set_response_delay(Duration::ZERO);
    s.names_back_within(SECOND, "a restore that lost its event subscription");
}
