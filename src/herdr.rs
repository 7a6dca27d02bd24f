//! The herdr client: what goes over herdr's socket, and a one-shot caller.
//!
//! herdr speaks newline-delimited JSON, one request per connection (see
//! PROTOCOL.md). This module builds request lines, frames incoming bytes
//! into capped lines, and parses the few shapes cowbell reads. herdr is
//! another program: names of methods, events and statuses stay strings,
//! unknown fields are ignored, and a line that does not parse is reported
//! with its first bytes, never unwrapped. The daemon's loop does its own
//! non-blocking I/O with these pieces; the short commands use `call`.

use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use miniserde::{Deserialize, json};

use crate::labels::Status;
use crate::resync::Tab;

/// Longest line accepted from herdr. A `tab.list` of 1000 tabs is ~200 KiB;
/// anything past this is a broken or hostile peer, and the connection goes.
pub const MAX_LINE: usize = 4 << 20;

/// Every request gets this long before it counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Before it acknowledges a status subscription, herdr probes every pane
/// listed in it, one round trip to its main loop after the other: the ack
/// of 3000 panes can take seconds on a busy server. Each pane adds this to
/// the wait, so a large subscription is not given up as lost and asked
/// for again, and again, at the same cost.
pub const ACK_TIME_PER_PANE: Duration = Duration::from_millis(2);

/// How long a status subscription of `panes` panes may take to be
/// acknowledged, after `misses` that were not: twice as long for each, as
/// a server slower than the guess per pane would otherwise never be waited
/// for. At most a minute.
pub fn status_ack_timeout(panes: usize, misses: u32) -> Duration {
    let panes = u32::try_from(panes).unwrap_or(u32::MAX);
    let once = REQUEST_TIMEOUT + ACK_TIME_PER_PANE.saturating_mul(panes);
    once.saturating_mul(1 << misses.min(5))
        .min(Duration::from_secs(60))
}

/// The lifecycle events that can change what a tab should show, by their
/// subscription type. On the wire herdr names them with `_` for the `.`
/// (`tab.renamed` arrives as `tab_renamed`).
pub const LIFECYCLE_EVENTS: &[&str] = &[
    "tab.created",
    "tab.closed",
    "tab.moved",
    "tab.renamed",
    "tab.focused",
    "pane.created",
    "pane.closed",
    "pane.moved",
    "pane.exited",
    "pane.focused",
    "pane.agent_detected",
    "workspace.focused",
    "workspace.closed",
];

/// The per-pane status event, which keeps its dotted name on the wire.
pub const STATUS_EVENT: &str = "pane.agent_status_changed";

/// Whether an event (by its wire name) is one cowbell resyncs after;
/// anything else herdr sends is ignored.
pub fn triggers_resync(name: &str) -> bool {
    name == STATUS_EVENT || LIFECYCLE_EVENTS.iter().any(|kind| is_wire_name(kind, name))
}

fn is_wire_name(kind: &str, name: &str) -> bool {
    kind.len() == name.len()
        && kind
            .bytes()
            .zip(name.bytes())
            .all(|(k, n)| n == if k == b'.' { b'_' } else { k })
}

/// Lifecycle events (as named on the wire) after which the set of panes,
/// and so the status subscription, may be different.
pub const PANE_SET_EVENTS: &[&str] = &[
    "pane_created",
    "pane_closed",
    "pane_moved",
    "pane_exited",
    "pane_agent_detected",
    "tab_created",
    "tab_closed",
    "workspace_closed",
];

/// A whole request line, newline included, built around `params` in
/// place: a status subscription's params are about 180 KB at 3000 panes,
/// and a second string would hold them twice.
pub fn request_line(id: &str, method: &str, mut params: String) -> String {
    let head = format!(
        "{{\"id\":{},\"method\":{},\"params\":",
        json::to_string(id),
        json::to_string(method)
    );
    params.insert_str(0, &head);
    params.push_str("}\n");
    params
}

pub fn rename_params(tab_id: &str, label: &str) -> String {
    format!(
        "{{\"tab_id\":{},\"label\":{}}}",
        json::to_string(tab_id),
        json::to_string(label)
    )
}

pub fn notification_params(title: &str, body: &str) -> String {
    format!(
        "{{\"title\":{},\"body\":{}}}",
        json::to_string(title),
        json::to_string(body)
    )
}

/// `events.subscribe` params for the lifecycle subscription.
pub fn lifecycle_subscription() -> String {
    let mut params = String::from("{\"subscriptions\":[");
    for (index, kind) in LIFECYCLE_EVENTS.iter().enumerate() {
        if index > 0 {
            params.push(',');
        }
        params.push_str("{\"type\":\"");
        params.push_str(kind);
        params.push_str("\"}");
    }
    params.push_str("]}");
    params
}

/// `events.subscribe` params for the per-pane status subscription.
pub fn status_subscription(pane_ids: &[&str]) -> String {
    // Built in one string: for 3000 panes it is about 180 KB, and pieces
    // joined afterwards would hold it in memory twice. The spare 100 bytes
    // take the request line around it (`request_line`).
    const ENTRY: &str = "{\"type\":\"pane.agent_status_changed\",\"pane_id\":";
    let mut params = String::with_capacity(100 + pane_ids.len() * (ENTRY.len() + 16));
    params.push_str("{\"subscriptions\":[");
    for (index, pane) in pane_ids.iter().enumerate() {
        if index > 0 {
            params.push(',');
        }
        params.push_str(ENTRY);
        params.push_str(&json::to_string(pane));
        params.push('}');
    }
    params.push_str("]}");
    params
}

/// A tab as `tab.list` describes it, with the fields cowbell reads
/// (miniserde skips the others without allocating them).
#[derive(Deserialize, Clone, Debug, PartialEq)]
pub struct TabInfo {
    pub tab_id: String,
    pub number: u64,
    pub label: String,
    pub agent_status: Option<String>,
    pub pane_count: Option<u64>,
}

impl TabInfo {
    /// herdr's status for the tab; one herdr may add later is unknown.
    pub fn status(&self) -> Status {
        self.agent_status
            .as_deref()
            .and_then(Status::from_name)
            .unwrap_or(Status::Unknown)
    }

    /// The tab in the core's terms. Moves the names rather than copying a
    /// thousand of them.
    pub fn into_tab(self) -> Tab {
        let status = self.status();
        Tab {
            tab_id: self.tab_id,
            number: self.number,
            label: self.label,
            status,
        }
    }
}

#[derive(Deserialize, Clone, Debug, PartialEq)]
pub struct PaneInfo {
    pub pane_id: String,
}

#[derive(Deserialize, Clone, Debug, PartialEq)]
pub struct PluginInfo {
    pub plugin_id: String,
    pub enabled: Option<bool>,
    pub manifest_path: Option<String>,
}

#[derive(Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// `code: message`, with herdr's words cut and rid of control characters
/// like any other text from the socket: an escape sequence in an error
/// message must not reach the log or the terminal.
impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = excerpt(self.code.as_bytes());
        let message = excerpt(self.message.as_bytes());
        write!(f, "{code}: {message}")
    }
}

#[derive(Deserialize, Default)]
struct ResultBody {
    #[serde(rename = "type")]
    kind: Option<String>,
    tabs: Option<Vec<TabInfo>>,
    panes: Option<Vec<PaneInfo>>,
    plugins: Option<Vec<PluginInfo>>,
    /// Only looked at to be there: a rename's answer without the tab is
    /// garbled, and the rename is tried again.
    tab: Option<TabInfo>,
}

#[derive(Deserialize, Default)]
struct EventData {
    tab_id: Option<String>,
    label: Option<String>,
    pane_id: Option<String>,
    agent_status: Option<String>,
}

/// Any line herdr sends: a response or an event. Only the fields cowbell
/// reads are declared; miniserde skips the rest.
#[derive(Deserialize)]
struct Line {
    result: Option<ResultBody>,
    error: Option<ErrorBody>,
    event: Option<String>,
    data: Option<EventData>,
}

/// What one line from herdr means to cowbell.
#[derive(Debug, PartialEq)]
pub enum Message {
    Error(ErrorBody),
    SubscriptionStarted,
    Tabs(Vec<TabInfo>),
    Panes(Vec<PaneInfo>),
    Plugins(Vec<PluginInfo>),
    /// Any other successful answer: `tab_info` for a rename, `ok`, `pong`,
    /// `notification_show`... cowbell needs only to know it succeeded.
    Ok,
    Event {
        name: String,
        tab_id: Option<String>,
        label: Option<String>,
        /// A status event's pane and the status it reports.
        pane_id: Option<String>,
        agent_status: Option<String>,
    },
}

impl Message {
    /// A short name for messages about an answer nobody expected.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Error(_) => "error",
            Message::SubscriptionStarted => "subscription_started",
            Message::Tabs(_) => "tab_list",
            Message::Panes(_) => "pane_list",
            Message::Plugins(_) => "plugin_list",
            Message::Ok => "ok",
            Message::Event { .. } => "event",
        }
    }
}

/// Why a line could not be understood; the text is what goes in the log.
#[derive(Debug, PartialEq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The first 200 bytes of a line, for messages, cut at a char boundary
/// (a character cut in two would show as U+FFFD).
pub fn excerpt(bytes: &[u8]) -> String {
    let mut end = bytes.len().min(200);
    // A character is at most 4 bytes: stepping back further would only
    // eat a run of invalid bytes, which then shows as nothing at all.
    let floor = end.saturating_sub(3);
    while end < bytes.len() && end > floor && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    let text = String::from_utf8_lossy(&bytes[..end]);
    let mut text = text.into_owned();
    crate::text::remove_controls(&mut text);
    text
}

pub fn parse_line(bytes: &[u8]) -> Result<Message, Malformed> {
    let malformed = || Malformed(format!("malformed line from herdr: {}", excerpt(bytes)));
    if !crate::json_check::nesting_is_shallow(bytes) {
        return Err(malformed());
    }
    let text = std::str::from_utf8(bytes).map_err(|_| malformed())?;
    let line: Line = json::from_str(text).map_err(|_| malformed())?;
    if let Some(name) = line.event {
        let data = line.data.unwrap_or_default();
        return Ok(Message::Event {
            name,
            tab_id: data.tab_id,
            label: data.label,
            pane_id: data.pane_id,
            agent_status: data.agent_status,
        });
    }
    if let Some(error) = line.error {
        return Ok(Message::Error(error));
    }
    let result = line.result.ok_or_else(malformed)?;
    let kind = result.kind.unwrap_or_default();
    Ok(match kind.as_str() {
        "subscription_started" => Message::SubscriptionStarted,
        "tab_list" => Message::Tabs(result.tabs.ok_or_else(malformed)?),
        "pane_list" => Message::Panes(result.panes.ok_or_else(malformed)?),
        "plugin_list" => Message::Plugins(result.plugins.ok_or_else(malformed)?),
        "tab_info" if result.tab.is_none() => return Err(malformed()),
        _ => Message::Ok,
    })
}

/// Past this, a line that shares the buffer with the next one leaves it.
const LARGE_LINE: usize = 64 << 10;

/// Splits a byte stream into lines and refuses to grow past `MAX_LINE`.
#[derive(Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
    /// Bytes of `pending` already searched for a newline.
    scanned: usize,
    /// Bytes after the last newline, so a huge line is caught without
    /// searching it again on every read.
    unterminated: usize,
}

#[derive(Debug, PartialEq)]
pub struct LineTooLong;

impl LineBuffer {
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), LineTooLong> {
        self.unterminated = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(last) => bytes.len() - last - 1,
            None => self.unterminated + bytes.len(),
        };
        if self.unterminated > MAX_LINE {
            *self = LineBuffer::default();
            return Err(LineTooLong);
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    /// The next complete line, without its newline.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        let newline = self.pending[self.scanned..]
            .iter()
            .position(|b| *b == b'\n');
        match newline {
            Some(offset) => {
                let end = self.scanned + offset;
                self.scanned = 0;
                // The usual case, one answer that fills the buffer, hands
                // the buffer over instead of copying a line that can be a
                // megabyte long (a pane.list of 3000 panes).
                let mut line = if end + 1 == self.pending.len() {
                    std::mem::take(&mut self.pending)
                } else if end >= LARGE_LINE {
                    // A large line with more behind it: the line takes the
                    // buffer, so its megabytes are not kept for the life of
                    // a subscription that only ever sees short lines again.
                    let rest = self.pending.split_off(end + 1);
                    std::mem::replace(&mut self.pending, rest)
                } else {
                    self.pending.drain(..=end).collect()
                };
                line.pop();
                Some(line)
            }
            None => {
                self.scanned = self.pending.len();
                None
            }
        }
    }

    /// Whatever is left without a newline (herdr may close right after).
    pub fn take_rest(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.pending);
        *self = LineBuffer::default();
        if rest.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            Some(rest)
        }
    }
}

/// Why a one-shot call failed.
#[derive(Debug)]
pub enum CallError {
    Connect(io::Error),
    Io(io::Error),
    Timeout,
    Closed,
    TooLong,
    Malformed(Malformed),
    Herdr(ErrorBody),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(error) if error.kind() == io::ErrorKind::WouldBlock => {
                write!(
                    f,
                    "cannot connect: herdr accepts no connections (its queue is full)"
                )
            }
            // macOS refuses, where Linux says EAGAIN, also when the queue is full.
            CallError::Connect(error)
                if cfg!(target_vendor = "apple")
                    && error.kind() == io::ErrorKind::ConnectionRefused =>
            {
                write!(
                    f,
                    "cannot connect: herdr refused the connection (not running, or its queue is full)"
                )
            }
            CallError::Connect(error) => write!(f, "cannot connect: {error}"),
            CallError::Io(error) => write!(f, "{error}"),
            CallError::Timeout => write!(f, "no answer within {} s", REQUEST_TIMEOUT.as_secs()),
            CallError::Closed => write!(f, "herdr closed the connection without an answer"),
            CallError::TooLong => write!(f, "answer longer than {} bytes", MAX_LINE),
            CallError::Malformed(malformed) => write!(f, "{malformed}"),
            CallError::Herdr(error) => write!(f, "herdr said {error}"),
        }
    }
}

/// One request on its own connection, for the short commands (the daemon
/// never blocks like this). herdr errors come back as `CallError::Herdr`.
pub fn call(socket: &Path, method: &str, params: &str) -> Result<Message, CallError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    // Not std's connect: it waits for as long as a hung server's listen
    // queue stays full, and a hook must finish.
    let mut stream = crate::sys::connect_unix(socket).map_err(CallError::Connect)?;
    crate::sys::set_blocking(std::os::fd::AsFd::as_fd(&stream)).map_err(CallError::Io)?;
    let io_error = |error: io::Error| match error.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => CallError::Timeout,
        // herdr closed the connection before it read the request (a
        // reset when it closed with the request unread).
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => CallError::Closed,
        // macOS's word for a write to a socket its peer is closing.
        _ if cfg!(target_vendor = "apple") && error.raw_os_error() == Some(libc::EPROTOTYPE) => {
            CallError::Closed
        }
        _ => CallError::Io(error),
    };
    stream
        .set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(CallError::Io)?;
    stream
        .write_all(request_line("c1", method, params.to_string()).as_bytes())
        .map_err(io_error)?;
    let mut lines = LineBuffer::default();
    let mut chunk = [0u8; 16 * 1024];
    let line = loop {
        if let Some(line) = lines.next_line() {
            break line;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CallError::Timeout);
        }
        stream.set_read_timeout(Some(left)).map_err(CallError::Io)?;
        match stream.read(&mut chunk) {
            Ok(0) => break lines.take_rest().ok_or(CallError::Closed)?,
            Ok(n) => lines.push(&chunk[..n]).map_err(|_| CallError::TooLong)?,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(io_error(error)),
        }
    };
    match parse_line(&line).map_err(CallError::Malformed)? {
        Message::Error(error) => Err(CallError::Herdr(error)),
        message => Ok(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_subscription_waits_longer_for_more_panes() {
        assert_eq!(status_ack_timeout(0, 0), REQUEST_TIMEOUT);
        assert_eq!(status_ack_timeout(1000, 0), Duration::from_secs(4));
        assert!(status_ack_timeout(3000, 0) > status_ack_timeout(1000, 0));
        assert_eq!(status_ack_timeout(usize::MAX, 0), Duration::from_secs(60));
        // Each ack that did not come in time doubles the next wait.
        assert_eq!(status_ack_timeout(1000, 1), Duration::from_secs(8));
        assert_eq!(status_ack_timeout(0, 2), Duration::from_secs(8));
        assert_eq!(status_ack_timeout(1000, 40), Duration::from_secs(60));
    }

    #[test]
    fn parses_the_recorded_shapes() {
        let renamed = br#"{"data":{"label":"build","tab_id":"w1:t1","type":"tab_renamed","workspace_id":"w1"},"event":"tab_renamed"}"#;
        assert_eq!(
            parse_line(renamed),
            Ok(Message::Event {
                name: "tab_renamed".into(),
                tab_id: Some("w1:t1".into()),
                label: Some("build".into()),
                pane_id: None,
                agent_status: None,
            })
        );
        let created = br#"{"data":{"tab":{"agent_status":"unknown","focused":false,"label":"temp","number":3,"pane_count":1,"tab_id":"w1:t3","workspace_id":"w1"},"type":"tab_created"},"event":"tab_created"}"#;
        assert!(
            matches!(parse_line(created), Ok(Message::Event { name, .. }) if name == "tab_created")
        );
        let status = br#"{"data":{"agent":"testbot","agent_status":"blocked","pane_id":"w1:p1","workspace_id":"w1"},"event":"pane.agent_status_changed"}"#;
        assert_eq!(
            parse_line(status),
            Ok(Message::Event {
                name: "pane.agent_status_changed".into(),
                tab_id: None,
                label: None,
                pane_id: Some("w1:p1".into()),
                agent_status: Some("blocked".into()),
            })
        );
        let list = br#"{"id":"tl1","result":{"type":"tab_list","tabs":[{"tab_id":"w1:t1","workspace_id":"w1","number":1,"label":"build","focused":true,"pane_count":1,"agent_status":"working"}]}}"#;
        match parse_line(list) {
            Ok(Message::Tabs(tabs)) => {
                assert_eq!(tabs[0].label, "build");
                assert_eq!(tabs[0].agent_status.as_deref(), Some("working"));
            }
            other => panic!("{other:?}"),
        }
        let probe = br#"{"id":"s:sub:1:probe","error":{"code":"pane_not_found","message":"pane w1:p99 not found"}}"#;
        assert!(matches!(parse_line(probe), Ok(Message::Error(e)) if e.code == "pane_not_found"));
        assert_eq!(
            parse_line(br#"{"id":"s1","result":{"type":"subscription_started"}}"#),
            Ok(Message::SubscriptionStarted)
        );
    }

    #[test]
    fn herdr_error_text_is_shown_without_escape_sequences() {
        let line =
            br#"{"id":"x","error":{"code":"bad\u001b]0;t\u0007","message":"\u001b[2J\u009bgone"}}"#;
        let Ok(Message::Error(error)) = parse_line(line) else {
            panic!("not an error line");
        };
        assert_eq!(error.to_string(), "bad]0;t: [2Jgone");
        assert_eq!(
            CallError::Herdr(error).to_string(),
            "herdr said bad]0;t: [2Jgone"
        );
    }

    #[test]
    fn bad_lines_are_reported_not_fatal() {
        for line in [
            &b"not json"[..],
            b"\xff\xfe",
            b"{\"id\":1}",
            b"[]",
            b"{\"result\":{\"type\":\"tab_list\"}}",
        ] {
            let error = parse_line(line).unwrap_err();
            assert!(
                error.0.starts_with("malformed line from herdr: "),
                "{error}"
            );
        }
        let unknown = br#"{"data":{"x":[1,2,{"y":null}]},"event":"something_new","extra":true}"#;
        assert!(matches!(parse_line(unknown), Ok(Message::Event { .. })));
    }

    #[test]
    fn a_line_nested_too_deep_is_malformed_before_miniserde_reads_it() {
        let mut deep = br#"{"event":"tab_focused","data":{"junk":"#.to_vec();
        deep.resize(100_000, b'[');
        assert!(parse_line(&deep).is_err());
        // Brackets in a label are text.
        let label = "[".repeat(1000);
        let renamed = format!(
            r#"{{"data":{{"label":"{label}","tab_id":"w1:t1","type":"tab_renamed"}},"event":"tab_renamed"}}"#
        );
        let Ok(Message::Event {
            label: Some(got), ..
        }) = parse_line(renamed.as_bytes())
        else {
            panic!("not read: {renamed}");
        };
        assert_eq!(got, label);
    }

    #[test]
    fn line_buffer_frames_and_caps() {
        let mut lines = LineBuffer::default();
        lines.push(b"ab").unwrap();
        assert_eq!(lines.next_line(), None);
        lines.push(b"c\nde\nf").unwrap();
        assert_eq!(lines.next_line(), Some(b"abc".to_vec()));
        assert_eq!(lines.next_line(), Some(b"de".to_vec()));
        assert_eq!(lines.next_line(), None);
        assert_eq!(lines.take_rest(), Some(b"f".to_vec()));
        let huge = vec![b'x'; MAX_LINE + 1];
        assert_eq!(lines.push(&huge), Err(LineTooLong));
        assert_eq!(lines.next_line(), None);
    }

    #[test]
    fn a_large_line_leaves_no_large_buffer_behind() {
        let mut lines = LineBuffer::default();
        let mut bytes = vec![b'x'; 1 << 20];
        bytes.extend_from_slice(b"\n{\"next\"");
        lines.push(&bytes).unwrap();
        assert_eq!(lines.next_line().map(|line| line.len()), Some(1 << 20));
        assert!(
            lines.pending.capacity() < LARGE_LINE,
            "{}",
            lines.pending.capacity()
        );
        lines.push(b":1}\n").unwrap();
        assert_eq!(lines.next_line(), Some(b"{\"next\":1}".to_vec()));
    }

    #[test]
    fn the_lifecycle_subscription_and_its_wire_names_agree() {
        let params = lifecycle_subscription();
        for kind in LIFECYCLE_EVENTS {
            assert!(
                params.contains(&format!("{{\"type\":\"{kind}\"}}")),
                "{kind}"
            );
            assert!(triggers_resync(&kind.replace('.', "_")), "{kind}");
        }
        assert!(triggers_resync(STATUS_EVENT));
        // Replayed or future events cowbell did not ask for change nothing.
        for other in ["workspace_renamed", "tab.created", "layout_updated", ""] {
            assert!(!triggers_resync(other), "{other}");
        }
    }

    /// The specification's triggers: "a tab is created, closed, moved,
    /// renamed or focused; a pane changes; a workspace gets focus or is
    /// closed". A missing one would hide behind the heartbeat or another
    /// event in the end-to-end tests.
    #[test]
    fn every_trigger_of_the_specification_is_subscribed() {
        for kind in [
            "tab.created",
            "tab.closed",
            "tab.moved",
            "tab.renamed",
            "tab.focused",
            "pane.created",
            "pane.closed",
            "pane.moved",
            "pane.exited",
            "pane.agent_detected",
            "workspace.focused",
            "workspace.closed",
        ] {
            assert!(LIFECYCLE_EVENTS.contains(&kind), "{kind} is not subscribed");
        }
    }

    #[test]
    fn an_excerpt_never_cuts_a_character_in_two() {
        let mut line = "a".repeat(199);
        line.push('é');
        line.push_str("rest");
        assert_eq!(excerpt(line.as_bytes()), "a".repeat(199));
        assert_eq!(excerpt("é".repeat(150).as_bytes()), "é".repeat(100));
        assert_eq!(excerpt(b"short"), "short");
        // Not UTF-8 at all: still something to read in the log.
        assert!(excerpt(&[0x80u8; 300]).starts_with('\u{FFFD}'));
    }

    /// herdr closing before it reads the request is "closed without an
    /// answer", not a bare "Broken pipe (os error 32)" or "Connection reset
    /// by peer", whichever the timing gives.
    #[test]
    fn a_server_that_closes_at_once_is_closed_whatever_the_timing() {
        let dir = crate::files::tests::TempDir::new("closes");
        let socket = dir.0.join("herdr.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            for _ in 0..20 {
                drop(listener.accept().unwrap());
            }
        });
        for _ in 0..20 {
            let error = call(&socket, "ping", "{}").unwrap_err();
            assert!(matches!(error, CallError::Closed), "{error}");
        }
        server.join().unwrap();
    }

    #[test]
    fn the_status_subscription_lists_every_pane() {
        let panes = ["w1:p1", "w1:p\"2"];
        let params = status_subscription(&panes);
        assert_eq!(
            params,
            r#"{"subscriptions":[{"type":"pane.agent_status_changed","pane_id":"w1:p1"},{"type":"pane.agent_status_changed","pane_id":"w1:p\"2"}]}"#
        );
        assert_eq!(status_subscription(&[]), r#"{"subscriptions":[]}"#);
    }

    #[test]
    fn requests_are_escaped_json() {
        let line = request_line("r1", "tab.rename", rename_params("w1:t1", "a\"b\n🔴"));
        assert!(line.ends_with('\n'));
        let value: json::Value = json::from_str(line.trim_end()).unwrap();
        let json::Value::Object(object) = value else {
            panic!()
        };
        let json::Value::Object(params) = &object["params"] else {
            panic!()
        };
        assert!(matches!(&params["label"], json::Value::String(label) if label == "a\"b\n🔴"));
    }
}
