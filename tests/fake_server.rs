//! Tests of the test support itself: the fake herdr server behaves like the
//! recorded herdr 0.8.2 (shapes, one request per connection, labels,
//! roll-up, replay, polled delivery, restarts), and the hook runner catches
//! commands that leave their pipes open.

mod support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use support::fake_herdr::{FakeHerdr, Options};
use support::hooks::{HookError, PIPE_GRACE, herdr_env, run_hook, try_run_hook};
use support::tempdir::TempDir;
use support::{Next, SubReader, json_shape, request, transcript_lines};

const SEC: Duration = Duration::from_secs(1);

fn start(dir: &TempDir, options: Options) -> (FakeHerdr, std::path::PathBuf) {
    let sock = dir.join("herdr.sock");
    (FakeHerdr::start_with(&sock, options), sock)
}

fn req(sock: &Path, id: &str, method: &str, params: &str) -> String {
    request(
        sock,
        &format!(r#"{{"id":"{id}","method":"{method}","params":{params}}}"#),
    )
}

fn labels(fake: &FakeHerdr) -> Vec<(String, String)> {
    fake.tabs()
        .into_iter()
        .map(|t| (t.tab_id, t.label))
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Reads lines until `n` arrived; panics after `timeout`.
fn take(sub: &mut SubReader, n: usize, timeout: Duration) -> Vec<String> {
    (0..n).map(|_| sub.line(timeout)).collect()
}

#[test]
fn ping_matches_the_recording_exactly() {
    let dir = TempDir::new();
    let (_fake, sock) = start(&dir, Options::immediate());
    let recorded = transcript_lines("requests.jsonl");
    let got = req(&sock, "req_1", "ping", "{}");
    assert_eq!(got, recorded[0]);
}

#[test]
fn one_request_per_connection_second_is_reset() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(5 * SEC)).unwrap();
    s.write_all(
        b"{\"id\":\"a\",\"method\":\"ping\",\"params\":{}}\n{\"id\":\"b\",\"method\":\"tab.list\",\"params\":{}}\n",
    )
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    let end = loop {
        match s.read(&mut buf) {
            Ok(0) => break "eof".to_string(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break format!("{:?}", e.kind()),
        }
    };
    let got = String::from_utf8(got).unwrap();
    assert!(
        got.starts_with(r#"{"id":"a","result":{"type":"pong""#),
        "{got}"
    );
    assert_eq!(got.lines().count(), 1, "b must never be answered: {got}");
    assert!(end == "ConnectionReset" || end == "eof", "ended with {end}");
    assert_eq!(fake.requests().len(), 1, "only the first line is read");

    // A second request written after the answer fails too.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"{\"id\":\"a\",\"method\":\"ping\",\"params\":{}}\n")
        .unwrap();
    let mut line = String::new();
    let mut b = [0u8; 1];
    while s.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0] as char);
    }
    std::thread::sleep(Duration::from_millis(50));
    let second = s
        .write_all(b"{\"id\":\"b\",\"method\":\"ping\",\"params\":{}}\n")
        .and_then(|_| s.read(&mut buf));
    assert!(matches!(second, Ok(0) | Err(_)), "{second:?}");
}

#[test]
fn invalid_requests_come_back_with_an_empty_id() {
    let dir = TempDir::new();
    let (_fake, sock) = start(&dir, Options::immediate());
    let bogus = req(&sock, "x", "bogus.method", "{}");
    assert_eq!(
        bogus,
        r#"{"id":"","error":{"code":"invalid_request","message":"invalid request: unknown variant `bogus.method`, expected one of `ping`, ..."}}"#
    );
    for line in [
        r#"{"id":"x","method":"tab.list"}"#,
        r#"not json"#,
        r#"{"id":"x","method":"tab.rename","params":{"tab_id":"w1:t1"}}"#,
        r#"{"id":"x","method":"pane.report_agent","params":{"pane_id":"w1:p1","source":"s","agent":"a","state":"done"}}"#,
        r#"{"id":"x","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.nonsense"}]}}"#,
    ] {
        let got = request(&sock, line);
        assert!(
            got.starts_with(
                r#"{"id":"","error":{"code":"invalid_request","message":"invalid request: "#
            ),
            "{line} -> {got}"
        );
    }
}

#[test]
fn unnamed_labels_follow_moves_and_closes() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    let t2 = fake.add_tab(&ws, None);
    let t3 = fake.add_tab(&ws, Some("named"));
    let t4 = fake.add_tab(&ws, None);
    assert_eq!((t1.as_str(), t4.as_str()), ("w1:t1", "w1:t4"));
    fake.move_tab(&t4, 1);
    assert_eq!(
        labels(&fake),
        pairs(&[(&t4, "1"), (&t1, "2"), (&t2, "3"), (&t3, "named")])
    );
    fake.close_tab(&t1);
    assert_eq!(
        labels(&fake),
        pairs(&[(&t4, "1"), (&t2, "2"), (&t3, "named")])
    );
    // Ids are never reused.
    assert_eq!(fake.add_tab(&ws, None), "w1:t5");
    // Through the API: tab.move takes a 0-based insert index.
    let moved = req(
        &sock,
        "m",
        "tab.move",
        r#"{"tab_id":"w1:t5","insert_index":0}"#,
    );
    assert!(moved.contains(r#""number":1,"label":"1""#), "{moved}");
    let list = req(&sock, "l", "tab.list", r#"{"workspace_id":"w1"}"#);
    assert!(
        list.contains(r#""tab_id":"w1:t4","workspace_id":"w1","number":2,"label":"2""#),
        "{list}"
    );
}

#[test]
fn any_rename_makes_a_custom_name() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    let t2 = fake.add_tab(&ws, None);
    let got = req(
        &sock,
        "r",
        "tab.rename",
        r#"{"tab_id":"w1:t2","label":"2"}"#,
    );
    assert_eq!(
        got,
        r#"{"id":"r","result":{"type":"tab_info","tab":{"tab_id":"w1:t2","workspace_id":"w1","number":2,"label":"2","focused":false,"pane_count":1,"agent_status":"unknown"}}}"#
    );
    fake.move_tab(&t2, 1);
    assert_eq!(labels(&fake), pairs(&[(&t2, "2"), (&t1, "2")]));
    assert!(fake.tabs()[0].custom_named && !fake.tabs()[1].custom_named);
    fake.rename_tab(&t1, "");
    assert_eq!(fake.label(&t1), "");
    assert_eq!(fake.renames_of(&t2), 1);
    assert_eq!(fake.renames_of(&t1), 0, "control renames are not requests");
    let missing = req(
        &sock,
        "t",
        "tab.rename",
        r#"{"tab_id":"w1:t9","label":"x"}"#,
    );
    assert_eq!(
        missing,
        r#"{"id":"t","error":{"code":"tab_not_found","message":"tab w1:t9 not found"}}"#
    );
}

#[test]
fn rollup_done_seen_and_focus() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None); // focused: first tab
    let t2 = fake.add_tab(&ws, None);
    let p1 = fake.panes_of(&t1)[0].clone();
    let p2 = fake.panes_of(&t2)[0].clone();
    let p3 = fake.add_pane(&t1);
    let status = |t: &str| {
        fake.tabs()
            .into_iter()
            .find(|x| x.tab_id == t)
            .unwrap()
            .status
    };
    assert_eq!(fake.tabs()[0].pane_count, 2);
    assert_eq!(status(&t1), "unknown");
    fake.set_status(&p1, "working");
    assert_eq!(status(&t1), "working");
    fake.set_status(&p3, "idle"); // seen: its tab is focused
    assert_eq!(status(&t1), "working");
    fake.set_status(&p1, "idle");
    assert_eq!(status(&t1), "idle");
    fake.set_status(&p2, "idle"); // nobody looks at t2
    assert_eq!(status(&t2), "done");
    fake.set_status(&p3, "blocked");
    assert_eq!(status(&t1), "blocked");
    fake.focus_tab(&t2);
    assert_eq!(status(&t2), "idle");
    let tabs = fake.tabs();
    assert!(!tabs[0].focused && tabs[1].focused);
    // Through the API, done is refused and idle in an unfocused tab is done.
    let r = req(
        &sock,
        "ra",
        "pane.report_agent",
        &format!(r#"{{"pane_id":"{p1}","source":"custom:test","agent":"testbot","state":"idle"}}"#),
    );
    assert_eq!(r, r#"{"id":"ra","result":{"type":"ok"}}"#);
    fake.set_status(&p3, "unknown");
    assert_eq!(status(&t1), "done");
    let list = req(&sock, "l", "tab.list", "{}");
    assert!(list.contains(r#""agent_status":"done"}"#), "{list}");
    let panes = req(&sock, "p", "pane.list", "{}");
    assert!(
        panes.contains(r#""agent_status":"done","agent":"testbot""#),
        "{panes}"
    );
}

#[test]
fn lifecycle_subscriptions_replay_the_buffer() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    fake.rename_tab(&t1, "old");
    fake.rename_tab(&t1, "older");
    let mut sub = SubReader::open(
        &sock,
        r#"{"id":"s1","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.renamed"}]}}"#,
    );
    assert_eq!(
        sub.line(SEC),
        r#"{"id":"s1","result":{"type":"subscription_started"}}"#
    );
    let replayed = take(&mut sub, 2, SEC);
    assert!(replayed[0].contains(r#""label":"old""#), "{replayed:?}");
    assert!(replayed[1].contains(r#""label":"older""#), "{replayed:?}");
    // Then new events, including the subscriber's own renames (the echo).
    req(
        &sock,
        "r",
        "tab.rename",
        r#"{"tab_id":"w1:t1","label":"new"}"#,
    );
    assert_eq!(
        sub.line(SEC),
        r#"{"data":{"label":"new","tab_id":"w1:t1","type":"tab_renamed","workspace_id":"w1"},"event":"tab_renamed"}"#
    );
    assert_eq!(sub.next(Duration::from_millis(100)), Next::Timeout);

    // A server without replay starts at the present.
    let dir2 = TempDir::new();
    let (fake2, sock2) = start(
        &dir2,
        Options {
            replay: false,
            ..Options::immediate()
        },
    );
    let ws = fake2.add_workspace("alpha");
    let t1 = fake2.add_tab(&ws, None);
    fake2.rename_tab(&t1, "old");
    let mut sub = SubReader::open(
        &sock2,
        r#"{"id":"s1","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.renamed"},{"type":"tab.created"}]}}"#,
    );
    sub.line(SEC);
    assert_eq!(sub.next(Duration::from_millis(100)), Next::Timeout);
    let t2 = fake2.add_tab(&ws, None);
    fake2.rename_tab(&t2, "fresh");
    let lines = take(&mut sub, 2, SEC);
    assert!(lines.iter().any(|l| l.contains(r#""event":"tab_created""#)));
    assert!(lines.iter().any(|l| l.contains(r#""label":"fresh""#)));
}

#[test]
fn status_subscriptions_start_now_and_report_done() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    let t2 = fake.add_tab(&ws, None);
    let p1 = fake.panes_of(&t1)[0].clone();
    let p2 = fake.panes_of(&t2)[0].clone();
    fake.set_status(&p2, "working"); // before the subscription: not replayed
    let mut sub = SubReader::open(
        &sock,
        &format!(
            r#"{{"id":"s","method":"events.subscribe","params":{{"subscriptions":[{{"type":"pane.agent_status_changed","pane_id":"{p1}"}},{{"type":"pane.agent_status_changed","pane_id":"{p2}"}}]}}}}"#
        ),
    );
    sub.line(SEC);
    assert_eq!(sub.next(Duration::from_millis(100)), Next::Timeout);
    fake.set_status(&p2, "idle");
    fake.focus_tab(&t2);
    fake.set_status(&p1, "blocked");
    let lines = take(&mut sub, 3, SEC);
    let for_p2: Vec<&String> = lines.iter().filter(|l| l.contains(&p2)).collect();
    assert_eq!(
        for_p2,
        [
            r#"{"data":{"agent":"testbot","agent_status":"done","pane_id":"w1:p2","workspace_id":"w1"},"event":"pane.agent_status_changed"}"#,
            r#"{"data":{"agent":"testbot","agent_status":"idle","pane_id":"w1:p2","workspace_id":"w1"},"event":"pane.agent_status_changed"}"#,
        ]
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(r#""agent_status":"blocked","pane_id":"w1:p1""#))
    );
}

#[test]
fn status_subscription_for_a_missing_pane_probes_and_closes() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    fake.add_tab(&ws, None);
    let mut sub = SubReader::open(
        &sock,
        r#"{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.renamed"},{"type":"pane.agent_status_changed","pane_id":"w1:p99"}]}}"#,
    );
    let lines = sub.until_eof(2 * SEC);
    assert_eq!(
        lines,
        [
            r#"{"id":"s:sub:1:probe","error":{"code":"pane_not_found","message":"pane w1:p99 not found"}}"#
        ]
    );
    assert_eq!(fake.subscriber_count(), 0);
}

#[test]
fn writing_on_a_subscription_disconnects() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let mut sub = SubReader::open(
        &sock,
        r#"{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.renamed"}]}}"#,
    );
    sub.line(SEC);
    assert_eq!(fake.subscriber_count(), 1);
    let mut raw = sub.stream();
    raw.write_all(b"{}\n").unwrap();
    assert!(sub.until_eof(2 * SEC).is_empty());
    assert!(fake.wait_for_subscribers(0, SEC));
}

#[test]
fn delivery_is_polled_one_event_per_entry_per_100ms() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::default());
    let ws = fake.add_workspace("alpha");
    let tabs: Vec<String> = (0..10).map(|_| fake.add_tab(&ws, None)).collect();
    let mut sub = SubReader::open(
        &sock,
        r#"{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.renamed"}]}}"#,
    );
    sub.line(SEC);
    let t0 = Instant::now();
    for (i, t) in tabs.iter().enumerate() {
        fake.rename_tab(t, &format!("n{i}"));
    }
    assert!(t0.elapsed() < Duration::from_millis(50));
    let mut arrivals = Vec::new();
    for i in 0..10 {
        let line = sub.line(3 * SEC);
        assert!(line.contains(&format!(r#""label":"n{i}""#)), "{line}");
        arrivals.push(t0.elapsed());
    }
    let span = arrivals[9] - arrivals[0];
    assert!(
        span >= Duration::from_millis(600) && span < Duration::from_millis(2500),
        "arrivals {arrivals:?}"
    );
}

#[test]
fn stop_gives_eof_and_start_again_keeps_names_but_not_states() {
    let dir = TempDir::new();
    let (mut fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    let t2 = fake.add_tab(&ws, None);
    fake.rename_tab(&t1, "build");
    fake.set_status(&fake.panes_of(&t2)[0], "blocked");
    let mut sub = SubReader::open(
        &sock,
        r#"{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.closed"}]}}"#,
    );
    sub.line(SEC);
    // A silent request in flight must not keep stop() waiting.
    fake.set_silent(true);
    let hung = UnixStream::connect(&sock).unwrap();
    (&hung)
        .write_all(b"{\"id\":\"h\",\"method\":\"ping\",\"params\":{}}\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    fake.stop();
    assert!(t0.elapsed() < SEC, "stop took {:?}", t0.elapsed());
    assert!(sub.until_eof(SEC).is_empty());
    assert!(!sock.exists());
    assert!(UnixStream::connect(&sock).is_err());

    fake.set_silent(false);
    fake.start_again(true);
    assert_eq!(labels(&fake), pairs(&[(&t1, "build"), (&t2, "2")]));
    assert!(fake.tabs()[0].custom_named);
    assert!(
        fake.panes()
            .iter()
            .all(|p| p.status == "unknown" && p.agent.is_none())
    );
    assert!(fake.events().is_empty(), "a new run has an empty buffer");
    let list = req(&sock, "l", "tab.list", "{}");
    assert!(list.contains(r#""label":"build""#), "{list}");

    fake.start_again(false);
    assert!(fake.tabs().is_empty());
    assert_eq!(fake.add_workspace("fresh"), "w1");
}

#[test]
fn fault_controls() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    fake.fail_next_renames(1);
    let r = req(
        &sock,
        "r",
        "tab.rename",
        &format!(r#"{{"tab_id":"{t1}","label":"x"}}"#),
    );
    assert!(r.contains("tab_not_found"), "{r}");
    let r = req(
        &sock,
        "r",
        "tab.rename",
        &format!(r#"{{"tab_id":"{t1}","label":"x"}}"#),
    );
    assert!(r.contains(r#""label":"x""#), "{r}");
    assert_eq!(fake.renames_of(&t1), 2);

    fake.set_response_delay(Duration::from_millis(150));
    let t0 = Instant::now();
    req(&sock, "p", "ping", "{}");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    fake.set_response_delay(Duration::ZERO);

    let sub_line = r#"{"id":"s","method":"events.subscribe","params":{"subscriptions":[{"type":"tab.focused"}]}}"#;
    let mut sub = SubReader::open(&sock, sub_line);
    sub.line(SEC);
    take(&mut sub, 1, SEC); // the replayed tab_focused of t1
    fake.push_raw(b"garbage\n");
    assert_eq!(sub.line(SEC), "garbage");
    fake.drop_subscriptions();
    assert!(sub.until_eof(SEC).is_empty());

    let n = fake.requests().len();
    fake.set_silent(true);
    let mut s = UnixStream::connect(&sock).unwrap();
    s.write_all(b"{\"id\":\"p\",\"method\":\"ping\",\"params\":{}}\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(s.read(&mut buf).is_err(), "a silent server answers nothing");
    assert_eq!(fake.requests().len(), n + 1);
    assert_eq!(fake.requests()[n].method, "ping");
    assert_eq!(fake.requests()[n].params, "{}");
}

#[test]
fn plugins_and_notifications() {
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let all = req(&sock, "pl", "plugin.list", "{}");
    assert!(
        all.contains(r#"{"plugin_id":"cowbell","name":"cowbell""#)
            && all.contains(r#""enabled":true"#),
        "{all}"
    );
    fake.set_plugin("cowbell", false);
    let one = req(&sock, "pl", "plugin.list", r#"{"plugin_id":"cowbell"}"#);
    assert!(one.contains(r#""enabled":false"#), "{one}");
    fake.uninstall_plugin("cowbell");
    let none = req(&sock, "pl", "plugin.list", r#"{"plugin_id":"cowbell"}"#);
    assert_eq!(
        none,
        r#"{"id":"pl","result":{"type":"plugin_list","plugins":[]}}"#
    );

    let n = req(
        &sock,
        "n",
        "notification.show",
        r#"{"title":"done","body":"w1:t2"}"#,
    );
    assert_eq!(
        n,
        r#"{"id":"n","result":{"type":"notification_show","shown":true,"reason":"shown"}}"#
    );
    assert_eq!(fake.notifications()[0].title, "done");
    assert_eq!(fake.notifications()[0].body.as_deref(), Some("w1:t2"));
}

// ---------------------------------------------------------------------------
// Shapes against the transcripts of a real herdr 0.8.2
// ---------------------------------------------------------------------------

fn event_name(line: &str) -> String {
    support::raw_field(line, "event")
        .unwrap_or_default()
        .trim_matches('"')
        .to_string()
}

#[test]
fn event_lines_have_the_recorded_shapes() {
    let recorded: Vec<String> = [
        "events-lifecycle-and-status.jsonl",
        "events-after-restart.jsonl",
    ]
    .iter()
    .flat_map(|f| transcript_lines(f))
    .collect();
    assert!(recorded.len() > 20, "transcripts look truncated");

    // Replay the recorded session on the fake.
    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    let t1 = fake.add_tab(&ws, None);
    let t2 = fake.add_tab(&ws, Some("second"));
    let subscribe = r#"{"id":"sub_1","method":"events.subscribe","params":{"subscriptions":[{"type":"workspace.created"},{"type":"workspace.renamed"},{"type":"workspace.closed"},{"type":"workspace.focused"},{"type":"tab.created"},{"type":"tab.renamed"},{"type":"tab.focused"},{"type":"tab.closed"},{"type":"pane.agent_detected"},{"type":"pane.agent_status_changed","pane_id":"w1:p1"},{"type":"pane.agent_status_changed","pane_id":"w1:p2"}]}}"#;
    let mut sub = SubReader::open(&sock, subscribe);
    let ack = sub.line(SEC);
    assert_eq!(ack, recorded[0]);
    req(
        &sock,
        "r1",
        "tab.rename",
        r#"{"tab_id":"w1:t1","label":"build"}"#,
    );
    fake.focus_tab(&t2);
    req(
        &sock,
        "r2",
        "tab.rename",
        r#"{"tab_id":"w1:t2","label":"review"}"#,
    );
    fake.focus_tab(&t1);
    for st in ["working", "blocked", "idle"] {
        fake.set_status("w1:p1", st);
    }
    fake.set_agent_status("w1:p2", "otherbot", "working");
    fake.set_agent_status("w1:p2", "otherbot", "idle");
    fake.focus_tab(&t2);
    let t3 = fake.add_tab(&ws, Some("temp"));
    fake.close_tab(&t3);
    let mut got = Vec::new();
    while let Next::Line(l) = sub.next(Duration::from_millis(150)) {
        got.push(l);
    }

    // The exactly reproducible lines.
    for exact in [
        r#"{"data":{"label":"build","tab_id":"w1:t1","type":"tab_renamed","workspace_id":"w1"},"event":"tab_renamed"}"#,
        r#"{"data":{"agent":"otherbot","agent_status":"done","pane_id":"w1:p2","workspace_id":"w1"},"event":"pane.agent_status_changed"}"#,
        r#"{"data":{"agent":"testbot","pane_id":"w1:p1","type":"pane_agent_detected","workspace_id":"w1"},"event":"pane_agent_detected"}"#,
        r#"{"data":{"tab_id":"w1:t3","type":"tab_closed","workspace_id":"w1"},"event":"tab_closed"}"#,
        r#"{"data":{"tab":{"agent_status":"unknown","focused":false,"label":"second","number":2,"pane_count":1,"tab_id":"w1:t2","workspace_id":"w1"},"type":"tab_created"},"event":"tab_created"}"#,
    ] {
        assert!(recorded.iter().any(|l| l == exact), "not recorded: {exact}");
        assert!(
            got.iter().any(|l| l == exact),
            "fake did not send {exact}\ngot {got:#?}"
        );
    }
    // Every recorded kind the fake produces has the same keys in the same
    // order.
    let mut checked = Vec::new();
    for rec in &recorded[1..] {
        let kind = event_name(rec);
        let Some(ours) = got.iter().find(|l| event_name(l) == kind) else {
            continue;
        };
        assert_eq!(json_shape(ours), json_shape(rec), "shape of {kind}");
        checked.push(kind);
    }
    for kind in [
        "workspace_created",
        "workspace_focused",
        "tab_created",
        "tab_focused",
        "tab_renamed",
        "tab_closed",
        "pane_agent_detected",
        "pane.agent_status_changed",
    ] {
        assert!(checked.iter().any(|k| k == kind), "{kind} not compared");
    }
}

#[test]
fn responses_have_the_recorded_shapes() {
    let text = support::read_transcript("requests.jsonl");
    // Pair each `>` request line with the `<` line that follows it.
    let mut pairs = Vec::new();
    let mut pending: Option<&str> = None;
    for line in text.lines() {
        if let Some(rq) = line.strip_prefix("> ").filter(|l| l.starts_with('{')) {
            pending = Some(rq);
        } else if let (Some(rs), Some(rq)) = (line.strip_prefix("< "), pending.take()) {
            pairs.push((rq.to_string(), rs.to_string()));
        }
    }
    assert!(
        pairs.len() >= 12,
        "requests.jsonl looks truncated: {pairs:?}"
    );

    let dir = TempDir::new();
    let (fake, sock) = start(&dir, Options::immediate());
    let ws = fake.add_workspace("alpha");
    fake.add_tab(&ws, None);
    fake.add_tab(&ws, Some("second"));
    fake.add_tab(&ws, Some("temp"));
    fake.set_plugin("demo.envdump", true);
    // These match byte for byte; the rest (ids from herdr, other tab
    // states) by shape.
    let exact = ["req_1", "r1", "r2", "tx", "ra1", "t", "x", "s", "pd", "ul"];
    for (rq, rs) in &pairs {
        let id = support::raw_field(rq, "id").unwrap().trim_matches('"');
        let method = support::raw_field(rq, "method").unwrap();
        if method == r#""pane.list""# {
            continue; // below, on a pane without an agent as recorded
        }
        let got = request(&sock, rq);
        if exact.contains(&id) {
            assert_eq!(&got, rs, "answer to {rq}");
        } else {
            assert_eq!(
                json_shape(&got),
                json_shape(rs),
                "answer to {rq}\ngot {got}"
            );
        }
    }
    let dir2 = TempDir::new();
    let (fake2, sock2) = start(&dir2, Options::immediate());
    let ws = fake2.add_workspace("alpha");
    fake2.add_tab(&ws, None);
    let (rq, rs) = pairs.iter().find(|(q, _)| q.contains("pane.list")).unwrap();
    let got = request(&sock2, rq);
    assert_eq!(json_shape(&got), json_shape(rs), "pane.list: {got}");
}

// ---------------------------------------------------------------------------
// Hook runner
// ---------------------------------------------------------------------------

#[test]
fn hook_runner_gives_herdrs_environment() {
    let dir = TempDir::new();
    let root = dir.subdir("plugin");
    let env = herdr_env(
        &dir.join("herdr.sock"),
        &dir.subdir("state"),
        &dir.subdir("config"),
        &root,
        "startup",
    );
    let out = run_hook(
        &root,
        &["sh", "-c", "pwd; env; echo oops >&2; exit 3"],
        &env,
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stderr, "oops\n");
    let mut lines = out.stdout.lines();
    assert_eq!(
        Path::new(lines.next().unwrap()),
        root.canonicalize().unwrap()
    );
    let vars: Vec<&str> = lines.map(|l| l.split('=').next().unwrap()).collect();
    for v in [
        "HERDR_SOCKET_PATH",
        "HERDR_BIN_PATH",
        "HERDR_ENV",
        "HERDR_PLUGIN_ID",
        "HERDR_PLUGIN_ROOT",
        "HERDR_PLUGIN_CONFIG_DIR",
        "HERDR_PLUGIN_STATE_DIR",
        "HERDR_PLUGIN_CONTEXT_JSON",
        "HERDR_PLUGIN_EVENT",
    ] {
        assert!(vars.contains(&v), "{v} missing from {vars:?}");
    }
    // Nothing of the test's own environment leaks in (sh adds a few).
    assert!(!vars.contains(&"CARGO_MANIFEST_DIR"), "{vars:?}");
    assert!(out.stdout.contains("HERDR_PLUGIN_ID=cowbell\n"));
    assert!(out.pipe_close_after_exit < SEC);
}

#[test]
fn hook_runner_catches_a_daemon_holding_the_pipes() {
    let dir = TempDir::new();
    let t0 = Instant::now();
    // The background sleep outlasts the grace the runner gives the pipes.
    let err = try_run_hook(dir.path(), &["sh", "-c", "echo started; sleep 10 &"], &[])
        .expect_err("pipes held open by the background sleep");
    assert!(
        t0.elapsed() < PIPE_GRACE + Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    let HookError::PipesHeldOpen { status, stdout, .. } = &err else {
        panic!("wrong error: {err}");
    };
    assert!(status.success());
    assert_eq!(stdout, "started\n");
    assert!(err.to_string().contains("still open"), "{err}");

    // run_hook turns it into a test failure; a daemon that detaches
    // properly passes.
    let panicked = std::panic::catch_unwind(|| {
        run_hook(dir.path(), &["sh", "-c", "sleep 10 &"], &[]);
    });
    assert!(panicked.is_err());
    let ok = run_hook(
        dir.path(),
        &["sh", "-c", "sleep 10 </dev/null >/dev/null 2>&1 &"],
        &[],
    );
    assert!(ok.status.success());
}
