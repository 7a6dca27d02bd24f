//! The daemon's one `poll(2)` loop: sockets, signals and deadlines.
//!
//! Each turn it reads the clock once, fires the deadlines that are due,
//! builds the poll set from what is open (asking for `POLLOUT` only where
//! bytes wait to be written), sleeps until the earliest deadline, and reacts
//! to what became readable. It holds two subscriptions (lifecycle events and
//! per-pane agent status) and opens one connection per request, since herdr
//! answers one request per connection. The decisions themselves come from
//! the pure core in `resync` and `fights`; this module moves bytes, keeps
//! time, and keeps the connection going: retries, backoff, re-listing panes
//! whose events were lost, and stopping when the plugin is gone.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::config;
use crate::daemon::{self, Holder, Lock};
use crate::fights::Timing;
use crate::files;
use crate::herdr::{self, LineBuffer, Message, PaneInfo, TabInfo};
use crate::log::Log;
use crate::pane_statuses::PaneStatuses;
use crate::paths::Paths;
use crate::resync::{Note, Rename, Settings, Tab, Tracker};
use crate::signals::{self, Signals};
use crate::state::{self, Clock, State};
use crate::sys;
use crate::text::quote;

const DEBOUNCE: Duration = Duration::from_millis(100);
/// How soon a rename that keeps the tab's base is looked at. Mostly these
/// are cowbell's old echoes, replayed to a new subscription at about ten a
/// second for up to a minute: after the debounce, each would bring a
/// resync of its own. The rest are icons put in front by someone else.
const LAZY: Duration = Duration::from_secs(1);
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
const IDLE_EXIT: Duration = Duration::from_secs(120);
const HEARTBEAT: Duration = Duration::from_secs(60);
/// How long a stop may take to restore names before giving up.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// After a failed request, the resync that tries again (see `retry_later`).
const RETRY: Duration = Duration::from_secs(1);
/// Requests open at once; herdr serves each on its own connection.
const MAX_IN_FLIGHT: usize = 16;
/// How long answers are left to arrive after the heartbeat fires before
/// the loop looks at them. The heartbeat's two answers (plugin.list and
/// tab.list), polled at once, usually come a few milliseconds apart and wake
/// the loop twice; read together, a quiet minute costs one wake-up for the
/// timer and one for herdr. Subscriptions and signals are polled meanwhile;
/// answers to other requests in flight wait too, at most this long, once a
/// minute.
const HEARTBEAT_GATHER: Duration = Duration::from_millis(20);

/// The specification's durations, divided by `COWBELL_TIME_SCALE` in tests.
#[derive(Clone, Copy, Debug)]
pub struct Durations {
    pub debounce: Duration,
    pub lazy: Duration,
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    pub idle_exit: Duration,
    pub heartbeat: Duration,
    pub heartbeat_gather: Duration,
    pub fight_timing: Timing,
    pub scale: u32,
}

impl Durations {
    /// The durations for this run: `COWBELL_TIME_SCALE=N` (N > 1, a
    /// test-only knob) divides each one by N. Nothing else reads it.
    pub fn from_env() -> Durations {
        let scale = std::env::var("COWBELL_TIME_SCALE")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        Durations::scaled(scale.unwrap_or(1))
    }

    pub fn scaled(scale: u32) -> Durations {
        // Past 1000 the debounce would round to nothing and the loop spin.
        let scale = scale.clamp(1, 1000);
        Durations {
            debounce: DEBOUNCE / scale,
            lazy: LAZY / scale,
            backoff_first: BACKOFF_FIRST / scale,
            backoff_max: BACKOFF_MAX / scale,
            idle_exit: IDLE_EXIT / scale,
            heartbeat: HEARTBEAT / scale,
            heartbeat_gather: HEARTBEAT_GATHER / scale,
            fight_timing: Timing::scaled(scale),
            scale,
        }
    }
}

/// Why a request was made, which decides what its answer does.
#[derive(Clone, Debug, PartialEq)]
enum Purpose {
    ListTabs {
        restore: bool,
    },
    Rename {
        tab_id: String,
        label: String,
        restore: bool,
        /// A spinner frame: not worth a line in the log.
        quiet: bool,
    },
    ListPanes,
    ListPlugins,
}

impl Purpose {
    fn is_list(&self) -> bool {
        matches!(self, Purpose::ListTabs { .. } | Purpose::ListPanes)
    }
}

/// One request on its own connection.
struct Pending {
    stream: UnixStream,
    unwritten: Vec<u8>,
    lines: LineBuffer,
    deadline: Instant,
    purpose: Purpose,
}

/// The panes the status subscription covers, as their number and a
/// fingerprint of the request that lists them: enough to see that the set
/// changed, without keeping 3000 ids for the daemon's whole life.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PaneSet {
    count: usize,
    fingerprint: u64,
}

/// A subscription connection: the request goes out once, then lines come in.
struct Subscription {
    stream: UnixStream,
    unwritten: Vec<u8>,
    lines: LineBuffer,
    /// Until the ack arrives, the deadline for it.
    ack_deadline: Option<Instant>,
}

impl Subscription {
    fn open(
        socket: &std::path::Path,
        params: String,
        ack_timeout: Duration,
        now: Instant,
    ) -> io::Result<Subscription> {
        let mut stream = sys::connect_unix(socket)?;
        let mut unwritten = herdr::request_line("sub", "events.subscribe", params).into_bytes();
        // As much as the socket takes now; the rest when it is writable.
        flush(&mut stream, &mut unwritten)?;
        Ok(Subscription {
            stream,
            unwritten,
            lines: LineBuffer::default(),
            ack_deadline: Some(now + ack_timeout),
        })
    }

    /// Writes what is left of the request, then reads what came; `None`
    /// while the request is still going out.
    fn pump(&mut self, revents: libc::c_short) -> Option<Input> {
        if !self.unwritten.is_empty() {
            if let Err(error) = flush(&mut self.stream, &mut self.unwritten) {
                return Some(Input::Failed(format!("subscription write failed: {error}")));
            }
            if revents & (libc::POLLHUP | libc::POLLERR) == 0 {
                return None;
            }
        }
        Some(read_lines(&mut self.stream, &mut self.lines))
    }
}

/// What reading a connection produced.
enum Input {
    Lines(Vec<Vec<u8>>),
    /// Lines read before the peer closed, then the end.
    Closed(Vec<Vec<u8>>),
    Failed(String),
}

/// How much one turn of the loop reads from one connection. herdr sends
/// one event per subscription entry per 100 ms; a peer that floods would
/// otherwise have every line it sent held at once (a peer writing without
/// pause grew the daemon past 100 MiB). The rest stays in the socket: poll
/// reports it readable again next turn.
const READ_PER_TURN: usize = 1024 * 1024;

/// The pause after a failed poll before the next try.
const POLL_FAILED_PAUSE: Duration = Duration::from_millis(100);

/// Reads what is there without blocking, up to `READ_PER_TURN`, and
/// splits it into lines.
fn read_lines(stream: &mut impl Read, lines: &mut LineBuffer) -> Input {
    let mut chunk = [0u8; 64 * 1024];
    let mut complete = Vec::new();
    let mut taken = 0;
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => {
                // Every read below takes its complete lines at once: only
                // an unterminated rest can be left.
                complete.extend(lines.take_rest());
                return Input::Closed(complete);
            }
            Ok(n) => {
                if lines.push(&chunk[..n]).is_err() {
                    return Input::Failed(format!(
                        "line from herdr longer than {} bytes",
                        herdr::MAX_LINE
                    ));
                }
                while let Some(line) = lines.next_line() {
                    complete.push(line);
                }
                taken += n;
                if taken >= READ_PER_TURN {
                    return Input::Lines(complete);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                return Input::Lines(complete);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Input::Failed(error.to_string()),
        }
    }
}

/// Writes what it can; `Err` when the peer is gone.
fn flush(stream: &mut UnixStream, unwritten: &mut Vec<u8>) -> io::Result<()> {
    while !unwritten.is_empty() {
        match stream.write(unwritten) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                unwritten.drain(..n);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    // A status subscription of 3000 panes is a request of about 180 KB; a
    // drained Vec would keep that capacity for the connection's whole life.
    *unwritten = Vec::new();
    Ok(())
}

/// How the stop after a signal or a failed heartbeat goes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    /// Restore every name, then exit. `listed` once the restore's
    /// `tab.list` is on its way.
    Restore { deadline: Instant, listed: bool },
    /// A new daemon takes over; names stay. Exit once the renames in flight
    /// are answered, or at `deadline`: a label sent but not yet confirmed
    /// lives only in memory, and the next daemon would take it for someone
    /// else's rename, a fight.
    /// `from`: the cowbell process that asked, which must still be
    /// there when the daemon leaves (see `fire_deadlines`).
    Quiet {
        deadline: Instant,
        from: Option<u32>,
    },
}

/// Where the poll set's entries came from.
#[derive(Clone, Copy)]
enum Source {
    Signals,
    Lifecycle,
    Status,
    NextStatus,
    Request(usize),
}

/// Whether the plugin's files are still there. herdr keeps listing a
/// plugin whose directory was deleted without an uninstall (a linked
/// checkout removed), with a warning; its hooks and actions cannot run any
/// more, so no `off` could give the names back. The manifest counts as gone
/// when checks half a heartbeat apart or more (30 s) keep missing it, so an
/// upgrade that replaces the files is not taken for it (a reconnect brings
/// a check of its own, maybe a moment after the heartbeat's), and only
/// after a check found it: a daemon that cannot see herdr's files (another
/// mount namespace) never stops for that.
#[derive(Default)]
struct FilesCheck {
    seen: bool,
    missing_since: Option<Instant>,
}

impl FilesCheck {
    /// Takes whether this check missed the manifest.
    fn gone(&mut self, missing: bool, now: Instant, apart: Duration) -> bool {
        if !missing {
            self.seen = true;
            self.missing_since = None;
            return false;
        }
        if !self.seen {
            return false;
        }
        let since = *self.missing_since.get_or_insert(now);
        now.saturating_duration_since(since) >= apart
    }
}

pub struct EventLoop {
    paths: Paths,
    /// The pidfile's lock, held for the daemon's life (and taken again if
    /// the pidfile is deleted under it).
    lock: Lock,
    log: Log,
    signals: Signals,
    durations: Durations,
    settings: Settings,
    tracker: Tracker,
    clock: Clock,
    last_saved: Option<u64>,
    /// The last save failed (and was logged).
    save_failing: bool,

    lifecycle: Option<Subscription>,
    /// The status subscription herdr acknowledged, and its panes.
    status: Option<Subscription>,
    subscribed_panes: PaneSet,
    /// The subscription for a changed pane set, until herdr acknowledges
    /// it. Before the ack herdr probes every pane (seconds at 3000), and
    /// the old subscription goes on reporting the panes it has meanwhile.
    next_status: Option<(Subscription, PaneSet)>,
    /// The pane set changed again while `next_status` waited: list the
    /// panes once it is acknowledged. Replacing it at once would start the
    /// probe over, and panes created every second would keep it from ever
    /// being acknowledged.
    next_status_stale: bool,
    /// What the status subscription's events said, to tell a new status
    /// from a new title.
    pane_statuses: PaneStatuses,
    connected: bool,
    in_flight: Vec<Pending>,
    /// Requests waiting for a slot, oldest first. A Vec, whose removal from
    /// the front moves the rest: the queue is long only for the renames of a
    /// first resync (1000 tabs: 0.3 ms of moves in all), and a VecDeque's
    /// code cost the binary 1.5 KiB more.
    queue: Vec<Purpose>,

    debounce_deadline: Option<Instant>,
    /// A resync for events that can wait (see `LAZY`).
    lazy_deadline: Option<Instant>,
    reconnect_deadline: Option<Instant>,
    backoff: Duration,
    /// When a failed try to reach herdr ends the daemon. No timer of its
    /// own: the last reconnect falls on it (see `connect_failed`).
    idle_exit_deadline: Option<Instant>,
    heartbeat_deadline: Option<Instant>,
    spinner_deadline: Option<Instant>,
    cooldown_deadline: Option<Instant>,
    retry_deadline: Option<Instant>,
    /// Retries scheduled since the last resync without a failed request,
    /// and whether a request of the running resync failed.
    failed_tries: u32,
    resync_failed: bool,
    plugin_check_deadline: Option<Instant>,
    files_check: FilesCheck,
    /// Until then, answers to requests are not polled (`HEARTBEAT_GATHER`).
    gather_deadline: Option<Instant>,
    /// When to list panes and subscribe again after the status subscription
    /// was refused or lost; `status_backoff` grows like the reconnect one, so
    /// a server that keeps refusing is not asked ten times a second.
    resubscribe_deadline: Option<Instant>,
    status_backoff: Duration,
    /// Status subscriptions herdr did not acknowledge in time since the
    /// connection started: each doubles the wait for the next ack.
    status_ack_misses: u32,
    /// herdr's last refusal of the event subscription, for the exit message:
    /// a server that answers but refuses is not "no server".
    refusal: Option<String>,

    /// A resync runs from its `tab.list` until its last rename is answered.
    resync_running: bool,
    /// The resync under way only moves the spinner on, or only finds tabs
    /// waiting for a retry (`Plan::is_quiet`): it is neither logged nor
    /// saved.
    resync_quiet: bool,
    resync_wanted: bool,
    panes_wanted: bool,
    /// Renames of the running resync still unanswered.
    renames_outstanding: usize,
    /// Renames of the stop's restore still unanswered.
    restores_outstanding: usize,
    /// A rename of the restore failed: once the others are answered, the
    /// restore lists the tabs again (until the stop's deadline).
    restore_failed: bool,
    /// The server-wide off flag, written with the state.
    off: bool,
    stop: Option<Stop>,
    exit_code: Option<u8>,
    request_counter: u64,
}

impl EventLoop {
    /// `loaded` is state.json as `state::load` read it, with its warning.
    pub fn new(
        paths: Paths,
        lock: Lock,
        mut log: Log,
        signals: Signals,
        durations: Durations,
        loaded: (State, Option<String>),
        clock: Clock,
    ) -> EventLoop {
        let settings = load_settings(&paths, &mut log, &durations);
        let (saved, warning) = loaded;
        if let Some(warning) = warning {
            log.line_fmt(format_args!("state: {warning}"));
        }
        let mut tracker = state::to_tracker(&saved, clock, &durations.fight_timing);
        if saved.daemon_running {
            tracker.mark_left_by_killed_daemon();
        }
        EventLoop {
            paths,
            lock,
            log,
            signals,
            durations,
            settings,
            tracker,
            clock,
            last_saved: None,
            save_failing: false,
            lifecycle: None,
            status: None,
            subscribed_panes: PaneSet::default(),
            next_status: None,
            next_status_stale: false,
            pane_statuses: PaneStatuses::default(),
            connected: false,
            in_flight: Vec::new(),
            queue: Vec::new(),
            debounce_deadline: None,
            lazy_deadline: None,
            reconnect_deadline: Some(Instant::now()),
            backoff: durations.backoff_first,
            idle_exit_deadline: None,
            heartbeat_deadline: None,
            spinner_deadline: None,
            cooldown_deadline: None,
            retry_deadline: None,
            failed_tries: 0,
            resync_failed: false,
            plugin_check_deadline: None,
            gather_deadline: None,
            resubscribe_deadline: None,
            status_backoff: durations.backoff_first,
            status_ack_misses: 0,
            refusal: None,
            files_check: FilesCheck::default(),
            resync_running: false,
            resync_quiet: false,
            resync_wanted: false,
            panes_wanted: false,
            renames_outstanding: 0,
            restores_outstanding: 0,
            restore_failed: false,
            off: saved.off,
            stop: None,
            exit_code: None,
            request_counter: 0,
        }
    }

    /// Runs until the daemon should exit; returns the exit code, and the
    /// lock for the caller to let go.
    pub fn run(mut self) -> (u8, Lock) {
        self.log.line_fmt(format_args!(
            "started: socket {}, state {}",
            self.paths.socket.display(),
            self.paths.server_dir.display()
        ));
        // On record before the first rename: killed after it, this daemon
        // leaves a state.json that says so (see `State::daemon_running`).
        self.save();
        // The clock is read once per turn, right after the wait: the same
        // `now` handles what woke us, fires what is due and times the next wait.
        let mut now = Instant::now();
        loop {
            self.fire_deadlines(now);
            if let Some(code) = self.exit_code {
                self.reclaim_pidfile();
                // Written even if unchanged: it may have gone with its
                // directory, and names not given back must be on record.
                self.last_saved = None;
                self.save();
                self.log.line_fmt(format_args!("exit {code}"));
                return (code, self.lock);
            }
            self.start_queued(now);
            // A request that failed at once may have decided the exit
            // (the restore's list with no herdr): no poll to wait first.
            if self.exit_code.is_some() {
                continue;
            }
            let (mut entries, sources) = self.poll_set();
            let timeout = self.poll_timeout(now);
            let polled = sys::poll(&mut entries, timeout);
            now = Instant::now();
            if let Err(error) = polled {
                self.log.line_fmt(format_args!("poll failed: {error}"));
                // Not a busy loop if poll keeps failing (ENOMEM).
                std::thread::sleep(POLL_FAILED_PAUSE);
                continue;
            }
            // The set lists requests last, in index order; walking it
            // backwards lets a handled request be swap_removed without
            // moving one that is still to be handled.
            for (entry, source) in entries.iter().zip(&sources).rev() {
                let revents = entry.revents;
                if revents == 0 {
                    continue;
                }
                match *source {
                    Source::Signals => self.on_signals(now),
                    Source::Lifecycle => self.on_lifecycle_ready(revents, now),
                    Source::Status => self.on_status_ready(false, revents, now),
                    Source::NextStatus => self.on_status_ready(true, revents, now),
                    Source::Request(index) => self.on_request_ready(index, revents, now),
                }
            }
        }
    }

    fn poll_set(&self) -> (Vec<libc::pollfd>, Vec<Source>) {
        let mut entries = vec![sys::poll_entry(self.signals.fd(), sys::READABLE)];
        let mut sources = vec![Source::Signals];
        let interest = |unwritten: &[u8]| {
            if unwritten.is_empty() {
                sys::READABLE
            } else {
                sys::WRITABLE
            }
        };
        if let Some(sub) = &self.lifecycle {
            entries.push(sys::poll_entry(
                sub.stream.as_fd(),
                interest(&sub.unwritten),
            ));
            sources.push(Source::Lifecycle);
        }
        // The next subscription before the current one, so that the
        // current one is read first in the backwards walk of `run`: an ack
        // that makes the next one current is the turn's last status read.
        if let Some((sub, _)) = &self.next_status {
            entries.push(sys::poll_entry(
                sub.stream.as_fd(),
                interest(&sub.unwritten),
            ));
            sources.push(Source::NextStatus);
        }
        if let Some(sub) = &self.status {
            entries.push(sys::poll_entry(
                sub.stream.as_fd(),
                interest(&sub.unwritten),
            ));
            sources.push(Source::Status);
        }
        for (index, pending) in self.in_flight.iter().enumerate() {
            // A request that times out within the gather is polled, so an
            // answer already there is read rather than given up on.
            let held = self
                .gather_deadline
                .is_some_and(|until| pending.deadline > until);
            if held && pending.unwritten.is_empty() {
                continue;
            }
            entries.push(sys::poll_entry(
                pending.stream.as_fd(),
                interest(&pending.unwritten),
            ));
            sources.push(Source::Request(index));
        }
        (entries, sources)
    }

    fn deadlines(&self) -> impl Iterator<Item = Instant> + '_ {
        let stop = match self.stop {
            Some(Stop::Restore { deadline, .. } | Stop::Quiet { deadline, .. }) => Some(deadline),
            None => None,
        };
        [
            self.debounce_deadline,
            self.lazy_deadline,
            self.reconnect_deadline,
            self.heartbeat_deadline,
            self.spinner_deadline,
            self.cooldown_deadline,
            self.retry_deadline,
            self.plugin_check_deadline,
            self.gather_deadline,
            self.resubscribe_deadline,
            stop,
            self.lifecycle.as_ref().and_then(|s| s.ack_deadline),
            self.next_status.as_ref().and_then(|(s, _)| s.ack_deadline),
        ]
        .into_iter()
        .flatten()
        .chain(self.in_flight.iter().map(|p| p.deadline))
    }

    /// Milliseconds until the earliest deadline, rounded up so a wait of
    /// 0.4 ms does not become a busy loop of zero-length polls.
    fn poll_timeout(&self, now: Instant) -> libc::c_int {
        match self.deadlines().min() {
            None => -1,
            Some(deadline) => wait_millis(deadline.saturating_duration_since(now)),
        }
    }

    /// The deadlines that end the loop: a handover's or a restore's time
    /// is up, or no herdr came for too long. True when the loop is to end
    /// (or, after a handover that did not happen, start over).
    fn fire_exit_deadlines(&mut self, now: Instant) -> bool {
        if let Some(Stop::Quiet { deadline, from }) = self.stop
            && (now >= deadline
                || !self
                    .in_flight
                    .iter()
                    .any(|p| matches!(p.purpose, Purpose::Rename { .. })))
        {
            // A replacing start waits 5 s for the lock, then gives up. If
            // this daemon was stopped meanwhile (SIGSTOP, a frozen cgroup,
            // a slow fsync), leaving now would leave no daemon at all.
            if let Some(pid) = from
                && !sys::is_alive(pid)
            {
                self.log.line_fmt(format_args!(
                    "the process that asked to take over (pid {pid}) has given up waiting: carrying on"
                ));
                // The handover dropped the queue mid-resync: start over as
                // after a lost connection, which resets all of it.
                self.stop = None;
                self.disconnected("carrying on after a handover that did not happen", now);
                return true;
            }
            // Decided: the taker, which finds the pidfile empty, waits for
            // the lock beyond its 5 s now (see `daemon::take_over`), as the
            // last save's sync may take that long. (Also when it is not
            // known who asked: a plain `kill`, as on macOS.)
            if let Err(error) = self.lock.clear_pid() {
                self.log
                    .line_fmt(format_args!("cannot empty the pidfile: {error}"));
            }
            self.exit_code = Some(0);
            return true;
        }
        if let Some(Stop::Restore { deadline, .. }) = self.stop
            && now >= deadline
        {
            self.log
                .line("stop: names not all restored in time; state kept for remove-icons");
            self.exit_code = Some(0);
            return true;
        }
        false
    }

    fn fire_deadlines(&mut self, now: Instant) {
        if self.fire_exit_deadlines(now) {
            return;
        }
        let due = |slot: Option<Instant>| slot.is_some_and(|deadline| now >= deadline);
        if due(self.reconnect_deadline) {
            self.reconnect_deadline = None;
            self.connect(now);
        }
        if due(self.lifecycle.as_ref().and_then(|s| s.ack_deadline)) {
            self.disconnected("herdr did not acknowledge the subscription", now);
        }
        if due(self.next_status.as_ref().and_then(|(s, _)| s.ack_deadline)) {
            self.status_ack_misses = self.status_ack_misses.saturating_add(1);
            self.status_lost(true, "status subscription not acknowledged", now);
        }
        let mut index = self.in_flight.len();
        while index > 0 {
            index -= 1;
            if now >= self.in_flight[index].deadline {
                let pending = self.in_flight.swap_remove(index);
                self.log
                    .line_fmt(format_args!("{} timed out", describe(&pending.purpose)));
                self.answer_lost(&pending.purpose);
                self.request_failed(pending.purpose, now);
            }
        }
        if due(self.debounce_deadline) || due(self.lazy_deadline) {
            self.debounce_deadline = None;
            self.lazy_deadline = None;
            self.begin_resync();
        }
        if due(self.retry_deadline) {
            self.retry_deadline = None;
            match &mut self.stop {
                // The restore's list or one of its renames failed: list
                // again, and rename what still carries an icon.
                Some(Stop::Restore { listed, .. }) => *listed = false,
                _ => self.begin_resync(),
            }
        }
        if due(self.resubscribe_deadline) {
            self.resubscribe_deadline = None;
            self.panes_wanted = true;
            self.open_debounce(now);
        }
        // The heartbeat: 60 s after the last resync (a quiet server), and in
        // any case 60 s after the last plugin check (a busy server resyncs
        // often, which keeps moving the first). Both jobs go together, so a
        // quiet server costs one timer wake-up a minute.
        if due(self.heartbeat_deadline) || due(self.plugin_check_deadline) {
            self.heartbeat_deadline = None;
            self.plugin_check_deadline = Some(now + self.durations.heartbeat);
            self.log.reopen_if_moved();
            if self.connected && self.stop.is_none() {
                self.queue.push(Purpose::ListPlugins);
                self.begin_resync();
                self.gather_deadline = Some(now + self.durations.heartbeat_gather);
            }
        }
        if due(self.gather_deadline) {
            self.gather_deadline = None;
        }
        if due(self.cooldown_deadline) {
            self.cooldown_deadline = None;
            self.open_debounce(now);
        }
        if due(self.spinner_deadline) {
            self.spinner_deadline = None;
            self.tracker.advance_spinner();
            self.begin_resync();
        }
        self.arm_spinner(now);
        self.cooldown_deadline = self.tracker.next_cooldown_end(now);
    }

    fn arm_spinner(&mut self, now: Instant) {
        if !self.tracker.spinning(&self.settings, now) {
            self.spinner_deadline = None;
        } else if self.connected && self.spinner_deadline.is_none() {
            self.spinner_deadline = Some(now + self.settings.spinner_interval);
        }
    }

    /// The pidfile must still be the one this daemon holds: if someone
    /// deleted the state directory, the daemon locks the pidfile anew, or,
    /// when a daemon started since holds it, leaves the server to that one.
    /// Looked at after every resync (the heartbeat brings one a minute).
    fn check_pidfile(&mut self, now: Instant) {
        let pid_file = self.paths.pid_file();
        if self.stop.is_some() || self.lock.is_at(&pid_file) {
            return;
        }
        // relock makes the directory again, if it went; then the log, which
        // went with it, is opened where one looks.
        let relocked = daemon::relock(&self.paths);
        let echo = self.log.echo_to_stderr;
        self.log = Log::open(self.paths.log_file());
        self.log.echo_to_stderr = echo;
        match relocked {
            Ok(Holder::Free(lock)) => {
                self.lock = lock;
                self.log
                    .line("the pidfile was deleted or replaced: locked it again");
                // An `off` given meanwhile found no daemon to stop, and
                // only recorded the flag.
                if state::peek(&self.paths.state_file()).0.off {
                    self.off = true;
                    self.begin_stop(now, "cowbell was turned off meanwhile");
                }
                // state.json went too: write it again now, not only once
                // something changes.
                self.last_saved = None;
                self.save();
            }
            Ok(Holder::Held(Some(_))) => {
                self.hand_over(now, "a daemon started since holds the new pidfile", None)
            }
            // A cowbell command holds it for a moment.
            Ok(Holder::Held(None)) => self
                .log
                .line("the new pidfile is held by a command: locking it at the next resync"),
            Err(error) => self.log.line_fmt(format_args!(
                "the pidfile was deleted or replaced, and cannot be made again: {error}"
            )),
        }
    }

    /// On the way out, a daemon whose pidfile went (with its directory,
    /// while herdr was away and no resync looked) locks it again if it is
    /// free, so the names not given back are on record, and keeps an `off`
    /// recorded meanwhile. It writes no pid: a `--replace` or `off` waiting
    /// for the lock keeps waiting, rather than taking this exiting daemon
    /// for a new one. A command holding the lock gets a moment to let go.
    fn reclaim_pidfile(&mut self) {
        if self.lock.is_at(&self.paths.pid_file()) {
            return;
        }
        if let Ok(Holder::Free(lock)) = daemon::try_lock_patiently(&self.paths) {
            self.lock = lock;
            self.off |= state::peek(&self.paths.state_file()).0.off;
        }
    }

    fn open_debounce(&mut self, now: Instant) {
        if self.stop.is_none() && self.debounce_deadline.is_none() {
            self.debounce_deadline = Some(now + self.durations.debounce);
        }
    }

    /// A resync within `LAZY`, unless the debounce's comes sooner.
    fn open_lazy(&mut self, now: Instant) {
        if self.debounce_deadline.is_none() {
            self.lazy_deadline.get_or_insert(now + self.durations.lazy);
        }
    }

    fn begin_resync(&mut self) {
        if !self.connected || self.stop.is_some() {
            return;
        }
        // The tab list it brings is made after every event so far.
        self.lazy_deadline = None;
        // One pane list at a time: against a slow herdr, every pane event
        // would send another, each holding a request slot the renames need.
        // A change while one is out is listed after its answer. Queued
        // before the tab list, which waits for it (see `next_request`): the
        // 0.8 MB answer of 3000 panes is parsed and gone before the resync's
        // renames are queued. The other way round, the daemon's peak at
        // 1000 tabs was 1.9 MiB instead of 1.5; the price is the pane list's
        // round trip before the renames that follow a pane event.
        if self.panes_wanted && !self.listing_panes() {
            self.panes_wanted = false;
            self.queue.push(Purpose::ListPanes);
        }
        if self.resync_running {
            self.resync_wanted = true;
        } else {
            self.resync_running = true;
            self.resync_wanted = false;
            self.resync_failed = false;
            self.queue.push(Purpose::ListTabs { restore: false });
        }
    }

    fn connect(&mut self, now: Instant) {
        let params = herdr::lifecycle_subscription();
        match Subscription::open(&self.paths.socket, params, herdr::REQUEST_TIMEOUT, now) {
            Ok(sub) => self.lifecycle = Some(sub),
            Err(error) => self.connect_failed(
                &format!("cannot connect to {}: {error}", self.paths.socket.display()),
                now,
            ),
        }
    }

    /// Tries again after the backoff; exits once a try at or after the
    /// idle time has failed. The last try falls on the idle time itself:
    /// with the backoff at 30 s, a server back at 105 s would otherwise
    /// go unseen by a daemon that exits at 120 s saying there was none.
    fn connect_failed(&mut self, why: &str, now: Instant) {
        let idle_exit = *self
            .idle_exit_deadline
            .get_or_insert(now + self.durations.idle_exit);
        if now >= idle_exit {
            self.log_idle_exit();
            self.exit_code = Some(0);
            return;
        }
        let wait = self.backoff.min(idle_exit - now);
        self.log.line_fmt(format_args!(
            "{why}; retrying in {} ms",
            // u64, not as_millis()'s u128: its formatting costs binary size.
            wait.as_millis() as u64
        ));
        self.reconnect_deadline = Some(now + wait);
        self.backoff = (self.backoff * 2).min(self.durations.backoff_max);
    }

    fn log_idle_exit(&mut self) {
        let seconds = self.durations.idle_exit.as_secs();
        self.log.line(&match &self.refusal {
            // Most likely a herdr without one of the event types.
            Some(refusal) => {
                let mut line = format!(
                    "{refusal}, still after {seconds} s: exiting (is this herdr older than \
                     cowbell needs? the subscription lists"
                );
                for kind in herdr::LIFECYCLE_EVENTS {
                    line.push(' ');
                    line.push_str(kind);
                }
                line.push(')');
                line
            }
            None => format!(
                "no herdr server for {seconds} s: exiting (the next server start brings \
                 cowbell back)"
            ),
        });
    }

    /// The server went away: drop every connection and start reconnecting.
    fn disconnected(&mut self, why: &str, now: Instant) {
        let was_connected = self.connected;
        self.lifecycle = None;
        self.status = None;
        self.subscribed_panes = PaneSet::default();
        self.next_status = None;
        self.next_status_stale = false;
        self.connected = false;
        if let Some(Stop::Restore { .. }) = self.stop {
            // The restore's requests go on connections of their own, which
            // a lost subscription does not take down: their answers say
            // whether herdr is still there (one that fails now, with no
            // connection, ends the stop: see `request_failed`).
            self.log
                .line_fmt(format_args!("{why}; the restore goes on"));
            return;
        }
        // herdr has these requests: their renames may land all the same.
        for pending in std::mem::take(&mut self.in_flight) {
            if pending.unwritten.is_empty() {
                self.answer_lost(&pending.purpose);
            }
        }
        self.queue.clear();
        self.resync_running = false;
        self.renames_outstanding = 0;
        self.debounce_deadline = None;
        self.lazy_deadline = None;
        self.retry_deadline = None;
        self.plugin_check_deadline = None;
        self.gather_deadline = None;
        self.heartbeat_deadline = None;
        self.spinner_deadline = None;
        self.resubscribe_deadline = None;
        self.save();
        if was_connected {
            self.log.line_fmt(format_args!("disconnected: {why}"));
            self.backoff = self.durations.backoff_first;
        }
        self.connect_failed(if was_connected { "reconnecting" } else { why }, now);
    }

    fn on_signals(&mut self, now: Instant) {
        for request in self.signals.take() {
            match request {
                signals::Request::Reload => {
                    self.settings = load_settings(&self.paths, &mut self.log, &self.durations);
                    self.spinner_deadline = None;
                    self.log.line("SIGHUP: configuration reloaded");
                    self.open_debounce(now);
                }
                signals::Request::Handover { from } => {
                    self.hand_over(now, "another cowbell daemon takes over", from)
                }
                signals::Request::StopAndRestore => self.begin_stop(now, "stop requested"),
                signals::Request::TurnOff => {
                    // Saved by this daemon, under its lock, so no hook can
                    // start another one between its exit and the flag.
                    self.off = true;
                    self.begin_stop(now, "cowbell turned off");
                }
            }
        }
    }

    /// Exits without touching names, once the renames in flight are
    /// answered: another daemon runs this server now.
    fn hand_over(&mut self, now: Instant, why: &str, from: Option<u32>) {
        // A restore asked for (SIGTERM, off) is the stronger request.
        if let Some(Stop::Restore { .. }) = self.stop {
            self.log
                .line_fmt(format_args!("{why}; a restore is under way and goes on"));
            return;
        }
        self.log
            .line_fmt(format_args!("{why}; exiting without touching names"));
        self.stop = Some(Stop::Quiet {
            deadline: now + herdr::REQUEST_TIMEOUT,
            from,
        });
        self.queue.clear();
        self.debounce_deadline = None;
        self.spinner_deadline = None;
    }

    /// Gives every name back and exits, before the loop has done anything.
    pub fn stop_at_once(&mut self, why: &str) {
        self.begin_stop(Instant::now(), why);
    }

    /// Restores every name, then exits (signals, a disabled plugin). Also
    /// during a handover: a SIGTERM or an `off` still means it, and the
    /// new daemon finds the names given back (or cowbell off).
    fn begin_stop(&mut self, now: Instant, why: &str) {
        if let Some(Stop::Restore { .. }) = self.stop {
            return;
        }
        self.log
            .line_fmt(format_args!("{why}: restoring tab names"));
        self.stop = Some(Stop::Restore {
            deadline: now + STOP_GRACE,
            listed: false,
        });
        self.debounce_deadline = None;
        self.spinner_deadline = None;
        // From now on a retry is the restore's own (see `fire_deadlines`).
        self.retry_deadline = None;
        // `off` gives the names back itself once the daemon is gone; a
        // SIGTERM or a disabled plugin tries a list first, since herdr may
        // be back while the reconnect backoff still waits (see
        // `request_failed`).
        if !self.connected && self.lifecycle.is_none() && self.off {
            self.leave_without_restore();
            return;
        }
        self.queue.clear();
    }

    /// No herdr to give the names back to: they stay in state.json for
    /// `off`, `remove-icons` or the next server start.
    fn leave_without_restore(&mut self) {
        self.log
            .line("no herdr server: names cannot be restored now; state kept for remove-icons");
        self.exit_code = Some(0);
    }

    fn on_lifecycle_ready(&mut self, revents: libc::c_short, now: Instant) {
        let Some(input) = self.lifecycle.as_mut().and_then(|sub| sub.pump(revents)) else {
            return;
        };
        match input {
            Input::Lines(lines) => self.lifecycle_lines(lines, now),
            Input::Closed(lines) => {
                self.lifecycle_lines(lines, now);
                self.disconnected("herdr closed the event subscription", now);
            }
            Input::Failed(why) => self.disconnected(&why, now),
        }
    }

    fn lifecycle_lines(&mut self, lines: Vec<Vec<u8>>, now: Instant) {
        for line in lines {
            match herdr::parse_line(&line) {
                Ok(Message::SubscriptionStarted) => self.on_connected(now),
                Ok(Message::Event {
                    name,
                    tab_id,
                    label,
                    ..
                }) => self.on_event(&name, tab_id, label, now),
                // Once it has started, herdr ends a subscription with an
                // error line (0.9's `events_lost` for one that fell behind)
                // and closes it: the reconnection that follows resyncs.
                Ok(Message::Error(error)) if self.connected => self
                    .log
                    .line_fmt(format_args!("herdr ended the event subscription: {error}")),
                Ok(Message::Error(error)) => {
                    let refusal = format!("herdr refused the event subscription: {error}");
                    self.log.line(&refusal);
                    self.refusal = Some(refusal);
                }
                Ok(_) => {}
                Err(malformed) => self.log.line(&malformed.0),
            }
        }
    }

    fn on_connected(&mut self, now: Instant) {
        if let Some(sub) = &mut self.lifecycle {
            sub.ack_deadline = None;
        }
        self.connected = true;
        self.refusal = None;
        self.failed_tries = 0;
        self.backoff = self.durations.backoff_first;
        self.status_backoff = self.durations.backoff_first;
        self.status_ack_misses = 0;
        self.idle_exit_deadline = None;
        self.log
            .line_fmt(format_args!("connected to {}", self.paths.socket.display()));
        self.panes_wanted = true;
        // A server that restarted with cowbell disabled or uninstalled runs
        // no startup hook to replace this daemon: look at once, not a
        // heartbeat later, before a minute of icons it no longer wants.
        if self.stop.is_none() {
            self.queue.push(Purpose::ListPlugins);
        }
        self.plugin_check_deadline = Some(now + self.durations.heartbeat);
        self.tracker.looked_away = true;
        // The retry deadline went with the old connection (a tab left
        // waiting for it would wait for the heartbeat).
        self.tracker.forget_retries();
        self.begin_resync();
    }

    fn on_event(
        &mut self,
        name: &str,
        tab_id: Option<String>,
        label: Option<String>,
        now: Instant,
    ) {
        if self.stop.is_some() {
            return;
        }
        if !herdr::triggers_resync(name) {
            return;
        }
        if name == "tab_renamed"
            && let (Some(tab_id), Some(label)) = (&tab_id, &label)
        {
            if self.tracker.take_echo(tab_id, label, now, &self.settings) {
                return;
            }
            if self
                .tracker
                .keeps_base(tab_id, label, &self.settings.labeler)
            {
                self.open_lazy(now);
                return;
            }
        }
        if herdr::PANE_SET_EVENTS.contains(&name) {
            self.panes_wanted = true;
        }
        self.open_debounce(now);
    }

    fn status_subscription(&mut self, next: bool) -> Option<&mut Subscription> {
        if next {
            self.next_status.as_mut().map(|(sub, _)| sub)
        } else {
            self.status.as_mut()
        }
    }

    /// Reads the current status subscription, or the next one (`next`).
    fn on_status_ready(&mut self, mut next: bool, revents: libc::c_short, now: Instant) {
        let Some(input) = self
            .status_subscription(next)
            .and_then(|sub| sub.pump(revents))
        else {
            return;
        };
        let (lines, closed) = match input {
            Input::Lines(lines) => (lines, None),
            Input::Closed(lines) => (
                lines,
                Some("herdr closed the status subscription".to_string()),
            ),
            Input::Failed(why) => (Vec::new(), Some(why)),
        };
        for line in lines {
            match herdr::parse_line(&line) {
                Ok(Message::SubscriptionStarted) if next => {
                    self.status_started(now);
                    // What follows on this connection is the current
                    // subscription's.
                    next = false;
                }
                Ok(Message::Event {
                    name,
                    pane_id,
                    agent_status,
                    ..
                }) if name == herdr::STATUS_EVENT => {
                    let news = self
                        .pane_statuses
                        .is_news(pane_id.as_deref(), agent_status.as_deref());
                    if news {
                        self.open_debounce(now)
                    }
                }
                Ok(Message::Error(error)) if next => {
                    // A pane closed between pane.list and the subscription.
                    self.log
                        .line_fmt(format_args!("status subscription refused: {error}"));
                }
                Ok(Message::Error(error)) => {
                    self.log
                        .line_fmt(format_args!("herdr ended the status subscription: {error}"));
                }
                Ok(_) => {}
                Err(malformed) => self.log.line(&malformed.0),
            }
        }
        if let Some(why) = closed {
            self.status_lost(next, &why, now);
        }
    }

    /// herdr acknowledged the next status subscription: it replaces the
    /// current one, which closes.
    fn status_started(&mut self, now: Instant) {
        let Some((mut sub, panes)) = self.next_status.take() else {
            return;
        };
        sub.ack_deadline = None;
        self.status = Some(sub);
        self.subscribed_panes = panes;
        self.pane_statuses.forget(panes.count);
        self.status_backoff = self.durations.backoff_first;
        if std::mem::take(&mut self.next_status_stale) {
            self.panes_wanted = true;
        }
        // Status subscriptions start now and replay nothing: a change since
        // the last tab.list, or one the old subscription had not delivered
        // yet, shows up only in another look.
        self.open_debounce(now);
    }

    /// The current status subscription, or the next one (`next`), is gone:
    /// list the panes and subscribe again after the backoff. While only the
    /// next one failed, the current one goes on reporting its panes.
    fn status_lost(&mut self, next: bool, why: &str, now: Instant) {
        if next {
            self.next_status = None;
            self.next_status_stale = false;
        } else {
            self.status = None;
            self.subscribed_panes = PaneSet::default();
        }
        if self.connected && self.resubscribe_deadline.is_none() {
            self.log.line_fmt(format_args!(
                "{why}; listing panes again in {} ms",
                self.status_backoff.as_millis() as u64
            ));
            self.resubscribe_deadline = Some(now + self.status_backoff);
            self.status_backoff = (self.status_backoff * 2).min(self.durations.backoff_max);
        }
    }

    fn start_queued(&mut self, now: Instant) {
        // The restore lists the tabs once the resync under way is answered:
        // a rename landing after that list would keep its icon.
        if let Some(Stop::Restore { listed, .. }) = &mut self.stop
            && !*listed
            && !self.in_flight.iter().any(|p| {
                matches!(
                    p.purpose,
                    Purpose::Rename { restore: false, .. } | Purpose::ListTabs { restore: false }
                )
            })
        {
            *listed = true;
            self.queue.push(Purpose::ListTabs { restore: true });
        }
        while self.in_flight.len() < MAX_IN_FLIGHT
            && let Some(purpose) = self.next_request()
        {
            self.request_counter += 1;
            let id = format!("r{}", self.request_counter);
            let (method, params) = match &purpose {
                Purpose::ListTabs { .. } => ("tab.list", "{}".to_string()),
                Purpose::Rename { tab_id, label, .. } => {
                    ("tab.rename", herdr::rename_params(tab_id, label))
                }
                Purpose::ListPanes => ("pane.list", "{}".to_string()),
                Purpose::ListPlugins => ("plugin.list", "{}".to_string()),
            };
            match sys::connect_unix(&self.paths.socket) {
                Ok(mut stream) => {
                    // Write at once: a request line fits the socket buffer,
                    // and waiting for POLLOUT would cost a wake-up.
                    let mut unwritten = herdr::request_line(&id, method, params).into_bytes();
                    if let Err(error) = flush(&mut stream, &mut unwritten) {
                        self.log.line_fmt(format_args!(
                            "{}: write failed: {error}",
                            describe(&purpose)
                        ));
                        self.request_failed(purpose, now);
                        continue;
                    }
                    self.in_flight.push(Pending {
                        stream,
                        unwritten,
                        lines: LineBuffer::default(),
                        deadline: now + herdr::REQUEST_TIMEOUT,
                        purpose,
                    });
                }
                Err(error) => {
                    self.log.line_fmt(format_args!(
                        "{}: cannot connect: {error}",
                        describe(&purpose)
                    ));
                    self.request_failed(purpose, now);
                }
            }
        }
    }

    /// The first queued request that may start now. herdr's tab and pane
    /// lists are the largest answers (at 1000 tabs the pane list is one
    /// 0.8 MB line): one list at a time, so that the daemon's peak memory
    /// is the larger of a list and the resync or subscription it feeds,
    /// not both at once.
    fn next_request(&mut self) -> Option<Purpose> {
        let list_out = self.in_flight.iter().any(|p| p.purpose.is_list());
        let index = self
            .queue
            .iter()
            .position(|purpose| !(list_out && purpose.is_list()))?;
        Some(self.queue.remove(index))
    }

    fn on_request_ready(&mut self, index: usize, revents: libc::c_short, now: Instant) {
        let Some(pending) = self.in_flight.get_mut(index) else {
            return;
        };
        if !pending.unwritten.is_empty() {
            if let Err(error) = flush(&mut pending.stream, &mut pending.unwritten) {
                let pending = self.in_flight.swap_remove(index);
                self.log.line_fmt(format_args!(
                    "{}: write failed: {error}",
                    describe(&pending.purpose)
                ));
                self.request_failed(pending.purpose, now);
                return;
            }
            if revents & (libc::POLLHUP | libc::POLLERR) == 0 {
                return;
            }
        }
        let answer = match read_lines(&mut pending.stream, &mut pending.lines) {
            Input::Lines(mut lines) | Input::Closed(mut lines) if !lines.is_empty() => {
                Ok(lines.remove(0))
            }
            Input::Lines(_) => return,
            Input::Closed(_) => Err("herdr closed the connection without an answer".to_string()),
            Input::Failed(why) => Err(why),
        };
        // The connection goes before the answer is acted on: at a
        // descriptor limit, the status subscription that a pane list's
        // answer opens may need this very descriptor.
        let purpose = self.in_flight.swap_remove(index).purpose;
        match answer.and_then(|line| herdr::parse_line(&line).map_err(|m| m.0)) {
            Ok(message) => self.on_answer(purpose, message, now),
            Err(why) => {
                self.log
                    .line_fmt(format_args!("{}: {why}", describe(&purpose)));
                self.answer_lost(&purpose);
                self.request_failed(purpose, now);
            }
        }
    }

    fn on_answer(&mut self, purpose: Purpose, message: Message, now: Instant) {
        match (purpose, message) {
            (purpose, Message::Error(error)) => {
                self.log
                    .line_fmt(format_args!("{}: herdr said {error}", describe(&purpose)));
                self.request_failed(purpose, now);
            }
            (Purpose::ListTabs { restore: false }, Message::Tabs(_)) if self.stop.is_some() => {
                // Stopping: this resync's renames would only race the restore.
                self.resync_running = false;
            }
            (Purpose::ListTabs { restore: false }, Message::Tabs(infos)) => {
                self.on_tabs_listed(infos, now)
            }
            (Purpose::ListTabs { restore: true }, Message::Tabs(infos)) => {
                self.on_restore_listed(infos, now)
            }
            (
                Purpose::Rename {
                    tab_id,
                    label,
                    restore,
                    quiet,
                },
                Message::Ok,
            ) => self.on_renamed(tab_id, label, restore, quiet, now),
            (Purpose::ListPanes, Message::Panes(panes)) => self.on_panes_listed(panes, now),
            (Purpose::ListPlugins, Message::Plugins(plugins)) => {
                // A plugin herdr lists without `enabled` counts as enabled.
                match plugins.iter().find(|p| p.plugin_id == self.paths.plugin_id) {
                    Some(plugin) if plugin.enabled != Some(false) => {
                        if let Some(manifest) = &plugin.manifest_path
                            && self.files_check.gone(
                                files::is_missing(std::path::Path::new(manifest)),
                                now,
                                self.durations.heartbeat / 2,
                            )
                        {
                            self.begin_stop(now, "the plugin's files are gone (no manifest)");
                        }
                    }
                    Some(_) => self.begin_stop(now, "the plugin was disabled"),
                    None => self.begin_stop(now, "the plugin is no longer installed"),
                }
            }
            (purpose, message) => {
                self.log.line_fmt(format_args!(
                    "{}: unexpected answer {}",
                    describe(&purpose),
                    message.kind()
                ));
                self.request_failed(purpose, now);
            }
        }
    }

    /// A resync's tab list: decide, log, and queue the renames.
    fn on_tabs_listed(&mut self, infos: Vec<TabInfo>, now: Instant) {
        // A pane created or closed without its event reaching us
        // (a slow reader loses events) shows in the pane counts.
        // (Saturating: herdr's counts are any u64 on the wire.)
        let listed_panes = infos
            .iter()
            .filter_map(|t| t.pane_count)
            .fold(0, u64::saturating_add);
        let listing = self.listing_panes();
        // (Not while a refused subscription waits out its backoff:
        // its timer lists the panes again.)
        if listed_panes != self.wanted_panes().count as u64
            && !listing
            && self.resubscribe_deadline.is_none()
        {
            self.queue.push(Purpose::ListPanes);
        }
        let tabs: Vec<Tab> = infos.into_iter().map(TabInfo::into_tab).collect();
        let plan = self.tracker.resync(&tabs, &self.settings, now);
        for note in &plan.notes {
            self.log.line(&describe_note(note));
        }
        // With the spinner on, a line per frame would rotate every
        // other line out of the log within minutes.
        self.resync_quiet = plan.is_quiet();
        // A tab still waiting for its retry: this resync did not make
        // everything right, and must not start the backoff over.
        self.resync_failed |= plan.waiting > 0;
        if !plan.tells_nothing() {
            self.log.line_fmt(format_args!(
                "resync: {} tabs, {} to rename",
                tabs.len(),
                plan.renames.len()
            ));
        }
        if plan.save_first() {
            self.save();
        }
        self.renames_outstanding += plan.renames.len();
        self.queue_renames(plan.renames, false, self.resync_quiet);
        self.maybe_finish_resync(now);
    }

    /// The restore's tab list: queue the renames that give names back.
    fn on_restore_listed(&mut self, infos: Vec<TabInfo>, now: Instant) {
        let tabs: Vec<Tab> = infos.into_iter().map(TabInfo::into_tab).collect();
        let renames = self
            .tracker
            .restore_plan(&tabs, &self.settings.labeler, false, now);
        self.log
            .line_fmt(format_args!("restore: {} tabs to rename", renames.len()));
        self.restores_outstanding = renames.len();
        self.queue_renames(renames, true, false);
        self.maybe_finish_restore(now);
    }

    /// herdr applied a rename of a resync or of the restore.
    fn on_renamed(
        &mut self,
        tab_id: String,
        label: String,
        restore: bool,
        quiet: bool,
        now: Instant,
    ) {
        if restore {
            self.log
                .line_fmt(format_args!("restored {tab_id} as {}", quote(&label)));
            self.tracker.tabs.remove(&tab_id);
            self.restores_outstanding = self.restores_outstanding.saturating_sub(1);
            self.maybe_finish_restore(now);
        } else {
            if !quiet {
                self.log
                    .line_fmt(format_args!("renamed {tab_id} to {}", quote(&label)));
            }
            self.tracker.confirm(&tab_id, &label);
            self.rename_done(now);
        }
    }

    /// The pane list: subscribe to the status of exactly these panes.
    fn on_panes_listed(&mut self, panes: Vec<PaneInfo>, now: Instant) {
        // The pane set changed while this list was out, so it may be
        // missing from it: list again (see `begin_resync`).
        if self.panes_wanted {
            self.open_debounce(now);
        }
        // Sorted as &str, which the resync's present tabs also sort:
        // one sort in the binary rather than two.
        let mut ids: Vec<&str> = panes.iter().map(|p| p.pane_id.as_str()).collect();
        ids.sort_unstable();
        let params = herdr::status_subscription(&ids);
        let set = PaneSet {
            count: ids.len(),
            fingerprint: files::fingerprint(params.as_bytes()),
        };
        // At 3000 panes the list is large: only the params are
        // needed from here, so the rest goes now.
        drop(ids);
        drop(panes);
        if self.resubscribe_deadline.is_some() {
            return;
        }
        match &self.next_status {
            Some((_, next)) => self.next_status_stale |= set != *next,
            None if set != self.subscribed_panes || self.status.is_none() => {
                self.subscribe_status(params, set, now)
            }
            None => {}
        }
    }

    /// The panes the status subscription covers, or will once the next one
    /// is acknowledged.
    fn wanted_panes(&self) -> PaneSet {
        match &self.next_status {
            Some((_, next)) => *next,
            None => self.subscribed_panes,
        }
    }

    /// herdr read a request whose answer never came (or came garbled): a
    /// rename may have been applied all the same.
    fn answer_lost(&mut self, purpose: &Purpose) {
        if let Purpose::Rename {
            tab_id,
            label,
            restore: false,
            ..
        } = purpose
        {
            self.tracker.answer_lost(tab_id, label);
        }
    }

    /// A request got no usable answer; keep the bookkeeping straight.
    fn request_failed(&mut self, purpose: Purpose, now: Instant) {
        match purpose {
            Purpose::ListTabs { restore: false } => {
                self.resync_running = false;
                self.retry_later(now);
            }
            Purpose::ListTabs { restore: true } if !self.connected => {
                // Tried while the daemon had no connection: no herdr after
                // all.
                self.leave_without_restore();
            }
            Purpose::ListTabs { restore: true } if self.off => {
                // `off` waits for this daemon and then gives the names back
                // itself: more tries here would only hold it up (by 10 s
                // against a herdr that does not answer).
                self.log
                    .line("restore: cannot list tabs; leaving the names to `off`");
                self.exit_code = Some(0);
            }
            Purpose::ListTabs { restore: true } => {
                // The stop's deadline ends the tries (names kept in the
                // state for remove-icons).
                self.log
                    .line("restore: cannot list tabs; trying again in 1 s");
                self.retry_deadline = Some(now + RETRY);
            }
            Purpose::Rename { restore: true, .. } => {
                self.restores_outstanding = self.restores_outstanding.saturating_sub(1);
                self.restore_failed = true;
                self.maybe_finish_restore(now);
            }
            Purpose::Rename {
                restore: false,
                tab_id,
                label,
                ..
            } => {
                // Look again soon: herdr may have applied it after all, or
                // may answer the next time. Until then the tab gets no new
                // rename, so neither do spinner frames resend a refused one
                // (a log line and a save each), nor does it hold up the
                // frames of the other tabs.
                self.retry_later(now);
                self.tracker
                    .rename_failed(&tab_id, &label, self.retry_deadline);
                self.rename_done(now);
            }
            Purpose::ListPanes => {
                self.panes_wanted = true;
                self.retry_later(now);
            }
            Purpose::ListPlugins => {}
        }
    }

    /// A resync to try again what failed: 1 s later for the first few
    /// tries (a passing hiccup), then twice as long each time up to 30 s,
    /// so a request herdr refuses for good costs a log line every 30 s
    /// rather than every second.
    fn retry_later(&mut self, now: Instant) {
        self.resync_failed = true;
        // Stopping, the daemon resyncs no more: a retry would only list the
        // restore's tabs a second time (see `fire_deadlines`).
        if self.stop.is_some() {
            return;
        }
        if self.retry_deadline.is_none() {
            let doublings = self.failed_tries.saturating_sub(3).min(5);
            let wait = (RETRY * (1 << doublings)).min(BACKOFF_MAX);
            self.retry_deadline = Some(now + wait);
            self.failed_tries += 1;
        }
    }

    fn queue_renames(&mut self, renames: Vec<Rename>, restore: bool, quiet: bool) {
        for Rename { tab_id, label } in renames {
            self.queue.push(Purpose::Rename {
                tab_id,
                label,
                restore,
                quiet,
            });
        }
    }

    fn listing_panes(&self) -> bool {
        self.queue.contains(&Purpose::ListPanes)
            || self
                .in_flight
                .iter()
                .any(|p| p.purpose == Purpose::ListPanes)
    }

    fn rename_done(&mut self, now: Instant) {
        if self.renames_outstanding > 0 {
            self.renames_outstanding -= 1;
            self.maybe_finish_resync(now);
        }
    }

    fn maybe_finish_resync(&mut self, now: Instant) {
        if self.renames_outstanding > 0 || !self.resync_running {
            return;
        }
        self.resync_running = false;
        // A pane list still out may fail yet: it runs beside the resync,
        // and one that keeps failing must back off too.
        if !std::mem::take(&mut self.resync_failed) && !self.listing_panes() {
            self.failed_tries = 0;
        }
        // Before the save: into a state directory that is no longer this
        // daemon's, it would overwrite an `off` recorded there meanwhile.
        self.check_pidfile(now);
        // Not when only the spinner moved on: a save per frame would be an
        // fsync per frame. A frame left by a daemon killed before its next
        // save is known all the same (`State::daemon_running`), and the
        // save on the way out records the last one.
        if !self.resync_quiet {
            self.save();
        }
        self.heartbeat_deadline = Some(now + self.durations.heartbeat);
        self.cooldown_deadline = self.tracker.next_cooldown_end(now);
        if self.resync_wanted {
            self.begin_resync();
        }
    }

    fn maybe_finish_restore(&mut self, now: Instant) {
        if self.restores_outstanding > 0 {
            return;
        }
        if self.restore_failed {
            self.restore_failed = false;
            self.log
                .line("restore: some renames failed; listing the tabs again in 1 s");
            self.retry_deadline = Some(now + RETRY);
            return;
        }
        self.log.line("names restored");
        self.exit_code = Some(0);
    }

    /// Subscribes to the status of the panes `params` lists. The current
    /// subscription stays until herdr acknowledges the new one.
    fn subscribe_status(&mut self, params: String, set: PaneSet, now: Instant) {
        self.next_status = None;
        self.next_status_stale = false;
        if set.count == 0 {
            self.status = None;
            self.subscribed_panes = PaneSet::default();
            self.pane_statuses.forget(0);
            return;
        }
        let ack_timeout = herdr::status_ack_timeout(set.count, self.status_ack_misses);
        match Subscription::open(&self.paths.socket, params, ack_timeout, now) {
            Ok(sub) => {
                self.log
                    .line_fmt(format_args!("status subscription for {} panes", set.count));
                self.next_status = Some((sub, set));
            }
            // Tried again after the backoff a lost subscription waits:
            // at a descriptor limit, at once would be a loop.
            Err(error) => self.status_lost(
                true,
                &format!("status subscription: cannot connect: {error}"),
                now,
            ),
        }
    }

    fn save(&mut self) {
        // state.json belongs to whoever holds the pidfile beside it: with
        // the pidfile gone (a deleted directory) or another daemon's, this
        // one writes nothing until it has locked it again (see
        // `check_pidfile`, and the way out in `run`), or it might put its
        // flag over an `off` recorded meanwhile. `Lock::dir` keeps a save
        // begun before a deletion out of the directory made since.
        let dir = match self.lock.dir(&self.paths) {
            Ok(Some(dir)) => Ok(dir),
            Ok(None) => return,
            Err(error) => Err(error),
        };
        // After a suspend or a wall-clock step the old offset would put
        // every saved time (a cool-down's end, say) off by as much.
        let now = Clock::now();
        if !self.clock.agrees_with(now) {
            self.clock = now;
        }
        // Running until the save on the way out (see `State::daemon_running`),
        // and a killed predecessor's record stays until its tabs were seen.
        let running = self.exit_code.is_none() || self.tracker.crash_unexamined();
        let saved = dir.and_then(|dir| {
            state::save_tracker(
                &dir,
                &self.tracker,
                self.off,
                running,
                self.clock,
                &mut self.last_saved,
            )
        });
        // A failed save is tried again at every later one, but said once:
        // a read-only directory must not cost a log line per resync.
        match saved {
            Err(error) if !self.save_failing => {
                self.save_failing = true;
                self.log.line_fmt(format_args!(
                    "cannot save {}: {error}",
                    self.paths.state_file().display()
                ));
            }
            Ok(true) if self.save_failing => {
                self.save_failing = false;
                self.log.line("state saved again");
            }
            _ => {}
        }
    }
}

/// The configuration's settings for this run; its problems go to the log.
fn load_settings(paths: &Paths, log: &mut Log, durations: &Durations) -> Settings {
    let loaded = config::load(&paths.config_file);
    for problem in &loaded.problems {
        log.line_fmt(format_args!("config: {}", problem.message));
    }
    Settings::from_config(&loaded.config, durations.fight_timing, durations.scale)
}

/// A poll(2) timeout for `wait`, rounded up so a wait of 0.4 ms does not
/// become a busy loop of zero-length polls.
fn wait_millis(wait: Duration) -> libc::c_int {
    // In u64: a u128 division (`as_nanos`) costs binary size.
    let millis = wait
        .as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(wait.subsec_nanos().div_ceil(1_000_000)));
    millis.min(libc::c_int::MAX as u64) as libc::c_int
}

fn describe(purpose: &Purpose) -> String {
    match purpose {
        Purpose::ListTabs { .. } => "tab.list".to_string(),
        Purpose::Rename { tab_id, .. } => format!("tab.rename {tab_id}"),
        Purpose::ListPanes => "pane.list".to_string(),
        Purpose::ListPlugins => "plugin.list".to_string(),
    }
}

fn describe_note(note: &Note) -> String {
    match note {
        Note::NewBase { tab_id, base } => {
            format!(
                "{tab_id} renamed by someone else: base is now {}",
                quote(base)
            )
        }
        Note::Fight { tab_id, recent } => {
            format!(
                "{tab_id}: renamed again soon after cowbell's rename: a fight ({recent} recently)"
            )
        }
        Note::Cooldown { tab_id, seconds } => {
            format!("{tab_id}: rename fight; leaving the tab alone for {seconds} s")
        }
        Note::Dropped { tab_id } => format!("{tab_id} closed: forgotten"),
        Note::ListedTwice { tab_id, ignored } => format!(
            "herdr listed {tab_id} more than once (repeats in the list: {ignored}): \
             the first entry of each tab counts"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_files_are_gone_when_checks_half_a_minute_apart_miss_them() {
        let mut check = FilesCheck::default();
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let apart = Duration::from_secs(30);
        // Never seen (another mount namespace): never gone.
        assert!(!(0..5).any(|n| check.gone(true, at(n * 60), apart)));
        assert!(!check.gone(false, at(300), apart));
        // Missed, then there again (an upgrade replacing the files).
        assert!(!check.gone(true, at(360), apart));
        assert!(!check.gone(false, at(420), apart));
        // Missed by a heartbeat and a reconnect's check a moment later.
        assert!(!check.gone(true, at(480), apart));
        assert!(!check.gone(true, at(481), apart));
        assert!(check.gone(true, at(540), apart));
    }

    #[test]
    fn poll_waits_round_up_to_whole_milliseconds() {
        assert_eq!(wait_millis(Duration::ZERO), 0);
        assert_eq!(wait_millis(Duration::from_micros(400)), 1);
        assert_eq!(wait_millis(Duration::from_millis(100)), 100);
        assert_eq!(wait_millis(Duration::from_micros(99_001)), 100);
        assert_eq!(wait_millis(Duration::from_secs(u64::MAX)), libc::c_int::MAX);
    }

    /// A peer that always has more to send, as a flooding one does.
    struct Flood {
        sent: usize,
    }

    impl Read for Flood {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.sent >= 16 * READ_PER_TURN {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let line = b"{\"event\":\"tab_focused\"}\n";
            let n = buf.len() / line.len() * line.len();
            for chunk in buf[..n].chunks_mut(line.len()) {
                chunk.copy_from_slice(line);
            }
            self.sent += n;
            Ok(n)
        }
    }

    #[test]
    fn one_turn_reads_a_flood_only_up_to_its_share() {
        let mut flood = Flood { sent: 0 };
        let mut lines = LineBuffer::default();
        let Input::Lines(first) = read_lines(&mut flood, &mut lines) else {
            panic!("a flood is neither an end nor a failure");
        };
        let bytes: usize = first.iter().map(|line| line.len() + 1).sum();
        assert!(
            (READ_PER_TURN..READ_PER_TURN + 64 * 1024).contains(&bytes),
            "{bytes}"
        );
        // The next turn goes on where this one stopped.
        assert!(
            matches!(read_lines(&mut flood, &mut lines), Input::Lines(more) if !more.is_empty())
        );
    }
}
