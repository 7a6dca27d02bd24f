//! A fake herdr 0.8.2 server (socket protocol 20) for tests.
//!
//! It owns: the Unix-socket listener and its connections (one request per
//! connection, as herdr does), an in-memory model of workspaces, tabs, panes,
//! agent states and plugins, herdr's 512-event buffer, and polled event
//! delivery to subscribers (one event per subscription entry per poll, every
//! 100 ms by default). Output lines reproduce the shapes recorded from a real
//! herdr in `tests/transcripts/`, key order included: responses keep
//! herdr's struct field order, events have alphabetically sorted keys (herdr
//! serialises them through `serde_json::Value`).
//!
//! Test controls on `FakeHerdr` act like a user in herdr's UI (or another
//! plugin) and emit the same events the real server would; fault controls
//! (delays, silence, raw garbage, dropped subscriptions, failing renames)
//! serve robustness tests.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use miniserde::json::{self, Number, Object, Value};

pub const VERSION: &str = "0.8.2";
pub const PROTOCOL: u32 = 20;
/// herdr keeps the last 512 events of a server run.
pub const EVENT_BUFFER: usize = 512;

/// Lifecycle subscription types herdr 0.8.2 accepts without parameters.
const LIFECYCLE_TYPES: &[&str] = &[
    "workspace.created",
    "workspace.updated",
    "workspace.metadata_updated",
    "workspace.renamed",
    "workspace.moved",
    "workspace.reordered",
    "workspace.closed",
    "workspace.focused",
    "worktree.created",
    "worktree.opened",
    "worktree.removed",
    "tab.created",
    "tab.closed",
    "tab.focused",
    "tab.renamed",
    "tab.moved",
    "pane.created",
    "pane.closed",
    "pane.updated",
    "pane.focused",
    "pane.moved",
    "pane.exited",
    "pane.agent_detected",
];
const AGENT_STATES: &[&str] = &["idle", "working", "blocked", "unknown"];
const AGENT_STATUSES: &[&str] = &["idle", "working", "blocked", "done", "unknown"];
/// Roll-up priority: the first status present among a tab's panes wins.
const ROLLUP_ORDER: &[&str] = &["blocked", "done", "working", "idle", "unknown"];

// ===========================================================================
// Public types
// ===========================================================================

#[derive(Clone, Debug)]
pub struct Options {
    /// Replay buffered events to new lifecycle subscriptions (herdr 0.8.2
    /// does); false models a server that starts them at the present.
    pub replay: bool,
    /// How often subscriptions are polled. `Duration::ZERO` delivers at once
    /// (every event as soon as possible, no one-per-poll spreading).
    pub deliver_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            replay: true,
            deliver_interval: Duration::from_millis(100),
        }
    }
}

impl Options {
    /// herdr's behaviour, but events delivered at once rather than on its
    /// 100 ms poll: for tests whose timing that poll would blur.
    pub fn immediate() -> Options {
        Options {
            deliver_interval: Duration::ZERO,
            ..Options::default()
        }
    }
}

/// One request line received by the server.
#[derive(Clone, Debug)]
pub struct LoggedRequest {
    pub at: Instant,
    /// Empty when the line could not be parsed.
    pub id: String,
    pub method: String,
    /// The raw JSON text of `params` as the client wrote it ("" if absent).
    pub params: String,
    pub line: String,
}

impl LoggedRequest {
    /// A string field of `params`, e.g. `param("tab_id")`.
    pub fn param(&self, key: &str) -> Option<String> {
        match json::from_str::<Value>(&self.params).ok()? {
            Value::Object(o) => match o.get(key)? {
                Value::String(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    pub title: String,
    pub body: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TabSnapshot {
    pub tab_id: String,
    pub workspace_id: String,
    /// 1-based position in its workspace.
    pub number: usize,
    pub label: String,
    /// Rolled-up effective status (`done` included).
    pub status: String,
    pub custom_named: bool,
    pub focused: bool,
    pub pane_count: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PaneSnapshot {
    pub pane_id: String,
    pub tab_id: String,
    pub workspace_id: String,
    /// Effective status (`done` = idle and not yet seen).
    pub status: String,
    pub agent: Option<String>,
}

/// What `wait_until` predicates look at.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub tabs: Vec<TabSnapshot>,
    pub panes: Vec<PaneSnapshot>,
    pub requests: Vec<LoggedRequest>,
    pub notifications: Vec<Notification>,
}

impl Snapshot {
    pub fn tab(&self, tab_id: &str) -> Option<&TabSnapshot> {
        self.tabs.iter().find(|t| t.tab_id == tab_id)
    }
    /// The tab's label; panics if the tab does not exist.
    pub fn label(&self, tab_id: &str) -> &str {
        &self
            .tab(tab_id)
            .unwrap_or_else(|| panic!("no tab {tab_id}"))
            .label
    }
    pub fn renames_of(&self, tab_id: &str) -> usize {
        count_renames(&self.requests, tab_id)
    }
}

// ===========================================================================
// Model
// ===========================================================================

struct Pane {
    id: String,
    terminal_id: String,
    agent: Option<String>,
    /// The terminal title its program set, if any.
    title: Option<String>,
    /// Reported state: idle, working, blocked or unknown.
    state: &'static str,
    /// Whether someone looked at the pane since it went idle.
    seen: bool,
}

impl Pane {
    fn effective(&self) -> &'static str {
        if self.state == "idle" && !self.seen {
            "done"
        } else {
            self.state
        }
    }
}

struct Tab {
    id: String,
    /// None until renamed: the label is then the tab's position.
    custom: Option<String>,
    panes: Vec<Pane>,
    /// Index in `panes` of the pane that has focus within the tab.
    active_pane: usize,
}

struct Workspace {
    id: String,
    label: String,
    tabs: Vec<Tab>,
    focused_tab: Option<String>,
    next_tab: u32,
    next_pane: u32,
}

struct Plugin {
    id: String,
    enabled: bool,
    /// Where the plugin's files are; a made-up path when not set.
    root: Option<String>,
}

#[derive(Default)]
struct Model {
    workspaces: Vec<Workspace>,
    focused_ws: Option<String>,
    next_ws: u32,
    next_terminal: u64,
    plugins: Vec<Plugin>,
}

/// Index paths into the model.
#[derive(Clone, Copy)]
struct TabAt(usize, usize);
#[derive(Clone, Copy)]
struct PaneAt(usize, usize, usize);

impl Model {
    fn ws_index(&self, ws_id: &str) -> Option<usize> {
        self.workspaces.iter().position(|w| w.id == ws_id)
    }
    fn tab_at(&self, tab_id: &str) -> Option<TabAt> {
        self.workspaces.iter().enumerate().find_map(|(wi, w)| {
            w.tabs
                .iter()
                .position(|t| t.id == tab_id)
                .map(|ti| TabAt(wi, ti))
        })
    }
    fn pane_at(&self, pane_id: &str) -> Option<PaneAt> {
        for (wi, w) in self.workspaces.iter().enumerate() {
            for (ti, t) in w.tabs.iter().enumerate() {
                if let Some(pi) = t.panes.iter().position(|p| p.id == pane_id) {
                    return Some(PaneAt(wi, ti, pi));
                }
            }
        }
        None
    }
    fn tab(&self, at: TabAt) -> &Tab {
        &self.workspaces[at.0].tabs[at.1]
    }
    fn tab_mut(&mut self, at: TabAt) -> &mut Tab {
        &mut self.workspaces[at.0].tabs[at.1]
    }
    fn pane(&self, at: PaneAt) -> &Pane {
        &self.workspaces[at.0].tabs[at.1].panes[at.2]
    }
    fn tab_focused(&self, at: TabAt) -> bool {
        let w = &self.workspaces[at.0];
        w.focused_tab.as_deref() == Some(&w.tabs[at.1].id)
    }
    fn label(&self, at: TabAt) -> String {
        match &self.tab(at).custom {
            Some(l) => l.clone(),
            None => (at.1 + 1).to_string(),
        }
    }
    fn tab_status(&self, at: TabAt) -> &'static str {
        rollup(self.tab(at).panes.iter().map(Pane::effective))
    }
    /// Every pane's effective status, to detect changes around a mutation.
    fn statuses(&self) -> HashMap<String, &'static str> {
        let mut m = HashMap::new();
        for w in &self.workspaces {
            for t in &w.tabs {
                for p in &t.panes {
                    m.insert(p.id.clone(), p.effective());
                }
            }
        }
        m
    }

    // --- JSON renderings ---------------------------------------------------

    /// TabInfo fields in herdr's struct order (responses); events sort them.
    fn tab_info(&self, at: TabAt) -> Obj {
        let t = self.tab(at);
        Obj::new()
            .s("tab_id", &t.id)
            .s("workspace_id", &self.workspaces[at.0].id)
            .n("number", at.1 as u64 + 1)
            .s("label", &self.label(at))
            .b("focused", self.tab_focused(at))
            .n("pane_count", t.panes.len() as u64)
            .s("agent_status", self.tab_status(at))
    }

    /// PaneInfo in herdr's order (as in the recorded pane.list answer).
    fn pane_info(&self, at: PaneAt) -> Obj {
        let w = &self.workspaces[at.0];
        let t = &w.tabs[at.1];
        let p = &t.panes[at.2];
        let focused = self.tab_focused(TabAt(at.0, at.1)) && t.active_pane == at.2;
        let mut o = Obj::new()
            .s("pane_id", &p.id)
            .s("terminal_id", &p.terminal_id)
            .s("workspace_id", &w.id)
            .s("tab_id", &t.id)
            .b("focused", focused)
            .s("cwd", "/tmp")
            .s("foreground_cwd", "/tmp")
            .s("agent_status", p.effective());
        if let Some(a) = &p.agent {
            o = o.s("agent", a);
        }
        o.raw(
            "scroll",
            r#"{"offset_from_bottom":0,"max_offset_from_bottom":0,"viewport_rows":37}"#,
        )
        .n("revision", 0)
    }

    fn workspace_info(&self, wi: usize) -> Obj {
        let w = &self.workspaces[wi];
        let panes = w.tabs.iter().flat_map(|t| t.panes.iter());
        Obj::new()
            .s("workspace_id", &w.id)
            .n("number", wi as u64 + 1)
            .s("label", &w.label)
            .b("focused", self.focused_ws.as_deref() == Some(&w.id))
            .n("pane_count", panes.clone().count() as u64)
            .n("tab_count", w.tabs.len() as u64)
            .s("active_tab_id", w.focused_tab.as_deref().unwrap_or(""))
            .s("agent_status", rollup(panes.map(Pane::effective)))
    }
}

fn rollup(statuses: impl Iterator<Item = &'static str>) -> &'static str {
    let present: Vec<&str> = statuses.collect();
    ROLLUP_ORDER
        .iter()
        .find(|s| present.contains(s))
        .copied()
        .unwrap_or("unknown")
}

// ===========================================================================
// Minimal JSON writing (herdr's exact key orders; miniserde would sort)
// ===========================================================================

/// serde_json's string escaping: `"`, `\` and control characters; non-ASCII
/// is written as is.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An object being written: fields keep insertion order unless sorted.
#[derive(Clone, Default)]
struct Obj(Vec<(String, String)>);

impl Obj {
    fn new() -> Obj {
        Obj(Vec::new())
    }
    fn raw(mut self, k: &str, raw_json: &str) -> Obj {
        self.0.push((k.to_string(), raw_json.to_string()));
        self
    }
    fn s(self, k: &str, v: &str) -> Obj {
        self.raw(k, &quote(v))
    }
    fn n(self, k: &str, v: u64) -> Obj {
        self.raw(k, &v.to_string())
    }
    fn b(self, k: &str, v: bool) -> Obj {
        self.raw(k, if v { "true" } else { "false" })
    }
    fn opt(self, k: &str, v: Option<&str>) -> Obj {
        match v {
            Some(v) => self.s(k, v),
            None => self.raw(k, "null"),
        }
    }
    fn sorted(mut self) -> Obj {
        self.0.sort_by(|a, b| a.0.cmp(&b.0));
        self
    }
    fn render(&self) -> String {
        let fields: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}:{v}", quote(k)))
            .collect();
        format!("{{{}}}", fields.join(","))
    }
}

fn ok_line(id: &str, result: &Obj) -> String {
    format!(r#"{{"id":{},"result":{}}}"#, quote(id), result.render())
}

fn err_line(id: &str, code: &str, message: &str) -> String {
    format!(
        r#"{{"id":{},"error":{{"code":{},"message":{}}}}}"#,
        quote(id),
        quote(code),
        quote(message)
    )
}

fn invalid(message: impl std::fmt::Display) -> String {
    err_line(
        "",
        "invalid_request",
        &format!("invalid request: {message}"),
    )
}

// ===========================================================================
// Events and subscriptions
// ===========================================================================

struct Event {
    seq: u64,
    /// herdr's snake_case event name; agent status changes are recorded as
    /// `pane_agent_status_changed` (their wire name is dotted).
    kind: String,
    pane_id: Option<String>,
    status: Option<&'static str>,
    line: String,
}

enum Entry {
    /// A lifecycle subscription: a cursor into the event buffer.
    Lifecycle { kind: String, cursor: u64 },
    /// `pane.agent_status_changed` for one pane, starting at the present.
    Status {
        pane_id: String,
        filter: Option<String>,
        cursor: u64,
        /// With a filter matching the status at subscription time, herdr
        /// emits that status on the first poll.
        initial: Option<String>,
    },
    /// Accepted types the fake never emits (pane.output_matched, ...).
    Silent,
}

struct Subscriber {
    conn: u64,
    writer: Arc<Mutex<UnixStream>>,
    entries: Vec<Entry>,
}

// ===========================================================================
// Shared state
// ===========================================================================

struct State {
    model: Model,
    events: VecDeque<Event>,
    next_seq: u64,
    subs: Vec<Subscriber>,
    /// Every open connection of the current run, to cut them on stop.
    conns: Vec<(u64, UnixStream)>,
    next_conn: u64,
    requests: Vec<LoggedRequest>,
    notifications: Vec<Notification>,
    response_delay: Duration,
    silent: bool,
    /// Requests of this method are read and never answered.
    silent_method: Option<String>,
    /// Requests of this method are answered at once, and the answer is
    /// written this much later: what the client reads is out of date.
    late_method: Option<(String, Duration)>,
    /// How long herdr takes to probe one pane of a status subscription
    /// before it acknowledges (a round trip to its main loop per pane).
    probe_time: Duration,
    fail_renames: usize,
    /// Set while `tracked` runs, so nested calls don't emit twice.
    tracking: bool,
    /// Canned raw answers (fault controls for tests/faults.rs, see the end).
    canned: Vec<Canned>,
}

struct Shared {
    state: Mutex<State>,
    options: Options,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not make every later call fail.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn emit(&mut self, kind: &str, data: Obj) {
        let data = data.s("type", kind).sorted();
        let line = format!(r#"{{"data":{},"event":{}}}"#, data.render(), quote(kind));
        self.push(Event {
            seq: 0,
            kind: kind.to_string(),
            pane_id: None,
            status: None,
            line,
        });
    }

    fn push(&mut self, mut ev: Event) {
        self.next_seq += 1;
        ev.seq = self.next_seq;
        self.events.push_back(ev);
        while self.events.len() > EVENT_BUFFER {
            self.events.pop_front();
        }
    }

    /// Runs a mutation and records a status event for every pane whose
    /// effective status changed (e.g. done -> idle when its tab is focused).
    fn tracked<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> R {
        if self.tracking {
            // An outer `tracked` call will compare; don't report twice.
            return f(self);
        }
        self.tracking = true;
        let before = self.model.statuses();
        let r = f(self);
        self.tracking = false;
        let after = self.model.statuses();
        let mut changed: Vec<&String> = after
            .iter()
            .filter(|(id, st)| before.get(*id).is_some_and(|b| b != *st))
            .map(|(id, _)| id)
            .collect();
        changed.sort();
        let changed: Vec<String> = changed.into_iter().cloned().collect();
        for id in changed {
            self.emit_status(&id);
        }
        r
    }

    fn status_line(&self, pane_id: &str) -> Option<(String, &'static str)> {
        let at = self.model.pane_at(pane_id)?;
        let p = self.model.pane(at);
        let mut data = Obj::new()
            .opt("agent", p.agent.as_deref())
            .s("agent_status", p.effective())
            .s("pane_id", &p.id);
        // Left out without a title, as in the recorded lines.
        if let Some(title) = p.title.as_deref() {
            data = data.s("title", title);
        }
        let data = data.s("workspace_id", &self.model.workspaces[at.0].id);
        let line = format!(
            r#"{{"data":{},"event":"pane.agent_status_changed"}}"#,
            data.render()
        );
        Some((line, p.effective()))
    }

    fn emit_status(&mut self, pane_id: &str) {
        if let Some((line, status)) = self.status_line(pane_id) {
            self.push(Event {
                seq: 0,
                kind: "pane_agent_status_changed".into(),
                pane_id: Some(pane_id.to_string()),
                status: Some(status),
                line,
            });
        }
    }

    // --- model operations shared by API requests and test controls --------

    fn add_workspace(&mut self, label: &str) -> String {
        self.model.next_ws += 1;
        let id = format!("w{}", self.model.next_ws);
        self.model.workspaces.push(Workspace {
            id: id.clone(),
            label: label.to_string(),
            tabs: Vec::new(),
            focused_tab: None,
            next_tab: 0,
            next_pane: 0,
        });
        let wi = self.model.workspaces.len() - 1;
        if self.model.focused_ws.is_none() {
            self.model.focused_ws = Some(id.clone());
        }
        let info = self.model.workspace_info(wi).sorted();
        self.emit(
            "workspace_created",
            Obj::new().raw("workspace", &info.render()),
        );
        if self.model.focused_ws.as_deref() == Some(&id) {
            self.emit("workspace_focused", Obj::new().s("workspace_id", &id));
        }
        id
    }

    fn new_pane(&mut self, wi: usize) -> Pane {
        let w = &mut self.model.workspaces[wi];
        w.next_pane += 1;
        let id = format!("{}:p{}", w.id, w.next_pane);
        self.model.next_terminal += 1;
        Pane {
            id,
            terminal_id: format!("term_{:014x}", 0x66176d34449000 + self.model.next_terminal),
            agent: None,
            title: None,
            state: "unknown",
            seen: true,
        }
    }

    /// Creates a tab at the end of the workspace with one pane; the first tab
    /// of a workspace gets the focus.
    fn add_tab(&mut self, wi: usize, name: Option<&str>, focus: bool) -> TabAt {
        let pane = self.new_pane(wi);
        let w = &mut self.model.workspaces[wi];
        w.next_tab += 1;
        let id = format!("{}:t{}", w.id, w.next_tab);
        w.tabs.push(Tab {
            id: id.clone(),
            custom: name.map(str::to_string),
            panes: vec![pane],
            active_pane: 0,
        });
        let at = TabAt(wi, w.tabs.len() - 1);
        let first = w.focused_tab.is_none();
        if first {
            w.focused_tab = Some(id.clone());
        }
        let info = self.model.tab_info(at).sorted();
        self.emit("tab_created", Obj::new().raw("tab", &info.render()));
        self.emit_pane_created(PaneAt(at.0, at.1, 0));
        if first {
            self.emit_tab_focused(at);
        } else if focus {
            self.focus_tab(at);
        }
        at
    }

    fn emit_pane_created(&mut self, at: PaneAt) {
        let info = self.model.pane_info(at).sorted();
        self.emit("pane_created", Obj::new().raw("pane", &info.render()));
    }

    fn emit_tab_focused(&mut self, at: TabAt) {
        let ws = self.model.workspaces[at.0].id.clone();
        let tab = self.model.tab(at);
        let (tab_id, pane_id) = (tab.id.clone(), tab.panes[tab.active_pane].id.clone());
        self.emit(
            "tab_focused",
            Obj::new().s("tab_id", &tab_id).s("workspace_id", &ws),
        );
        self.emit(
            "pane_focused",
            Obj::new().s("pane_id", &pane_id).s("workspace_id", &ws),
        );
    }

    /// Focuses a tab (and its workspace) and marks its panes as seen.
    fn focus_tab(&mut self, at: TabAt) {
        self.tracked(|s| {
            let ws = s.model.workspaces[at.0].id.clone();
            s.model.focused_ws = Some(ws.clone());
            s.emit("workspace_focused", Obj::new().s("workspace_id", &ws));
            let tab = s.model.tab_mut(at);
            for p in &mut tab.panes {
                p.seen = true;
            }
            let id = tab.id.clone();
            s.model.workspaces[at.0].focused_tab = Some(id);
            s.emit_tab_focused(at);
        });
    }

    fn rename_tab(&mut self, at: TabAt, label: &str) {
        self.model.tab_mut(at).custom = Some(label.to_string());
        let tab_id = self.model.tab(at).id.clone();
        let ws = self.model.workspaces[at.0].id.clone();
        self.emit(
            "tab_renamed",
            Obj::new()
                .s("label", label)
                .s("tab_id", &tab_id)
                .s("workspace_id", &ws),
        );
    }

    /// Moves a tab to 0-based `insert_index` (clamped).
    fn move_tab(&mut self, at: TabAt, insert_index: usize) -> TabAt {
        let w = &mut self.model.workspaces[at.0];
        let tab = w.tabs.remove(at.1);
        let idx = insert_index.min(w.tabs.len());
        let (tab_id, ws) = (tab.id.clone(), w.id.clone());
        w.tabs.insert(idx, tab);
        let tabs: Vec<String> = (0..w.tabs.len())
            .map(|ti| self.model.tab_info(TabAt(at.0, ti)).sorted().render())
            .collect();
        self.emit(
            "tab_moved",
            Obj::new()
                .n("insert_index", idx as u64)
                .s("tab_id", &tab_id)
                .raw("tabs", &format!("[{}]", tabs.join(",")))
                .s("workspace_id", &ws),
        );
        TabAt(at.0, idx)
    }

    fn close_tab(&mut self, at: TabAt) {
        self.tracked(|s| {
            let was_focused = s.model.tab_focused(at);
            let ws = s.model.workspaces[at.0].id.clone();
            let tab = s.model.workspaces[at.0].tabs.remove(at.1);
            for p in &tab.panes {
                s.emit(
                    "pane_closed",
                    Obj::new().s("pane_id", &p.id).s("workspace_id", &ws),
                );
            }
            s.emit(
                "tab_closed",
                Obj::new().s("tab_id", &tab.id).s("workspace_id", &ws),
            );
            let left = s.model.workspaces[at.0].tabs.len();
            if left == 0 {
                // herdr closes a workspace with its last tab.
                s.model.workspaces[at.0].focused_tab = None;
                s.close_workspace(at.0);
            } else if was_focused {
                s.model.workspaces[at.0].focused_tab = None;
                s.focus_tab(TabAt(at.0, at.1.min(left - 1)));
            }
        });
    }

    fn close_workspace(&mut self, wi: usize) {
        let info = self.model.workspace_info(wi).sorted();
        let w = self.model.workspaces.remove(wi);
        self.emit(
            "workspace_closed",
            Obj::new()
                .raw("workspace", &info.render())
                .s("workspace_id", &w.id),
        );
        if self.model.focused_ws.as_deref() == Some(&w.id) {
            self.model.focused_ws = self.model.workspaces.first().map(|w| w.id.clone());
            if let Some(id) = self.model.focused_ws.clone() {
                self.emit("workspace_focused", Obj::new().s("workspace_id", &id));
            }
        }
    }

    fn add_pane(&mut self, at: TabAt) -> String {
        let pane = self.new_pane(at.0);
        let id = pane.id.clone();
        let tab = self.model.tab_mut(at);
        tab.panes.push(pane);
        let pi = tab.panes.len() - 1;
        self.emit_pane_created(PaneAt(at.0, at.1, pi));
        id
    }

    fn close_pane(&mut self, at: PaneAt) {
        let tab_at = TabAt(at.0, at.1);
        if self.model.tab(tab_at).panes.len() == 1 {
            // The last pane takes its tab with it.
            return self.close_tab(tab_at);
        }
        let ws = self.model.workspaces[at.0].id.clone();
        let tab = self.model.tab_mut(tab_at);
        let p = tab.panes.remove(at.2);
        if tab.active_pane >= tab.panes.len() {
            tab.active_pane = tab.panes.len() - 1;
        }
        self.emit(
            "pane_closed",
            Obj::new().s("pane_id", &p.id).s("workspace_id", &ws),
        );
    }

    /// `pane.report_agent`: state is one of AGENT_STATES.
    fn report_agent(&mut self, at: PaneAt, agent: &str, state: &str) {
        let focused = self.model.tab_focused(TabAt(at.0, at.1));
        let state = AGENT_STATES.iter().find(|s| **s == state).copied().unwrap();
        let ws = self.model.workspaces[at.0].id.clone();
        self.tracked(|s| {
            let p = &mut s.model.workspaces[at.0].tabs[at.1].panes[at.2];
            let detected = p.agent.as_deref() != Some(agent);
            p.agent = Some(agent.to_string());
            // An agent that goes idle where nobody looks is "done".
            p.seen = focused;
            p.state = state;
            let pane_id = p.id.clone();
            if detected {
                s.emit(
                    "pane_agent_detected",
                    Obj::new()
                        .s("agent", agent)
                        .s("pane_id", &pane_id)
                        .s("workspace_id", &ws),
                );
            }
        });
    }

    fn snapshot(&self) -> Snapshot {
        let m = &self.model;
        let mut tabs = Vec::new();
        let mut panes = Vec::new();
        for (wi, w) in m.workspaces.iter().enumerate() {
            for (ti, t) in w.tabs.iter().enumerate() {
                let at = TabAt(wi, ti);
                tabs.push(TabSnapshot {
                    tab_id: t.id.clone(),
                    workspace_id: w.id.clone(),
                    number: ti + 1,
                    label: m.label(at),
                    status: m.tab_status(at).to_string(),
                    custom_named: t.custom.is_some(),
                    focused: m.tab_focused(at),
                    pane_count: t.panes.len(),
                });
                for p in &t.panes {
                    panes.push(PaneSnapshot {
                        pane_id: p.id.clone(),
                        tab_id: t.id.clone(),
                        workspace_id: w.id.clone(),
                        status: p.effective().to_string(),
                        agent: p.agent.clone(),
                    });
                }
            }
        }
        Snapshot {
            tabs,
            panes,
            requests: self.requests.clone(),
            notifications: self.notifications.clone(),
        }
    }
}

fn count_renames(requests: &[LoggedRequest], tab_id: &str) -> usize {
    requests
        .iter()
        .filter(|r| r.method == "tab.rename" && r.param("tab_id").as_deref() == Some(tab_id))
        .count()
}

// ===========================================================================
// Request handling
// ===========================================================================

/// What a request line turns into.
enum Reply {
    Line(String),
    /// A valid `events.subscribe`: entries to register, after the probe.
    Subscribe {
        id: String,
        entries: Vec<SubSpec>,
    },
}

enum SubSpec {
    Lifecycle(String),
    Status {
        pane_id: String,
        filter: Option<String>,
    },
    /// Accepted but never emitted by the fake; a pane id is still probed.
    Other(Option<String>),
}

/// Field access with serde-like error messages.
struct Params<'a>(&'a Object);

impl Params<'_> {
    fn opt_str(&self, key: &str) -> Result<Option<String>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("invalid type for `{key}`, expected a string")),
        }
    }
    fn str(&self, key: &str) -> Result<String, String> {
        self.opt_str(key)?
            .ok_or_else(|| format!("missing field `{key}`"))
    }
    fn uint(&self, key: &str) -> Result<u64, String> {
        match self.0.get(key) {
            None => Err(format!("missing field `{key}`")),
            Some(Value::Number(Number::U64(n))) => Ok(*n),
            Some(_) => Err(format!(
                "invalid type for `{key}`, expected a non-negative integer"
            )),
        }
    }
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("invalid type for `{key}`, expected a boolean")),
        }
    }
}

fn variant<'a>(value: &str, allowed: &[&'a str]) -> Result<&'a str, String> {
    allowed
        .iter()
        .find(|a| **a == value)
        .copied()
        .ok_or_else(|| {
            let list: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
            format!(
                "unknown variant `{value}`, expected one of {}",
                list.join(", ")
            )
        })
}

/// Parses the request envelope: (id, method, params) or the error line.
fn parse_envelope(line: &str) -> Result<(String, String, Object), String> {
    let v: Value = json::from_str(line).map_err(|_| invalid("expected a JSON object"))?;
    let Value::Object(mut o) = v else {
        return Err(invalid("expected a JSON object"));
    };
    let id = match o.remove("id") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid("invalid type for `id`, expected a string")),
        None => return Err(invalid("missing field `id`")),
    };
    let method = match o.remove("method") {
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid("invalid type for `method`, expected a string")),
        None => return Err(invalid("missing field `method`")),
    };
    let params = match o.remove("params") {
        Some(Value::Object(p)) => p,
        Some(_) => return Err(invalid("invalid type for `params`, expected a map")),
        None => return Err(invalid("missing field `params`")),
    };
    Ok((id, method, params))
}

fn handle(state: &mut State, id: &str, method: &str, params: &Object) -> Reply {
    match handle_inner(state, id, method, Params(params)) {
        Ok(r) => r,
        // Parameter errors are parse errors in herdr: the id comes back empty.
        Err(msg) => Reply::Line(invalid(msg)),
    }
}

fn handle_inner(state: &mut State, id: &str, method: &str, p: Params) -> Result<Reply, String> {
    let line = |r: Obj| Ok(Reply::Line(ok_line(id, &r)));
    let ok = || Ok(Reply::Line(ok_line(id, &Obj::new().s("type", "ok"))));
    let error = |code: &str, msg: String| Ok(Reply::Line(err_line(id, code, &msg)));
    match method {
        "ping" => line(
            Obj::new()
                .s("type", "pong")
                .s("version", VERSION)
                .n("protocol", PROTOCOL as u64)
                .raw(
                    "capabilities",
                    r#"{"live_handoff":true,"detached_server_daemon":true}"#,
                ),
        ),
        "tab.list" => {
            let ws = p.opt_str("workspace_id")?;
            let m = &state.model;
            let mut tabs = Vec::new();
            for (wi, w) in m.workspaces.iter().enumerate() {
                if ws.as_ref().is_some_and(|id| *id != w.id) {
                    continue;
                }
                for ti in 0..w.tabs.len() {
                    tabs.push(m.tab_info(TabAt(wi, ti)).render());
                }
            }
            if let Some(ws) = ws.filter(|ws| m.ws_index(ws).is_none()) {
                return error("workspace_not_found", format!("workspace {ws} not found"));
            }
            line(
                Obj::new()
                    .s("type", "tab_list")
                    .raw("tabs", &format!("[{}]", tabs.join(","))),
            )
        }
        "tab.rename" => {
            let tab_id = p.str("tab_id")?;
            let label = p.str("label")?;
            let at = state.model.tab_at(&tab_id);
            let injected = state.fail_renames > 0;
            match at {
                Some(at) if !injected => {
                    state.rename_tab(at, &label);
                    line(tab_info_result(state, at))
                }
                _ => {
                    state.fail_renames = state.fail_renames.saturating_sub(1);
                    error("tab_not_found", format!("tab {tab_id} not found"))
                }
            }
        }
        "tab.focus" => {
            let tab_id = p.str("tab_id")?;
            let Some(at) = state.model.tab_at(&tab_id) else {
                return error("tab_not_found", format!("tab {tab_id} not found"));
            };
            state.focus_tab(at);
            line(tab_info_result(state, at))
        }
        "tab.close" => {
            let tab_id = p.str("tab_id")?;
            let Some(at) = state.model.tab_at(&tab_id) else {
                return error("tab_not_found", format!("tab {tab_id} not found"));
            };
            state.close_tab(at);
            ok()
        }
        "tab.create" => {
            let label = p.opt_str("label")?;
            let focus = p.bool_or("focus", false)?;
            let wi = match p.opt_str("workspace_id")? {
                Some(ws) => match state.model.ws_index(&ws) {
                    Some(wi) => wi,
                    None => {
                        return error("workspace_not_found", format!("workspace {ws} not found"));
                    }
                },
                None => match state.model.focused_ws.clone() {
                    Some(ws) => state.model.ws_index(&ws).unwrap(),
                    None => {
                        let ws = state.add_workspace("1");
                        state.model.ws_index(&ws).unwrap()
                    }
                },
            };
            let at = state.add_tab(wi, label.as_deref(), focus);
            let tab = state.model.tab_info(at);
            let pane = state.model.pane_info(PaneAt(at.0, at.1, 0));
            line(
                Obj::new()
                    .s("type", "tab_created")
                    .raw("tab", &tab.render())
                    .raw("root_pane", &pane.render()),
            )
        }
        "tab.move" => {
            let tab_id = p.str("tab_id")?;
            let idx = p.uint("insert_index")?;
            let Some(at) = state.model.tab_at(&tab_id) else {
                return error("tab_not_found", format!("tab {tab_id} not found"));
            };
            let at = state.move_tab(at, idx as usize);
            line(tab_info_result(state, at))
        }
        "pane.list" => {
            let ws = p.opt_str("workspace_id")?;
            let m = &state.model;
            let mut panes = Vec::new();
            for (wi, w) in m.workspaces.iter().enumerate() {
                if ws.as_ref().is_some_and(|id| *id != w.id) {
                    continue;
                }
                for (ti, t) in w.tabs.iter().enumerate() {
                    for pi in 0..t.panes.len() {
                        panes.push(m.pane_info(PaneAt(wi, ti, pi)).render());
                    }
                }
            }
            line(
                Obj::new()
                    .s("type", "pane_list")
                    .raw("panes", &format!("[{}]", panes.join(","))),
            )
        }
        "pane.report_agent" => {
            let pane_id = p.str("pane_id")?;
            p.str("source")?;
            let agent = p.str("agent")?;
            // `done` is derived by herdr, never reported: a parse error.
            let st = variant(&p.str("state")?, AGENT_STATES)?;
            let Some(at) = state.model.pane_at(&pane_id) else {
                return error("pane_not_found", format!("pane {pane_id} not found"));
            };
            state.report_agent(at, &agent, st);
            ok()
        }
        "plugin.list" => {
            let only = p.opt_str("plugin_id")?;
            let plugins: Vec<String> = state
                .model
                .plugins
                .iter()
                .filter(|pl| only.as_ref().is_none_or(|id| *id == pl.id))
                .map(|pl| plugin_info(pl).render())
                .collect();
            line(
                Obj::new()
                    .s("type", "plugin_list")
                    .raw("plugins", &format!("[{}]", plugins.join(","))),
            )
        }
        "plugin.enable" | "plugin.disable" => {
            let plugin_id = p.str("plugin_id")?;
            let enable = method == "plugin.enable";
            let Some(pl) = state.model.plugins.iter_mut().find(|pl| pl.id == plugin_id) else {
                return error("plugin_not_found", format!("plugin {plugin_id} not found"));
            };
            pl.enabled = enable;
            let kind = if enable {
                "plugin_enabled"
            } else {
                "plugin_disabled"
            };
            // As recorded: only the id and the new flag, not the manifest.
            let plugin = Obj::new().s("plugin_id", &pl.id).b("enabled", enable);
            line(Obj::new().s("type", kind).raw("plugin", &plugin.render()))
        }
        "plugin.unlink" => {
            let plugin_id = p.str("plugin_id")?;
            let before = state.model.plugins.len();
            state.model.plugins.retain(|pl| pl.id != plugin_id);
            let removed = state.model.plugins.len() < before;
            line(
                Obj::new()
                    .s("type", "plugin_unlinked")
                    .s("plugin_id", &plugin_id)
                    .b("removed", removed),
            )
        }
        "notification.show" => {
            let title = p.str("title")?;
            let body = p.opt_str("body")?;
            state.notifications.push(Notification { title, body });
            line(
                Obj::new()
                    .s("type", "notification_show")
                    .b("shown", true)
                    .s("reason", "shown"),
            )
        }
        "events.subscribe" => {
            let Some(list) = p.0.get("subscriptions") else {
                return Err("missing field `subscriptions`".into());
            };
            let Value::Array(list) = list else {
                return Err("invalid type for `subscriptions`, expected a sequence".into());
            };
            let mut entries = Vec::new();
            for item in list.iter() {
                let Value::Object(o) = item else {
                    return Err("invalid type for a subscription, expected a map".into());
                };
                let sp = Params(o);
                let ty = sp.str("type")?;
                let spec = match ty.as_str() {
                    "pane.agent_status_changed" => {
                        let filter = match sp.opt_str("agent_status")? {
                            Some(f) => Some(variant(&f, AGENT_STATUSES)?.to_string()),
                            None => None,
                        };
                        SubSpec::Status {
                            pane_id: sp.str("pane_id")?,
                            filter,
                        }
                    }
                    "pane.output_matched" | "pane.scroll_changed" => {
                        SubSpec::Other(Some(sp.str("pane_id")?))
                    }
                    t if LIFECYCLE_TYPES.contains(&t) => SubSpec::Lifecycle(t.replace('.', "_")),
                    t => {
                        let mut all: Vec<&str> = LIFECYCLE_TYPES.to_vec();
                        all.extend([
                            "pane.output_matched",
                            "pane.agent_status_changed",
                            "pane.scroll_changed",
                        ]);
                        return Err(variant(t, &all).unwrap_err());
                    }
                };
                entries.push(spec);
            }
            Ok(Reply::Subscribe {
                id: id.to_string(),
                entries,
            })
        }
        // herdr lists all its ~90 methods here; the recording shortened it.
        other => Err(format!(
            "unknown variant `{other}`, expected one of `ping`, ..."
        )),
    }
}

fn tab_info_result(state: &State, at: TabAt) -> Obj {
    Obj::new()
        .s("type", "tab_info")
        .raw("tab", &state.model.tab_info(at).render())
}

/// An installed plugin as `plugin.list` shows it; the manifest parts are
/// plausible stand-ins with the recorded shape (one entry of each kind).
fn plugin_info(pl: &Plugin) -> Obj {
    let root = pl.root.clone().unwrap_or(format!("/plugins/{}", pl.id));
    let command = |arg: &str| format!(r#"["bin/{}",{}]"#, pl.id, quote(arg));
    Obj::new()
        .s("plugin_id", &pl.id)
        .s("name", &pl.id)
        .s("version", "0.1.0")
        .s("min_herdr_version", "0.8.0")
        .s("description", "...")
        .s("manifest_path", &format!("{root}/herdr-plugin.toml"))
        .s("plugin_root", &root)
        .b("enabled", pl.enabled)
        .raw("platforms", r#"["linux","macos"]"#)
        .raw(
            "startup",
            &format!(r#"[{{"command":{}}}]"#, command("startup")),
        )
        .raw(
            "actions",
            &format!(
                r#"[{{"id":"refresh","title":"Refresh","contexts":["workspace"],"command":{}}}]"#,
                command("refresh")
            ),
        )
        .raw(
            "events",
            &format!(
                r#"[{{"on":"pane.agent_detected","command":{}}}]"#,
                command("agent-detected")
            ),
        )
        .raw("source", r#"{"kind":"local"}"#)
}

// ===========================================================================
// Delivery
// ===========================================================================

/// One poll of every subscription entry: at most one line per entry.
fn poll_once(state: &mut State) -> Vec<(u64, Arc<Mutex<UnixStream>>, Vec<String>)> {
    let mut out = Vec::new();
    let State {
        subs,
        events,
        model: _,
        ..
    } = state;
    for sub in subs.iter_mut() {
        let mut lines = Vec::new();
        for entry in sub.entries.iter_mut() {
            match entry {
                Entry::Lifecycle { kind, cursor } => {
                    for ev in events.range(newer_than(events, *cursor)..) {
                        *cursor = ev.seq;
                        if ev.kind == *kind {
                            lines.push(ev.line.clone());
                            break;
                        }
                    }
                }
                Entry::Status {
                    pane_id,
                    filter,
                    cursor,
                    initial,
                } => {
                    if let Some(line) = initial.take() {
                        lines.push(line);
                        continue;
                    }
                    for ev in events.range(newer_than(events, *cursor)..) {
                        *cursor = ev.seq;
                        if ev.kind == "pane_agent_status_changed"
                            && ev.pane_id.as_deref() == Some(pane_id.as_str())
                            && filter.as_deref().is_none_or(|f| Some(f) == ev.status)
                        {
                            lines.push(ev.line.clone());
                            break;
                        }
                    }
                }
                Entry::Silent => {}
            }
        }
        if !lines.is_empty() {
            out.push((sub.conn, sub.writer.clone(), lines));
        }
    }
    out
}

/// Where the events after `cursor` begin. A binary search, not a scan from
/// the oldest: every 1 ms tick asks it for each of thousands of status
/// entries, and a scan kept a core busy under the lock the requests need,
/// which made the fake, not cowbell, the latency measured at 1000 tabs.
fn newer_than(events: &VecDeque<Event>, cursor: u64) -> usize {
    events.partition_point(|e| e.seq <= cursor)
}

fn delivery_loop(shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let interval = shared.options.deliver_interval;
    // "At once" still needs a thread to notice new events: poll every 1 ms.
    let tick = interval.max(Duration::from_millis(1));
    let mut next = Instant::now() + tick;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now < next {
            thread::sleep((next - now).min(Duration::from_millis(10)));
            continue;
        }
        next += tick;
        if next < now {
            next = now + tick; // fell behind (slow machine): don't burst
        }
        loop {
            let batch = poll_once(&mut shared.lock());
            let got = !batch.is_empty();
            for (conn, writer, lines) in batch {
                let mut text = lines.join("\n");
                text.push('\n');
                let failed = writer.lock().unwrap().write_all(text.as_bytes()).is_err();
                if failed {
                    drop_conn(&shared, conn);
                }
            }
            // With a zero interval, drain everything now.
            if !(interval.is_zero() && got) {
                break;
            }
        }
    }
}

/// Forgets a connection (and its subscription) and cuts it.
fn drop_conn(shared: &Shared, conn: u64) {
    let mut st = shared.lock();
    st.subs.retain(|s| s.conn != conn);
    if let Some(i) = st.conns.iter().position(|(c, _)| *c == conn) {
        let (_, s) = st.conns.remove(i);
        let _ = s.shutdown(Shutdown::Both);
    }
}

// ===========================================================================
// Connections
// ===========================================================================

/// Reads one line byte by byte, so that whatever the client sent after it
/// stays unread in the socket: closing a Unix socket with unread data resets
/// the peer, which is what herdr's clients see on a second request.
fn read_line_unbuffered(s: &mut UnixStream) -> Option<String> {
    let mut bytes = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(_) if b[0] == b'\n' => break,
            Ok(_) => bytes.push(b[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    if bytes.is_empty() {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Sleeps, waking early when the server stops.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= end {
            return;
        }
        thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

fn connection(shared: Arc<Shared>, stop: Arc<AtomicBool>, conn: u64, mut stream: UnixStream) {
    serve(&shared, &stop, conn, &mut stream);
    let mut st = shared.lock();
    st.subs.retain(|s| s.conn != conn);
    st.conns.retain(|(c, _)| *c != conn);
    // Dropping `stream` closes it (a reset if a second request is unread).
}

fn serve(shared: &Shared, stop: &AtomicBool, conn: u64, stream: &mut UnixStream) {
    let Some(line) = read_line_unbuffered(stream) else {
        return;
    };
    let parsed = parse_envelope(&line);
    let (delay, silent, late) = {
        let mut st = shared.lock();
        let (id, method, params) = match &parsed {
            Ok((id, m, _)) => (
                id.clone(),
                m.clone(),
                super::raw_field(&line, "params").unwrap_or("").to_string(),
            ),
            Err(_) => (String::new(), String::new(), String::new()),
        };
        st.requests.push(LoggedRequest {
            at: Instant::now(),
            id,
            method,
            params,
            line: line.clone(),
        });
        let silent = st.silent
            || matches!((&st.silent_method, &parsed), (Some(m), Ok((_, method, _))) if m == method);
        let late = match (&st.late_method, &parsed) {
            (Some((m, late)), Ok((_, method, _))) if m == method => *late,
            _ => Duration::ZERO,
        };
        (st.response_delay, silent, late)
    };
    // Fault hook: a canned raw answer replaces the real one (see the end).
    if let Some(bytes) = take_canned(shared, &line) {
        let _ = stream.write_all(&bytes);
        return;
    }
    if silent {
        // Accept, never answer: hold the connection until the client or
        // the server gives up.
        let mut sink = [0u8; 256];
        while !stop.load(Ordering::SeqCst) && matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        return;
    }
    sleep_unless_stopped(delay, stop);
    if stop.load(Ordering::SeqCst) {
        return;
    }
    let (id, method, params) = match parsed {
        Ok(x) => x,
        Err(err) => {
            let _ = writeln!(stream, "{err}");
            return;
        }
    };
    let mut st = shared.lock();
    match handle(&mut st, &id, &method, &params) {
        Reply::Line(l) => {
            drop(st);
            sleep_unless_stopped(late, stop);
            let _ = writeln!(stream, "{l}");
        }
        Reply::Subscribe { id, entries } => {
            // herdr probes the panes one after the other before the ack;
            // the lock is let go meanwhile, as herdr's main loop goes on.
            let probes = entries
                .iter()
                .filter(|spec| matches!(spec, SubSpec::Status { .. }))
                .count() as u32;
            let probe_time = st.probe_time * probes;
            if !probe_time.is_zero() {
                drop(st);
                sleep_unless_stopped(probe_time, stop);
                st = shared.lock();
            }
            // Probe every pane first, like herdr: the first missing pane
            // answers with an error line (index 0-based, as recorded).
            for (i, spec) in entries.iter().enumerate() {
                let pane = match spec {
                    SubSpec::Status { pane_id, .. } => Some(pane_id),
                    SubSpec::Other(p) => p.as_ref(),
                    SubSpec::Lifecycle(_) => None,
                };
                if let Some(pane) = pane.filter(|p| st.model.pane_at(p).is_none()) {
                    let probe = format!("{id}:sub:{i}:probe");
                    let l = err_line(&probe, "pane_not_found", &format!("pane {pane} not found"));
                    drop(st);
                    let _ = writeln!(stream, "{l}");
                    return;
                }
            }
            let present = st.next_seq;
            let replay = shared.options.replay;
            let entries = entries
                .into_iter()
                .map(|spec| match spec {
                    SubSpec::Lifecycle(kind) => Entry::Lifecycle {
                        kind,
                        // Buffered events are replayed: start before them all.
                        cursor: if replay { 0 } else { present },
                    },
                    SubSpec::Status { pane_id, filter } => {
                        let initial = st
                            .status_line(&pane_id)
                            .filter(|(_, s)| filter.as_deref() == Some(*s))
                            .map(|(l, _)| l);
                        Entry::Status {
                            pane_id,
                            filter,
                            cursor: present,
                            initial,
                        }
                    }
                    SubSpec::Other(_) => Entry::Silent,
                })
                .collect();
            let writer = Arc::new(Mutex::new(stream.try_clone().unwrap()));
            // The ack goes out under the state lock, so no event can
            // overtake it.
            let ack = ok_line(&id, &Obj::new().s("type", "subscription_started"));
            if writeln!(writer.lock().unwrap(), "{ack}").is_err() {
                return;
            }
            st.subs.push(Subscriber {
                conn,
                writer,
                entries,
            });
            drop(st);
            // Anything the client writes now gets it disconnected; EOF
            // means it left. Either way the subscription ends.
            let mut b = [0u8; 64];
            loop {
                match stream.read(&mut b) {
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    _ => break,
                }
            }
            // Forget it before cutting, so a client that sees EOF also sees
            // `subscriber_count` drop.
            shared.lock().subs.retain(|s| s.conn != conn);
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

// ===========================================================================
// The server handle
// ===========================================================================

struct Run {
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
    delivery: JoinHandle<()>,
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

pub struct FakeHerdr {
    shared: Arc<Shared>,
    path: PathBuf,
    run: Option<Run>,
}

impl FakeHerdr {
    /// Starts a server on `socket_path` with herdr 0.8.2's behaviour.
    pub fn start(socket_path: &Path) -> FakeHerdr {
        Self::start_with(socket_path, Options::default())
    }

    pub fn start_with(socket_path: &Path, options: Options) -> FakeHerdr {
        let state = State {
            model: Model {
                // herdr lists every plugin installed: another one, disabled,
                // before cowbell.
                plugins: vec![
                    Plugin {
                        id: "demo.envdump".into(),
                        enabled: false,
                        root: None,
                    },
                    Plugin {
                        id: "cowbell".into(),
                        enabled: true,
                        root: None,
                    },
                ],
                ..Model::default()
            },
            events: VecDeque::new(),
            next_seq: 0,
            subs: Vec::new(),
            conns: Vec::new(),
            next_conn: 0,
            requests: Vec::new(),
            notifications: Vec::new(),
            response_delay: Duration::ZERO,
            silent: false,
            silent_method: None,
            late_method: None,
            probe_time: Duration::ZERO,
            fail_renames: 0,
            tracking: false,
            canned: Vec::new(),
        };
        let mut fake = FakeHerdr {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                options,
            }),
            path: socket_path.to_path_buf(),
            run: None,
        };
        fake.listen();
        fake
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    pub fn is_running(&self) -> bool {
        self.run.is_some()
    }

    fn listen(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let listener = UnixListener::bind(&self.path)
            .unwrap_or_else(|e| panic!("fake herdr: bind {}: {e}", self.path.display()));
        // Non-blocking so the acceptor can notice `stop` between attempts.
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let workers = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (shared, stop, workers) = (self.shared.clone(), stop.clone(), workers.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            stream.set_nonblocking(false).unwrap();
                            let conn = {
                                let mut st = shared.lock();
                                st.next_conn += 1;
                                let conn = st.next_conn;
                                st.conns.push((conn, stream.try_clone().unwrap()));
                                conn
                            };
                            let (shared, stop) = (shared.clone(), stop.clone());
                            let h = thread::spawn(move || connection(shared, stop, conn, stream));
                            let mut w = workers.lock().unwrap();
                            w.retain(|h: &JoinHandle<()>| !h.is_finished());
                            w.push(h);
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(2)),
                    }
                }
            })
        };
        let delivery = {
            let (shared, stop) = (self.shared.clone(), stop.clone());
            thread::spawn(move || delivery_loop(shared, stop))
        };
        self.run = Some(Run {
            stop,
            acceptor,
            delivery,
            workers,
        });
    }

    /// Stops the server: closes the listener and every connection
    /// (subscribers see end of file) and removes the socket file. The model
    /// is kept for `start_again`.
    pub fn stop(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        run.stop.store(true, Ordering::SeqCst);
        let _ = run.acceptor.join(); // drops the listener
        let _ = std::fs::remove_file(&self.path);
        {
            let mut st = self.shared.lock();
            for (_, s) in st.conns.drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
            st.subs.clear();
        }
        for h in run.workers.lock().unwrap().drain(..) {
            let _ = h.join();
        }
        let _ = run.delivery.join();
    }

    /// Restarts on the same path. Like a herdr restart: custom names, ids
    /// and layout survive (unless `keep_tabs` is false, which starts from an
    /// empty session), reported agent states are lost (every pane becomes
    /// `unknown`), the event buffer starts empty.
    pub fn start_again(&mut self, keep_tabs: bool) {
        self.stop();
        {
            let mut st = self.shared.lock();
            st.events.clear();
            if keep_tabs {
                for w in &mut st.model.workspaces {
                    for t in &mut w.tabs {
                        for p in &mut t.panes {
                            p.agent = None;
                            p.state = "unknown";
                            p.seen = true;
                        }
                    }
                }
            } else {
                st.model.workspaces.clear();
                st.model.focused_ws = None;
                st.model.next_ws = 0;
            }
        }
        self.listen();
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.shared.lock())
    }

    // --- test controls: act like the user in herdr's UI ---------------------

    /// Creates an empty workspace (add tabs with `add_tab`); the first one
    /// gets the focus.
    pub fn add_workspace(&self, label: &str) -> String {
        self.with(|s| s.add_workspace(label))
    }

    /// Creates a tab at the end of the workspace, with one pane; `name` None
    /// leaves it unnamed (label = position). The first tab of a workspace
    /// is focused; others are not.
    pub fn add_tab(&self, ws_id: &str, name: Option<&str>) -> String {
        self.with(|s| {
            let wi = s
                .model
                .ws_index(ws_id)
                .unwrap_or_else(|| panic!("fake herdr: no workspace {ws_id}"));
            let at = s.add_tab(wi, name, false);
            s.model.tab(at).id.clone()
        })
    }

    pub fn add_pane(&self, tab_id: &str) -> String {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.add_pane(at)
        })
    }

    /// Panes of a tab, in creation order.
    pub fn panes_of(&self, tab_id: &str) -> Vec<String> {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.model.tab(at).panes.iter().map(|p| p.id.clone()).collect()
        })
    }

    /// A pane whose `pane_created` and `pane_agent_detected` never reach
    /// any subscriber (a lifecycle reader that fell behind and lost them):
    /// the agent "testbot" already reports `state` in it.
    #[allow(dead_code)]
    pub fn add_pane_unannounced(&self, tab_id: &str, state: &'static str) -> String {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            let mut pane = s.new_pane(at.0);
            pane.agent = Some("testbot".to_string());
            pane.state = state;
            let id = pane.id.clone();
            s.model.tab_mut(at).panes.push(pane);
            id
        })
    }

    /// Closes a pane; closing a tab's last pane closes the tab.
    pub fn close_pane(&self, pane_id: &str) {
        self.with(|s| {
            let at = s
                .model
                .pane_at(pane_id)
                .unwrap_or_else(|| panic!("fake herdr: no pane {pane_id}"));
            s.close_pane(at)
        })
    }

    /// Closes a tab; closing a workspace's last tab closes the workspace.
    pub fn close_tab(&self, tab_id: &str) {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.close_tab(at)
        })
    }

    pub fn close_workspace(&self, ws_id: &str) {
        self.with(|s| {
            let wi = s
                .model
                .ws_index(ws_id)
                .unwrap_or_else(|| panic!("fake herdr: no workspace {ws_id}"));
            s.close_workspace(wi)
        })
    }

    /// Moves a tab to a 1-based position in its workspace.
    pub fn move_tab(&self, tab_id: &str, position: usize) {
        assert!(position >= 1, "positions are 1-based");
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.move_tab(at, position - 1);
        })
    }

    pub fn focus_tab(&self, tab_id: &str) {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.focus_tab(at)
        })
    }

    /// A rename by the user or another plugin (emits `tab_renamed`).
    pub fn rename_tab(&self, tab_id: &str, label: &str) {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.rename_tab(at, label)
        })
    }

    /// Like `pane.report_agent` with agent "testbot".
    pub fn set_status(&self, pane_id: &str, state: &str) {
        self.set_agent_status(pane_id, "testbot", state)
    }

    pub fn set_agent_status(&self, pane_id: &str, agent: &str, state: &str) {
        assert!(
            AGENT_STATES.contains(&state),
            "fake herdr: agents report idle, working, blocked or unknown, not {state:?}"
        );
        self.with(|s| {
            let at = s
                .model
                .pane_at(pane_id)
                .unwrap_or_else(|| panic!("fake herdr: no pane {pane_id}"));
            s.report_agent(at, agent, state)
        })
    }

    /// The pane's program sets its terminal title: herdr sends the pane's
    /// status event although the status stayed the same (its subscription
    /// compares the title too).
    #[allow(dead_code)]
    pub fn set_title(&self, pane_id: &str, title: &str) {
        self.with(|s| {
            let at = s
                .model
                .pane_at(pane_id)
                .unwrap_or_else(|| panic!("fake herdr: no pane {pane_id}"));
            s.model.workspaces[at.0].tabs[at.1].panes[at.2].title = Some(title.to_string());
            s.emit_status(pane_id);
        })
    }

    /// The tab's current label; panics if it does not exist.
    pub fn label(&self, tab_id: &str) -> String {
        self.with(|s| {
            let at = tab_at(s, tab_id);
            s.model.label(at)
        })
    }

    pub fn tabs(&self) -> Vec<TabSnapshot> {
        self.with(|s| s.snapshot().tabs)
    }

    pub fn panes(&self) -> Vec<PaneSnapshot> {
        self.with(|s| s.snapshot().panes)
    }

    pub fn snapshot(&self) -> Snapshot {
        self.with(|s| s.snapshot())
    }

    /// Installs the plugin if needed and sets its enabled flag.
    pub fn set_plugin(&self, plugin_id: &str, enabled: bool) {
        self.with(
            |s| match s.model.plugins.iter_mut().find(|p| p.id == plugin_id) {
                Some(p) => p.enabled = enabled,
                None => s.model.plugins.push(Plugin {
                    id: plugin_id.to_string(),
                    enabled,
                    root: None,
                }),
            },
        )
    }

    /// Where `plugin.list` says the plugin's files (its root and manifest)
    /// are.
    pub fn set_plugin_root(&self, plugin_id: &str, root: &Path) {
        self.with(|s| {
            for p in s.model.plugins.iter_mut().filter(|p| p.id == plugin_id) {
                p.root = Some(root.to_string_lossy().into_owned());
            }
        })
    }

    pub fn uninstall_plugin(&self, plugin_id: &str) {
        self.with(|s| s.model.plugins.retain(|p| p.id != plugin_id))
    }

    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.with(|s| s.requests.clone())
    }

    /// Requests of one method.
    pub fn requests_of(&self, method: &str) -> Vec<LoggedRequest> {
        self.with(|s| {
            s.requests
                .iter()
                .filter(|r| r.method == method)
                .cloned()
                .collect()
        })
    }

    pub fn clear_requests(&self) {
        self.with(|s| s.requests.clear())
    }

    pub fn notifications(&self) -> Vec<Notification> {
        self.with(|s| s.notifications.clone())
    }

    /// Number of `tab.rename` requests received for the tab.
    pub fn renames_of(&self, tab_id: &str) -> usize {
        self.with(|s| count_renames(&s.requests, tab_id))
    }

    /// The event lines now in the buffer (lifecycle events as sent to
    /// subscribers; status changes in their `pane.agent_status_changed` form).
    pub fn events(&self) -> Vec<String> {
        self.with(|s| s.events.iter().map(|e| e.line.clone()).collect())
    }

    /// Number of live subscription connections.
    pub fn subscriber_count(&self) -> usize {
        self.with(|s| s.subs.len())
    }

    /// How many panes each live status subscription covers.
    #[allow(dead_code)]
    pub fn status_subscription_sizes(&self) -> Vec<usize> {
        self.with(|s| {
            s.subs
                .iter()
                .map(|sub| {
                    sub.entries
                        .iter()
                        .filter(|e| matches!(e, Entry::Status { .. }))
                        .count()
                })
                .filter(|&n| n > 0)
                .collect()
        })
    }

    /// Waits (polling every 10 ms) until exactly `n` subscriptions are live.
    pub fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.subscriber_count() != n {
            if Instant::now() >= end {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// Polls `pred` on a snapshot every 10 ms until it holds or `timeout`
    /// passes; returns whether it held.
    pub fn wait_until(&self, timeout: Duration, mut pred: impl FnMut(&Snapshot) -> bool) -> bool {
        let end = Instant::now() + timeout;
        loop {
            if pred(&self.snapshot()) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    // --- fault controls ---------------------------------------------------

    /// Answer every request only after `delay`.
    pub fn set_response_delay(&self, delay: Duration) {
        self.with(|s| s.response_delay = delay)
    }

    /// Accept connections and read requests but never answer.
    pub fn set_silent(&self, silent: bool) {
        self.with(|s| s.silent = silent)
    }

    /// Accept and read requests of `method` but never answer them (a herdr
    /// that lists tabs and then stalls on renames); `None` ends it.
    pub fn set_silent_method(&self, method: Option<&str>) {
        self.with(|s| s.silent_method = method.map(str::to_string))
    }

    /// Answer requests of `method` at once but write the answer `late`
    /// later (a herdr whose answer is out of date when it is read); `None`
    /// ends it.
    pub fn set_late_answer(&self, method: Option<&str>, late: Duration) {
        self.with(|s| s.late_method = method.map(|m| (m.to_string(), late)))
    }

    /// Each pane of a status subscription takes this long to probe before
    /// herdr acknowledges it: a large subscription is acknowledged late.
    #[allow(dead_code)]
    pub fn set_probe_time(&self, per_pane: Duration) {
        self.with(|s| s.probe_time = per_pane)
    }

    /// Writes raw bytes to every open subscription connection.
    pub fn push_raw(&self, bytes: &[u8]) {
        let writers: Vec<_> = self.with(|s| s.subs.iter().map(|s| s.writer.clone()).collect());
        for w in writers {
            let _ = w.lock().unwrap().write_all(bytes);
        }
    }

    /// Closes every subscription connection (the clients see EOF).
    pub fn drop_subscriptions(&self) {
        self.with(|s| {
            let conns: Vec<u64> = s.subs.drain(..).map(|s| s.conn).collect();
            for (c, stream) in &s.conns {
                if conns.contains(c) {
                    let _ = stream.shutdown(Shutdown::Both);
                }
            }
        })
    }

    /// The next `n` `tab.rename` requests fail with `tab_not_found`.
    pub fn fail_next_renames(&self, n: usize) {
        self.with(|s| s.fail_renames = n)
    }
}

fn tab_at(s: &State, tab_id: &str) -> TabAt {
    s.model
        .tab_at(tab_id)
        .unwrap_or_else(|| panic!("fake herdr: no tab {tab_id}"))
}

impl Drop for FakeHerdr {
    fn drop(&mut self) {
        self.stop();
    }
}

// ===========================================================================
// Additions for tests/bench.rs: cheap access to the request log (the bench
// polls it every millisecond, so it must not clone the whole log each time)
// ===========================================================================

impl FakeHerdr {
    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        self.with(|s| s.requests.len())
    }

    /// The requests received after the first `from` ones.
    pub fn requests_since(&self, from: usize) -> Vec<LoggedRequest> {
        self.with(|s| {
            s.requests
                .get(from..)
                .map(<[_]>::to_vec)
                .unwrap_or_default()
        })
    }
}

// ===========================================================================
// Fault controls for tests/faults.rs and tests/soak.rs
//
// Kept apart from the rest: a canned answer replaces what the server would
// have said to the next matching request, and the connection then closes.
// Nothing here changes the server unless a test asks for it.
// ===========================================================================

/// A raw answer for the next `remaining` requests of `method` whose line
/// contains `contains` (if given).
struct Canned {
    method: String,
    contains: Option<String>,
    bytes: Arc<Vec<u8>>,
    remaining: usize,
}

/// Takes the canned answer for a request line, if one matches.
fn take_canned(shared: &Shared, line: &str) -> Option<Arc<Vec<u8>>> {
    let mut st = shared.lock();
    if st.canned.is_empty() {
        return None;
    }
    let method = super::raw_field(line, "method")?
        .trim_matches('"')
        .to_string();
    let index = st.canned.iter().position(|c| {
        c.remaining > 0
            && c.method == method
            && c.contains.as_deref().is_none_or(|text| line.contains(text))
    })?;
    let canned = &mut st.canned[index];
    canned.remaining -= 1;
    let bytes = canned.bytes.clone();
    st.canned.retain(|c| c.remaining > 0);
    Some(bytes)
}

impl FakeHerdr {
    /// The next `times` requests of `method` get `bytes` (exactly, no
    /// newline added) instead of their answer; then the connection closes.
    /// `bytes` may be half a line, garbage, or a line of the wrong shape.
    pub fn answer_raw(&self, method: &str, times: usize, bytes: &[u8]) {
        self.answer_raw_if(method, None, times, bytes)
    }

    /// Like `answer_raw`, for requests whose line contains `contains` (to
    /// tell the lifecycle subscription, which lists `tab.created`, from
    /// the status one, which lists `pane.agent_status_changed`).
    pub fn answer_raw_if(&self, method: &str, contains: Option<&str>, times: usize, bytes: &[u8]) {
        self.with(|s| {
            s.canned.push(Canned {
                method: method.to_string(),
                contains: contains.map(str::to_string),
                bytes: Arc::new(bytes.to_vec()),
                remaining: times,
            })
        })
    }

    /// Forgets every canned answer not yet used.
    pub fn clear_canned(&self) {
        self.with(|s| s.canned.clear())
    }

    /// How many canned answers are still waiting for their request.
    pub fn canned_left(&self) -> usize {
        self.with(|s| s.canned.iter().map(|c| c.remaining).sum())
    }

    /// The server dies in the middle of a line: `partial` (no newline) goes
    /// to every subscriber, then the server stops. `start_again` revives it.
    pub fn die_mid_line(&mut self, partial: &[u8]) {
        self.push_raw(partial);
        // Let the bytes reach the clients before the connections close.
        thread::sleep(Duration::from_millis(20));
        self.stop();
    }
}
