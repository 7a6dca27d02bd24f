//! The daemon end to end: the real binary against the fake herdr server,
//! one test per behaviour of the specification's "The daemon", "Resync"
//! and "Which status a tab shows".

mod support;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use support::cowbell::{self, Cowbell};
use support::fake_herdr::{LoggedRequest, Options};
use support::hooks;

const SECOND: Duration = Duration::from_secs(1);

/// A running daemon over three named tabs.
fn running_with_tabs(names: &[&str]) -> (Cowbell, Vec<(String, String)>) {
    let cb = Cowbell::new();
    let tabs: Vec<(String, String)> = names.iter().map(|name| cb.tab(Some(name))).collect();
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    (cb, tabs)
}

fn tab_lists(cb: &Cowbell) -> usize {
    cb.herdr.requests_of("tab.list").len()
}

#[test]
fn an_icon_appears_within_a_second_of_a_pane_going_blocked() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.expect_steady(tab, "api", Duration::from_millis(300));
    let start = Instant::now();
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", SECOND);
    assert!(start.elapsed() < SECOND);
}

#[test]
fn every_status_shows_its_icon_and_the_roll_up_decides() {
    let (cb, tabs) = running_with_tabs(&["a", "b", "c"]);
    let (a, pa) = &tabs[0];
    let (b, pb) = &tabs[1];
    let (c, pc) = &tabs[2];
    cb.herdr.set_status(pa, "working");
    cb.herdr.set_status(pb, "working");
    cb.herdr.set_status(pc, "idle");
    cb.expect_label(a, "🟡 a", 2 * SECOND);
    cb.expect_label(b, "🟡 b", 2 * SECOND);
    // An idle pane in an unfocused tab is "done" until someone looks.
    cb.expect_label(c, "🔵 c", 2 * SECOND);
    // Blocked beats working within one tab.
    let extra = cb.herdr.add_pane(a);
    cb.herdr.set_status(&extra, "blocked");
    cb.expect_label(a, "🔴 a", 2 * SECOND);
    // Unknown and idle show no icon.
    cb.herdr.set_status(pb, "unknown");
    cb.expect_label(b, "b", 2 * SECOND);
}

#[test]
fn done_keeps_its_icon_until_the_tab_is_focused() {
    let (cb, tabs) = running_with_tabs(&["first", "review"]);
    let (tab, pane) = &tabs[1];
    cb.herdr.set_status(pane, "working");
    cb.expect_label(tab, "🟡 review", 2 * SECOND);
    cb.herdr.set_status(pane, "idle");
    cb.expect_label(tab, "🔵 review", 2 * SECOND);
    cb.expect_steady(tab, "🔵 review", SECOND);
    cb.herdr.focus_tab(tab);
    cb.expect_label(tab, "review", 2 * SECOND);
}

#[test]
fn a_user_rename_becomes_the_base_with_the_icon_in_front_once() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    let before = cb.herdr.renames_of(tab);
    cb.herdr.rename_tab(tab, "frontend");
    cb.expect_label(tab, "🔴 frontend", 2 * SECOND);
    // Give the echo time to come back: it must not cause another rename.
    cb.expect_steady(tab, "🔴 frontend", 2 * SECOND);
    // The user's rename and cowbell's one answer: exactly one more by cowbell.
    let by_cowbell = cb.herdr.renames_of(tab) - before;
    assert_eq!(by_cowbell, 1, "log:\n{}", cb.log());
    assert!(
        cb.state_json().contains("\"base\":\"frontend\""),
        "{}",
        cb.state_json()
    );
}

/// herdr replays old renames to a new subscription: none of them is taken
/// for a name, even while cowbell's own renames await their echoes.
#[test]
fn a_replayed_old_name_is_not_adopted_after_a_reconnect() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("zero"));
    for name in ["one", "alpha", "beta"] {
        cb.herdr.rename_tab(&tab, name);
    }
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 beta", 3 * SECOND);
    std::thread::sleep(SECOND);
    cb.herdr.drop_subscriptions();
    cb.herdr.set_status(&pane, "unknown");
    cb.expect_label(&tab, "beta", 3 * SECOND);
    cb.expect_steady(&tab, "beta", 2 * SECOND);
}

/// herdr delivers one event per poll: after a resync that renamed many
/// tabs, echoes come seconds late, and an old one of them is no name.
#[test]
fn late_echoes_never_revert_a_name_the_person_gave() {
    let cb = Cowbell::new();
    let others: Vec<_> = (0..12).map(|i| cb.tab(Some(&format!("t{i}")))).collect();
    let (tab, pane) = cb.tab(Some("alpha"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(Duration::from_millis(500));
    for (_, other) in &others {
        cb.herdr.set_status(other, "blocked");
    }
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 alpha", 2 * SECOND);
    cb.herdr.rename_tab(&tab, "beta");
    std::thread::sleep(Duration::from_millis(50));
    cb.herdr.set_status(&others[0].1, "working");
    cb.expect_label(&tab, "🔴 beta", SECOND);
    cb.herdr.set_status(&pane, "unknown");
    cb.expect_label(&tab, "beta", SECOND);
    cb.expect_steady(&tab, "beta", 3 * SECOND);
}

#[test]
fn icons_never_double() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    // Someone (another plugin) copies the label with icons in front.
    cb.herdr.rename_tab(tab, "🔴 🟡 api");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    cb.herdr.set_status(pane, "working");
    cb.expect_label(tab, "🟡 api", 2 * SECOND);
    cb.expect_steady(tab, "🟡 api", SECOND);
}

#[test]
fn a_closed_tab_leaves_state_json() {
    let (cb, tabs) = running_with_tabs(&["keep", "temp"]);
    let (temp, pane) = &tabs[1];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(temp, "🔴 temp", 2 * SECOND);
    cb.wait_state_saved(&[temp]);
    cb.herdr.close_tab(temp);
    let deadline = Instant::now() + 2 * SECOND;
    while cb.state_json().contains(temp.as_str()) {
        assert!(
            Instant::now() < deadline,
            "entry still there: {}",
            cb.state_json()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(cb.state_json().contains(tabs[0].0.as_str()));
}

#[test]
fn a_resync_lists_once_and_renames_only_what_differs() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let tabs: Vec<(String, String)> = (0..10).map(|i| cb.tab(Some(&format!("t{i}")))).collect();
    for (_, pane) in &tabs[..4] {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.startup();
    for (tab, _) in &tabs[..4] {
        cb.expect_label(
            tab,
            &format!("🔴 {}", cb.herdr.label(tab).trim_start_matches("🔴 ")),
            2 * SECOND,
        );
    }
    std::thread::sleep(SECOND);
    cb.herdr.clear_requests();
    cb.herdr.set_status(&tabs[5].1, "blocked");
    cb.expect_label(&tabs[5].0, "🔴 t5", 2 * SECOND);
    std::thread::sleep(SECOND);
    let requests = cb.herdr.requests();
    let lists = requests.iter().filter(|r| r.method == "tab.list").count();
    let renames: Vec<_> = requests
        .iter()
        .filter(|r| r.method == "tab.rename")
        .collect();
    assert_eq!(lists, 1, "{requests:?}");
    assert_eq!(renames.len(), 1, "{renames:?}");
    assert_eq!(
        renames[0].param("tab_id").as_deref(),
        Some(tabs[5].0.as_str())
    );
}

#[test]
fn echoes_of_its_own_renames_trigger_nothing() {
    // Real herdr spreads the echoes of ten renames over about a second.
    let cb = Cowbell::new();
    let tabs: Vec<(String, String)> = (0..10).map(|i| cb.tab(Some(&format!("t{i}")))).collect();
    // The agents are known before the test starts (pane_agent_detected
    // events are real resync triggers, and arrive one per 100 ms too).
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "unknown");
    }
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(2 * SECOND);
    cb.herdr.clear_requests();
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    for (i, (tab, _)) in tabs.iter().enumerate() {
        cb.expect_label(tab, &format!("🔴 t{i}"), 3 * SECOND);
    }
    let lists_after_renames = tab_lists(&cb);
    // The ten echoes arrive over the next second; none may cause a resync.
    std::thread::sleep(2 * SECOND);
    assert_eq!(tab_lists(&cb), lists_after_renames, "log:\n{}", cb.log());
    assert_eq!(cb.herdr.requests_of("tab.rename").len(), 10);
}

#[test]
fn a_steady_stream_of_events_cannot_starve_the_resync() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (tab, pane) = cb.tab(Some("busy"));
    let (_other, noisy) = cb.tab(Some("noisy"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    // A status change every 20 ms, for longer than a debounce window.
    let start = Instant::now();
    let mut flip = false;
    while start.elapsed() < Duration::from_millis(800) {
        cb.herdr
            .set_status(&noisy, if flip { "working" } else { "unknown" });
        flip = !flip;
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        cb.herdr.label(&tab),
        "🔴 busy",
        "the resync waited for the stream to end"
    );
    // And the debounce still groups events: far fewer lists than events.
    assert!(tab_lists(&cb) < 20, "{} tab.list calls", tab_lists(&cb));
}

#[test]
fn new_panes_are_subscribed_and_closed_panes_dropped() {
    let (cb, tabs) = running_with_tabs(&["one"]);
    let (tab, _) = &tabs[0];
    std::thread::sleep(Duration::from_millis(500));
    // A pane created after the daemon started.
    let late = cb.herdr.add_pane(tab);
    let (new_tab, new_pane) = cb.tab(Some("two"));
    std::thread::sleep(Duration::from_millis(500));
    cb.herdr.set_status(&late, "blocked");
    cb.herdr.set_status(&new_pane, "working");
    cb.expect_label(tab, "🔴 one", 2 * SECOND);
    cb.expect_label(&new_tab, "🟡 two", 2 * SECOND);
    // Those first reports also raised pane_agent_detected, a lifecycle
    // event; a later change of a new pane reaches cowbell only through the
    // status subscription rebuilt for it.
    cb.herdr.set_status(&late, "working");
    cb.herdr.set_status(&new_pane, "blocked");
    cb.expect_label(tab, "🟡 one", 2 * SECOND);
    cb.expect_label(&new_tab, "🔴 two", 2 * SECOND);
    cb.herdr.close_pane(&late);
    cb.expect_label(tab, "one", 2 * SECOND);
    // The new subscription can come a debounce after the label: a pane
    // list still out when the pane closed is listed again after it.
    let closed = format!("\"{late}\"");
    let last_subscribe = || {
        let subscribes = cb.herdr.requests_of("events.subscribe");
        subscribes
            .last()
            .map(|r| r.line.clone())
            .unwrap_or_default()
    };
    let dropped = cb
        .herdr
        .wait_until(2 * SECOND, |_| !last_subscribe().contains(&closed));
    assert!(
        dropped,
        "closed pane still subscribed: {}",
        last_subscribe()
    );
}

#[test]
fn tab_and_pane_lists_are_asked_for_one_at_a_time() {
    // At 1000 tabs both answers are large (the pane list is a 0.8 MB line);
    // held at once beside the resync, they took the daemon's peak memory
    // past 2 MiB in some runs. With every answer 300 ms late, a list asked
    // for beside another arrives within milliseconds of it; one asked for
    // after the other's answer, at least 300 ms later.
    let (cb, tabs) = running_with_tabs(&["one", "two"]);
    let (tab, _) = &tabs[0];
    std::thread::sleep(Duration::from_millis(500));
    let from = cb.herdr.request_count();
    cb.herdr.set_response_delay(Duration::from_millis(300));
    // A new pane: a resync and a new pane list.
    cb.herdr.add_pane(tab);
    let lists = || -> Vec<LoggedRequest> {
        cb.herdr
            .requests_since(from)
            .into_iter()
            .filter(|r| r.method == "tab.list" || r.method == "pane.list")
            .collect()
    };
    let both = cb.herdr.wait_until(5 * SECOND, |_| {
        let lists = lists();
        lists.iter().any(|r| r.method == "tab.list")
            && lists.iter().any(|r| r.method == "pane.list")
    });
    // Any list the second one brought along has had its time to come.
    std::thread::sleep(Duration::from_millis(700));
    cb.herdr.set_response_delay(Duration::ZERO);
    let lists = lists();
    assert!(both, "a tab.list and a pane.list: {lists:?}");
    for pair in lists.windows(2) {
        let apart = pair[1].at - pair[0].at;
        assert!(
            apart >= Duration::from_millis(300),
            "{} {apart:?} after {}: {lists:?}",
            pair[1].method,
            pair[0].method
        );
    }
}

#[test]
fn a_change_while_the_status_subscription_is_rebuilt_is_not_missed() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, _) = &tabs[0];
    // A second agent pane, detected now: its later changes raise no
    // lifecycle event, only a status event.
    let agent = cb.herdr.add_pane(tab);
    cb.herdr.set_status(&agent, "idle");
    cb.expect_steady(tab, "api", Duration::from_millis(500));
    // Slow answers stretch the gap between the resync's tab.list and the
    // start of the status subscription a new pane brings, which herdr does
    // not replay.
    cb.herdr.set_response_delay(Duration::from_millis(600));
    let subscribes = cb.herdr.requests_of("events.subscribe").len();
    cb.herdr.add_pane(tab);
    let asked = Instant::now();
    while cb.herdr.requests_of("events.subscribe").len() == subscribes {
        assert!(asked.elapsed() < 5 * SECOND, "no new status subscription");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The tab.list is answered; the subscription starts 600 ms from now.
    std::thread::sleep(Duration::from_millis(200));
    cb.herdr.set_status(&agent, "blocked");
    cb.herdr.set_response_delay(Duration::ZERO);
    // Well before the 60 s heartbeat.
    cb.expect_label(tab, "🔴 api", 5 * SECOND);
}

/// One tab, "api", whose agent turns blocked while herdr answers slowly
/// (600 ms): the startup hook asks for a handover while that rename is on
/// its way. Returns the old daemon's pid.
fn a_handover_asked_during_a_slow_rename() -> (Cowbell, String, u32) {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = tabs[0].clone();
    cb.expect_steady(&tab, "api", Duration::from_millis(300));
    let old = cb.daemon_pid().unwrap();
    cb.herdr.set_response_delay(Duration::from_millis(600));
    let renames = cb.herdr.requests_of("tab.rename").len();
    cb.herdr.set_status(&pane, "blocked");
    let asked = Instant::now();
    while cb.herdr.requests_of("tab.rename").len() == renames {
        assert!(asked.elapsed() < 5 * SECOND, "no rename");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(cb.startup().status.success());
    (cb, tab, old)
}

#[test]
fn a_handover_during_a_rename_is_no_fight() {
    let (cb, tab, old) = a_handover_asked_during_a_slow_rename();
    let tab = &tab;
    cb.herdr.set_response_delay(Duration::ZERO);
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(tab, "🔴 api", 3 * SECOND);
    cb.expect_steady(tab, "🔴 api", SECOND);
    let log = cb.log();
    assert!(!log.contains(": a fight ("), "a false fight:\n{log}");
    assert!(
        cb.state_json().contains("\"fights_total\":0"),
        "{}",
        cb.state_json()
    );
}

#[test]
fn tabs_herdr_named_by_position_are_left_alone() {
    let cb = Cowbell::new();
    let (auto, auto_pane) = cb.tab(None);
    let (named, named_pane) = cb.tab(Some("named"));
    cb.startup();
    cb.herdr.set_status(&auto_pane, "blocked");
    cb.herdr.set_status(&named_pane, "blocked");
    cb.expect_label(&named, "🔴 named", 2 * SECOND);
    cb.expect_steady(&auto, "1", SECOND);
    assert!(!cb.state_json().contains(auto.as_str()));
}

#[test]
fn a_running_daemon_makes_another_start_a_no_op() {
    let (cb, _) = running_with_tabs(&["a"]);
    let pid = cb.wait_for_daemon(SECOND);
    let outcome = cb.run(&["daemon"]);
    assert!(outcome.status.success());
    assert!(
        outcome.stderr.contains("already runs"),
        "{}",
        outcome.stderr
    );
    let outcome = cb.watchdog();
    assert!(outcome.status.success());
    assert_eq!(outcome.stderr, "", "watchdog is silent");
    assert_eq!(cb.daemons(), vec![pid]);
}

#[test]
fn ten_watchdogs_at_once_leave_exactly_one_daemon() {
    let cb = Cowbell::new();
    cb.tab(Some("a"));
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..10).map(|_| scope.spawn(|| cb.watchdog())).collect();
        for run in runs {
            let outcome = run.join().unwrap();
            assert!(outcome.status.success(), "{}", outcome.stderr);
        }
    });
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cb.daemons().len(), 1, "{:?}", cb.daemons());
}

#[test]
fn two_replacing_starts_at_once_leave_exactly_one_daemon() {
    let (cb, _) = running_with_tabs(&["a"]);
    std::thread::scope(|scope| {
        let a = scope.spawn(|| cb.run(&["daemon", "--replace"]));
        let b = scope.spawn(|| cb.run(&["daemon", "--replace"]));
        assert!(a.join().unwrap().status.success());
        assert!(b.join().unwrap().status.success());
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(cb.daemons().len(), 1, "{:?}\n{}", cb.daemons(), cb.log());
}

#[test]
fn the_watchdog_restarts_a_killed_daemon_without_losing_bases() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[tab]);
    let pid = cb.wait_for_daemon(SECOND);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    let started = Instant::now();
    let outcome = cb.watchdog();
    assert!(outcome.status.success());
    assert!(
        started.elapsed() < SECOND,
        "watchdog took {:?}",
        started.elapsed()
    );
    let new_pid = cb.wait_for_daemon(2 * SECOND);
    assert_ne!(new_pid, pid);
    cb.herdr.set_status(pane, "working");
    cb.expect_label(tab, "🟡 api", 2 * SECOND);
}

#[test]
fn the_startup_hook_after_a_server_restart_brings_icons_back() {
    let (mut cb, tabs) = running_with_tabs(&["api", "docs"]);
    let (api, api_pane) = &tabs[0];
    let (docs, docs_pane) = &tabs[1];
    cb.herdr.set_status(api_pane, "blocked");
    cb.herdr.set_status(docs_pane, "working");
    cb.expect_label(api, "🔴 api", 2 * SECOND);
    cb.expect_label(docs, "🟡 docs", 2 * SECOND);
    let old_pid = cb.wait_for_daemon(SECOND);
    cb.herdr.stop();
    cb.herdr.start_again(true);
    // Agent states are lost in a restart; the agents report again.
    cb.herdr.set_status(api_pane, "blocked");
    let start = Instant::now();
    cb.startup();
    cb.expect_label(api, "🔴 api", 2 * SECOND);
    // docs has no status any more: its stale icon goes.
    cb.expect_label(docs, "docs", 2 * SECOND);
    assert!(start.elapsed() < 2 * SECOND);
    assert!(
        cowbell::wait_dead(old_pid, 2 * SECOND),
        "the old daemon handed over"
    );
    assert_eq!(cb.daemons().len(), 1);
}

#[test]
fn the_daemon_reconnects_when_the_server_comes_back() {
    let cb_scale = 10.0;
    let mut cb = Cowbell::with(Options::default(), cb_scale);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.herdr.stop();
    std::thread::sleep(SECOND);
    cb.herdr.start_again(true);
    // No startup hook this time: the daemon's own reconnect does it.
    cb.herdr.set_status(&pane, "working");
    cb.expect_label(&tab, "🟡 api", 4 * SECOND);
    assert!(cb.log().contains("disconnected"), "{}", cb.log());
}

#[test]
fn the_daemon_exits_120_seconds_after_the_server_goes_away() {
    // Scale 60: 120 s become 2 s.
    let mut cb = Cowbell::with(Options::default(), 60.0);
    cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.stop();
    // Alive at 105 s, gone by 159 s (the slack is for a loaded machine;
    // the message's "2 s" alone would pass anything from 120 to 179 s).
    std::thread::sleep(Duration::from_millis(1750));
    assert!(cowbell::alive(pid), "exited too early:\n{}", cb.log());
    assert!(
        cowbell::wait_dead(pid, Duration::from_millis(900)),
        "still running:\n{}",
        cb.log()
    );
    assert!(cb.log().contains("no herdr server for 2 s"), "{}", cb.log());
}

#[test]
fn a_server_that_refuses_the_subscription_gets_a_message_that_says_so() {
    // An older herdr refuses a subscription naming an event type it does
    // not know; that is not "no server". Scale 60: 120 s become 2 s.
    let cb = Cowbell::with(Options::default(), 60.0);
    cb.tab(Some("api"));
    cb.herdr.answer_raw_if(
        "events.subscribe",
        Some("tab.created"),
        10_000,
        b"{\"id\":\"\",\"error\":{\"code\":\"invalid_request\",\"message\":\"unknown variant `tab.focused`\"}}\n",
    );
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    assert!(
        cowbell::wait_dead(pid, 5 * SECOND),
        "still running:\n{}",
        cb.log()
    );
    let log = cb.log();
    assert!(log.contains("unknown variant"), "{log}");
    assert!(log.contains("older than cowbell needs"), "{log}");
    assert!(!log.contains("no herdr server"), "{log}");
}

/// The heartbeat finds the plugin gone or disabled: names back, exit.
fn assert_heartbeat_stops_when(change: impl FnOnce(&Cowbell), logged: &str) {
    // Scale 60: the 60 s heartbeat becomes 1 s.
    let cb = Cowbell::with(Options::default(), 60.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    change(&cb);
    cb.expect_label(&tab, "api", 3 * SECOND);
    assert!(cowbell::wait_dead(pid, 2 * SECOND), "{}", cb.log());
    assert!(cb.log().contains(logged), "{}", cb.log());
}

#[test]
fn the_heartbeat_notices_a_disabled_plugin_and_restores_names() {
    assert_heartbeat_stops_when(|cb| cb.herdr.set_plugin("cowbell", false), "disabled");
}

#[test]
fn the_heartbeat_notices_an_uninstalled_plugin() {
    assert_heartbeat_stops_when(
        |cb| cb.herdr.uninstall_plugin("cowbell"),
        "no longer installed",
    );
}

/// A linked checkout deleted without an uninstall: herdr still lists the
/// plugin, but its hooks and actions cannot run, so no `off` could give
/// the names back. Two heartbeats that miss the manifest stop the daemon
/// (`FilesCheck` in src/event_loop.rs has the rest of the rule).
#[test]
fn the_heartbeat_notices_the_plugins_files_deleted() {
    // Scale 60: the 60 s heartbeat becomes 1 s.
    let cb = Cowbell::with(Options::default(), 60.0);
    let root = cb.dir.path().join("plugin");
    std::fs::create_dir(&root).unwrap();
    let manifest = root.join("herdr-plugin.toml");
    std::fs::write(&manifest, "id = \"cowbell\"\n").unwrap();
    cb.herdr.set_plugin_root("cowbell", &root);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    // Seen at a check first: a daemon that never saw the files (another
    // mount namespace) must not stop for them.
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_dir_all(&root).unwrap();
    cb.expect_label(&tab, "api", 5 * SECOND);
    assert!(cowbell::wait_dead(pid, 2 * SECOND), "{}", cb.log());
    assert!(cb.log().contains("files are gone"), "{}", cb.log());
}

/// A server restarted with cowbell disabled runs no startup hook to replace
/// the old daemon, which reconnects within its 120 s: it looks at herdr's
/// plugin list on connecting, not a 60 s heartbeat later.
#[test]
fn a_daemon_back_on_a_server_that_disabled_it_stops_at_once() {
    let mut cb = Cowbell::with(Options::default(), 1.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.herdr.stop();
    cb.herdr.set_plugin("cowbell", false);
    cb.herdr.start_again(true);
    assert!(
        cowbell::wait_dead(pid, 15 * SECOND),
        "still running:\n{}",
        cb.log()
    );
    assert!(cb.log().contains("disabled"), "{}", cb.log());
    assert_eq!(cb.herdr.label(&tab), "api");
}

/// The heartbeat looks for cowbell's own entry (`HERDR_PLUGIN_ID`) in
/// herdr's list of every plugin: another one disabled, even one called
/// `cowbell`, is no reason to stop.
#[test]
fn the_heartbeat_checks_the_plugin_id_herdr_gave() {
    // Scale 60: the 60 s heartbeat becomes 1 s.
    let cb = Cowbell::with(Options::default(), 60.0);
    cb.herdr.set_plugin("cowbell", false);
    cb.herdr.set_plugin("cowbell-dev", true);
    let (tab, pane) = cb.tab(Some("api"));
    let mut env = cb.env("startup");
    for (key, value) in &mut env {
        if key == "HERDR_PLUGIN_ID" {
            *value = "cowbell-dev".into();
        }
    }
    let started = hooks::run_hook(
        &cb.plugin_root,
        &[cowbell::bin(), "daemon", "--replace"],
        &env,
    );
    assert!(started.status.success(), "{}", started.stderr);
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    // Three heartbeats.
    std::thread::sleep(3 * SECOND);
    assert!(cowbell::alive(pid), "{}", cb.log());
    assert_eq!(cb.herdr.label(&tab), "🔴 api");
    cb.herdr.set_plugin("cowbell-dev", false);
    cb.expect_label(&tab, "api", 3 * SECOND);
    assert!(cowbell::wait_dead(pid, 2 * SECOND), "{}", cb.log());
    assert!(cb.log().contains("disabled"), "{}", cb.log());
}

/// `rm cowbell.log` under a running daemon: the heartbeat opens a new one,
/// so what the daemon logs after it is not lost in the deleted file.
#[test]
fn the_heartbeat_brings_a_deleted_log_back() {
    // Scale 60: the 60 s heartbeat becomes 1 s.
    let cb = Cowbell::with(Options::default(), 60.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    let log = cb.server_dir().join("cowbell.log");
    std::fs::remove_file(&log).unwrap();
    std::thread::sleep(3 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    // The line comes after the rename's answer: a loaded machine may take
    // a while.
    let deadline = Instant::now() + 3 * SECOND;
    while !cb.log().contains("renamed") {
        assert!(Instant::now() < deadline, "{:?}", cb.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_heartbeat_resyncs_a_quiet_server() {
    let cb = Cowbell::with(Options::default(), 60.0);
    cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(SECOND);
    let before = tab_lists(&cb);
    std::thread::sleep(Duration::from_millis(2500));
    let beats = tab_lists(&cb) - before;
    assert!(
        (1..=4).contains(&beats),
        "{beats} heartbeat resyncs in 2.5 s at 1 s"
    );
    assert!(!cb.herdr.requests_of("plugin.list").is_empty());
}

/// Every way of stopping gives every tab exactly its original name back.
fn assert_names_restored(stop: impl FnOnce(&Cowbell)) {
    let (cb, tabs) = running_with_tabs(&["api", "docs", "🔴 notes"]);
    let original: Vec<String> = tabs.iter().map(|(tab, _)| cb.herdr.label(tab)).collect();
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.expect_label(&tabs[0].0, "🔴 api", 2 * SECOND);
    cb.expect_label(&tabs[1].0, "🔴 docs", 2 * SECOND);
    cb.expect_label(&tabs[2].0, "🔴 notes", 2 * SECOND);
    let pid = cb.wait_for_daemon(SECOND);
    stop(&cb);
    assert!(
        cowbell::wait_dead(pid, 5 * SECOND),
        "daemon still runs:\n{}",
        cb.log()
    );
    cb.expect_label(&tabs[0].0, "api", 2 * SECOND);
    cb.expect_label(&tabs[1].0, "docs", 2 * SECOND);
    // A name that came with an icon is given back without it.
    cb.expect_label(&tabs[2].0, "notes", 2 * SECOND);
    assert_eq!(&original[..2], ["api", "docs"]);
    assert!(
        !cb.state_json().contains("\"base\""),
        "entries left: {}",
        cb.state_json()
    );
}

#[test]
fn off_restores_every_name() {
    assert_names_restored(|cb| {
        let outcome = cb.action("off");
        assert!(outcome.status.success(), "{}", outcome.stderr);
        assert_eq!(
            outcome.stdout.trim(),
            "cowbell: off; the daemon gave the names back"
        );
    });
}

#[test]
fn remove_icons_restores_every_name() {
    assert_names_restored(|cb| {
        let outcome = cb.action("remove-icons");
        assert!(outcome.status.success(), "{}", outcome.stderr);
    });
}

#[test]
fn sigterm_restores_every_name() {
    assert_names_restored(|cb| cowbell::signal(cb.wait_for_daemon(SECOND), libc::SIGTERM));
}

#[test]
fn a_restore_keeps_a_name_someone_gave_after_cowbell() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    let pid = cb.wait_for_daemon(SECOND);
    // Stop the loop from reacting, then rename behind its back.
    cowbell::signal(pid, libc::SIGSTOP);
    cb.herdr.rename_tab(tab, "🟡 theirs");
    cowbell::signal(pid, libc::SIGTERM);
    cowbell::signal(pid, libc::SIGCONT);
    assert!(cowbell::wait_dead(pid, 5 * SECOND));
    cb.expect_label(tab, "theirs", 2 * SECOND);
}

#[test]
fn off_stays_off_until_on() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    assert!(cb.action("off").status.success());
    assert!(cb.wait_for_no_daemon(3 * SECOND));
    // Neither the watchdog nor the startup hook starts anything while off.
    assert!(cb.watchdog().status.success());
    assert!(cb.run(&["daemon", "--replace"]).status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(cb.daemons().is_empty());
    cb.herdr.set_status(pane, "blocked");
    cb.expect_steady(tab, "api", SECOND);
    let outcome = cb.action("on");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
}

#[test]
fn off_while_the_server_is_down_gives_the_names_back_when_it_returns() {
    let (mut cb, tabs) = running_with_tabs(&["api", "docs"]);
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.expect_label(&tabs[0].0, "🔴 api", 2 * SECOND);
    cb.expect_label(&tabs[1].0, "🔴 docs", 2 * SECOND);
    cb.wait_state_saved(&[&tabs[0].0, &tabs[1].0]);
    cb.herdr.stop();
    let off = cb.action("off");
    assert!(!off.status.success(), "no server, yet: {}", off.stdout);
    assert!(cb.wait_for_no_daemon(3 * SECOND));
    // The server comes back with the icons (a restart keeps names); its
    // startup hook finishes the restore and starts nothing.
    cb.herdr.start_again(true);
    let outcome = cb.startup();
    assert!(
        outcome.stdout.contains("2 tab names restored"),
        "{}",
        outcome.stdout
    );
    assert_eq!(cb.herdr.label(&tabs[0].0), "api");
    assert_eq!(cb.herdr.label(&tabs[1].0), "docs");
    assert!(cb.daemons().is_empty());
    let state = cb.state_json();
    assert!(state.contains("\"off\":true"), "{state}");
    assert!(state.contains("\"tabs\":{}"), "{state}");
    // Once done, the next start has nothing left to give back.
    let again = cb.startup();
    assert!(!again.stdout.contains("restored"), "{}", again.stdout);
}

#[test]
fn on_while_the_server_is_down_says_so_and_the_next_start_brings_icons() {
    let (mut cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    assert!(cb.action("off").status.success());
    assert!(cb.wait_for_no_daemon(3 * SECOND));
    cb.herdr.stop();
    let on = cb.action("on");
    assert_eq!(on.status.code(), Some(3), "{}", on.stdout);
    assert!(on.stderr.contains("cowbell is on"), "{}", on.stderr);
    assert!(
        cb.state_json().contains("\"off\":false"),
        "{}",
        cb.state_json()
    );
    cb.herdr.start_again(true);
    cb.startup();
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
}

#[test]
fn remove_icons_works_without_a_daemon_and_cleans_up_after_a_crash() {
    let (cb, tabs) = running_with_tabs(&["api", "docs"]);
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    cb.expect_label(&tabs[0].0, "🔴 api", 2 * SECOND);
    cb.expect_label(&tabs[1].0, "🔴 docs", 2 * SECOND);
    cb.wait_state_saved(&[&tabs[0].0, &tabs[1].0]);
    let pid = cb.wait_for_daemon(SECOND);
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    // A tab cowbell never knew, with an icon of another preset.
    let (stray, _) = cb.tab(Some("[!] stray"));
    let outcome = cb.action("remove-icons");
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert_eq!(cb.herdr.label(&tabs[0].0), "api");
    assert_eq!(cb.herdr.label(&tabs[1].0), "docs");
    assert_eq!(cb.herdr.label(&stray), "stray");
    assert_eq!(
        outcome.stdout.trim(),
        "cowbell: icons removed; 3 tab names restored"
    );
}

#[test]
fn sighup_reloads_the_configuration() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    cb.write_config(r#"{"preset": "ascii"}"#);
    cowbell::signal(cb.wait_for_daemon(SECOND), libc::SIGHUP);
    cb.expect_label(tab, "[!] api", 2 * SECOND);
}

#[test]
fn sync_does_one_resync_without_a_daemon() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    let outcome = cb.run(&["sync"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert_eq!(cb.herdr.label(&tab), "🔴 api");
    assert!(cb.daemons().is_empty());
    assert_eq!(cb.herdr.requests_of("tab.list").len(), 1);
}

#[test]
fn status_reports_the_daemon_the_server_and_every_tab() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[tab]);
    let pid = cb.wait_for_daemon(SECOND);
    let outcome = cb.run(&["status"]);
    assert!(outcome.status.success());
    assert!(
        outcome.stdout.contains(&format!("running (pid {pid})")),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome.stdout.contains("base \"api\""),
        "{}",
        outcome.stdout
    );
    assert!(outcome.stdout.contains("blocked"), "{}", outcome.stdout);
    let json = cb.run(&["status", "--json"]).stdout;
    assert!(
        json.contains("\"daemon_running\":true") && json.contains("\"base\":\"api\""),
        "{json}"
    );
    // The menu action also shows a one-line summary in herdr.
    let outcome = cb.action("status");
    assert!(outcome.status.success());
    let notes = cb.herdr.notifications();
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0]
            .body
            .as_deref()
            .unwrap_or("")
            .contains("daemon running"),
        "{notes:?}"
    );
}

#[test]
fn short_commands_say_clearly_when_there_is_no_server() {
    let mut cb = Cowbell::new();
    cb.herdr.stop();
    for command in ["sync", "on"] {
        let outcome = cb.run(&[command]);
        assert_eq!(outcome.status.code(), Some(3), "{command}");
        assert!(
            outcome.stderr.starts_with("cowbell: herdr server at"),
            "{command}: {}",
            outcome.stderr
        );
        assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
    }
    for pid in cb.daemons() {
        cowbell::signal(pid, libc::SIGKILL);
    }
    std::fs::write(&cb.socket, b"not a socket").unwrap();
    for command in ["sync", "on"] {
        let outcome = cb.run(&[command]);
        assert!(
            outcome.stderr.contains("not a socket"),
            "{command}: {}",
            outcome.stderr
        );
    }
}

#[test]
fn a_stop_during_a_slow_resync_still_restores_every_name() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "idle");
    cb.herdr.focus_tab(tab);
    cb.expect_steady(tab, "api", Duration::from_millis(300));
    let pid = cb.wait_for_daemon(SECOND);
    // The resync's tab.list is still unanswered when the stop comes.
    cb.herdr.set_response_delay(Duration::from_millis(300));
    cb.herdr.set_status(pane, "blocked");
    std::thread::sleep(Duration::from_millis(250));
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 5 * SECOND), "{}", cb.log());
    cb.herdr.set_response_delay(Duration::ZERO);
    cb.expect_steady(tab, "api", SECOND);
    assert!(!cb.state_json().contains("\"base\""), "{}", cb.state_json());
}

#[test]
fn a_rename_failing_during_the_stop_brings_no_second_restore() {
    let (cb, tabs) = running_with_tabs(&["api", "web"]);
    let (api, api_pane) = &tabs[0];
    let (web, web_pane) = &tabs[1];
    cb.herdr.set_status(web_pane, "blocked");
    cb.expect_label(web, "🔴 web", 2 * SECOND);
    let pid = cb.wait_for_daemon(SECOND);
    // Every answer 600 ms late, and the resync's rename of api refused: its
    // failure comes in after the stop began, while the restore waits for
    // it. A resync retry it armed fired 1 s later, in the middle of the
    // restore's rename of web, and listed the tabs a second time.
    cb.herdr.set_response_delay(Duration::from_millis(600));
    cb.herdr.fail_next_renames(1);
    cb.herdr.set_status(api_pane, "blocked");
    let before = cb.herdr.requests_of("tab.rename").len();
    let renaming = cb.herdr.wait_until(3 * SECOND, |_| {
        cb.herdr.requests_of("tab.rename").len() > before
    });
    assert!(renaming, "{}", cb.log());
    let from = cb.herdr.request_count();
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 10 * SECOND), "{}", cb.log());
    cb.herdr.set_response_delay(Duration::ZERO);
    let lists: Vec<LoggedRequest> = cb
        .herdr
        .requests_since(from)
        .into_iter()
        .filter(|r| r.method == "tab.list")
        .collect();
    assert_eq!(lists.len(), 1, "{lists:?}\n{}", cb.log());
    cb.expect_steady(api, "api", SECOND);
    cb.expect_steady(web, "web", SECOND);
}

#[test]
fn a_rename_back_to_a_label_cowbell_wrote_earlier_is_noticed() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.tab(Some("other"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    // cowbell writes "🔴 api", "api", "🔴 api" in turn.
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.herdr.set_status(&pane, "idle");
    cb.herdr.focus_tab(&tab);
    cb.expect_label(&tab, "api", 2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    std::thread::sleep(Duration::from_millis(300));
    // Another plugin sets "api", a label cowbell also wrote: not an echo.
    cb.herdr.rename_tab(&tab, "api");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
}

#[test]
fn a_busy_server_does_not_postpone_the_plugin_check() {
    // Scale 60: the check is due every second; events come every 200 ms,
    // each one a resync that pushes the heartbeat on.
    let cb = Cowbell::with(Options::default(), 60.0);
    let (tab, pane) = cb.tab(Some("api"));
    let (_busy, busy_pane) = cb.tab(Some("busy"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.herdr.set_plugin("cowbell", false);
    // The events keep coming until the daemon is gone: a heartbeat that
    // waits for a quiet moment would only fire after this loop.
    let start = Instant::now();
    let mut flip = false;
    let mut stopped = false;
    while !stopped && start.elapsed() < 4 * SECOND {
        cb.herdr
            .set_status(&busy_pane, if flip { "working" } else { "unknown" });
        flip = !flip;
        stopped = cowbell::wait_dead(pid, Duration::from_millis(200));
    }
    assert!(stopped, "never noticed while busy:\n{}", cb.log());
    cb.expect_label(&tab, "api", SECOND);
}

#[test]
fn off_wins_against_watchdogs_that_run_at_the_same_time() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let hooks = scope.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                assert!(cb.watchdog().status.success());
            }
        });
        let outcome = cb.action("off");
        assert!(outcome.status.success(), "{}", outcome.stderr);
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        hooks.join().unwrap();
    });
    assert!(cb.wait_for_no_daemon(2 * SECOND), "{:?}", cb.daemons());
    cb.expect_steady(tab, "api", SECOND);
}

#[test]
fn status_only_looks() {
    // status neither takes the daemon's lock (a hook starting a daemon at
    // that moment would think one runs) nor creates anything.
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    let outcome = cb.run(&["status"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(
        outcome.stdout.contains("daemon: not running"),
        "{}",
        outcome.stdout
    );
    assert!(
        !cb.state_dir.exists(),
        "status created {}",
        cb.state_dir.display()
    );
    assert!(cb.watchdog().status.success());
    let pid = cb.wait_for_daemon(2 * SECOND);
    let outcome = cb.run(&["status"]);
    assert!(
        outcome.stdout.contains(&format!("running (pid {pid})")),
        "{}",
        outcome.stdout
    );
    // While status looked, the daemon kept its lock: a start is a no-op.
    assert!(cb.run(&["daemon"]).stderr.contains("already runs"));
    assert_eq!(cb.daemons(), vec![pid]);
}

#[test]
fn an_unchanged_state_is_not_written_again() {
    // Scale 60: a heartbeat a second, each one a resync that changes nothing.
    let cb = Cowbell::with(Options::default(), 60.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&tab]);
    std::thread::sleep(SECOND);
    let state = cb.server_dir().join("state.json");
    let written = std::fs::metadata(&state).unwrap().modified().unwrap();
    let lists = tab_lists(&cb);
    std::thread::sleep(Duration::from_millis(3500));
    assert!(tab_lists(&cb) > lists, "no heartbeat resync happened");
    assert_eq!(
        std::fs::metadata(&state).unwrap().modified().unwrap(),
        written
    );
}

#[test]
fn reconnects_back_off_from_half_a_second_to_thirty() {
    // Scale 10: 0.5 s .. 30 s become 50 ms .. 3 s.
    let mut cb = Cowbell::with(Options::default(), 10.0);
    cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(Duration::from_millis(300));
    cb.herdr.stop();
    std::thread::sleep(Duration::from_millis(9500));
    let waits: Vec<u64> = cb
        .log()
        .lines()
        .filter_map(|line| line.split("retrying in ").nth(1))
        .filter_map(|rest| rest.strip_suffix(" ms"))
        .filter_map(|ms| ms.parse().ok())
        .collect();
    assert!(waits.len() >= 8, "{waits:?}\n{}", cb.log());
    assert_eq!(
        &waits[..8],
        [50, 100, 200, 400, 800, 1600, 3000, 3000],
        "{}",
        cb.log()
    );
}

/// At scale 60 (the idle exit 2 s after the server goes away): a daemon
/// whose server stops and, `away` later, is back with no startup hook run.
/// The daemon's pid, its tab and pane.
fn server_back_after(away: Duration) -> (Cowbell, u32, String, String) {
    let mut cb = Cowbell::with(Options::default(), 60.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&tab, "api", Duration::from_millis(300));
    cb.herdr.stop();
    std::thread::sleep(away);
    cb.herdr.start_again(true);
    (cb, pid, tab, pane)
}

/// "It exits after 120 s without a server": a server that came back is a
/// server, so the idle exit must not fire 120 s after an outage that ended.
#[test]
fn a_daemon_that_reconnected_does_not_exit_at_the_idle_time() {
    let (cb, pid, tab, pane) = server_back_after(Duration::from_millis(500));
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        cowbell::alive(pid),
        "exited although connected:\n{}",
        cb.log()
    );
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", SECOND);
}

/// "When the set of panes changes, the per-pane subscriptions are
/// rebuilt": also when one pane closes and another opens at once, so the
/// number of panes stays the same.
#[test]
fn a_pane_swapped_for_another_is_subscribed() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (a, _) = cb.tab(Some("a"));
    let (b, _) = cb.tab(Some("b"));
    let extra = cb.herdr.add_pane(&a);
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&b, "b", Duration::from_millis(500));
    // In one debounce window: a pane goes, another comes.
    cb.herdr.close_pane(&extra);
    let fresh = cb.herdr.add_pane(&b);
    std::thread::sleep(Duration::from_millis(500));
    // The first report also raises pane_agent_detected (a lifecycle event).
    cb.herdr.set_status(&fresh, "working");
    cb.expect_label(&b, "🟡 b", SECOND);
    std::thread::sleep(Duration::from_millis(300));
    // This change reaches cowbell only through the status subscription;
    // the heartbeat is 60 s away.
    cb.herdr.set_status(&fresh, "blocked");
    cb.expect_label(&b, "🔴 b", 2 * SECOND);
}

/// "A 60 s heartbeat ... also checks that the plugin is still enabled":
/// every 60 s, not every 90. The mean gap over several beats is robust to
/// one late wake-up on a busy machine.
#[test]
fn the_heartbeat_checks_the_plugin_every_sixty_seconds() {
    // Scale 60: every second.
    let cb = Cowbell::with(Options::default(), 60.0);
    cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(Duration::from_millis(5500));
    let times: Vec<Instant> = cb
        .herdr
        .requests_of("plugin.list")
        .iter()
        .map(|r| r.at)
        .collect();
    assert!(times.len() >= 4, "{} plugin checks in 5.5 s", times.len());
    let mean = (times[times.len() - 1] - times[0]) / (times.len() as u32 - 1);
    // Each gap is the period and the loop's wake-up latency: 54 to 69 s.
    assert!(
        mean >= Duration::from_millis(900) && mean <= Duration::from_millis(1150),
        "plugin checks {mean:?} apart on average, not 1 s (60 s scaled)"
    );
}

/// "Events are debounced for about 100 ms, then it resyncs."
#[test]
fn the_resync_follows_an_event_after_about_a_hundred_ms() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&tab, "api", Duration::from_millis(500));
    let mut delays = Vec::new();
    for status in ["blocked", "working", "blocked", "working", "blocked"] {
        cb.herdr.clear_requests();
        let changed = Instant::now();
        cb.herdr.set_status(&pane, status);
        let want = if status == "blocked" {
            "🔴 api"
        } else {
            "🟡 api"
        };
        cb.expect_label(&tab, want, SECOND);
        let list = cb.herdr.requests_of("tab.list")[0].at;
        delays.push(list - changed);
        std::thread::sleep(Duration::from_millis(300));
    }
    delays.sort();
    let median = delays[delays.len() / 2];
    assert!(
        median >= Duration::from_millis(80) && median <= Duration::from_millis(200),
        "event to tab.list: {delays:?}"
    );
}

/// A resync that finds every tab right is no news for the log. herdr sends
/// a status event when only a pane's title changes, so an agent animating
/// its title would otherwise put a line there every few hundred ms.
#[test]
fn resyncs_that_find_every_tab_right_leave_the_log_alone() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (t1, p1) = cb.tab(Some("api"));
    let (t2, _) = cb.tab(Some("web"));
    cb.herdr.set_status(&p1, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&t1, "🔴 api", 2 * SECOND);
    cb.expect_steady(&t1, "🔴 api", Duration::from_millis(300));
    let lines = cb.log().lines().count();
    let lists = cb.herdr.requests_of("tab.list").len();
    for tab in [&t2, &t1, &t2, &t1] {
        cb.herdr.focus_tab(tab);
        std::thread::sleep(Duration::from_millis(300));
    }
    let resyncs = cb.herdr.requests_of("tab.list").len() - lists;
    assert!(resyncs >= 3, "{resyncs} resyncs after 4 focus changes");
    let log = cb.log();
    assert_eq!(log.lines().count(), lines, "new lines in the log:\n{log}");
    // A resync that renames still says so.
    cb.herdr.set_status(&p1, "working");
    cb.expect_label(&t1, "🟡 api", 2 * SECOND);
    assert!(
        cb.log().contains("resync: 2 tabs, 1 to rename"),
        "{}",
        cb.log()
    );
}

/// herdr sends a pane's status event when only its title changed (an
/// agent animating it sends one every poll): that changes no icon, and is
/// no reason for a `tab.list`. A real change right after still shows.
#[test]
fn a_status_event_for_a_new_title_alone_brings_no_resync() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "working");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🟡 api", 2 * SECOND);
    let live = cb
        .herdr
        .wait_until(2 * SECOND, |_| cb.herdr.status_subscription_sizes() == [1]);
    assert!(live, "no status subscription; log:\n{}", cb.log());
    // The pane's first event since the subscription started is news.
    cb.herdr.set_title(&pane, "⠋ fixing the build");
    let lists = settled_tab_lists(&cb);
    for frame in ["⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"] {
        cb.herdr
            .set_title(&pane, &format!("{frame} fixing the build"));
        std::thread::sleep(Duration::from_millis(150));
    }
    let resyncs = cb.herdr.requests_of("tab.list").len() - lists;
    assert_eq!(resyncs, 0, "a resync for a title; log:\n{}", cb.log());
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", SECOND);
}

/// How many `tab.list` requests herdr has had, once 300 ms pass without
/// another (the resyncs under way are over); fails after 5 s of resyncs.
fn settled_tab_lists(cb: &Cowbell) -> usize {
    let mut lists = cb.herdr.requests_of("tab.list").len();
    for _ in 0..16 {
        std::thread::sleep(Duration::from_millis(300));
        let now = cb.herdr.requests_of("tab.list").len();
        if now == lists {
            return lists;
        }
        lists = now;
    }
    panic!("resyncs never stopped; log:\n{}", cb.log());
}

/// "These events trigger a resync: a tab is ... moved": with
/// include_auto_named, the icon follows a move at once, not at the next
/// heartbeat (unscaled, 60 s away).
#[test]
fn a_move_alone_brings_a_resync() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    cb.write_config(r#"{"include_auto_named": true}"#);
    let (t1, p1) = cb.tab(None);
    let (t2, _) = cb.tab(None);
    cb.herdr.set_status(&p1, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&t1, "🔴 1", 2 * SECOND);
    cb.expect_steady(&t2, "2", Duration::from_millis(300));
    cb.herdr.move_tab(&t1, 2);
    cb.expect_label(&t1, "🔴 2", SECOND);
}

/// cowbell never ran for this server (no state.json, no pidfile): "on"
/// only by default. A name the person gave with a leading emoji is theirs.
#[test]
fn off_on_a_server_cowbell_never_ran_on_leaves_names_alone() {
    let cb = Cowbell::new();
    let (tab, _) = cb.tab(Some("🔴 prod"));
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    assert_eq!(cb.herdr.label(&tab), "🔴 prod", "off said: {}", off.stdout);
}

/// A daemon in its reconnect backoff exits at once on `off` without giving
/// anything back ("leaving the names to off"); off then restores them
/// itself, and must not say the daemon did.
#[test]
fn off_does_not_credit_a_daemon_that_gave_nothing_back() {
    let mut cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&tab]);
    // herdr away until the backoff has grown to 4 s: `off` comes well
    // before the next try.
    cb.herdr.stop();
    let deadline = Instant::now() + 10 * SECOND;
    while !cb.log().contains("retrying in 4000 ms") {
        assert!(Instant::now() < deadline, "no backoff:\n{}", cb.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    cb.herdr.start_again(true);
    let off = cb.action("off");
    assert!(off.status.success(), "{}", off.stderr);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    assert_eq!(cb.herdr.label(&tab), "api");
    assert!(
        !off.stdout.contains("the daemon gave the names back"),
        "off said: {}\nlog:\n{}",
        off.stdout,
        cb.log()
    );
}

/// An event that comes while a resync's renames are still unanswered is
/// not dropped: another resync follows once they are, not the 60 s
/// heartbeat.
#[test]
fn a_change_during_a_resyncs_renames_brings_another_resync() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (a, pa) = cb.tab(Some("a"));
    let (b, pb) = cb.tab(Some("b"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&b, "b", Duration::from_millis(300));
    let renames = cb.herdr.requests_of("tab.rename").len();
    cb.herdr.set_response_delay(Duration::from_millis(500));
    cb.herdr.set_status(&pa, "blocked");
    assert!(
        cb.herdr.wait_until(2 * SECOND, |s| {
            s.requests
                .iter()
                .filter(|r| r.method == "tab.rename")
                .count()
                > renames
        }),
        "no rename of a"
    );
    // a's rename waits 500 ms for its answer: this change comes meanwhile.
    cb.herdr.set_status(&pb, "blocked");
    cb.herdr.set_response_delay(Duration::ZERO);
    cb.expect_label(&a, "🔴 a", 2 * SECOND);
    cb.expect_label(&b, "🔴 b", 2 * SECOND);
}

/// The old daemon waits for its rename's answer before it hands over: a
/// label herdr applies after it left, unconfirmed and so unsaved, would be
/// seen by the new daemon as someone else's rename, a fight. Here herdr
/// stays slow, so the new daemon's first list shows the late label.
#[test]
fn a_handover_waits_for_the_renames_in_flight() {
    let (cb, tab, old) = a_handover_asked_during_a_slow_rename();
    let tab = &tab;
    assert!(cowbell::wait_dead(old, 5 * SECOND));
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(tab, "🔴 api", 3 * SECOND);
    // The new daemon's first list has come and gone.
    std::thread::sleep(2 * SECOND);
    cb.herdr.set_response_delay(Duration::ZERO);
    cb.expect_steady(tab, "🔴 api", SECOND);
    let log = cb.log();
    assert!(!log.contains(": a fight ("), "a false fight:\n{log}");
    assert!(!log.contains("renamed by someone else"), "{log}");
}

/// A stop that comes while a resync's rename is on its way lists the tabs
/// for the restore only once that rename is answered: a rename herdr
/// applies after the restore's list would keep its icon.
#[test]
fn a_stop_during_a_slow_rename_still_restores_the_name() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.expect_steady(tab, "api", Duration::from_millis(300));
    let pid = cb.wait_for_daemon(SECOND);
    cb.herdr.set_response_delay(Duration::from_millis(800));
    let renames = cb.herdr.requests_of("tab.rename").len();
    cb.herdr.set_status(pane, "blocked");
    let asked = Instant::now();
    while cb.herdr.requests_of("tab.rename").len() == renames {
        assert!(asked.elapsed() < 5 * SECOND, "no rename");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The rename lands 800 ms from now; the restore's list is answered at once.
    cb.herdr.set_response_delay(Duration::ZERO);
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 5 * SECOND), "{}", cb.log());
    cb.expect_label(tab, "api", SECOND);
    cb.expect_steady(tab, "api", Duration::from_millis(1500));
    assert!(!cb.state_json().contains("\"base\""), "{}", cb.state_json());
}

/// A resync whose tab list is answered after a stop began renames
/// nothing: its icons would only race the restore (and flicker).
#[test]
fn a_stop_during_a_slow_resync_sends_no_icon() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "idle");
    cb.herdr.focus_tab(tab);
    cb.expect_steady(tab, "api", Duration::from_millis(300));
    let pid = cb.wait_for_daemon(SECOND);
    cb.herdr.set_response_delay(Duration::from_millis(300));
    let lists = tab_lists(&cb);
    cb.herdr.set_status(pane, "blocked");
    let asked = Instant::now();
    while tab_lists(&cb) == lists {
        assert!(asked.elapsed() < 5 * SECOND, "no tab.list");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The resync's tab.list is still unanswered when the stop comes.
    cowbell::signal(pid, libc::SIGTERM);
    assert!(cowbell::wait_dead(pid, 5 * SECOND), "{}", cb.log());
    cb.herdr.set_response_delay(Duration::ZERO);
    cb.expect_steady(tab, "api", SECOND);
    let icons: Vec<String> = cb
        .herdr
        .requests_of("tab.rename")
        .into_iter()
        .map(|r| r.params)
        .filter(|params| params.contains("🔴"))
        .collect();
    assert!(
        icons.is_empty(),
        "renamed during the stop: {icons:?}\n{}",
        cb.log()
    );
}

/// `sync` records the labels herdr applied, as the daemon does: the next
/// sync (or daemon) must not take its own icon for someone else's rename
/// within 30 s of it, a fight.
#[test]
fn a_sync_records_its_renames_so_the_next_one_sees_no_fight() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    for _ in 0..2 {
        let outcome = cb.run(&["sync"]);
        assert!(outcome.status.success(), "{}", outcome.stderr);
        assert_eq!(cb.herdr.label(&tab), "🔴 api");
    }
    let state = cb.state_json();
    assert!(state.contains("\"fights_total\":0"), "{state}");
    assert!(!state.contains("\"written\":null"), "{state}");
}

/// state.json is written only when it changed: a script's `sync` per event
/// with nothing new replaces no file (a sync and a rename each).
#[test]
fn a_sync_that_changes_nothing_leaves_state_json_alone() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    assert!(cb.run(&["sync"]).status.success());
    assert_eq!(cb.herdr.label(&tab), "🔴 api");
    let file = cb.server_dir().join("state.json");
    let inode = |file: &std::path::Path| std::fs::metadata(file).unwrap().ino();
    let before = inode(&file);
    let first = cb.state_json();
    let outcome = cb.run(&["sync"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert_eq!(inode(&file), before, "state.json was replaced");
    // Something new is written.
    cb.herdr.set_status(&pane, "idle");
    assert!(cb.run(&["sync"]).status.success());
    assert_eq!(cb.herdr.label(&tab), "api");
    let now = cb.state_json();
    assert!(now != first && now.contains("\"written\":\"api\""), "{now}");
}

/// While cowbell is off, `sync` puts no icon back and leaves it off.
#[test]
fn sync_while_off_changes_nothing() {
    let (cb, tabs) = running_with_tabs(&["api"]);
    let (tab, pane) = &tabs[0];
    cb.herdr.set_status(pane, "blocked");
    cb.expect_label(tab, "🔴 api", 2 * SECOND);
    assert!(cb.action("off").status.success());
    cb.expect_label(tab, "api", 2 * SECOND);
    let outcome = cb.run(&["sync"]);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("off for this server"),
        "{}",
        outcome.stderr
    );
    assert_eq!(cb.herdr.label(tab), "api");
    assert!(cb.watchdog().status.success());
    std::thread::sleep(Duration::from_millis(500));
    assert!(cb.daemons().is_empty(), "a hook started a daemon while off");
    assert_eq!(cb.herdr.label(tab), "api");
}

/// README: `status` "exits 3 when herdr does not answer".
#[test]
fn status_exits_3_when_herdr_does_not_answer() {
    let mut cb = Cowbell::new();
    cb.herdr.stop();
    for args in [&["status"][..], &["status", "--json"][..]] {
        let outcome = cb.run(args);
        assert_eq!(
            outcome.status.code(),
            Some(3),
            "{args:?}: {}",
            outcome.stdout
        );
        assert!(
            outcome.stdout.contains("unreachable")
                || outcome.stdout.contains("\"server_reachable\":false"),
            "{}",
            outcome.stdout
        );
    }
}

/// `status`'s exit code says whether herdr answered, whatever became of
/// its report (`cowbell status | head -1`, here a full device), as for
/// every other command.
#[test]
fn status_exit_code_does_not_depend_on_its_reader() {
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    for args in [&["status"][..], &["status", "--json"][..]] {
        let outcome = std::process::Command::new(cowbell::bin())
            .args(args)
            .envs(cb.env("action"))
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(
            outcome.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&outcome.stderr)
        );
    }
}

/// A cool-down that ended is not shown, even when state.json still
/// carries its end (a daemon killed during it).
#[test]
fn status_does_not_show_a_cooldown_that_ended() {
    let cb = Cowbell::new();
    let (tab, _) = cb.tab(Some("api"));
    assert!(cb.run(&["sync"]).status.success());
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ended = wall_ms - 10_000;
    let state = format!(
        r#"{{"version":1,"off":false,"tabs":{{"{tab}":{{"base":"api","written":null,"seen":"api","auto_named":false,"fights_ms":[],"last_own_rename_ms":null,"cooldown_until_ms":{ended},"last_cooldown_end_ms":null,"last_cooldown_ms":60000,"cooldown_level":1,"fights_total":3}}}}}}"#
    );
    std::fs::write(cb.server_dir().join("state.json"), state).unwrap();
    let json = cb.run(&["status", "--json"]).stdout;
    assert!(json.contains("\"cooldown_until\":null"), "{json}");
    assert!(json.contains("\"fights\":3"), "{json}");
    let text = cb.run(&["status"]).stdout;
    assert!(!text.contains("cooling down"), "{text}");
}

/// SIGINT (a Ctrl-C on `daemon --foreground`) restores names like SIGTERM.
#[test]
fn sigint_restores_every_name() {
    assert_names_restored(|cb| cowbell::signal(cb.daemon_pid().unwrap(), libc::SIGINT));
}

/// A stop while more renames are queued than may be in flight at once
/// (16): the queued ones are dropped, not sent after the stop, where they
/// would race the restore's list and leave icons behind.
#[test]
fn a_stop_with_renames_still_queued_sends_none_of_them() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let names: Vec<String> = (0..30).map(|i| format!("t{i}")).collect();
    let tabs: Vec<(String, String)> = names.iter().map(|n| cb.tab(Some(n))).collect();
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&tabs[0].0, "t0", Duration::from_millis(300));
    cb.herdr.set_response_delay(Duration::from_millis(500));
    let renames = cb.herdr.requests_of("tab.rename").len();
    for (_, pane) in &tabs {
        cb.herdr.set_status(pane, "blocked");
    }
    let asked = Instant::now();
    while cb.herdr.requests_of("tab.rename").len() == renames {
        assert!(asked.elapsed() < 5 * SECOND, "no rename");
        std::thread::sleep(Duration::from_millis(5));
    }
    cowbell::signal(pid, libc::SIGTERM);
    let stopped = Instant::now();
    assert!(cowbell::wait_dead(pid, 8 * SECOND), "{}", cb.log());
    cb.herdr.set_response_delay(Duration::ZERO);
    let late: Vec<String> = cb
        .herdr
        .requests_of("tab.rename")
        .into_iter()
        .filter(|r| r.at > stopped + Duration::from_millis(200) && r.params.contains("🔴"))
        .map(|r| r.params)
        .collect();
    assert!(
        late.is_empty(),
        "icons sent after the stop: {late:?}\n{}",
        cb.log()
    );
    for ((tab, _), name) in tabs.iter().zip(&names) {
        cb.expect_label(tab, name, SECOND);
    }
}

/// `off` with herdr away turns cowbell off and keeps the names for later:
/// it must say so, not only that herdr could not be reached; `status`
/// shows the names still to give back.
#[test]
fn off_with_herdr_away_says_where_the_names_are() {
    let mut cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&tab]);
    cb.herdr.stop();
    let off = cb.run(&["off"]);
    assert_eq!(off.status.code(), Some(3), "{}", off.stderr);
    assert!(
        off.stderr.contains(
            "; cowbell is off; 1 tab name not back yet, kept in state.json for `cowbell off`"
        ),
        "{}",
        off.stderr
    );
    let status = cb.run(&["status"]);
    assert!(
        status.stdout.contains("1 tab name not given back yet")
            && status
                .stdout
                .contains("; 0 of 0 tabs tracked, 1 tab name not given back"),
        "{}",
        status.stdout
    );
    let json = cb.run(&["status", "--json"]);
    assert!(
        json.stdout.contains("\"names_to_give_back\":1"),
        "{}",
        json.stdout
    );
}

/// The README says to run `cowbell sync` after editing the config: with a
/// daemon running, its problems must reach the person too, not only the log.
#[test]
fn sync_with_a_daemon_reports_the_config_problems() {
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.write_config(r#"{"preset":"asci"}"#);
    let sync = cb.run(&["sync"]);
    assert!(sync.status.success(), "{}", sync.stderr);
    assert!(sync.stderr.contains("\"asci\""), "{}", sync.stderr);
    assert_eq!(
        sync.stdout.trim(),
        "cowbell: the daemon reloads the configuration and resyncs"
    );
}

#[test]
fn status_keeps_control_characters_from_herdr_off_the_terminal() {
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    let line = "{\"id\":\"x\",\"result\":{\"type\":\"tab_list\",\"tabs\":[{\"tab_id\":\"w1:t1\\u001b]0;pwned\\u0007\\u001b[2J\",\"workspace_id\":\"w1\",\"number\":1,\"label\":\"api\",\"focused\":true,\"pane_count\":1,\"agent_status\":\"idle\\u001b[31m\"}]}}\n";
    cb.herdr.answer_raw("tab.list", 1, line.as_bytes());
    let status = cb.run(&["status"]);
    assert!(!status.stdout.contains('\u{1b}'), "{:?}", status.stdout);
    assert!(status.stdout.contains(" unknown "), "{:?}", status.stdout);
}

/// A rename herdr refuses for good is tried again, but less and less
/// often: not a resync and a log line every second for ever.
#[test]
fn a_rename_refused_for_good_is_tried_less_and_less_often() {
    let cb = Cowbell::new();
    let (_, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.herdr.fail_next_renames(1_000_000);
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(15 * SECOND);
    // Tries at 0, 1, 2, 3, 4, 6, 10 s; every second would be 16.
    let tries = cb.herdr.requests_of("tab.rename").len();
    assert!(
        (5..=9).contains(&tries),
        "{tries} tries in 15 s\n{}",
        cb.log()
    );
}

/// The same with the spinner on: a frame is no reason to send the refused
/// rename again (a log line and a save of state.json each time).
#[test]
fn a_rename_refused_for_good_backs_off_with_the_spinner_on_too() {
    let cb = Cowbell::new();
    cb.write_config(r#"{"spinner": true, "spinner_interval_ms": 250}"#);
    let (_, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "working");
    cb.herdr.fail_next_renames(1_000_000);
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(10 * SECOND);
    // Tries at 0, 1, 2, 3, 4, 6 s; a try per frame would be 40.
    let tries = cb.herdr.requests_of("tab.rename").len();
    assert!(
        (4..=8).contains(&tries),
        "{tries} tries in 10 s\n{}",
        cb.log()
    );
    let lines = cb.log().lines().count();
    assert!(lines <= 3 * 8, "{lines} log lines in 10 s\n{}", cb.log());
}

/// herdr refuses the next `times` renames of `tab` (as it would a label
/// it does not take).
fn refuse_renames_of(cb: &Cowbell, tab: &str, times: usize) {
    let refusal =
        b"{\"id\":\"x\",\"error\":{\"code\":\"invalid_label\",\"message\":\"refused\"}}\n";
    cb.herdr
        .answer_raw_if("tab.rename", Some(&format!("\"{tab}\"")), times, refusal);
}

/// How many renames of `tab` cowbell has sent.
fn renames_tried(cb: &Cowbell, tab: &str) -> usize {
    cb.herdr
        .requests_of("tab.rename")
        .iter()
        .filter(|r| r.params.contains(&format!("\"{tab}\"")))
        .count()
}

/// One tab whose renames herdr refuses holds up nobody else's spinner: the
/// other working tabs move on a frame every interval.
#[test]
fn one_refused_tab_does_not_stall_the_spinner_of_the_others() {
    let cb = Cowbell::new();
    cb.write_config(r#"{"spinner": true, "spinner_interval_ms": 250}"#);
    let (bad, bad_pane) = cb.tab(Some("bad"));
    let (good, good_pane) = cb.tab(Some("good"));
    cb.herdr.set_status(&bad_pane, "working");
    cb.herdr.set_status(&good_pane, "working");
    refuse_renames_of(&cb, &bad, 1_000_000);
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    std::thread::sleep(2 * SECOND);
    let before = cb.herdr.renames_of(&good);
    std::thread::sleep(5 * SECOND);
    let frames = cb.herdr.renames_of(&good) - before;
    // 20 frames in 5 s at 250 ms; a frame per retry of the refused tab
    // would be 3 or 4.
    assert!(
        frames >= 12,
        "{good} moved on {frames} frames in 5 s\n{}",
        cb.log()
    );
    // And the refused tab is tried less and less often, not every frame.
    let tries = renames_tried(&cb, &bad);
    assert!(tries <= 9, "{tries} tries of {bad} in 7 s\n{}", cb.log());
}

/// A tab whose rename failed waits for its retry; a reconnect starts afresh
/// (the retry deadline went with the old connection), so the tab must not
/// wait for the heartbeat.
#[test]
fn a_reconnect_while_a_tab_waits_for_its_retry_renames_it() {
    let cb = Cowbell::new();
    let (bad, bad_pane) = cb.tab(Some("bad"));
    // Seven refusals: retries after 1, 1, 1, 1, 2, 4 s; the seventh
    // failure sets a retry 8 s out.
    refuse_renames_of(&cb, &bad, 7);
    cb.herdr.set_status(&bad_pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    let deadline = Instant::now() + 20 * SECOND;
    while cb.herdr.canned_left() > 0 {
        assert!(Instant::now() < deadline, "{}", cb.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    // herdr is fine again; the event connection drops (a herdr hiccup).
    std::thread::sleep(Duration::from_millis(50));
    cb.herdr.drop_subscriptions();
    // The retry was due 8 s after the last refusal: give it 12.
    let waited = Instant::now();
    while cb.herdr.label(&bad) != "🔴 bad" {
        assert!(
            waited.elapsed() < 12 * SECOND,
            "{bad} still {:?} {:?} after the reconnect\n{}",
            cb.herdr.label(&bad),
            waited.elapsed(),
            cb.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number given back to an auto-named tab (include_auto_named
/// switched off) that herdr refuses waits for the retry too: not a try,
/// a log line and a save per spinner frame.
#[test]
fn a_refused_number_give_back_is_not_resent_every_spinner_frame() {
    let cb = Cowbell::new();
    cb.write_config(r#"{"include_auto_named": true, "spinner": true, "spinner_interval_ms": 250}"#);
    let (auto, auto_pane) = cb.tab(None);
    let (_, work_pane) = cb.tab(Some("work"));
    cb.herdr.set_status(&auto_pane, "blocked");
    cb.herdr.set_status(&work_pane, "working");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&auto, "🔴 1", 2 * SECOND);
    refuse_renames_of(&cb, &auto, 1_000_000);
    cb.write_config(
        r#"{"include_auto_named": false, "spinner": true, "spinner_interval_ms": 250}"#,
    );
    let lines_before = cb.log().lines().count();
    let before = renames_tried(&cb, &auto);
    assert!(cb.run(&["sync"]).status.success());
    std::thread::sleep(5 * SECOND);
    let tries = renames_tried(&cb, &auto) - before;
    let lines = cb.log().lines().count() - lines_before;
    // Backing off: tries at 0, 1, 2, 3, 4 s. A try per frame is 20.
    assert!(
        tries <= 7,
        "{tries} tries in 5 s, {lines} log lines\n{}",
        cb.log()
    );
}

/// A blocked tab "api" with its icon, beside a tab "bad" whose renames
/// herdr has refused seven times: the shared retry is now 8 s out.
fn api_beside_a_tab_refused_seven_times() -> (Cowbell, String, String) {
    let cb = Cowbell::new();
    let (bad, bad_pane) = cb.tab(Some("bad"));
    let (api, api_pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&api_pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&api, "🔴 api", 2 * SECOND);
    refuse_renames_of(&cb, &bad, 1_000_000);
    cb.herdr.set_status(&bad_pane, "blocked");
    wait_for_tries(&cb, &bad, 7, 20 * SECOND);
    (cb, api, api_pane)
}

/// Waits until cowbell has sent `tries` renames of `tab`.
fn wait_for_tries(cb: &Cowbell, tab: &str, tries: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while renames_tried(cb, tab) < tries {
        assert!(Instant::now() < deadline, "{}", cb.log());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A rename whose answer was lost (the connection closed first) but whose
/// echo shows herdr applied it holds the tab back no longer: its next
/// status shows at once, not after a retry that another tab's refusals
/// pushed out to 8 s.
#[test]
fn a_rename_confirmed_by_its_echo_does_not_hold_the_tab_back() {
    let (cb, api, api_pane) = api_beside_a_tab_refused_seven_times();
    // The seventh refusal set a retry 8 s out. api's rename to done is
    // applied, but its answer is lost.
    std::thread::sleep(Duration::from_millis(100));
    cb.herdr
        .answer_raw_if("tab.rename", Some(&format!("\"{api}\"")), 1, b"");
    let sent = renames_tried(&cb, &api);
    cb.herdr.set_status(&api_pane, "idle");
    wait_for_tries(&cb, &api, sent + 1, 3 * SECOND);
    std::thread::sleep(Duration::from_millis(50));
    cb.herdr.rename_tab(&api, "🔵 api");
    std::thread::sleep(Duration::from_millis(500));
    cb.herdr.set_status(&api_pane, "working");
    cb.expect_label(&api, "🟡 api", 2 * SECOND);
}

/// `a_rename_confirmed_by_its_echo_does_not_hold_the_tab_back` with the
/// echo first and the answer lost after it (a timeout): the rename landed,
/// so the tab must not wait for the retry either.
#[test]
fn an_echo_before_the_lost_answer_does_not_hold_the_tab_back() {
    let (cb, api, api_pane) = api_beside_a_tab_refused_seven_times();
    // The seventh refusal set a retry 8 s out. herdr stalls on api's
    // rename to done: it applies it (the echo comes) but never answers.
    std::thread::sleep(Duration::from_millis(100));
    cb.herdr.set_silent_method(Some("tab.rename"));
    let sent = renames_tried(&cb, &api);
    cb.herdr.set_status(&api_pane, "idle");
    wait_for_tries(&cb, &api, sent + 1, 3 * SECOND);
    cb.herdr.set_silent_method(None);
    std::thread::sleep(Duration::from_millis(50));
    cb.herdr.rename_tab(&api, "🔵 api");
    // The answer times out (2 s).
    let deadline = Instant::now() + 4 * SECOND;
    while !cb.log().contains("timed out") {
        assert!(Instant::now() < deadline, "{}", cb.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    cb.herdr.set_status(&api_pane, "working");
    cb.expect_label(&api, "🟡 api", 2 * SECOND);
}

/// README: "A tab cowbell sees for the first time is saved before its icon
/// goes on", also when it appears while another tab waits for a retry (a
/// resync that is quiet in the log). Killed right after the icon, the
/// daemon leaves nothing `off` does not know.
#[test]
fn a_new_tab_seen_while_another_waits_is_saved_before_its_icon() {
    let cb = Cowbell::new();
    let (bad, bad_pane) = cb.tab(Some("bad"));
    cb.herdr.set_status(&bad_pane, "blocked");
    refuse_renames_of(&cb, &bad, 1_000_000);
    cb.startup();
    let pid = cb.wait_for_daemon(2 * SECOND);
    // After the seventh refusal the next retry is 8 s away.
    wait_for_tries(&cb, &bad, 7, 20 * SECOND);
    std::thread::sleep(Duration::from_millis(100));
    let (fresh, fresh_pane) = cb.tab(Some("fresh"));
    std::thread::sleep(Duration::from_millis(600));
    cb.herdr.set_status(&fresh_pane, "blocked");
    let deadline = Instant::now() + 3 * SECOND;
    while cb.herdr.label(&fresh) != "🔴 fresh" {
        assert!(Instant::now() < deadline, "{}", cb.log());
    }
    cowbell::signal(pid, libc::SIGKILL);
    assert!(cowbell::wait_dead(pid, 2 * SECOND));
    cb.herdr.clear_canned();
    let _ = cb.run(&["off"]);
    assert_eq!(
        cb.herdr.label(&fresh),
        "fresh",
        "state.json: {}\nlog:\n{}",
        cb.state_json(),
        cb.log()
    );
}

/// herdr shows nothing a menu action prints: an action that fails (here
/// the state directory is a file) shows why as a herdr notification.
#[test]
fn a_failed_action_says_why_in_herdr() {
    let cb = Cowbell::new();
    cb.tab(Some("api"));
    let _ = std::fs::remove_dir_all(&cb.state_dir);
    std::fs::write(&cb.state_dir, b"not a directory").unwrap();
    let outcome = cb.action("off");
    assert_eq!(outcome.status.code(), Some(1), "{}", outcome.stderr);
    let notes = cb.herdr.notifications();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let body = notes[0].body.as_deref().unwrap_or("");
    assert!(
        body.starts_with("cowbell: ") && outcome.stderr.contains(body),
        "{notes:?}\n{}",
        outcome.stderr
    );
}

/// `remove-icons` with herdr away removes no icon: it must not say so.
#[test]
fn remove_icons_with_herdr_away_does_not_say_icons_removed() {
    let mut cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    cb.wait_state_saved(&[&tab]);
    cb.herdr.stop();
    let out = cb.run(&["remove-icons"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    assert!(!out.stderr.contains("icons removed, but"), "{}", out.stderr);
}

/// `remove-icons` with herdr away and nothing in state.json: cowbell is now
/// off, and it must say so, not only that herdr could not be reached.
#[test]
fn remove_icons_with_herdr_away_and_no_state_says_it_is_off() {
    let mut cb = Cowbell::new();
    cb.tab(Some("api"));
    cb.herdr.stop();
    let out = cb.run(&["remove-icons"]);
    let status = cb.run(&["status"]);
    assert!(
        status.stdout.starts_with("cowbell off"),
        "{}",
        status.stdout
    );
    assert!(
        out.stderr.contains("off") || out.stdout.contains("off"),
        "turned off without a word:\nstdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
}

/// A pane whose events never arrived (a reader that fell behind loses
/// them) shows in `tab.list`'s pane counts: the next resync lists the panes
/// and subscribes to it.
#[test]
fn a_pane_whose_events_were_lost_is_subscribed_after_the_next_resync() {
    let cb = Cowbell::with(Options::immediate(), 1.0);
    let (api, _) = cb.tab(Some("api"));
    let (web, web_pane) = cb.tab(Some("web"));
    cb.herdr.set_status(&web_pane, "idle");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_steady(&api, "api", Duration::from_millis(500));
    let quiet = cb.herdr.add_pane_unannounced(&api, "idle");
    cb.herdr.set_status(&web_pane, "working");
    cb.expect_label(&web, "🟡 web", SECOND);
    std::thread::sleep(Duration::from_millis(500));
    cb.herdr.set_status(&quiet, "blocked");
    cb.expect_label(&api, "🔴 api", 2 * SECOND);
}

/// remove-icons that removed some icons before one rename failed says
/// how many it did remove.
#[test]
fn remove_icons_that_removed_some_does_not_say_none() {
    let cb = Cowbell::new();
    let (api, _) = cb.tab(Some("api"));
    let (docs, _) = cb.tab(Some("docs"));
    cb.herdr.rename_tab(&api, "🔴 api");
    cb.herdr.rename_tab(&docs, "🔵 docs");
    // The first rename gets garbage for an answer; the second goes through.
    cb.herdr.answer_raw("tab.rename", 1, b"garbage\n");
    let out = cb.run(&["remove-icons"]);
    let labels = [cb.herdr.label(&api), cb.herdr.label(&docs)];
    let removed = labels
        .iter()
        .filter(|l| !l.starts_with('🔴') && !l.starts_with('🔵'))
        .count();
    assert_eq!(removed, 1, "{labels:?}");
    assert!(
        out.stderr
            .contains("; cowbell is off; 1 tab name restored; 1 tab name not back yet"),
        "{labels:?}\n{}",
        out.stderr
    );
}

/// The startup hook finishing a restore an `off` left (herdr was away):
/// one rename fails, one goes through, and it says so.
#[test]
fn a_partly_finished_restore_says_what_is_back_and_what_is_kept() {
    let mut cb = Cowbell::new();
    let (api, api_pane) = cb.tab(Some("api"));
    let (docs, docs_pane) = cb.tab(Some("docs"));
    cb.herdr.set_status(&api_pane, "blocked");
    cb.herdr.set_status(&docs_pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&api, "🔴 api", 2 * SECOND);
    cb.expect_label(&docs, "🔴 docs", 2 * SECOND);
    cb.wait_state_saved(&[&api, &docs]);
    cb.herdr.stop();
    let off = cb.run(&["off"]);
    assert_eq!(off.status.code(), Some(3), "{}", off.stderr);
    cb.herdr.start_again(true);
    cb.herdr.answer_raw("tab.rename", 1, b"garbage\n");
    let hook = cb.run(&["daemon", "--replace"]);
    assert_eq!(hook.status.code(), Some(3), "{}", hook.stderr);
    assert!(
        hook.stderr
            .contains("; cowbell is off; 1 tab name restored; 1 tab name not back yet"),
        "{}",
        hook.stderr
    );
}

/// A server back before the idle time is up, but after the daemon's last
/// reconnect attempt, is still a server: the daemon must not exit at the
/// idle time saying there was none.
#[test]
fn a_server_back_late_in_the_last_backoff_is_found_before_the_idle_exit() {
    // Back 1.75 s later (105 s at full scale). The backoff (8 ms doubling
    // up to 500 ms) tried at about 1.03 and 1.53 s; its next try, 2.03 s,
    // would come after the idle time.
    let (cb, pid, tab, pane) = server_back_after(Duration::from_millis(1750));
    assert!(
        !cowbell::wait_dead(pid, Duration::from_millis(1500)),
        "exited with a server there:\n{}",
        cb.log()
    );
    cb.herdr.set_status(&pane, "blocked");
    cb.expect_label(&tab, "🔴 api", SECOND);
}

/// While cowbell is off, a command giving names back (here a slow
/// `remove-icons`) holds the lock with no pid: watchdogs, one per agent
/// detected, have nothing to start and must not wait for it in herdr's
/// 32 command slots.
#[test]
fn watchdogs_beside_a_slow_command_while_off_finish_quickly() {
    let cb = Cowbell::new();
    let (tab, pane) = cb.tab(Some("api"));
    cb.herdr.set_status(&pane, "blocked");
    cb.startup();
    cb.wait_for_daemon(2 * SECOND);
    cb.expect_label(&tab, "🔴 api", 2 * SECOND);
    let off = cb.run(&["off"]);
    assert!(off.status.success(), "{}", off.stderr);
    assert!(cb.wait_for_no_daemon(2 * SECOND));
    cb.herdr.set_response_delay(Duration::from_millis(1900));
    let env = cb.env("action");
    let root = cb.plugin_root.clone();
    let slow =
        std::thread::spawn(move || hooks::run_hook(&root, &[cowbell::bin(), "remove-icons"], &env));
    std::thread::sleep(Duration::from_millis(300));
    let watchdogs: Vec<_> = (0..20)
        .map(|_| {
            let env = cb.env("pane.agent_detected");
            let root = cb.plugin_root.clone();
            std::thread::spawn(move || {
                let began = Instant::now();
                let out = hooks::run_hook(&root, &[cowbell::bin(), "watchdog"], &env);
                (began.elapsed(), out.status.success())
            })
        })
        .collect();
    let times: Vec<(Duration, bool)> = watchdogs.into_iter().map(|w| w.join().unwrap()).collect();
    let _ = slow.join().unwrap();
    cb.herdr.set_response_delay(Duration::ZERO);
    assert!(
        cb.daemons().is_empty(),
        "a daemon runs although cowbell is off"
    );
    assert!(times.iter().all(|(_, ok)| *ok), "{times:?}");
    let slowest = times.iter().map(|(t, _)| *t).max().unwrap();
    assert!(
        slowest < Duration::from_millis(1000),
        "watchdogs in flight up to {slowest:?}: {times:?}"
    );
}
