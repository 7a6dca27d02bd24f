//! The short commands that herdr's hooks and menu actions run.
//!
//! Each finishes quickly and talks to herdr with one blocking request per
//! connection (`herdr::call`); the daemon is reached through its pidfile
//! and signals (see `daemon`). The decisions (labels, restores) come from
//! the same pure core the daemon uses.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use miniserde::{Serialize, json};

use crate::config;
use crate::daemon::{self, Failed, Holder, Lock, Reached, Started};
use crate::error::Error;
use crate::fights::Timing;
use crate::herdr::{self, CallError, Message, TabInfo};
use crate::labels;
use crate::log::utc_timestamp;
use crate::paths::Paths;
use crate::resync::{Rename, Settings, Tab, Tracker};
use crate::state::{self, Clock, State};
use crate::text::{quote, shown};

pub fn daemon(paths: &Paths, replace: bool, foreground: bool) -> Result<u8, Error> {
    match start_daemon(paths, replace, foreground)? {
        Started::AlreadyRunning(pid) => {
            match pid {
                Some(pid) => {
                    complain!("cowbell: a daemon already runs for this server (pid {pid})")
                }
                None => complain!(
                    "cowbell: nothing started: the pidfile is held (by a daemon on another \
                     host, or a cowbell command at work)"
                ),
            }
            Ok(0)
        }
        Started::Off(lock) => {
            complain!("cowbell: off for this server; `cowbell on` turns it back on");
            finish_restore(paths, lock)
        }
        Started::Detached => Ok(0),
        Started::Exited(code) => Ok(code),
        Started::Failed(failed) => Err(not_started(paths, failed)),
    }
}

fn start_daemon(paths: &Paths, replace: bool, foreground: bool) -> Result<Started, Error> {
    // A new daemon cannot start on a state.json it cannot read just now;
    // found out only after the old one handed over, that leaves none.
    if replace {
        state::peek_off(&paths.state_file()).map_err(Error::io("state"))?;
    }
    daemon::start(paths, replace, foreground).map_err(at_pidfile(paths, "starting the daemon"))
}

/// A start that ended without a daemon. After a fork that failed, perhaps
/// once an old daemon handed its tabs over, nobody keeps their icons
/// right: the names go back now, as a stop would give them. Said in the
/// log too, since the hooks' output goes nowhere a person looks.
fn not_started(paths: &Paths, failed: Failed) -> Error {
    let why = match failed {
        Failed::Unchanged(error) => error,
        Failed::CannotFork {
            lock,
            error,
            loaded,
        } => {
            let given = give_back(paths, lock, loaded);
            std::io::Error::new(
                error.kind(),
                format!("cannot make its process ({error}); {given}"),
            )
        }
    };
    crate::log::Log::open(paths.log_file()).line_fmt(format_args!("no daemon started: {why}"));
    Error::io("no daemon started")(why)
}

/// Gives back the names of `state` under `lock`, and says how it went.
fn give_back(paths: &Paths, lock: Lock, (state, warning): (State, Option<String>)) -> String {
    if let Some(warning) = warning {
        complain!("cowbell: state: {warning}");
        crate::log::Log::open(paths.log_file()).line_fmt(format_args!("state: {warning}"));
    }
    let clock = Clock::now();
    let mut tracker = tracker_of(&state, clock, &Timing::REAL);
    let (n, failure) = restore(paths, &mut tracker, false);
    let mut given = format!("{} given back", tab_names(n));
    // Their own "cowbell: " goes: this is one line.
    let bare = |error: Error| {
        let text = error.to_string();
        text.strip_prefix("cowbell: ").unwrap_or(&text).to_string()
    };
    if let Some((failure, _)) = failure {
        let _ = write!(given, "; {}, the rest kept for the next try", bare(failure));
    }
    if let Err(failure) = write_state(paths, &lock, &tracker, state.off, clock) {
        let _ = write!(given, "; {}", bare(failure));
    }
    drop(lock);
    given
}

/// The `pane.agent_detected` hook: make sure a daemon runs, say nothing.
pub fn watchdog(paths: &Paths) -> Result<u8, Error> {
    match start_daemon(paths, false, false)? {
        Started::Exited(code) => Ok(code),
        Started::Failed(failed) => Err(not_started(paths, failed)),
        Started::Detached | Started::AlreadyRunning(_) | Started::Off(_) => Ok(0),
    }
}

/// Clears an `off` on record, under `lock`. Only that needs a write; a
/// corrupt file is left to the daemon's start, which moves it aside and
/// says so in the log, where an action's output would go nowhere.
fn clear_off(paths: &Paths, lock: &Lock) -> Result<(), Error> {
    if !state::peek_off(&paths.state_file()).map_err(Error::io("state"))? {
        return Ok(());
    }
    let (state, _) = load_state(paths)?;
    if state.off {
        let clock = Clock::now();
        let tracker = tracker_of(&state, clock, &Timing::REAL);
        write_state(paths, lock, &tracker, false, clock)?;
    }
    Ok(())
}

/// How long `on` waits for the daemon it started to write its pid, which
/// takes milliseconds.
const PID_WAIT: Duration = Duration::from_secs(2);

pub fn on(paths: &Paths) -> Result<u8, Error> {
    // A short command may hold the lock for a while (a watchdog that found
    // cowbell off; the startup hook giving names back, to a slow herdr for
    // up to about 10 s): the flag is cleared under the lock all the same
    // once it lets go, or the start below would find cowbell still off. A
    // daemon's pid means it is on.
    if let Holder::Free(lock) = daemon::try_lock_after_commands(paths, daemon::STOP_WAIT)
        .map_err(at_pidfile(paths, "locking the pidfile"))?
    {
        clear_off(paths, &lock)?;
    }
    match start_daemon(paths, true, false)? {
        Started::Exited(code) => Ok(code),
        Started::Failed(failed) => Err(not_started(paths, failed)),
        // Turned off after this `on` cleared the flag: that `off` stands.
        Started::Off(_) => {
            let text = "cowbell: still off: `cowbell off` finished at the same moment; run `cowbell on` again";
            complain_to_action(paths, text);
            Ok(1)
        }
        // One that cannot write its pid (a full disk) gives the names back
        // and exits at once: "on" would be untrue.
        Started::Detached
            if daemon::wait_for_pid(paths, PID_WAIT)
                .ok()
                .flatten()
                .is_none() =>
        {
            let text = format!(
                "cowbell: on, but the daemon did not stay up; its log may say why: {}",
                paths.log_file().display()
            );
            complain_to_action(paths, &text);
            Ok(1)
        }
        Started::Detached | Started::AlreadyRunning(_) => match list_tab_infos(paths) {
            Ok(_) => {
                say!("cowbell: on");
                Ok(0)
            }
            // On all the same: the daemon waits for the server, and the
            // next server start brings the icons back.
            Err(error) => {
                complain!("{error}; cowbell is on, and the icons come when the server does");
                Ok(3)
            }
        },
    }
}

pub fn off(paths: &Paths, every_tab: bool) -> Result<u8, Error> {
    let daemon::Stopped { lock, daemon_ran } = stop_daemon(paths)?;
    let (state, lost) = load_state(paths)?;
    let clock = Clock::now();
    let mut tracker = tracker_of(&state, clock, &Timing::REAL);
    // With the remembered names lost, taking the icons off every tab is the
    // nearest thing to giving the names back.
    let (n, failure) = restore(paths, &mut tracker, every_tab || lost);
    // What a daemon could not give back, it left in state.json.
    let daemon_restored = daemon_ran && state.tabs.is_empty();
    let recorded = write_state(paths, &lock, &tracker, true, clock);
    drop(lock);
    // The daemon may have recorded off before it exited; if nobody did,
    // the next hook starts one that puts the icons back on.
    if let Err(error) = recorded
        && !state::peek_off(&paths.state_file()).unwrap_or(false)
    {
        let text = format!(
            "{error}; {} restored, but off is not on record: the next server start or agent turns cowbell back on",
            tab_names(n)
        );
        complain!("{text}");
        // (Not to a herdr that stopped answering the restore.)
        if failure.as_ref().is_none_or(|(_, answered)| *answered) {
            notify_action(paths, &text);
        }
        return Ok(error.exit_code());
    }
    if let Some((error, answered)) = failure {
        let text = restore_failure_message(&error, n, &tracker);
        complain!("{text}");
        if answered {
            notify_action(paths, &text);
        }
        return Ok(error.exit_code());
    }
    let what = if every_tab { "icons removed" } else { "off" };
    match (daemon_restored, n) {
        (false, n) => say!("cowbell: {what}; {} restored", tab_names(n)),
        (true, 0) => say!("cowbell: {what}; the daemon gave the names back"),
        (true, n) => {
            say!(
                "cowbell: {what}; the daemon gave the names back, and this command {} more",
                tab_names(n)
            )
        }
    }
    Ok(0)
}

/// Gives back the names a stop left in state.json when it could not reach
/// herdr (`off` while the server was down, a server that stopped in the
/// middle of the restore). The startup hook runs this once herdr is back,
/// so no tab keeps a stale icon while cowbell is off.
fn finish_restore(paths: &Paths, lock: Lock) -> Result<u8, Error> {
    let (state, _) = load_state(paths)?;
    if state.tabs.is_empty() {
        return Ok(0);
    }
    let clock = Clock::now();
    let mut tracker = tracker_of(&state, clock, &Timing::REAL);
    let (n, failure) = restore(paths, &mut tracker, false);
    write_state(paths, &lock, &tracker, state.off, clock)?;
    drop(lock);
    if let Some((error, _)) = failure {
        complain!("{}", restore_failure_message(&error, n, &tracker));
        return Ok(error.exit_code());
    }
    say!(
        "cowbell: {} restored that an earlier stop could not give back",
        tab_names(n)
    );
    Ok(0)
}

/// One line for a restore that failed: what failed, that cowbell is off
/// all the same, how many names are back and how many are kept.
fn restore_failure_message(error: &Error, restored: usize, tracker: &Tracker) -> String {
    let mut line = format!("{error}; cowbell is off");
    if restored > 0 {
        let _ = write!(line, "; {} restored", tab_names(restored));
    }
    let left = tracker.tabs.values().count();
    if left > 0 {
        let _ = write!(
            line,
            "; {} not back yet, kept in state.json for `cowbell off` or the next server start",
            tab_names(left)
        );
    }
    line
}

fn tab_names(n: usize) -> String {
    if n == 1 {
        "1 tab name".to_string()
    } else {
        format!("{n} tab names")
    }
}

/// Stops a running daemon, which restores names and records the off flag
/// itself before it lets go of the lock (so no hook can start a new one in
/// between), and returns the lock with what it did.
fn stop_daemon(paths: &Paths) -> Result<daemon::Stopped, Error> {
    match daemon::stop(paths).map_err(at_pidfile(paths, "stopping the daemon"))? {
        Some(stopped) => Ok(stopped),
        None => Err(Error::Io {
            what: "stopping the daemon".into(),
            source: std::io::Error::other(format!(
                "the pidfile {} is still locked (the daemon did not exit, another cowbell command holds it, or a daemon on another host or in another pid namespace does)",
                paths.pid_file().display()
            )),
        }),
    }
}

/// Gives back the names of the tabs `tracker` still tracks (after a crash,
/// or with no daemon), and with `every_tab` strips a leading icon from
/// every other tab too. Returns how many tabs were renamed, and what went
/// wrong if some were not, with whether herdr answered all the same (a
/// refusal: a notification can say it); those stay in `tracker` for the
/// next try.
fn restore(
    paths: &Paths,
    tracker: &mut Tracker,
    every_tab: bool,
) -> (usize, Option<(Error, bool)>) {
    if tracker.tabs.is_empty() && !every_tab {
        return (0, None);
    }
    let config = config::load(&paths.config_file).config;
    let labeler = config.labeler();
    let tabs = match list_tabs(paths) {
        Ok(tabs) => tabs,
        Err(error) => return (0, Some((error, false))),
    };
    let renames = tracker.restore_plan(&tabs, &labeler, every_tab, Instant::now());
    let mut restored = 0;
    let unfinished = send_renames(paths, &renames, "restoring", &mut |_| restored += 1);
    // Tabs cowbell did not track (remove-icons, or a lost state.json) that
    // still carry an icon are tracked from now on, so the next try (the
    // startup hook, another off) gives them their name.
    for rename in renames
        .iter()
        .filter(|r| unfinished.tabs.contains(&r.tab_id.as_str()))
    {
        if let Some(tab) = tabs.iter().find(|tab| tab.tab_id == rename.tab_id) {
            tracker.keep_for_restore(tab, &rename.label);
        }
    }
    // Forget every tab whose name is back; keep the rest for the next try.
    tracker
        .tabs
        .retain(&mut |id, _| unfinished.tabs.contains(&id));
    let failure = unfinished.why.map(|why| {
        let error = Error::Herdr {
            what: "restoring tab names".into(),
            why,
        };
        (error, unfinished.answered)
    });
    (restored, failure)
}

/// One resync in the foreground (for scripts, and hosts without a daemon).
pub fn sync(paths: &Paths) -> Result<u8, Error> {
    // Said here too, as the daemon only logs them.
    let loaded = config::load(&paths.config_file);
    for problem in &loaded.problems {
        complain!("cowbell: {}", problem.message);
    }
    // A running daemon keeps the state: ask it to resync instead.
    let lock = match daemon::signal_daemon(paths, libc::SIGHUP)
        .map_err(at_pidfile(paths, "signalling the daemon"))?
    {
        Reached::Free(lock) => lock,
        Reached::Signalled => {
            say!("cowbell: the daemon reloads the configuration and resyncs");
            return Ok(0);
        }
    };
    let (state, _) = load_state(paths)?;
    if state.off {
        complain!("cowbell: off for this server; `cowbell on` turns it back on");
        return Ok(0);
    }
    // One resync and exit: no spinner to turn.
    let config = config::Config {
        spinner: false,
        ..loaded.config
    };
    let settings = Settings::from_config(&config, Timing::REAL, 1);
    let clock = Clock::now();
    let mut tracker = tracker_of(&state, clock, &settings.timing);
    let tabs = list_tabs(paths)?;
    let plan = tracker.resync(&tabs, &settings, clock.mono);
    // Every label is saved as pending before it goes out: killed in
    // between, the next run knows it for its own. A save that fails here
    // fails again below, where it is said; the renames go out all the
    // same, as the daemon's do.
    if !plan.renames.is_empty() {
        let _ = write_state(paths, &lock, &tracker, false, clock);
    }
    let mut applied = Vec::new();
    let unfinished = send_renames(paths, &plan.renames, "renaming", &mut |rename| {
        applied.push(rename)
    });
    for rename in applied {
        tracker.confirm(&rename.tab_id, &rename.label);
    }
    // With the clock the state was read with, its times come back to the
    // same milliseconds: a sync that changed nothing writes nothing.
    write_state(paths, &lock, &tracker, false, clock)?;
    drop(lock);
    Ok(if unfinished.why.is_some() { 3 } else { 0 })
}

/// How long a short command goes on renaming: herdr answers a rename
/// within a millisecond, so only a stalling herdr reaches this, and a hook
/// or an action must finish (herdr runs at most 32 plugin commands at
/// once, and waits for each).
const RENAMES_BUDGET: Duration = Duration::from_secs(5);

/// What `send_renames` left undone.
struct Unfinished<'a> {
    /// The tabs whose rename was not made: refused, unanswered, not tried,
    /// or refused as `tab_not_found`. They stay tracked for the next try
    /// (whose `tab.list` drops a tab that is really gone).
    tabs: Vec<&'a str>,
    /// Why the command fails; `None` when herdr only said some tabs are
    /// gone (a tab closed since the list has no name left to give).
    why: Option<String>,
    /// herdr answered the last rename sent, so a notification would reach
    /// it (one to a herdr that stopped answering waits 2 s for nothing).
    answered: bool,
}

/// Sends `renames` one by one, calling `applied` for each one herdr
/// applied (a `dyn` closure: one copy of this function serves both
/// callers). Stops early when herdr does not answer one in time or the
/// budget is spent: those not sent are unfinished, like the ones herdr
/// refused, so the caller keeps them for the next try.
fn send_renames<'a>(
    paths: &Paths,
    renames: &'a [Rename],
    doing: &str,
    applied: &mut dyn FnMut(&'a Rename),
) -> Unfinished<'a> {
    let give_up = Instant::now() + RENAMES_BUDGET;
    let mut unfinished = Unfinished {
        tabs: Vec::new(),
        why: None,
        answered: true,
    };
    for (index, rename) in renames.iter().enumerate() {
        let params = herdr::rename_params(&rename.tab_id, &rename.label);
        let rest = &renames[index + 1..];
        let answer = herdr::call(&paths.socket, "tab.rename", &params);
        unfinished.answered = matches!(answer, Ok(_) | Err(CallError::Herdr(_)));
        match answer {
            Ok(_) => applied(rename),
            Err(CallError::Herdr(error)) if error.code == "tab_not_found" => {
                unfinished.tabs.push(&rename.tab_id);
            }
            Err(error) => {
                complain!("cowbell: {doing} {}: {error}", shown(&rename.tab_id));
                unfinished.tabs.push(&rename.tab_id);
                unfinished.why.get_or_insert(error.to_string());
                // Only a timeout costs time (a refused or dropped
                // connection fails at once, and may be a passing hiccup):
                // after one, the next would most likely wait as long.
                if matches!(error, CallError::Timeout) && !rest.is_empty() {
                    unfinished.break_off(rest, "herdr stopped answering");
                    break;
                }
            }
        }
        if Instant::now() >= give_up && !rest.is_empty() {
            let why = format!("herdr is slow ({} s spent)", RENAMES_BUDGET.as_secs());
            unfinished.break_off(rest, &why);
            break;
        }
    }
    unfinished
}

impl<'a> Unfinished<'a> {
    fn break_off(&mut self, rest: &'a [Rename], why: &str) {
        let why = format!("{why}: {} more tabs not renamed", rest.len());
        complain!("cowbell: {why}");
        self.tabs
            .extend(rest.iter().map(|rename| rename.tab_id.as_str()));
        self.why.get_or_insert(why);
    }
}

fn list_tabs(paths: &Paths) -> Result<Vec<Tab>, Error> {
    Ok(list_tab_infos(paths)?
        .into_iter()
        .map(TabInfo::into_tab)
        .collect())
}

fn server_what(paths: &Paths) -> String {
    format!("herdr server at {}", paths.socket.display())
}

/// A clear word when the socket path is not a socket at all.
fn check_socket(paths: &Paths) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(&paths.socket) {
        Ok(meta) if !meta.file_type().is_socket() => Err(Error::Herdr {
            what: server_what(paths),
            why: "this path is not a socket".into(),
        }),
        Err(error) => Err(Error::Herdr {
            what: server_what(paths),
            why: format!("{error} (is herdr running?)"),
        }),
        Ok(_) => Ok(()),
    }
}

/// The state, for a command that holds the lock and will write it. A
/// corrupt file is moved aside as the daemon would, and the person told,
/// rather than overwritten in silence; `true` when the file could not be
/// used. One that cannot be read just now ends the command instead.
fn load_state(paths: &Paths) -> Result<(State, bool), Error> {
    let (state, problem) = state::load(&paths.state_file(), Clock::now().wall_ms / 1000)
        .map_err(Error::io("state"))?;
    if let Some(problem) = &problem {
        complain!("cowbell: {problem}");
    }
    Ok((state, problem.is_some()))
}

/// An error with the pidfile named: a permission or a planted file there is
/// the usual cause, and the person has to know where to look.
fn at_pidfile(paths: &Paths, doing: &str) -> impl FnOnce(std::io::Error) -> Error {
    Error::io(format!("{doing} ({})", paths.pid_file().display()))
}

/// Writes state.json beside the pidfile `lock` holds (see `Lock::dir`).
/// state.json's tabs for a command to work on. A daemon killed after
/// herdr applied its rename but before its save left labels state.json
/// does not know (a spinner frame, a renumbering): they are known for
/// cowbell's, as a daemon starting after it knows them, and an auto-named
/// tab gets its current position back, not a number that became a name.
/// (Not every time: run again and again, `sync` would then never see a
/// plugin that writes its own status icon over cowbell's as a fight.)
fn tracker_of(state: &State, clock: Clock, timing: &Timing) -> Tracker {
    let mut tracker = state::to_tracker(state, clock, timing);
    if state.daemon_running {
        tracker.mark_left_by_killed_daemon();
    }
    tracker
}

fn write_state(
    paths: &Paths,
    lock: &Lock,
    tracker: &Tracker,
    off: bool,
    clock: Clock,
) -> Result<(), Error> {
    let dir = lock.dir(paths).and_then(|dir| {
        dir.ok_or_else(|| {
            std::io::Error::other("the state directory was deleted or replaced meanwhile")
        })
    });
    // Only when it changed: a script's `sync` per event would otherwise
    // cost a sync and a rename each. The lock is held since the state was
    // read, so the file holds what the last writer wrote.
    let mut on_disk = state::fingerprint_on_disk(&paths.state_file());
    // A killed daemon's record stays until its tabs are looked at: an
    // `off` that could not reach herdr leaves it for the next restore.
    let crashed = tracker.crash_unexamined();
    dir.and_then(|dir| state::save_tracker(&dir, tracker, off, crashed, clock, &mut on_disk))
        .map(|_| ())
        .map_err(Error::io(format!(
            "writing {}",
            paths.state_file().display()
        )))
}

#[derive(Serialize)]
struct TabStatus {
    tab_id: String,
    label: String,
    base: Option<String>,
    status: String,
    tracked: bool,
    fights: u32,
    cooldown_until: Option<String>,
}

#[derive(Serialize)]
struct StatusReport {
    daemon_running: bool,
    pid: Option<u32>,
    /// Why the pidfile could not be looked at: whether a daemon runs is
    /// then unknown, which "not running" would misstate.
    daemon_problem: Option<String>,
    socket: String,
    server_reachable: bool,
    server_error: Option<String>,
    off: bool,
    state_dir: String,
    /// Why state.json could not be read, when it could not.
    state_problem: Option<String>,
    /// While off: tabs whose name an earlier stop could not give back yet.
    names_to_give_back: usize,
    config_file: String,
    config_problems: Vec<String>,
    tabs: Vec<TabStatus>,
}

pub fn status(paths: &Paths, as_json: bool) -> Result<u8, Error> {
    let (pid, daemon_problem) = match daemon::probe(paths) {
        Ok(pid) => (pid, None),
        Err(error) => (
            None,
            Some(format!("{}: {error}", paths.pid_file().display())),
        ),
    };
    let running = pid.is_some();
    let (state, state_problem) = state::peek(&paths.state_file());
    let loaded = config::load(&paths.config_file);
    let (tabs, server_error) = match list_tab_infos(paths) {
        Ok(tabs) => (tabs, None),
        // The report names the socket already; only the reason is news.
        Err(Error::Herdr { why, .. }) => (Vec::new(), Some(why)),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    // Cool-downs as a daemon would read them: one further away than it
    // could last (saved before the wall clock went back) is dropped.
    let clock = Clock::now();
    let tracker = state::to_tracker(&state, clock, &Timing::REAL);
    let tab_rows: Vec<TabStatus> = tabs
        .iter()
        .map(|tab| {
            let entry = state.tabs.get(&tab.tab_id);
            TabStatus {
                tab_id: tab.tab_id.clone(),
                label: tab.label.clone(),
                base: entry.map(|e| e.base.clone()),
                // As the daemon reads it: a status herdr may add later is
                // unknown, and nothing raw reaches the terminal.
                status: tab.status().name().to_string(),
                tracked: entry.is_some(),
                fights: entry.and_then(|e| e.fights_total).unwrap_or(0),
                cooldown_until: tracker
                    .tabs
                    .get(&tab.tab_id)
                    .and_then(|record| record.fight.cooldown_until)
                    .filter(|until| *until > clock.mono)
                    .map(|until| utc_timestamp(clock.to_wall(until) / 1000)),
            }
        })
        .collect();
    let report = StatusReport {
        daemon_running: running,
        pid,
        daemon_problem,
        socket: paths.socket.display().to_string(),
        server_reachable: server_error.is_none(),
        server_error,
        off: state.off,
        state_dir: paths.server_dir.display().to_string(),
        state_problem,
        names_to_give_back: if state.off { state.tabs.len() } else { 0 },
        config_file: paths.config_file.display().to_string(),
        config_problems: loaded.problems.iter().map(|p| p.message.clone()).collect(),
        tabs: tab_rows,
    };
    let summary = summary_line(&report);
    if report.server_reachable {
        notify_action(paths, &summary);
    }
    if as_json {
        say!("{}", json::to_string(&report));
    } else {
        say_raw!("{}", status_text(&report, &summary));
    }
    // The report is printed either way; the exit code still says whether
    // herdr could be reached, as for every other command.
    Ok(if report.server_reachable { 0 } else { 3 })
}

/// herdr shows nothing a menu action prints: an action that failed says so
/// where the person looks. Not when herdr itself was the problem, which
/// would only make the person wait for a second failure.
pub fn notify_action_failure(paths: &Paths, error: &Error) {
    if !matches!(error, Error::Herdr { .. }) {
        notify_action(paths, &error.to_string());
    }
}

/// Says `text` on stderr, and shows it as a herdr notification when a menu
/// action runs this command: herdr shows nothing an action prints. (When
/// herdr could not be reached, the notification cannot reach it either.)
fn complain_to_action(paths: &Paths, text: &str) {
    complain!("{text}");
    notify_action(paths, text);
}

/// Shows `text` as a herdr notification when a menu action runs this
/// command; a command run by hand has its terminal.
fn notify_action(paths: &Paths, text: &str) {
    if std::env::var_os("HERDR_PLUGIN_ACTION_ID").is_some() {
        let _ = herdr::call(
            &paths.socket,
            "notification.show",
            &herdr::notification_params("cowbell", text),
        );
    }
}

fn list_tab_infos(paths: &Paths) -> Result<Vec<TabInfo>, Error> {
    check_socket(paths)?;
    match herdr::call(&paths.socket, "tab.list", "{}").map_err(Error::herdr(server_what(paths)))? {
        Message::Tabs(infos) => Ok(infos),
        other => Err(Error::Herdr {
            what: server_what(paths),
            why: format!("unexpected answer to tab.list: {}", other.kind()),
        }),
    }
}

fn summary_line(report: &StatusReport) -> String {
    let daemon = match (report.off, report.daemon_running) {
        (true, _) => "off".to_string(),
        (false, true) => "on, daemon running".to_string(),
        (false, false) if report.daemon_problem.is_some() => "on, daemon unknown".to_string(),
        (false, false) => "on, daemon not running".to_string(),
    };
    let tracked = report.tabs.iter().filter(|t| t.tracked).count();
    let cooling = report
        .tabs
        .iter()
        .filter(|t| t.cooldown_until.is_some())
        .count();
    let mut line = format!(
        "cowbell {daemon}; {tracked} of {} tabs tracked",
        report.tabs.len()
    );
    if cooling > 0 {
        let _ = write!(line, ", {cooling} cooling down");
    }
    if !report.config_problems.is_empty() {
        let _ = write!(line, ", {} config problems", report.config_problems.len());
    }
    if report.state_problem.is_some() {
        line.push_str(", state.json unusable");
    }
    if report.names_to_give_back > 0 {
        let _ = write!(
            line,
            ", {} not given back yet",
            tab_names(report.names_to_give_back)
        );
    }
    if !report.server_reachable {
        line.push_str(", herdr unreachable");
    }
    line
}

fn status_text(report: &StatusReport, summary: &str) -> String {
    let mut text = format!("{summary}\n");
    let pid = report
        .pid
        .map_or(String::new(), |pid| format!(" (pid {pid})"));
    let _ = match &report.daemon_problem {
        Some(problem) => writeln!(text, "daemon: unknown (cannot look: {problem})"),
        None if report.daemon_running => writeln!(text, "daemon: running{pid}"),
        None => writeln!(text, "daemon: not running"),
    };
    let _ = match &report.server_error {
        None => writeln!(text, "socket: {} (reachable)", report.socket),
        Some(error) => writeln!(text, "socket: {} (unreachable: {error})", report.socket),
    };
    let _ = writeln!(
        text,
        "state: {} ({})",
        report.state_dir,
        if report.off { "off" } else { "on" }
    );
    if let Some(problem) = &report.state_problem {
        let _ = writeln!(text, "  problem: {problem}");
    }
    if report.names_to_give_back > 0 {
        let _ = writeln!(
            text,
            "  {} not given back yet (an earlier stop could not rename them): `cowbell off` gives them back, as does the next server start",
            tab_names(report.names_to_give_back)
        );
    }
    let _ = writeln!(text, "config: {}", report.config_file);
    for problem in &report.config_problems {
        let _ = writeln!(text, "  problem: {problem}");
    }
    for tab in &report.tabs {
        let base = tab
            .base
            .as_deref()
            .map_or("(not tracked)".to_string(), |b| {
                format!("base {}", quote(b))
            });
        let _ = write!(
            text,
            "  {:<8} {:<10} {} {base}",
            shown(&tab.tab_id),
            tab.status,
            quote(&tab.label)
        );
        if tab.fights > 0 {
            let _ = write!(text, ", {} fights", tab.fights);
        }
        if let Some(until) = &tab.cooldown_until {
            let _ = write!(text, ", cooling down until {until}");
        }
        text.push('\n');
    }
    text
}

pub fn presets() -> Result<u8, Error> {
    say_raw!("{}", labels::presets_sample());
    Ok(0)
}

pub fn config_check(config_file: &std::path::Path) -> Result<u8, Error> {
    let loaded = config::load(config_file);
    for problem in &loaded.problems {
        complain!("cowbell: {}", problem.message);
    }
    if loaded.has_errors() {
        let problems = loaded
            .problems
            .iter()
            .filter(|p| p.severity == config::Severity::Error)
            .count();
        return Err(Error::Config { problems });
    }
    say_raw!("{}", loaded.config.to_json());
    Ok(0)
}
