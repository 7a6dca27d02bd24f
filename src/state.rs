//! state.json: what cowbell remembers about one server's tabs between runs.
//!
//! Per tab: the base (the real name), the last label cowbell wrote, the
//! label it last saw, the label it sent that herdr has not confirmed yet,
//! whether herdr named the tab by position, and the fight history; plus
//! the server-wide "off" flag. The file is versioned, written only when its
//! text changed, and replaced atomically. A missing file is an empty state;
//! a corrupt or unknown-version one is moved aside as
//! `state.json.corrupt-<unix time>` and cowbell starts empty.
//!
//! Times are stored as wall-clock milliseconds, because monotonic instants
//! mean nothing to the next process. On load they become instants again; a
//! clock that jumped is clamped, so a cool-down never lasts longer than the
//! longest cool-down the rules allow.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use miniserde::{Deserialize, Serialize, json, ser};

use crate::fights::{FightRecord, Timing};
use crate::files::{self, Dir};
use crate::paths::STATE_FILE;
use crate::resync::{TabRecord, Tracker};

pub const VERSION: u64 = 1;

/// Far more than 1000 tabs need; a larger file is not ours.
const MAX_STATE_BYTES: u64 = 8 << 20;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TabEntry {
    pub base: String,
    pub written: Option<String>,
    pub seen: Option<String>,
    /// The newest label cowbell sent and herdr has not confirmed yet.
    pub pending: Option<String>,
    pub auto_named: bool,
    pub fights_ms: Vec<u64>,
    pub last_own_rename_ms: Option<u64>,
    pub cooldown_until_ms: Option<u64>,
    pub last_cooldown_end_ms: Option<u64>,
    pub last_cooldown_ms: Option<u64>,
    pub cooldown_level: u32,
    /// Missing in files from before it: a file of cowbell's first builds
    /// must still read (with its `off` flag and cool-downs), not be moved
    /// aside as corrupt.
    pub fights_total: Option<u32>,
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u64,
    off: bool,
    /// Written by a daemon that was running (see `State::daemon_running`);
    /// missing in files from before it.
    daemon_running: Option<bool>,
    tabs: BTreeMap<String, TabEntry>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    pub off: bool,
    /// A running daemon wrote the file, and its last save on the way out
    /// (which says false) never came: it was killed, and may have renamed
    /// tabs after this save (see `Tracker::mark_left_by_killed_daemon`).
    pub daemon_running: bool,
    pub tabs: BTreeMap<String, TabEntry>,
}

/// The file's shape for writing: it streams the tabs from a tracker, so
/// that a save never holds a second copy of every name (at 1000 tabs that
/// copy was the daemon's memory peak).
#[derive(Serialize)]
struct StateFileOut<T> {
    version: u64,
    off: bool,
    daemon_running: bool,
    tabs: T,
}

/// The state file's text, built one entry at a time from the tracker.
fn encode_tracker(tracker: &Tracker, off: bool, daemon_running: bool, clock: Clock) -> String {
    json::to_string(&StateFileOut {
        version: VERSION,
        off,
        daemon_running,
        tabs: TrackerTabs { tracker, clock },
    })
}

struct TrackerTabs<'a> {
    tracker: &'a Tracker,
    clock: Clock,
}

impl Serialize for TrackerTabs<'_> {
    fn begin(&self) -> ser::Fragment<'_> {
        ser::Fragment::Map(Box::new(TrackerEntries {
            records: self.tracker.tabs.iter(),
            clock: self.clock,
            current: None,
        }))
    }
}

/// Holds only the entry being written.
struct TrackerEntries<'a> {
    records: std::slice::Iter<'a, (String, TabRecord)>,
    clock: Clock,
    current: Option<TabEntry>,
}

impl ser::Map for TrackerEntries<'_> {
    fn next(&mut self) -> Option<(Cow<'_, str>, &dyn Serialize)> {
        let (tab_id, record) = self.records.next()?;
        let entry = self.current.insert(entry_of(record, self.clock));
        Some((Cow::Borrowed(tab_id.as_str()), entry))
    }
}

/// More elements in one array make a state file corrupt: its only arrays
/// are a tab's fights of the last 120 s, of which a cool-down starts at
/// the third.
const MAX_ARRAY_ELEMENTS: usize = 64;

pub fn decode(text: &str) -> Result<State, String> {
    // Deeper, miniserde's parse stack alone would take some 40 bytes a
    // level; longer, its numbers 8 to 16 bytes each.
    if !crate::json_check::nesting_is_shallow(text.as_bytes()) {
        return Err(not_a_state_file(text));
    }
    // A newer cowbell's file is named as such, whatever else is wrong.
    let newer = || match json::from_str::<VersionOnly>(text) {
        Ok(VersionOnly { version: Some(v) }) if v != VERSION => {
            Some(format!("unknown format version {v}"))
        }
        _ => None,
    };
    if !crate::json_check::shape_is_small(text.as_bytes(), MAX_ARRAY_ELEMENTS) {
        return Err(newer()
            .unwrap_or_else(|| format!("more than {MAX_ARRAY_ELEMENTS} elements in one array")));
    }
    match json::from_str::<StateFile>(text) {
        Ok(file) if file.version == VERSION => Ok(State {
            off: file.off,
            daemon_running: file.daemon_running.unwrap_or(false),
            tabs: file.tabs,
        }),
        Ok(file) => Err(format!("unknown format version {}", file.version)),
        Err(_) => Err(newer().unwrap_or_else(|| not_a_state_file(text))),
    }
}

fn not_a_state_file(text: &str) -> String {
    match crate::json_check::locate_error(text) {
        Some(error) => format!(
            "not JSON: line {}, column {}: {}",
            error.line, error.column, error.what
        ),
        None => "not a cowbell state file (wrong fields or types)".to_string(),
    }
}

/// Why state.json cannot be used.
enum Unusable {
    Corrupt(String),
    Unreadable(io::Error),
    /// A failure of the moment (no descriptor or memory left): the file
    /// may well be fine, and must stay as it is.
    Unavailable(io::Error),
}

/// Whether a failed read says nothing about the file itself. (Not EIO: a
/// bad block under the file fails every read, and moved aside, the file
/// no longer keeps cowbell from starting.)
fn is_passing(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
    )
}

fn read(path: &Path) -> Result<State, Unusable> {
    match files::read_capped(path, MAX_STATE_BYTES) {
        Ok(None) => Ok(State::default()),
        Ok(Some(bytes)) => match std::str::from_utf8(&bytes) {
            Ok(text) => decode(text).map_err(Unusable::Corrupt),
            Err(_) => Err(Unusable::Corrupt("not UTF-8".to_string())),
        },
        Err(error) if error.kind() == io::ErrorKind::InvalidData => {
            Err(Unusable::Corrupt(error.to_string()))
        }
        Err(error) if is_passing(&error) => Err(Unusable::Unavailable(error)),
        Err(error) => Err(Unusable::Unreadable(error)),
    }
}

/// The state as the file holds it, for a quick look (the launching hook,
/// `status`): a file that cannot be used counts as empty and stays where it
/// is, and the problem comes back to be shown.
pub fn peek(path: &Path) -> (State, Option<String>) {
    match read(path) {
        Ok(state) => (state, None),
        Err(unusable) => (State::default(), Some(describe(path, &unusable))),
    }
}

/// Whether cowbell is off for this server, for the launching hook. A file
/// that cannot be read just now is an error: it may say off.
pub fn peek_off(path: &Path) -> io::Result<bool> {
    match read(path) {
        Ok(state) => Ok(state.off),
        Err(Unusable::Unavailable(error)) => Err(unavailable(path, error)),
        Err(_) => Ok(false),
    }
}

fn describe(path: &Path, unusable: &Unusable) -> String {
    match unusable {
        Unusable::Corrupt(why) => format!("{} is corrupt ({why})", path.display()),
        Unusable::Unreadable(error) | Unusable::Unavailable(error) => {
            format!("cannot read {}: {error}", path.display())
        }
    }
}

fn unavailable(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!(
            "cannot read {} just now ({error}); it stays as it is",
            path.display()
        ),
    )
}

/// Reads state.json for whoever will write it. Problems come back as
/// warnings; the state is then empty, and the file has been moved aside:
/// a corrupt one, and an unreadable one too (another user's, say), which
/// the next save would otherwise replace unread. A failure of the moment
/// is an error, and the file stays: starting empty would forget every name
/// and an `off`.
pub fn load(path: &Path, now_unix_secs: u64) -> io::Result<(State, Option<String>)> {
    let problem = match read(path) {
        Ok(state) => return Ok((state, None)),
        Err(Unusable::Unavailable(error)) => return Err(unavailable(path, error)),
        Err(unusable) => describe(path, &unusable),
    };
    let aside = corrupt_name(path, now_unix_secs);
    let moved = match std::fs::rename(path, &aside) {
        Ok(()) => format!("moved aside to {}", aside.display()),
        Err(error) => format!("could not move it aside: {error}"),
    };
    Ok((
        State::default(),
        Some(format!("{problem}; {moved}; starting empty")),
    ))
}

fn corrupt_name(path: &Path, now_unix_secs: u64) -> PathBuf {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("state.json");
    // Two corrupt files within a second must not overwrite each other.
    let mut candidate = path.with_file_name(format!("{name}.corrupt-{now_unix_secs}"));
    let mut n = 1;
    while candidate.symlink_metadata().is_ok() {
        candidate = path.with_file_name(format!("{name}.corrupt-{now_unix_secs}-{n}"));
        n += 1;
    }
    candidate
}

/// A fingerprint of what state.json holds, as `save_tracker`'s
/// `last_saved` takes it: a writer that did not save it itself (a short
/// command) writes only what differs. `None` when there is no file to
/// read.
pub fn fingerprint_on_disk(path: &Path) -> Option<u64> {
    let bytes = files::read_capped(path, MAX_STATE_BYTES).ok().flatten()?;
    Some(files::fingerprint(&bytes))
}

/// Writes the tracker's state unless its text is the one last saved, known
/// by its fingerprint (for 1000 tabs the text is ~300 KB, not worth
/// keeping). The fingerprint is kept only once the write succeeded, so a
/// save that failed (a full disk) is tried again at the next one. Returns
/// whether it wrote.
pub fn save_tracker(
    dir: &Dir,
    tracker: &Tracker,
    off: bool,
    daemon_running: bool,
    clock: Clock,
    last_saved: &mut Option<u64>,
) -> io::Result<bool> {
    let text = encode_tracker(tracker, off, daemon_running, clock);
    write_unless_saved(dir, &text, last_saved)
}

fn write_unless_saved(dir: &Dir, text: &str, last_saved: &mut Option<u64>) -> io::Result<bool> {
    let fingerprint = files::fingerprint(text.as_bytes());
    if *last_saved == Some(fingerprint) {
        return Ok(false);
    }
    // A file cowbell could not read back would be taken for a corrupt one
    // and moved aside: better keep the last one that fits.
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(io::Error::other(format!(
            "the state is {} bytes, more than the {MAX_STATE_BYTES} cowbell reads back (tab names of megabytes?); the file keeps the last state that fitted",
            text.len()
        )));
    }
    dir.write_atomically(STATE_FILE, text.as_bytes())?;
    *last_saved = Some(fingerprint);
    Ok(true)
}

/// One reading of both clocks, so every conversion in a save or load
/// agrees.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub mono: Instant,
    pub wall_ms: u64,
}

impl Clock {
    pub fn now() -> Clock {
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Clock {
            mono: Instant::now(),
            wall_ms,
        }
    }

    /// Whether a newer reading still gives the same offset between the
    /// clocks, to within a second. A suspend (the monotonic clock stands
    /// still) or a step of the wall clock ends the agreement.
    pub fn agrees_with(self, newer: Clock) -> bool {
        self.to_wall(newer.mono).abs_diff(newer.wall_ms) <= 1000
    }

    pub fn to_wall(self, at: Instant) -> u64 {
        if at >= self.mono {
            self.wall_ms
                .saturating_add(at.duration_since(self.mono).as_millis() as u64)
        } else {
            self.wall_ms
                .saturating_sub(self.mono.duration_since(at).as_millis() as u64)
        }
    }

    /// A stored past moment as an instant; `None` when it is older than the
    /// monotonic clock can express, or lies in the future because the wall
    /// clock went back since. Taken for now, such a moment (a fight, say,
    /// days old) would count as recent.
    fn past(self, wall_ms: u64) -> Option<Instant> {
        if wall_ms > self.wall_ms.saturating_add(1000) {
            None
        } else if wall_ms >= self.wall_ms {
            Some(self.mono)
        } else {
            self.mono
                .checked_sub(Duration::from_millis(self.wall_ms - wall_ms))
        }
    }

    /// Whether a stored end of something that lasts at most `limit` is
    /// further away than that: it was written before the wall clock went
    /// back, at a time nobody knows, maybe days ago.
    fn beyond(self, wall_ms: u64, limit: Duration) -> bool {
        let furthest = self.wall_ms.saturating_add(limit.as_millis() as u64);
        wall_ms > furthest.saturating_add(1000)
    }

    /// A stored future moment, no further away than `limit`.
    fn future(self, wall_ms: u64, limit: Duration) -> Option<Instant> {
        if wall_ms >= self.wall_ms {
            Some(self.mono + Duration::from_millis(wall_ms - self.wall_ms).min(limit))
        } else {
            self.past(wall_ms)
        }
    }
}

pub fn to_tracker(state: &State, clock: Clock, timing: &Timing) -> Tracker {
    let mut tracker = Tracker::default();
    for (tab_id, entry) in &state.tabs {
        // A cool-down lasts no longer than it did when it started. One that
        // ends further away than that was saved before the wall clock went
        // back, at a time nobody knows: it may have ended days ago, or run
        // still. Dropped, and the tab's renamer counts as new, as after a
        // long quiet spell: when in doubt, the icon shows.
        let longest = entry.last_cooldown_ms.map_or(timing.max_cooldown, |ms| {
            Duration::from_millis(ms).min(timing.max_cooldown)
        });
        let unknown_end = [entry.cooldown_until_ms, entry.last_cooldown_end_ms]
            .into_iter()
            .flatten()
            .any(|end| clock.beyond(end, longest));
        let fight = FightRecord {
            last_own_rename: entry.last_own_rename_ms.and_then(|ms| clock.past(ms)),
            fights: entry
                .fights_ms
                .iter()
                .filter_map(|ms| clock.past(*ms))
                .collect(),
            cooldown_until: entry
                .cooldown_until_ms
                .filter(|_| !unknown_end)
                .and_then(|ms| clock.future(ms, longest)),
            last_cooldown: entry
                .last_cooldown_end_ms
                .filter(|_| entry.last_cooldown_ms.is_some() && !unknown_end)
                .and_then(|end| clock.future(end, longest))
                .map(|end| (end, longest)),
            level: if unknown_end {
                0
            } else {
                entry.cooldown_level.min(16)
            },
            total: entry.fights_total.unwrap_or(0),
        };
        let mut record = TabRecord {
            base: entry.base.clone(),
            written: entry.written.clone(),
            seen: entry
                .seen
                .clone()
                .or_else(|| entry.written.clone())
                .unwrap_or_else(|| entry.base.clone()),
            auto_named: entry.auto_named,
            fight,
            ..TabRecord::default()
        };
        // Sent by a process that ended before herdr's answer: if the tab
        // shows it, it is cowbell's own label, not a rename by someone else.
        if let Some(label) = &entry.pending {
            record.remember_unconfirmed(label, clock.mono);
        }
        tracker.tabs.insert(tab_id.clone(), record);
    }
    tracker
}

fn entry_of(record: &TabRecord, clock: Clock) -> TabEntry {
    let fight = &record.fight;
    TabEntry {
        base: record.base.clone(),
        written: record.written.clone(),
        seen: Some(record.seen.clone()),
        pending: record.unconfirmed().map(str::to_string),
        auto_named: record.auto_named,
        fights_ms: fight.fights.iter().map(|at| clock.to_wall(*at)).collect(),
        last_own_rename_ms: fight.last_own_rename.map(|at| clock.to_wall(at)),
        cooldown_until_ms: fight.cooldown_until.map(|at| clock.to_wall(at)),
        last_cooldown_end_ms: fight.last_cooldown.map(|(end, _)| clock.to_wall(end)),
        last_cooldown_ms: fight
            .last_cooldown
            .map(|(_, length)| length.as_millis() as u64),
        cooldown_level: fight.level,
        fights_total: Some(fight.total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::tests::TempDir;
    use std::os::unix::fs::PermissionsExt;

    /// A `State` as the file holds it (the program writes only trackers).
    fn encode(state: &State) -> String {
        json::to_string(&StateFileOut {
            version: VERSION,
            off: state.off,
            daemon_running: state.daemon_running,
            tabs: &state.tabs,
        })
    }

    /// As the program saves: through the directory, which the pidfile's
    /// lock made.
    fn save(path: &Path, state: &State, last_saved: &mut Option<u64>) -> io::Result<bool> {
        let dir = path.parent().unwrap();
        files::ensure_private_dir(dir)?;
        write_unless_saved(&Dir::open(dir)?, &encode(state), last_saved)
    }

    /// What the daemon's streamed save holds, as a `State`.
    fn from_tracker(tracker: &Tracker, off: bool, clock: Clock) -> State {
        let tabs = tracker
            .tabs
            .iter()
            .map(|(tab_id, record)| (tab_id.clone(), entry_of(record, clock)))
            .collect();
        State {
            off,
            tabs,
            ..State::default()
        }
    }

    fn sample() -> State {
        let mut state = State {
            off: true,
            ..State::default()
        };
        state.tabs.insert(
            "w1:t1".into(),
            TabEntry {
                base: "api \"quoted\" 🔴".into(),
                written: Some("🔴 api".into()),
                seen: Some("🔴 api".into()),
                fights_ms: vec![1, 2],
                cooldown_until_ms: Some(5),
                cooldown_level: 2,
                ..<TabEntry as Default>::default()
            },
        );
        state.tabs.insert(
            "w1:t2".into(),
            TabEntry {
                base: "2".into(),
                auto_named: true,
                ..<TabEntry as Default>::default()
            },
        );
        state
    }

    #[test]
    fn a_clock_reading_agrees_until_a_suspend_or_a_step() {
        let first = Clock::now();
        let later = |mono_s: u64, wall_s: u64| Clock {
            mono: first.mono + Duration::from_secs(mono_s),
            wall_ms: first.wall_ms + wall_s * 1000,
        };
        assert!(first.agrees_with(first));
        assert!(first.agrees_with(later(10, 10)));
        // An hour of suspend: the wall clock moved, the monotonic one not.
        assert!(!first.agrees_with(later(10, 3610)));
        // "To within a second": two seconds off is a step.
        assert!(!first.agrees_with(later(10, 12)));
        assert!(!first.agrees_with(later(12, 10)));
        // The wall clock stepped back a minute.
        assert!(!first.agrees_with(Clock {
            mono: first.mono + Duration::from_secs(70),
            wall_ms: first.wall_ms + 10_000,
        }));
    }

    #[test]
    fn round_trip_and_write_only_on_change() {
        let temp = TempDir::new("state");
        let path = temp.0.join("server/state.json");
        let mut last = None;
        assert!(save(&path, &sample(), &mut last).unwrap());
        assert!(
            !save(&path, &sample(), &mut last).unwrap(),
            "unchanged state is not written"
        );
        assert_eq!(load(&path, 0).unwrap(), (sample(), None));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
    }

    #[test]
    fn a_failed_save_is_tried_again_with_the_same_state() {
        let temp = TempDir::new("retry");
        let dir = temp.0.join("server");
        let path = dir.join("state.json");
        // Something in the way of the directory, then gone (as a full disk
        // fills and frees).
        std::fs::write(&dir, b"").unwrap();
        let mut last = None;
        assert!(save(&path, &sample(), &mut last).is_err());
        std::fs::remove_file(&dir).unwrap();
        assert!(save(&path, &sample(), &mut last).unwrap());
        assert_eq!(load(&path, 0).unwrap(), (sample(), None));
    }

    #[test]
    fn a_state_too_large_to_read_back_is_not_written() {
        let temp = TempDir::new("large");
        let path = temp.0.join("state.json");
        let mut last = None;
        assert!(save(&path, &sample(), &mut last).unwrap());
        let mut large = sample();
        large.tabs.get_mut("w1:t1").unwrap().base = "\u{1}".repeat(2 << 20);
        let error = save(&path, &large, &mut last).unwrap_err();
        assert!(error.to_string().contains("reads back"), "{error}");
        // The file keeps the last state that fitted, and reads as such.
        assert_eq!(load(&path, 0).unwrap(), (sample(), None));
    }

    #[test]
    fn an_unreadable_file_is_moved_aside_not_overwritten() {
        let temp = TempDir::new("unreadable");
        let path = temp.0.join("state.json");
        let target = temp.0.join("elsewhere");
        std::fs::write(&target, encode(&sample())).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let (state, warning) = load(&path, 1234).unwrap();
        assert_eq!(state, State::default());
        let warning = warning.unwrap();
        assert!(
            warning.contains("cannot read") && warning.contains("corrupt-1234"),
            "{warning}"
        );
        assert!(std::fs::symlink_metadata(&path).is_err());
        assert!(
            std::fs::symlink_metadata(temp.0.join("state.json.corrupt-1234"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), encode(&sample()));
    }

    #[test]
    fn a_missing_file_is_an_empty_state() {
        let temp = TempDir::new("missing");
        assert_eq!(
            load(&temp.0.join("state.json"), 0).unwrap(),
            (State::default(), None)
        );
    }

    #[test]
    fn every_kind_of_corruption_is_moved_aside() {
        let good = encode(&sample());
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", good.as_bytes()[..good.len() / 2].to_vec()),
            ("empty", Vec::new()),
            ("not json", b"hello".to_vec()),
            (
                "wrong types",
                br#"{"version":1,"off":"yes","tabs":{}}"#.to_vec(),
            ),
            (
                "future version",
                br#"{"version":99,"off":false,"tabs":{},"new":1}"#.to_vec(),
            ),
            ("not utf-8", b"{\"version\":1,\xff}".to_vec()),
            ("huge", vec![b' '; (MAX_STATE_BYTES + 1) as usize]),
            // Under the cap, but too deep for miniserde to read cheaply.
            ("nested too deep", vec![b'['; 1 << 20]),
            // Valid, but miniserde would keep every number.
            ("an array too long", {
                let zeros = vec!["0"; 1 << 20].join(",");
                let long = good.replace("[1,2]", &format!("[{zeros}]"));
                assert_ne!(long, good);
                long.into_bytes()
            }),
        ];
        for (what, bytes) in cases {
            let temp = TempDir::new("corrupt");
            let path = temp.0.join("state.json");
            std::fs::write(&path, &bytes).unwrap();
            let (state, warning) = load(&path, 1234).unwrap();
            assert_eq!(state, State::default(), "{what}");
            let warning = warning.unwrap_or_else(|| panic!("{what}: no warning"));
            // "corrupt-1234" alone would satisfy a bare "corrupt": ask for
            // the diagnosis, not the file name.
            assert!(
                warning.contains(" is corrupt (") && warning.contains("corrupt-1234"),
                "{what}: {warning}"
            );
            assert!(!path.exists(), "{what}");
            assert_eq!(
                std::fs::read(temp.0.join("state.json.corrupt-1234")).unwrap(),
                bytes,
                "{what}"
            );
        }
    }

    #[test]
    fn future_versions_are_named_in_the_warning() {
        assert_eq!(
            decode(r#"{"version":7}"#),
            Err("unknown format version 7".to_string())
        );
        // Even when it holds what this version would refuse.
        let long = format!(
            r#"{{"version":7,"tabs":{{"a":{{"fights_ms":[{}]}}}}}}"#,
            "0,".repeat(99) + "0"
        );
        assert_eq!(decode(&long), Err("unknown format version 7".to_string()));
        let long = long.replace("\"version\":7", "\"version\":1");
        assert_eq!(
            decode(&long),
            Err("more than 64 elements in one array".to_string())
        );
    }

    #[test]
    fn the_daemon_writes_what_a_command_would_and_reads_it_back() {
        let clock = Clock::now();
        let mut tracker = Tracker::default();
        for (id, base, written) in [("w1:t2", "web", None), ("w1:t1", "a\"pi", Some("🔴 a\"pi"))]
        {
            let mut record = TabRecord {
                base: base.into(),
                written: written.map(String::from),
                seen: written.unwrap_or(base).into(),
                auto_named: written.is_none(),
                ..TabRecord::default()
            };
            record.fight.fights = vec![clock.mono];
            record.fight.last_cooldown = Some((clock.mono, Duration::from_secs(60)));
            record.fight.level = 2;
            tracker.tabs.insert(id.into(), record);
        }
        let streamed = encode_tracker(&tracker, true, false, clock);
        assert_eq!(streamed, encode(&from_tracker(&tracker, true, clock)));
        let state = decode(&streamed).unwrap();
        assert_eq!(state, from_tracker(&tracker, true, clock));
        assert_eq!(state.tabs.len(), 2);
        assert_eq!(state.tabs["w1:t1"].written.as_deref(), Some("🔴 a\"pi"));
    }

    #[test]
    fn times_survive_a_restart_and_a_jumped_clock_is_clamped() {
        let timing = Timing::REAL;
        let before = Clock::now();
        let mut tracker = Tracker::default();
        let mut record = TabRecord {
            base: "api".into(),
            seen: "🔴 api".into(),
            ..TabRecord::default()
        };
        record.fight.cooldown_until = Some(before.mono + Duration::from_secs(60));
        record.fight.fights = vec![before.mono];
        tracker.tabs.insert("w1:t1".into(), record);
        let state = from_tracker(&tracker, false, before);
        // Read back by a process started 10 s later.
        let later = Clock {
            mono: before.mono + Duration::from_secs(10),
            wall_ms: before.wall_ms + 10_000,
        };
        let restored = to_tracker(&state, later, &timing);
        let until = restored.tabs["w1:t1"].fight.cooldown_until.unwrap();
        assert_eq!(until.duration_since(later.mono), Duration::from_secs(50));
        // The wall clock jumped back a day: no cool-down of a day.
        let jumped = Clock {
            mono: later.mono,
            wall_ms: before.wall_ms - 86_400_000,
        };
        let restored = to_tracker(&state, jumped, &timing);
        assert_eq!(restored.tabs["w1:t1"].fight.cooldown_until, None);
        // A fight now "in the future" may be days old: it is dropped.
        assert_eq!(restored.tabs["w1:t1"].fight.fights, Vec::new());
    }

    #[test]
    fn corrupt_files_moved_aside_in_the_same_second_are_all_kept() {
        let temp = TempDir::new("corrupt-twice");
        let path = temp.0.join("state.json");
        for n in 0..=100 {
            std::fs::write(&path, format!("corrupt {n}")).unwrap();
            assert!(load(&path, 1234).unwrap().1.is_some());
        }
        let read = |name: &str| std::fs::read_to_string(temp.0.join(name)).unwrap();
        assert_eq!(read("state.json.corrupt-1234"), "corrupt 0");
        assert_eq!(read("state.json.corrupt-1234-1"), "corrupt 1");
        // The hundred-and-first is kept too, not written over the last.
        assert_eq!(read("state.json.corrupt-1234-99"), "corrupt 99");
        assert_eq!(read("state.json.corrupt-1234-100"), "corrupt 100");
    }

    #[test]
    fn a_tracker_survives_a_save_and_a_load() {
        // The other round trip compares the streamed text with one made by
        // the same `entry_of`, so it cannot see a field `entry_of` drops.
        let clock = Clock::now();
        let mut tracker = Tracker::default();
        let record = TabRecord {
            base: "api".into(),
            written: None,
            // What another renamer left during a cool-down: neither the
            // base nor a label cowbell wrote.
            seen: "● api".into(),
            auto_named: false,
            ..TabRecord::default()
        };
        tracker.tabs.insert("w1:t1".into(), record);
        let state = decode(&encode_tracker(&tracker, true, true, clock)).unwrap();
        assert!(state.off && state.daemon_running);
        // A file from before the flag: no daemon was running.
        assert!(
            !decode(r#"{"version":1,"off":false,"tabs":{}}"#)
                .unwrap()
                .daemon_running
        );
        let back = to_tracker(&state, clock, &Timing::REAL);
        let record = &back.tabs["w1:t1"];
        assert_eq!(
            (
                record.base.as_str(),
                record.written.as_deref(),
                record.seen.as_str()
            ),
            ("api", None, "● api")
        );
    }

    #[test]
    fn an_entry_without_seen_was_last_seen_with_the_label_cowbell_wrote() {
        let text = r#"{"version":1,"off":false,"tabs":{"w1:t1":{"base":"api","written":"🔴 api","seen":null,"auto_named":false,"fights_ms":[],"last_own_rename_ms":null,"cooldown_until_ms":null,"last_cooldown_end_ms":null,"last_cooldown_ms":null,"cooldown_level":0,"fights_total":0}}}"#;
        let state = decode(text).unwrap();
        let tracker = to_tracker(&state, Clock::now(), &Timing::REAL);
        assert_eq!(tracker.tabs["w1:t1"].seen, "🔴 api");
    }

    /// A file as cowbell's first builds wrote it (no `fights_total`,
    /// `pending` or `daemon_running`): an upgrade reads it, with the `off`
    /// flag and the cool-down, instead of moving it aside as corrupt and
    /// turning cowbell back on.
    #[test]
    fn a_state_file_of_the_first_builds_still_reads() {
        let until = Clock::now().wall_ms + 50_000;
        let text = format!(
            r#"{{"version":1,"off":true,"tabs":{{"w1:t1":{{"base":"api","written":"🔴 api","seen":"🔴 api","auto_named":false,"fights_ms":[],"last_own_rename_ms":null,"cooldown_until_ms":{until},"last_cooldown_end_ms":{until},"last_cooldown_ms":60000,"cooldown_level":1}}}}}}"#
        );
        let state = decode(&text).unwrap();
        assert!(state.off);
        assert!(!state.daemon_running);
        let entry = &state.tabs["w1:t1"];
        assert_eq!((entry.fights_total, entry.pending.as_deref()), (None, None));
        let tracker = to_tracker(&state, Clock::now(), &Timing::REAL);
        let fight = &tracker.tabs["w1:t1"].fight;
        assert!(fight.cooling_down(Instant::now()), "{fight:?}");
        assert_eq!((fight.level, fight.total), (1, 0));
    }

    #[test]
    fn a_cooldown_read_back_lasts_no_longer_than_it_did() {
        let before = Clock::now();
        let mut tracker = Tracker::default();
        let mut record = TabRecord {
            base: "api".into(),
            seen: "api".into(),
            ..TabRecord::default()
        };
        let until = before.mono + Duration::from_secs(60);
        record.fight.cooldown_until = Some(until);
        record.fight.last_cooldown = Some((until, Duration::from_secs(60)));
        tracker.tabs.insert("w1:t1".into(), record);
        let state = from_tracker(&tracker, false, before);
        // The wall clock stepped back an hour; a process reads it 1 s later.
        let jumped = Clock {
            mono: before.mono + Duration::from_secs(1),
            wall_ms: before.wall_ms + 1000 - 3_600_000,
        };
        let fight = &to_tracker(&state, jumped, &Timing::REAL).tabs["w1:t1"].fight;
        // Its end, an hour and a minute away, is no end a 60 s cool-down
        // can have: nobody knows when it really ends, and it is dropped.
        assert_eq!(fight.cooldown_until, None);
        assert_eq!((fight.last_cooldown, fight.level), (None, 0));
        // A step back that leaves the end within 60 s keeps it, capped.
        let nudged = Clock {
            mono: before.mono + Duration::from_secs(1),
            wall_ms: before.wall_ms + 1000 - 500,
        };
        let fight = &to_tracker(&state, nudged, &Timing::REAL).tabs["w1:t1"].fight;
        let left = fight.cooldown_until.unwrap().duration_since(nudged.mono);
        assert!(left <= Duration::from_secs(60), "{left:?} left");
        assert_eq!(fight.last_cooldown.unwrap().1, Duration::from_secs(60));
    }

    /// Two fights, `ago_ms` before a save, and cowbell's rename after them,
    /// read back by a daemon a minute later with the wall clock stepped
    /// back `back_ms`: what one rename by hand is then.
    fn rename_after_a_step_back(ago_ms: u64, back_ms: u64) -> crate::fights::Verdict {
        let timing = Timing::REAL;
        let saved = Clock::now();
        let mut state = State::default();
        state.tabs.insert(
            "w1:t1".into(),
            TabEntry {
                base: "api".into(),
                written: Some("🔴 api".into()),
                fights_ms: vec![saved.wall_ms - ago_ms, saved.wall_ms - ago_ms + 5000],
                last_own_rename_ms: Some(saved.wall_ms - ago_ms + 5000),
                fights_total: Some(2),
                ..<TabEntry as Default>::default()
            },
        );
        let later = Clock {
            mono: saved.mono + Duration::from_secs(60),
            wall_ms: saved.wall_ms + 60_000 - back_ms,
        };
        let mut fight = to_tracker(&state, later, &timing).tabs["w1:t1"]
            .fight
            .clone();
        fight.foreign_rename(later.mono + Duration::from_secs(1), &timing)
    }

    /// Fights and cowbell's last rename of days ago, read back after the
    /// wall clock stepped back past them (a wrong RTC corrected, a VM
    /// snapshot), are not recent: one rename by hand must not start a
    /// cool-down.
    #[test]
    fn old_fights_read_after_a_clock_step_back_are_not_recent() {
        let day_ms = 86_400_000;
        let verdict = rename_after_a_step_back(day_ms, 3 * day_ms);
        assert_eq!(verdict, crate::fights::Verdict::NotAFight);
        // Without the step, a moment from a second ago is still recent.
        let now = Clock::now();
        assert!(now.past(now.wall_ms - 1000).is_some());
        assert_eq!(now.past(now.wall_ms + 500), Some(now.mono));
    }

    /// A cool-down that ended a day ago, read back after the wall clock
    /// stepped back three days, neither runs again nor keeps the doubling
    /// at its cap: the tab has been quiet far longer than it lasted. Also
    /// when no resync expired it before the save (both ends recorded).
    #[test]
    fn an_old_cooldown_end_after_a_clock_step_back_lets_the_doubling_reset() {
        let timing = Timing::REAL;
        let saved = Clock::now();
        let day_ms = 86_400_000;
        for until in [None, Some(saved.wall_ms - day_ms)] {
            let mut state = State::default();
            state.tabs.insert(
                "w1:t1".into(),
                TabEntry {
                    base: "api".into(),
                    cooldown_until_ms: until,
                    last_cooldown_end_ms: Some(saved.wall_ms - day_ms),
                    last_cooldown_ms: Some(900_000),
                    cooldown_level: 5,
                    fights_total: Some(15),
                    ..<TabEntry as Default>::default()
                },
            );
            for step_back_days in [0, 3] {
                let later = Clock {
                    mono: saved.mono + Duration::from_secs(60),
                    wall_ms: saved.wall_ms + 60_000 - step_back_days * day_ms,
                };
                let mut fight = to_tracker(&state, later, &timing).tabs["w1:t1"]
                    .fight
                    .clone();
                assert!(!fight.cooling_down(later.mono), "{fight:?}");
                let mut verdict = crate::fights::Verdict::NotAFight;
                let mut at = later.mono;
                for _ in 0..3 {
                    fight.own_rename(at);
                    at += Duration::from_secs(1);
                    verdict = fight.foreign_rename(at, &timing);
                }
                let crate::fights::Verdict::CooldownStarted { until } = verdict else {
                    panic!("{verdict:?}")
                };
                assert_eq!(
                    until.duration_since(at),
                    Duration::from_secs(60),
                    "stepped back {step_back_days} days: {fight:?}"
                );
            }
        }
    }

    /// A daemon keeps its clock reading while it agrees to within 1 s
    /// (`EventLoop::save`), so it may save a cool-down's end up to 1 s
    /// late. Read back 100 ms later by its successor (no clock step), the
    /// cool-down that just started must run on.
    #[test]
    fn a_cooldown_saved_with_a_clock_a_second_off_is_kept() {
        let now = Clock::now();
        // The daemon's reading, 900 ms off (still "agrees").
        let stale = Clock {
            mono: now.mono,
            wall_ms: now.wall_ms + 900,
        };
        assert!(stale.agrees_with(now));
        let state = from_tracker(&in_a_cooldown(now.mono), false, stale);
        let later = Clock {
            mono: now.mono + Duration::from_millis(100),
            wall_ms: now.wall_ms + 100,
        };
        let fight = &to_tracker(&state, later, &Timing::REAL).tabs["w1:t1"].fight;
        assert!(fight.cooling_down(later.mono), "{fight:?}");
        assert_eq!(fight.level, 1);
    }

    /// One tab "w1:t1" in its first cool-down, 60 s from `from`.
    fn in_a_cooldown(from: Instant) -> Tracker {
        let mut tracker = Tracker::default();
        let mut record = TabRecord {
            base: "api".into(),
            seen: "api".into(),
            ..TabRecord::default()
        };
        let until = from + Duration::from_secs(60);
        record.fight.cooldown_until = Some(until);
        record.fight.last_cooldown = Some((until, Duration::from_secs(60)));
        record.fight.level = 1;
        tracker.tabs.insert("w1:t1".into(), record);
        tracker
    }

    /// README: "A cool-down read back after the wall clock went back past
    /// its start is dropped", also for a step back of minutes rather than
    /// hours: a 60 s cool-down saved just before the wall clock went back
    /// 10 minutes ends 11 minutes away, which no 60 s cool-down can.
    #[test]
    fn a_cooldown_read_back_after_a_ten_minute_step_back_is_dropped() {
        let before = Clock::now();
        let state = from_tracker(&in_a_cooldown(before.mono), false, before);
        let jumped = Clock {
            mono: before.mono + Duration::from_secs(1),
            wall_ms: before.wall_ms + 1000 - 600_000,
        };
        let fight = &to_tracker(&state, jumped, &Timing::REAL).tabs["w1:t1"].fight;
        assert_eq!(fight.cooldown_until, None, "{fight:?}");
        assert_eq!((fight.last_cooldown, fight.level), (None, 0));
    }

    /// `Clock::past`'s slack is 1 s (two readings that agree), no more: a
    /// step back of 10 minutes must not make fights of 5 minutes ago
    /// recent, or one rename by hand starts a cool-down.
    #[test]
    fn fights_read_after_a_ten_minute_step_back_are_not_recent() {
        let verdict = rename_after_a_step_back(300_000, 600_000);
        assert_eq!(verdict, crate::fights::Verdict::NotAFight);
        let now = Clock::now();
        assert_eq!(now.past(now.wall_ms + 1500), None);
    }
}
