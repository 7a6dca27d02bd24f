//! The resync decision: what every tab should be called, and why.
//!
//! Pure: it takes herdr's tab list, the settings and the time, and returns
//! the renames to make. It keeps, per tab, the base (the real name), the
//! last label cowbell wrote, the label it last saw, the labels it sent
//! recently (to recognise its own echoes, even of a rename that timed out
//! and was applied late) and the fight history. Whatever touches a socket
//! or a file lives elsewhere.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::fights::{FightRecord, Timing, Verdict};
use crate::labels::{Labeler, SPINNER_FRAMES, Status};
use crate::tab_map::TabMap;

/// How long a label cowbell sent is still recognised as its own echo.
/// herdr delivers a burst of echoes over about a second, and can apply a
/// rename that timed out seconds later.
pub const ECHO_MEMORY: Duration = Duration::from_secs(60);

/// Labels remembered per tab for echo recognition.
const ECHOES_KEPT: usize = 8;

/// A tab as herdr listed it, in the core's terms.
#[derive(Clone, Debug, PartialEq)]
pub struct Tab {
    pub tab_id: String,
    pub number: u64,
    pub label: String,
    pub status: Status,
}

impl Tab {
    /// herdr names a tab nobody named after its 1-based position.
    fn looks_auto_named(&self) -> bool {
        self.label == self.number.to_string()
    }
}

/// What the configuration and the clock scale decide for a resync.
#[derive(Clone, Debug)]
pub struct Settings {
    pub labeler: Labeler,
    pub include_auto_named: bool,
    pub spinner: bool,
    /// One spinner frame (the loop's deadline; the core only counts frames).
    pub spinner_interval: Duration,
    pub timing: Timing,
}

impl Settings {
    /// The settings a configuration gives, with the fight timing and time
    /// scale of this run (the spinner interval is scaled like every other
    /// duration).
    pub fn from_config(config: &Config, timing: Timing, scale: u32) -> Settings {
        Settings {
            labeler: config.labeler(),
            include_auto_named: config.include_auto_named,
            spinner: config.spinner,
            spinner_interval: Duration::from_millis(config.spinner_interval_ms) / scale.max(1),
            timing,
        }
    }
}

/// One tab's memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TabRecord {
    pub base: String,
    /// The last label cowbell wrote and herdr confirmed.
    pub written: Option<String>,
    /// The label the tab had when cowbell last looked or wrote.
    pub seen: String,
    /// herdr named it by position; the base follows the position.
    pub auto_named: bool,
    pub fight: FightRecord,
    pub status: Option<Status>,
    /// Labels sent recently, newest last, each with whether its echo has
    /// come back yet.
    pub sent: Vec<Sent>,
    /// `include_auto_named` went off: the tab's number is being given
    /// back, and cowbell lets go of the tab once herdr confirms it.
    pub released: bool,
    /// Read back from a state.json a killed daemon left, and not looked
    /// at since (see `is_own`).
    pub left_by_killed_daemon: bool,
    /// herdr refused (or never answered) the last rename: no new one
    /// before the daemon's retry.
    pub retry_at: Option<Instant>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    label: String,
    at: Instant,
    echoed: bool,
    /// herdr got the request but its answer was lost (see `answer_lost`).
    answer_lost: bool,
}

impl Sent {
    fn recent(&self, label: &str, now: Instant) -> bool {
        self.label == label && now.saturating_duration_since(self.at) <= ECHO_MEMORY
    }

    /// Sent recently, and its echo has not come back yet.
    fn awaiting_echo(&self, label: &str, now: Instant) -> bool {
        !self.echoed && self.recent(label, now)
    }
}

impl TabRecord {
    fn sent_recently(&self, label: &str, now: Instant) -> bool {
        self.sent.iter().any(|sent| sent.recent(label, now))
    }

    /// A label cowbell put there: the last one it sent (its rename may have
    /// timed out and still been applied), one it sent recently whose echo
    /// has not come back, or, with the spinner on, any spinner frame in
    /// front of the base (herdr delivers a burst of spinner echoes late,
    /// one per 100 ms poll, later than a short memory of sent labels
    /// holds). An older label whose echo came back is not: the tab left
    /// it for a newer one, so whoever put it back is someone else (a
    /// renamer stripping the icon off a tab cowbell once showed plain).
    /// At the first look after a daemon was killed, so is any label
    /// cowbell would write for the base: one killed after herdr applied
    /// its rename but before it saved left one there. (Only then: every
    /// time, it would never see a plugin that writes its own status icon
    /// over cowbell's as a fight.) For an auto-named tab that base is the
    /// position it had then, whatever number that was: unsaved spinner
    /// frames and renumberings leave a label state.json never knew. Only
    /// with an icon in front: a bare number may be a person's name. And
    /// after a rename whose answer was lost, until a newer one is confirmed
    /// (see `confirm`), any label sent recently: herdr may apply a rename
    /// that timed out after a newer one, and an old echo (replayed, or
    /// late) may have confirmed one that never landed.
    fn is_own(&self, label: &str, settings: &Settings, now: Instant) -> bool {
        let newest = self.sent.last().is_some_and(|sent| sent.label == label);
        let unechoed = self.sent.iter().any(|sent| sent.awaiting_echo(label, now));
        let uncertain =
            self.sent.iter().any(|sent| sent.answer_lost) && self.sent_recently(label, now);
        let labeler = &settings.labeler;
        let left_by_a_crash = self.left_by_killed_daemon && {
            let base = match labeler.strip(label) {
                number if self.auto_named && is_iconed_number(label, number) => number,
                _ => &self.base,
            };
            Status::ALL
                .iter()
                .any(|status| labeler.label(*status, base) == label)
                || is_spinner_frame(label, base, labeler)
        };
        newest
            || unechoed
            || uncertain
            || left_by_a_crash
            || is_own_spinner_frame(label, &self.base, settings)
    }

    /// The newest label cowbell sent that herdr has not confirmed. It is
    /// saved, so that a process killed between the rename and the answer
    /// leaves the next one knowing the label as cowbell's own.
    pub fn unconfirmed(&self) -> Option<&str> {
        let newest = self.sent.last()?.label.as_str();
        (self.written.as_deref() != Some(newest)).then_some(newest)
    }

    /// A label an earlier process sent (see `unconfirmed`).
    pub fn remember_unconfirmed(&mut self, label: &str, now: Instant) {
        self.remember_sent(label, now);
    }

    /// After someone else renamed the tab, the labels cowbell wrote before
    /// are no longer its own: a person who renames the tab back to one of
    /// them ("api" after "web") means that name.
    fn forget_own_labels(&mut self) {
        self.sent.clear();
        self.written = None;
    }

    fn remember_sent(&mut self, label: &str, now: Instant) {
        // A first push would make room for four; most tabs hold one or two
        // labels, and at 1000 tabs the spare room was 140 KB.
        self.sent.reserve_exact(1);
        self.sent.push(Sent {
            label: label.to_string(),
            at: now,
            echoed: false,
            answer_lost: false,
        });
        if self.sent.len() > ECHOES_KEPT {
            self.sent.remove(0);
        }
    }
}

/// A rename to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rename {
    pub tab_id: String,
    pub label: String,
}

/// Something worth a line in the log.
#[derive(Clone, Debug, PartialEq)]
pub enum Note {
    NewBase {
        tab_id: String,
        base: String,
    },
    Fight {
        tab_id: String,
        recent: usize,
    },
    Cooldown {
        tab_id: String,
        seconds: u64,
    },
    Dropped {
        tab_id: String,
    },
    /// herdr's list named the tab (and maybe others) more than once: the
    /// first entry of each counted, and `ignored` entries did not.
    ListedTwice {
        tab_id: String,
        ignored: usize,
    },
}

/// The outcome of one resync.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub renames: Vec<Rename>,
    pub notes: Vec<Note>,
    /// How many of the renames only move a spinner frame on.
    pub frames: usize,
    /// How many tabs are tracked from this resync on.
    pub new_tabs: usize,
    /// How many renames give an auto-named tab its new position bare (a
    /// status without an icon): see `save_first`.
    pub bare_numbers: usize,
    /// How many tabs wait for the retry of a failed rename.
    pub waiting: usize,
}

impl Plan {
    /// Only the spinner moved on, or tabs wait for a retry: nothing a
    /// person would look for in the log (a resync per frame would fill it).
    pub fn is_quiet(&self) -> bool {
        (self.frames > 0 || self.waiting > 0)
            && self.frames == self.renames.len()
            && self.notes.is_empty()
            && self.new_tabs == 0
    }

    /// Whether the state must be on disk before the renames go out, as
    /// what they send is then saved as `pending`. Killed in between, a
    /// daemon would leave labels that no state.json knows for cowbell's:
    /// icons on new tabs, which `off` would not touch, and bare positions,
    /// which read as names (a person may name a tab "2024").
    pub fn save_first(&self) -> bool {
        !self.renames.is_empty() && (self.new_tabs > 0 || self.bare_numbers > 0)
    }

    /// Nothing for the log: a quiet resync, or one that found every tab
    /// as it should be. herdr sends a status event for a pane whose title
    /// changes too, so an agent that animates its title brings a resync
    /// every few hundred milliseconds; a line for each would rotate the
    /// log's renames and fights out within the hour.
    pub fn tells_nothing(&self) -> bool {
        self.is_quiet() || (self.renames.is_empty() && self.notes.is_empty() && self.new_tabs == 0)
    }
}

/// The record of a tab cowbell sees for the first time; `None` for an
/// auto-named tab unless the settings include those.
fn first_record(tab: &Tab, settings: &Settings) -> Option<TabRecord> {
    let auto_named = tab.looks_auto_named();
    if auto_named && !settings.include_auto_named {
        return None;
    }
    let base = if auto_named {
        tab.number.to_string()
    } else {
        settings.labeler.strip(&tab.label).to_string()
    };
    Some(TabRecord {
        base,
        seen: tab.label.clone(),
        auto_named,
        ..TabRecord::default()
    })
}

/// Every tab cowbell keeps an icon on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracker {
    pub tabs: TabMap,
    pub spinner_frame: usize,
    /// cowbell has not looked at the tabs since it (re)connected: whatever
    /// changed meanwhile happened while it renamed nothing (see
    /// `notice_label_change`).
    pub looked_away: bool,
}

impl Tracker {
    /// Decides every tab's label from a fresh `tab.list`.
    pub fn resync(&mut self, listed: &[Tab], settings: &Settings, now: Instant) -> Plan {
        let mut plan = Plan::default();
        // Borrowed ids, not a second map of moved records: the daemon's
        // memory peak is a resync of many tabs. A sorted Vec rather than a
        // BTreeSet, whose collect brings in a stable sort: binary size.
        let mut present: Vec<&str> = listed.iter().map(|t| t.tab_id.as_str()).collect();
        present.sort_unstable();
        let notes = &mut plan.notes;
        self.tabs.retain(&mut |tab_id, _| {
            let listed = present.binary_search(&tab_id).is_ok();
            if !listed {
                let tab_id = tab_id.to_string();
                notes.push(Note::Dropped { tab_id });
            }
            listed
        });
        // herdr lists a tab once. Should a list name one twice, its first
        // entry counts, as if the others were not there. Paid only when the
        // sorted ids show a repeat, and by a lookup in them: a look back
        // over the list took 12 s for a hostile one of 50,000 repeats.
        let repeats = present.windows(2).any(|pair| pair[0] == pair[1]);
        let mut counted = Vec::new();
        if repeats {
            // (Not vec![false; n], which brings in calloc: 0.5 KiB.)
            counted.resize(present.len(), false);
        }
        let mut first_repeat = None;
        let mut ignored = 0;
        let listed: Vec<&Tab> = listed
            .iter()
            .filter(|tab| {
                if !repeats {
                    return true;
                }
                // The first of the equal ids in `present` stands for them all.
                let at = present.partition_point(|id| *id < tab.tab_id.as_str());
                let Some(counted) = counted.get_mut(at) else {
                    return true;
                };
                let first = !std::mem::replace(counted, true);
                if !first {
                    ignored += 1;
                    first_repeat.get_or_insert_with(|| tab.tab_id.clone());
                }
                first
            })
            .collect();
        // One line however many: a hostile list must not rotate the log.
        if let Some(tab_id) = first_repeat {
            plan.notes.push(Note::ListedTwice { tab_id, ignored });
        }
        // Records for new tabs, merged in at once (see `TabMap::add_new`).
        let new = listed
            .iter()
            .filter(|tab| self.tabs.get(&tab.tab_id).is_none())
            .filter_map(|tab| Some((tab.tab_id.clone(), first_record(tab, settings)?)))
            .collect::<Vec<_>>();
        plan.new_tabs = new.len();
        self.tabs.add_new(new);
        for tab in listed {
            self.resync_tab(tab, settings, now, &mut plan);
        }
        self.looked_away = false;
        plan
    }

    /// One listed tab: take in what changed since the last look (a rename by
    /// someone else gives a new base and may be a fight), then queue the
    /// rename to the label it should show, unless it cools down.
    fn resync_tab(&mut self, tab: &Tab, settings: &Settings, now: Instant, plan: &mut Plan) {
        let labeler = &settings.labeler;
        // None: an auto-named tab that cowbell leaves alone.
        let Some(record) = self.tabs.get_mut(&tab.tab_id) else {
            return;
        };
        // Not at the first look after a connection: a label an earlier
        // process sent (state.json's `pending`, dated when it was read) is
        // cowbell's however long herdr took to come back.
        if !self.looked_away {
            record
                .sent
                .retain(|sent| now.saturating_duration_since(sent.at) <= ECHO_MEMORY);
        }
        if tab.label != record.seen {
            notice_label_change(record, tab, self.looked_away, settings, now, plan);
            record.seen = tab.label.clone();
        }
        record.left_by_killed_daemon = false;
        record.status = Some(tab.status);
        record.fight.expire(now);
        if record.auto_named && !settings.include_auto_named {
            // The option was switched off: give the number back, and forget
            // the tab once herdr shows it. Until then the record stays, so
            // a rename that fails is tried again and a restore still knows
            // the icon is cowbell's.
            let position = tab.number.to_string();
            if tab.label == position {
                self.tabs.remove(&tab.tab_id);
            } else if !waits_for_retry(record, now, plan) {
                record.remember_sent(&position, now);
                record.released = true;
                plan.renames.push(Rename {
                    tab_id: tab.tab_id.clone(),
                    label: position,
                });
            }
            return;
        }
        // The option is on again before herdr confirmed the number: the
        // tab is kept after all.
        record.released = false;
        if record.auto_named {
            record.base = tab.number.to_string();
        }
        if record.fight.cooling_down(now) || waits_for_retry(record, now, plan) {
            return;
        }
        let wanted = wanted_label(record, settings, self.spinner_frame);
        if wanted != tab.label {
            record.remember_sent(&wanted, now);
            if record.auto_named && wanted == record.base {
                plan.bare_numbers += 1;
            }
            // A new spinner frame over an old one changes neither icon nor
            // name: it is not a rename another plugin could be provoked by.
            if is_spinner_frame(&wanted, &record.base, labeler)
                && is_spinner_frame(&tab.label, &record.base, labeler)
            {
                plan.frames += 1;
            } else {
                record.fight.own_rename(now);
            }
            plan.renames.push(Rename {
                tab_id: tab.tab_id.clone(),
                label: wanted,
            });
        }
    }

    /// Whether a `tab_renamed` event is the echo of cowbell's own rename.
    /// Each rename has one echo: a matching event uses it up, so a later
    /// rename by someone else to a label cowbell also wrote a while ago is
    /// still noticed. Spinner frames are the exception (see `is_own`).
    pub fn take_echo(
        &mut self,
        tab_id: &str,
        label: &str,
        now: Instant,
        settings: &Settings,
    ) -> bool {
        let Some(record) = self.tabs.get_mut(tab_id) else {
            return false;
        };
        let pending = record
            .sent
            .iter()
            .position(|sent| sent.awaiting_echo(label, now));
        match pending {
            Some(i) => {
                record.sent[i].echoed = true;
                if i + 1 == record.sent.len() && record.sent[i].answer_lost {
                    self.confirm(tab_id, label);
                }
                true
            }
            None => is_own_spinner_frame(label, &record.base, settings),
        }
    }

    /// Whether a `tab_renamed` event leaves the tab's base as it is: an old
    /// echo of cowbell's, or an icon put in front by someone else.
    pub fn keeps_base(&self, tab_id: &str, label: &str, labeler: &Labeler) -> bool {
        self.tabs
            .get(tab_id)
            .is_some_and(|record| labeler.strip(label) == record.base)
    }

    /// herdr refused a rename of the tab, or its answer never came: resyncs
    /// before `retry_at` leave the tab alone (see `TabRecord::retry_at`).
    /// Not when its answer was lost and its echo came first: it landed
    /// after all. (A refusal is final, whatever echo came: an old one of
    /// the same label, replayed, must not free a refused rename.)
    pub fn rename_failed(&mut self, tab_id: &str, label: &str, retry_at: Option<Instant>) {
        if let Some(record) = self.tabs.get_mut(tab_id) {
            let landed = record
                .sent
                .last()
                .is_some_and(|sent| sent.label == label && sent.echoed && sent.answer_lost);
            if !landed {
                record.retry_at = retry_at;
            }
        }
    }

    /// A new connection: no tab waits for a retry of the old one's.
    pub fn forget_retries(&mut self) {
        for record in self.tabs.values_mut() {
            record.retry_at = None;
        }
    }

    /// Some tab read back after a killed daemon has not been looked at yet:
    /// the record of the crash must stay for whoever looks next.
    pub fn crash_unexamined(&self) -> bool {
        self.tabs
            .values()
            .any(|record| record.left_by_killed_daemon)
    }

    /// Read back from a state.json a killed daemon left (see `left_by_killed_daemon`).
    pub fn mark_left_by_killed_daemon(&mut self) {
        for record in self.tabs.values_mut() {
            record.left_by_killed_daemon = true;
        }
    }

    /// herdr got cowbell's rename but the answer was lost (a timeout, a
    /// connection closed first): it may or may not have applied it. If the
    /// echo comes (before or after this), it did, and the label counts as
    /// confirmed; otherwise the tab would stay seen with its old label, and
    /// a renamer that puts that label back would never be caught fighting.
    /// Only such a rename is confirmed by its echo: the replay of a new
    /// subscription brings old echoes that may carry the same label.
    pub fn answer_lost(&mut self, tab_id: &str, label: &str) {
        let Some(record) = self.tabs.get_mut(tab_id) else {
            return;
        };
        let Some(newest) = record.sent.last_mut().filter(|sent| sent.label == label) else {
            return;
        };
        newest.answer_lost = true;
        if newest.echoed {
            self.confirm(tab_id, label);
        }
    }

    /// herdr applied a rename: the tab now carries cowbell's label, or
    /// its number again if cowbell was letting go of it.
    pub fn confirm(&mut self, tab_id: &str, label: &str) {
        if let Some(record) = self.tabs.get_mut(tab_id) {
            if record.released {
                self.tabs.remove(tab_id);
                return;
            }
            record.written = Some(label.to_string());
            record.seen = label.to_string();
            // A lost rename whose echo came before this newer one landed
            // can no longer land late: its label is no longer in doubt
            // (see `is_own`).
            if let Some((_, older)) = record.sent.split_last_mut() {
                for sent in older.iter_mut().filter(|sent| sent.echoed) {
                    sent.answer_lost = false;
                }
            }
            // Its echo says a rename whose answer was lost landed after all.
            record.retry_at = None;
        }
    }

    /// Moves the spinner on one frame; the next resync renames every
    /// working tab to it together. The spinner goes through a full resync
    /// (one `tab.list`) rather than renaming blind, so a name someone gave
    /// the tab since the last look is adopted, not overwritten (only one
    /// given between the list and the rename is: see the README).
    pub fn advance_spinner(&mut self) {
        self.spinner_frame = self.spinner_frame.wrapping_add(1);
    }

    /// True while some tab shows the spinner, so the loop needs a tick.
    pub fn spinning(&self, settings: &Settings, now: Instant) -> bool {
        settings.spinner
            && self
                .tabs
                .values()
                .any(|r| r.status == Some(Status::Working) && !r.fight.cooling_down(now))
    }

    /// The earliest end of a running cool-down, when the icon comes back.
    pub fn next_cooldown_end(&self, now: Instant) -> Option<Instant> {
        self.tabs
            .values()
            .filter_map(|r| r.fight.cooldown_until)
            .filter(|until| *until > now)
            .min()
    }

    /// The renames that give every tab its own name back. A label still
    /// equal to cowbell's last write goes back to the base (the position for
    /// an auto-named tab); a label someone else set since keeps their name:
    /// the base cowbell took from it, if it has seen that label, else the
    /// base it would take (see `foreign_base`: a mark put in front of
    /// cowbell's label leaves no icon inside). With `every_tab`, tabs
    /// cowbell does not track lose a leading icon too (remove-icons cleans
    /// up after a crash).
    /// The tabs that need no rename (gone, or showing their own name) are
    /// done and forgotten; the others stay until herdr confirms theirs.
    pub fn restore_plan(
        &mut self,
        listed: &[Tab],
        labeler: &Labeler,
        every_tab: bool,
        now: Instant,
    ) -> Vec<Rename> {
        let mut renames = Vec::new();
        for tab in listed {
            let target = match self.tabs.get(&tab.tab_id) {
                Some(record) => {
                    let ours = record.written.as_deref() == Some(tab.label.as_str())
                        || record.sent_recently(&tab.label, now);
                    match (ours, record.auto_named) {
                        (true, true) => tab.number.to_string(),
                        (true, false) => record.base.clone(),
                        (false, false) if tab.label == record.seen => record.base.clone(),
                        (false, false) => foreign_base(record, &tab.label, labeler),
                        // Unchanged since cowbell looked, which a resync
                        // would renumber: a number given back earlier, as
                        // a name herdr no longer moves.
                        (false, true) if tab.label == record.seen => tab.number.to_string(),
                        // An icon before a number is a position a killed
                        // daemon wrote and never saved: the one now.
                        (false, true) => match labeler.strip(&tab.label) {
                            number
                                if record.left_by_killed_daemon
                                    && is_iconed_number(&tab.label, number) =>
                            {
                                tab.number.to_string()
                            }
                            name => name.to_string(),
                        },
                    }
                }
                None if every_tab => labeler.strip(&tab.label).to_string(),
                None => continue,
            };
            if target != tab.label {
                renames.push(Rename {
                    tab_id: tab.tab_id.clone(),
                    label: target,
                });
            }
        }
        self.tabs
            .retain(&mut |id, _| renames.iter().any(|r| r.tab_id == id));
        renames
    }

    /// A tab a restore could not give its name back although cowbell did
    /// not track it (`remove-icons`, or `off` after state.json was lost):
    /// tracked from now on, with its current label as cowbell's own, so
    /// that the next restore gives `base` back.
    pub fn keep_for_restore(&mut self, tab: &Tab, base: &str) {
        self.tabs.get_or_insert_with(&tab.tab_id, || TabRecord {
            base: base.to_string(),
            written: Some(tab.label.clone()),
            seen: tab.label.clone(),
            ..TabRecord::default()
        });
    }
}

/// The tab's last rename failed and its retry has not come (see
/// `TabRecord::retry_at`): no new rename yet.
fn waits_for_retry(record: &mut TabRecord, now: Instant, plan: &mut Plan) -> bool {
    if record.retry_at.is_some_and(|at| now < at) {
        plan.waiting += 1;
        return true;
    }
    record.retry_at = None;
    false
}

/// The tab shows a label other than the one cowbell last saw: cowbell's
/// own, herdr's positional name, or someone else's new name for the tab.
///
/// Seen at the first look after the daemon was away (a herdr restart, a
/// new daemon), someone else's label may be an answer to cowbell's last
/// rename, if that came within the fight window and no cool-down runs: a
/// fight as any other (a handover in the middle of one keeps its history).
/// Otherwise it is no fight, and the tab starts afresh: it may even be a new tab, since a fresh
/// herdr session hands out the same ids again, and it must not inherit the
/// old one's cool-down.
fn notice_label_change(
    record: &mut TabRecord,
    tab: &Tab,
    looked_away: bool,
    settings: &Settings,
    now: Instant,
    plan: &mut Plan,
) {
    if record.is_own(&tab.label, settings, now) {
        record.written = Some(tab.label.clone());
        return;
    }
    // In a cool-down cowbell renamed nothing: no answer to it either.
    let fight = &record.fight;
    if looked_away && (!fight.provoked(now, &settings.timing) || fight.cooling_down(now)) {
        record.fight = FightRecord::default();
    }
    if tab.looks_auto_named() {
        // herdr's positional name: an auto-named tab that moved, or
        // a new server reusing a tracked id for an unnamed tab. It is
        // never a name to keep; `resync_tab`'s auto-named rules apply.
        if record.auto_named {
            // Someone put the number back over cowbell's label: one
            // who does it after every cowbell rename is a fight like
            // any other.
            note_fight(record, &tab.tab_id, now, settings, plan);
        } else {
            record.auto_named = true;
            record.forget_own_labels();
        }
    } else {
        // Someone else named the tab: their name is the new base.
        record.base = foreign_base(record, &tab.label, &settings.labeler);
        record.auto_named = false;
        record.forget_own_labels();
        plan.notes.push(Note::NewBase {
            tab_id: tab.tab_id.clone(),
            base: record.base.clone(),
        });
        note_fight(record, &tab.tab_id, now, settings, plan);
    }
}

/// Someone else renamed the tab: counts toward a fight if it came soon
/// after cowbell's own rename (see `fights`).
fn note_fight(
    record: &mut TabRecord,
    tab_id: &str,
    now: Instant,
    settings: &Settings,
    plan: &mut Plan,
) {
    match record.fight.foreign_rename(now, &settings.timing) {
        Verdict::NotAFight => {}
        Verdict::Fight { recent } => plan.notes.push(Note::Fight {
            tab_id: tab_id.to_string(),
            recent,
        }),
        Verdict::CooldownStarted { until } => plan.notes.push(Note::Cooldown {
            tab_id: tab_id.to_string(),
            seconds: until.saturating_duration_since(now).as_secs(),
        }),
    }
}

/// A spinner frame cowbell may have written: only with the spinner on. A
/// plugin with a braille spinner of its own writes the same frames.
fn is_own_spinner_frame(label: &str, base: &str, settings: &Settings) -> bool {
    settings.spinner && is_spinner_frame(label, base, &settings.labeler)
}

/// `label` is an icon (or spinner frame) before `stripped`, a position as
/// herdr writes it: digits only.
fn is_iconed_number(label: &str, stripped: &str) -> bool {
    label != stripped && !stripped.is_empty() && stripped.bytes().all(|b| b.is_ascii_digit())
}

fn is_spinner_frame(label: &str, base: &str, labeler: &Labeler) -> bool {
    (0..SPINNER_FRAMES.len()).any(|frame| labeler.spinner_label(frame, base) == label)
}

/// The base a foreign label gives. A renamer that put its own mark and a
/// space in front of cowbell's label ("★ 🔴 api") wrapped the old name: the
/// icon in the middle is cowbell's, and the base is the mark and the old
/// base ("★ api"), or icons would pile up inside the name with every
/// exchange. Without the space it is a word someone wrote ("Hey! api" over
/// the icon "!"), and only a leading icon goes. cowbell's label there is
/// the last one herdr confirmed, or the newest one sent, which herdr may
/// have applied although its answer was lost.
fn foreign_base(record: &TabRecord, label: &str, labeler: &Labeler) -> String {
    let wrapped = [record.written.as_deref(), record.unconfirmed()]
        .into_iter()
        .flatten()
        // Only a label with cowbell's icon in it: a bare "2" written for
        // an auto-named tab is no wrapping in the user's "docs 2".
        .filter(|written| labeler.has_icon(written))
        .find_map(|written| label.strip_suffix(written))
        .filter(|prefix| prefix.ends_with(char::is_whitespace));
    match wrapped {
        Some(prefix) => labeler
            .strip(&format!("{prefix}{}", record.base))
            .to_string(),
        None => labeler.strip(label).to_string(),
    }
}

fn wanted_label(record: &TabRecord, settings: &Settings, spinner_frame: usize) -> String {
    let status = record.status.unwrap_or(Status::Unknown);
    if settings.spinner && status == Status::Working {
        settings.labeler.spinner_label(spinner_frame, &record.base)
    } else {
        settings.labeler.label(status, &record.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults: emoji preset, one space, no spinner, real time.
    fn settings() -> Settings {
        Settings::from_config(&Config::default(), Timing::REAL, 1)
    }

    fn tab(id: &str, number: u64, label: &str, status: Status) -> Tab {
        Tab {
            tab_id: id.into(),
            number,
            label: label.into(),
            status,
        }
    }

    fn renames(plan: &Plan) -> Vec<(&str, &str)> {
        plan.renames
            .iter()
            .map(|r| (r.tab_id.as_str(), r.label.as_str()))
            .collect()
    }

    /// A tracker that has put its icons on `tabs`, applied by herdr.
    fn tracking(tabs: &mut [Tab], s: &Settings, now: Instant) -> Tracker {
        let mut tracker = Tracker::default();
        let plan = tracker.resync(tabs, s, now);
        apply(&mut tracker, tabs, &plan.renames);
        tracker
    }

    /// Applies a plan the way herdr would, confirming each rename.
    fn apply(tracker: &mut Tracker, tabs: &mut [Tab], plan: &[Rename]) {
        for rename in plan {
            let tab = tabs.iter_mut().find(|t| t.tab_id == rename.tab_id).unwrap();
            tab.label = rename.label.clone();
            tracker.confirm(&rename.tab_id, &rename.label);
        }
    }

    #[test]
    fn a_tab_listed_twice_counts_once_by_its_first_entry() {
        let s = settings();
        let now = Instant::now();
        let tabs = vec![
            tab("w1:t4", 4, "web", Status::Blocked),
            tab("w1:t5", 5, "api", Status::Done),
            tab("w1:t4", 4, "4", Status::Done),
        ];
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t4", "🔴 web"), ("w1:t5", "🔵 api")]);
        let tab_id = "w1:t4".to_string();
        assert_eq!(plan.notes, [Note::ListedTwice { tab_id, ignored: 1 }]);
        assert_eq!(tracker.tabs["w1:t4"].base, "web");
    }

    #[test]
    fn many_tabs_listed_twice_make_one_note() {
        let s = settings();
        let now = Instant::now();
        let mut tabs: Vec<Tab> = (1..=3)
            .map(|i| tab(&format!("w1:t{i}"), i, &format!("n{i}"), Status::Blocked))
            .collect();
        tabs.extend(
            (1..=3)
                .rev()
                .map(|i| tab(&format!("w1:t{i}"), 9, "x", Status::Idle)),
        );
        tabs.push(tab("w1:t2", 9, "y", Status::Idle));
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(
            renames(&plan),
            [("w1:t1", "🔴 n1"), ("w1:t2", "🔴 n2"), ("w1:t3", "🔴 n3")]
        );
        let tab_id = "w1:t3".to_string();
        assert_eq!(plan.notes, [Note::ListedTwice { tab_id, ignored: 4 }]);
    }

    #[test]
    fn a_new_tab_never_replaces_the_records_of_known_ones() {
        let s = settings();
        let now = Instant::now();
        let mut tabs: Vec<Tab> = (1..=60)
            .map(|i| tab(&format!("w1:t{i}"), i, &format!("n{i}"), Status::Blocked))
            .collect();
        let mut tracker = tracking(&mut tabs, &s, now);
        tabs.push(tab("w1:t61", 61, "new", Status::Blocked));
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t61", "🔴 new")]);
        for (tab_id, record) in tracker.tabs.iter() {
            if tab_id != "w1:t61" {
                assert!(record.written.is_some(), "{tab_id} replaced");
            }
        }
    }

    #[test]
    fn icons_follow_the_status_and_only_changed_tabs_are_renamed() {
        let s = settings();
        let now = Instant::now();
        let mut tracker = Tracker::default();
        let mut tabs = vec![
            tab("w1:t1", 1, "api", Status::Blocked),
            tab("w1:t2", 2, "docs", Status::Done),
            tab("w1:t3", 3, "build", Status::Working),
            tab("w1:t4", 4, "shell", Status::Idle),
            tab("w1:t5", 5, "logs", Status::Unknown),
        ];
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(
            renames(&plan),
            [
                ("w1:t1", "🔴 api"),
                ("w1:t2", "🔵 docs"),
                ("w1:t3", "🟡 build")
            ]
        );
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(tracker.resync(&tabs, &s, now), Plan::default());
        // Done clears once the tab is seen.
        tabs[1].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "docs")]);
    }

    #[test]
    fn a_foreign_rename_becomes_the_base_with_the_icon_in_front_once() {
        let s = settings();
        let now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = tracking(&mut tabs, &s, now);
        for new_name in ["frontend", "🟡 tests", "🔴 🔴 again"] {
            tabs[0].label = new_name.into();
            let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(100));
            let expected = format!("🔴 {}", s.labeler.strip(new_name));
            assert_eq!(renames(&plan), [("w1:t1", expected.as_str())]);
            apply(&mut tracker, &mut tabs, &plan.renames);
            assert!(
                tracker
                    .resync(&tabs, &s, now + Duration::from_secs(100))
                    .renames
                    .is_empty()
            );
        }
        assert_eq!(tracker.tabs["w1:t1"].base, "again");
    }

    #[test]
    fn echoes_are_recognised_and_are_not_new_bases() {
        let s = settings();
        let now = Instant::now();
        let mut tracker = Tracker::default();
        let tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let plan = tracker.resync(&tabs, &s, now);
        assert!(!tracker.take_echo("w1:t1", "api", now, &s));
        assert!(!tracker.clone().take_echo(
            "w1:t1",
            "🔴 api",
            now + ECHO_MEMORY + Duration::from_secs(1),
            &s
        ));
        // One rename, one echo: the same label once more is someone else's
        // (a plugin that renames back to a label cowbell wrote earlier).
        assert!(tracker.take_echo("w1:t1", "🔴 api", now + Duration::from_secs(1), &s));
        assert!(!tracker.take_echo("w1:t1", "🔴 api", now + Duration::from_secs(1), &s));
        // The rename timed out but herdr applied it later: still ours.
        let late = vec![tab("w1:t1", 1, &plan.renames[0].label, Status::Blocked)];
        let plan = tracker.resync(&late, &s, now + Duration::from_secs(5));
        assert_eq!(plan, Plan::default());
        assert_eq!(tracker.tabs["w1:t1"].base, "api");
        assert_eq!(tracker.tabs["w1:t1"].written.as_deref(), Some("🔴 api"));
    }

    #[test]
    fn closed_tabs_are_dropped() {
        let s = settings();
        let now = Instant::now();
        let mut tracker = Tracker::default();
        tracker.resync(
            &[
                tab("w1:t1", 1, "a", Status::Idle),
                tab("w1:t2", 2, "b", Status::Idle),
            ],
            &s,
            now,
        );
        let plan = tracker.resync(&[tab("w1:t2", 1, "b", Status::Idle)], &s, now);
        assert_eq!(
            plan.notes,
            [Note::Dropped {
                tab_id: "w1:t1".into()
            }]
        );
        assert_eq!(tracker.tabs.keys().collect::<Vec<_>>(), ["w1:t2"]);
    }

    #[test]
    fn auto_named_tabs_are_skipped_by_default() {
        let s = settings();
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&[tab("w1:t1", 1, "1", Status::Blocked)], &s, Instant::now());
        assert!(plan.renames.is_empty());
        assert!(tracker.tabs.is_empty());
    }

    #[test]
    fn auto_named_tabs_follow_their_position_when_included() {
        let mut s = settings();
        s.include_auto_named = true;
        let now = Instant::now();
        let mut tracker = Tracker::default();
        let mut tabs = vec![
            tab("w1:t1", 1, "custom", Status::Idle),
            tab("w1:t2", 2, "2", Status::Blocked),
        ];
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "🔴 2")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        // The first tab closes: the auto-named one is now number 1.
        let mut tabs = vec![Tab {
            number: 1,
            ..tabs[1].clone()
        }];
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "🔴 1")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        // Idle again: the plain position, and it keeps following moves.
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "1")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].number = 3;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "3")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        // A user names it: now a custom tab.
        tabs[0].label = "notes".into();
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t2", "🔴 notes")]);
        assert!(!tracker.tabs["w1:t2"].auto_named);
    }

    /// An auto-named tab at position 1, blocked, with its icon on
    /// ("🔴 1"), and `include_auto_named` on.
    fn auto_named_with_icon() -> (Settings, Vec<Tab>, Tracker, Instant) {
        let mut s = settings();
        s.include_auto_named = true;
        let now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "1", Status::Blocked)];
        let tracker = tracking(&mut tabs, &s, now);
        assert_eq!(tabs[0].label, "🔴 1");
        (s, tabs, tracker, now)
    }

    /// A daemon killed after renumbering an auto-named tab, before it
    /// saved: its label holds a number state.json never knew. It is still
    /// cowbell's: the next daemon keeps the tab auto-named and gives it its
    /// position, and a restore gives the position back.
    #[test]
    fn an_unsaved_position_left_by_a_killed_daemon_is_still_cowbells() {
        let (s, mut tabs, mut tracker, now) = auto_named_with_icon();
        // Saved: "🔴 1" at position 1. Unsaved: the tab moved to 2, and the
        // killed daemon wrote "🔴 2"; then it moved to 3.
        tabs[0].label = "🔴 2".into();
        tabs[0].number = 3;
        let mut next = tracker.clone();
        next.mark_left_by_killed_daemon();
        next.looked_away = true;
        let plan = next.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 3")]);
        assert!(next.tabs["w1:t1"].auto_named);
        assert_eq!(next.tabs["w1:t1"].base, "3");
        // `off` after the crash: the position, not the number in the label.
        tracker.mark_left_by_killed_daemon();
        for label in ["🔴 2", "🟡 2"] {
            tabs[0].label = label.into();
            let restore = tracker.clone().restore_plan(&tabs, &s.labeler, false, now);
            assert_eq!(
                restore,
                [Rename {
                    tab_id: "w1:t1".into(),
                    label: "3".into()
                }],
                "{label}"
            );
        }
        // An unseen rename to a name keeps the name, a number included.
        for label in ["notes", "2024"] {
            tabs[0].label = label.into();
            let restore = tracker.clone().restore_plan(&tabs, &s.labeler, false, now);
            assert_eq!(restore, [], "{label}");
        }
        // And the next daemon takes it as the tab's name.
        next = tracker.clone();
        next.looked_away = true;
        let plan = next.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 2024")]);
        assert!(!next.tabs["w1:t1"].auto_named);
    }

    /// A number an earlier `off` gave back is a name to herdr, which no
    /// longer moves it; cowbell tracks the tab as auto-named all the same
    /// (it shows its position). Moved before a resync could renumber it, a
    /// restore gives the position, as that resync would.
    #[test]
    fn a_restore_renumbers_a_moved_auto_named_tab_it_never_renamed() {
        let mut s = settings();
        s.include_auto_named = true;
        let now = Instant::now();
        let mut tabs = vec![tab("w1:t3", 3, "3", Status::Idle)];
        let tracker = tracking(&mut tabs, &s, now);
        assert!(tracker.tabs["w1:t3"].auto_named);
        assert_eq!(tracker.tabs["w1:t3"].written, None);
        tabs[0].number = 1;
        let restore = tracker.clone().restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(
            restore,
            [Rename {
                tab_id: "w1:t3".into(),
                label: "1".into()
            }]
        );
        assert_eq!(
            renames(&tracker.clone().resync(&tabs, &s, now)),
            [("w1:t3", "1")]
        );
        // Renamed since cowbell looked: the new name stays.
        tabs[0].label = "notes".into();
        assert_eq!(
            tracker.clone().restore_plan(&tabs, &s.labeler, false, now),
            []
        );
    }

    /// A move gives an idle auto-named tab its new position bare, which a
    /// later process could not tell from a name: the plan asks for a save
    /// first. An icon in front says whose it is, and asks for none.
    #[test]
    fn a_bare_renumbering_is_saved_before_it_goes_out() {
        let mut s = settings();
        s.include_auto_named = true;
        let now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "1", Status::Blocked),
            tab("w1:t3", 3, "3", Status::Idle),
        ];
        let mut tracker = tracking(&mut tabs, &s, now);
        assert_eq!(tabs[0].label, "🔴 1");
        // A number given back earlier: herdr no longer moves it.
        tabs[1].number = 2;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t3", "2")]);
        assert!(plan.save_first());
        assert_eq!(tracker.tabs["w1:t3"].unconfirmed(), Some("2"));
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].number = 2;
        tabs[1].number = 1;
        tabs[1].label = "2".into();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 2"), ("w1:t3", "1")]);
        assert_eq!(plan.bare_numbers, 1);
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].number = 1;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 1")]);
        assert!(!plan.save_first());
    }

    /// A bare number a killed process sent, loaded as pending, is still
    /// cowbell's when herdr comes back only minutes later.
    #[test]
    fn a_pending_bare_number_is_cowbells_at_a_first_look_minutes_later() {
        let mut s = settings();
        s.include_auto_named = true;
        let loaded = Instant::now();
        let mut tabs = vec![tab("w1:t3", 3, "3", Status::Idle)];
        let mut tracker = tracking(&mut tabs, &s, loaded);
        let record = tracker.tabs.get_mut("w1:t3").unwrap();
        record.remember_unconfirmed("2", loaded);
        record.left_by_killed_daemon = true;
        tracker.looked_away = true;
        tabs[0] = tab("w1:t3", 1, "2", Status::Idle);
        let later = loaded + 3 * ECHO_MEMORY;
        let plan = tracker.resync(&tabs, &s, later);
        assert_eq!(renames(&plan), [("w1:t3", "1")]);
        assert!(tracker.tabs["w1:t3"].auto_named);
    }

    /// Without a crash, an icon before a number cowbell did not write is
    /// someone else's label: a restore strips the icon and keeps the number.
    #[test]
    fn an_iconed_number_is_a_name_when_no_daemon_was_killed() {
        let (s, mut tabs, mut tracker, now) = auto_named_with_icon();
        tabs[0].label = "🟡 7".into();
        tabs[0].number = 2;
        let restore = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(
            restore,
            [Rename {
                tab_id: "w1:t1".into(),
                label: "7".into()
            }]
        );
    }

    /// include_auto_named: an auto-named tab shown as "2", idle (cowbell
    /// wrote the bare number), then moved to the front: the settings, the
    /// tracker before the move, and the tab as herdr now lists it.
    fn an_idle_auto_named_tab_moved_to_the_front(now: Instant) -> (Settings, Tracker, Vec<Tab>) {
        let mut s = settings();
        s.include_auto_named = true;
        let mut tabs = vec![
            tab("w1:t1", 1, "lead", Status::Idle),
            tab("w1:t2", 2, "2", Status::Blocked),
        ];
        let mut tracker = tracking(&mut tabs, &s, now);
        assert_eq!(tabs[1].label, "🔴 2");
        tabs[1].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(tabs[1].label, "2");
        let moved = vec![Tab {
            number: 1,
            ..tabs[1].clone()
        }];
        (s, tracker, moved)
    }

    /// herdr applies the renumbering and the daemon is killed before its
    /// save. The "2" it wrote is no wrapping in the user's later "docs 2".
    #[test]
    fn a_name_ending_in_an_old_position_survives_a_crash() {
        let now = Instant::now();
        let (s, mut tracker, mut tabs) = an_idle_auto_named_tab_moved_to_the_front(now);
        let mut next = tracker.clone(); // what state.json holds
        let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(1));
        assert_eq!(renames(&plan), [("w1:t2", "1")]);
        apply(&mut tracker, &mut tabs, &plan.renames); // then SIGKILL
        next.mark_left_by_killed_daemon();
        next.looked_away = true;
        let plan = next.resync(&tabs, &s, now + Duration::from_secs(5));
        assert_eq!(renames(&plan), []);
        tabs[0].label = "docs 2".into();
        let later = now + Duration::from_secs(300);
        let plan = next.resync(&tabs, &s, later);
        assert_eq!(next.tabs["w1:t2"].base, "docs 2");
        assert_eq!(renames(&plan), []);
        assert_eq!(next.restore_plan(&tabs, &s.labeler, false, later), []);
    }

    /// The same without a crash: herdr refuses the renumbering rename and
    /// the user names the tab before its retry.
    #[test]
    fn a_name_ending_in_an_old_position_survives_a_refused_rename() {
        let now = Instant::now();
        let (s, mut tracker, mut tabs) = an_idle_auto_named_tab_moved_to_the_front(now);
        let t1 = now + Duration::from_secs(60);
        let plan = tracker.resync(&tabs, &s, t1);
        assert_eq!(renames(&plan), [("w1:t2", "1")]);
        tracker.rename_failed("w1:t2", "1", Some(t1 + Duration::from_secs(1)));
        tabs[0].label = "docs 2".into();
        let t2 = t1 + Duration::from_millis(500);
        tracker.resync(&tabs, &s, t2);
        assert_eq!(tracker.tabs["w1:t2"].base, "docs 2");
        assert_eq!(tracker.restore_plan(&tabs, &s.labeler, false, t2), []);
    }

    /// Spinner frames are not saved: a killed daemon leaves a later frame
    /// than state.json knows, over a number that may be old by now.
    #[test]
    fn a_spinner_frame_left_by_a_killed_daemon_restores_to_the_position() {
        let mut s = settings();
        s.include_auto_named = true;
        s.spinner = true;
        let now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "1", Status::Idle),
            tab("w1:t2", 2, "2", Status::Working),
        ];
        let mut tracker = tracking(&mut tabs, &s, now);
        let mut saved = tracker.clone();
        tracker.advance_spinner();
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(plan.renames.len(), 1);
        // Killed before a save; tab 1 closes, so tab 2 is number 1.
        let mut tabs = vec![Tab {
            number: 1,
            ..tabs[1].clone()
        }];
        saved.mark_left_by_killed_daemon();
        let restore = saved.clone().restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(
            restore,
            [Rename {
                tab_id: "w1:t2".into(),
                label: "1".into()
            }]
        );
        saved.looked_away = true;
        let plan = saved.resync(&tabs, &s, now);
        assert!(saved.tabs["w1:t2"].auto_named);
        assert_eq!(saved.tabs["w1:t2"].base, "1");
        apply(&mut saved, &mut tabs, &plan.renames);
        assert_eq!(s.labeler.strip(&tabs[0].label), "1");
    }

    #[test]
    fn switching_auto_named_off_gives_the_number_back() {
        let (mut s, mut tabs, mut tracker, now) = auto_named_with_icon();
        s.include_auto_named = false;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "1")]);
        assert!(tracker.tabs.contains_key("w1:t1"), "kept until confirmed");
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.tabs.is_empty());
        assert_eq!(tracker.resync(&tabs, &s, now), Plan::default());
    }

    #[test]
    fn a_number_given_back_is_tried_again_until_herdr_shows_it() {
        let (mut s, mut tabs, mut tracker, now) = auto_named_with_icon();
        s.include_auto_named = false;
        // herdr refused the first rename back: the tab still shows "🔴 1".
        assert_eq!(renames(&tracker.resync(&tabs, &s, now)), [("w1:t1", "1")]);
        let later = now + Duration::from_secs(1);
        assert_eq!(renames(&tracker.resync(&tabs, &s, later)), [("w1:t1", "1")]);
        // A stop meanwhile still gives the number back rather than keeping
        // the icon as if it were the tab's name.
        let restore = tracker.restore_plan(&tabs, &s.labeler, false, later);
        assert_eq!(
            restore,
            [Rename {
                tab_id: "w1:t1".into(),
                label: "1".into()
            }]
        );
        // The rename lands; its echo is cowbell's own, and the tab is let go.
        assert!(tracker.take_echo("w1:t1", "1", later, &s));
        tabs[0].label = "1".into();
        assert_eq!(tracker.resync(&tabs, &s, later), Plan::default());
        assert!(tracker.tabs.is_empty());
    }

    #[test]
    fn switched_on_again_before_the_number_is_back_the_tab_is_kept() {
        let (mut s, mut tabs, mut tracker, now) = auto_named_with_icon();
        s.include_auto_named = false;
        // The rename back to "1" is refused; then the option is on again.
        assert_eq!(renames(&tracker.resync(&tabs, &s, now)), [("w1:t1", "1")]);
        s.include_auto_named = true;
        tabs[0].status = Status::Working;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🟡 1")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(
            tracker.tabs["w1:t1"].auto_named,
            "still tracked, by position"
        );
    }

    /// Another plugin that answers every cowbell rename 50 ms later with
    /// `theirs`, for `rounds` resyncs 150 ms apart. Returns cowbell's
    /// renames and the time after the last round.
    fn hostile(
        tracker: &mut Tracker,
        tabs: &mut [Tab],
        s: &Settings,
        theirs: &str,
        rounds: usize,
    ) -> (usize, Instant) {
        let (own_renames, _, now) = hostile_from(tracker, tabs, s, theirs, rounds, Instant::now());
        (own_renames, now)
    }

    /// `hostile` from `now`, also giving the length in seconds of the last
    /// cool-down that started.
    fn hostile_from(
        tracker: &mut Tracker,
        tabs: &mut [Tab],
        s: &Settings,
        theirs: &str,
        rounds: usize,
        mut now: Instant,
    ) -> (usize, Option<u64>, Instant) {
        let mut own_renames = 0;
        let mut cooldown = None;
        for _ in 0..rounds {
            let plan = tracker.resync(tabs, s, now);
            own_renames += plan.renames.len();
            apply(tracker, tabs, &plan.renames);
            for note in &plan.notes {
                if let Note::Cooldown { seconds, .. } = note {
                    cooldown = Some(*seconds);
                }
            }
            now += Duration::from_millis(50);
            tabs[0].label = theirs.into();
            now += Duration::from_millis(100);
        }
        (own_renames, cooldown, now)
    }

    #[test]
    fn a_hostile_renamer_gets_three_exchanges_then_a_cooldown() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (own_renames, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        assert_eq!(own_renames, 3);
        assert!(tracker.tabs["w1:t1"].fight.cooling_down(now));
        assert_eq!(tabs[0].label, "api");
        let end = tracker.next_cooldown_end(now).unwrap();
        assert_eq!(
            tracker
                .resync(&tabs, &s, end - Duration::from_millis(1))
                .renames,
            []
        );
        assert_eq!(
            renames(&tracker.resync(&tabs, &s, end)),
            [("w1:t1", "🔴 api")]
        );
    }

    /// A tab renamed while cowbell was away (a herdr restart, a new
    /// daemon) is no fight, and a tab that only shares an old tab's id (a
    /// fresh herdr session hands ids out again) gets no old cool-down.
    #[test]
    fn a_rename_seen_at_the_first_look_after_a_reconnect_is_no_fight() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (_, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        // Reconnected to a fresh session, past the fight window of
        // cowbell's last rename: a new tab "build" has the id.
        let now = now + Duration::from_secs(31);
        assert!(tracker.tabs["w1:t1"].fight.cooling_down(now));
        tracker.looked_away = true;
        let tabs = vec![tab("w1:t1", 1, "build", Status::Blocked)];
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 build")]);
        let fight = &tracker.tabs["w1:t1"].fight;
        assert!(fight.fights.is_empty() && fight.cooldown_until.is_none());
        // Nothing of the old tab: the spec gives a new one 60 s first.
        assert_eq!(
            (fight.level, fight.total, fight.last_cooldown),
            (0, 0, None)
        );
        assert!(!tracker.looked_away);
        // Once looked, a rename right after cowbell's counts again.
        let mut tabs = tabs;
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].label = "web".into();
        tracker.resync(&tabs, &s, now + Duration::from_secs(1));
        assert_eq!(tracker.tabs["w1:t1"].fight.fights.len(), 1);
    }

    /// A new daemon that first looks right after the old one's rename (a
    /// handover in the middle of a fight) counts the answer as a fight.
    #[test]
    fn a_rename_answering_cowbells_last_one_is_a_fight_at_the_first_look_too() {
        let s = settings();
        let now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = tracking(&mut tabs, &s, now);
        tracker.tabs.get_mut("w1:t1").unwrap().fight.total = 4;
        tracker.looked_away = true;
        tabs[0].label = "api".into();
        tracker.resync(&tabs, &s, now + Duration::from_secs(2));
        let fight = &tracker.tabs["w1:t1"].fight;
        assert_eq!((fight.fights.len(), fight.total), (1, 5));
    }

    #[test]
    fn a_tab_whose_rename_failed_waits_for_its_retry() {
        let s = settings();
        let now = Instant::now();
        let tabs = vec![
            tab("w1:t1", 1, "api", Status::Blocked),
            tab("w1:t2", 2, "web", Status::Done),
        ];
        let mut tracker = Tracker::default();
        tracker.resync(&tabs, &s, now);
        let retry = now + Duration::from_secs(1);
        tracker.rename_failed("w1:t1", "🔴 api", Some(retry));
        let plan = tracker.resync(&tabs, &s, now + Duration::from_millis(500));
        assert_eq!(renames(&plan), [("w1:t2", "🔵 web")]);
        assert_eq!(plan.waiting, 1);
        let plan = tracker.resync(&tabs, &s, retry);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api"), ("w1:t2", "🔵 web")]);
        assert_eq!(plan.waiting, 0);
        // Waiting alone is no news for the log.
        let quiet = Plan {
            waiting: 1,
            ..Plan::default()
        };
        assert!(quiet.is_quiet());
        assert!(!Plan::default().is_quiet());
        // Nor is a resync that found everything right, though it is saved
        // (a done tab may have been seen meanwhile).
        assert!(quiet.tells_nothing());
        assert!(Plan::default().tells_nothing());
        let settled = vec![
            tab("w1:t1", 1, "🔴 api", Status::Blocked),
            tab("w1:t2", 2, "🔵 web", Status::Done),
        ];
        let news = tracker.resync(&settled, &s, retry + Duration::from_secs(1));
        assert!(news.tells_nothing(), "{news:?}");
        let renamed = Plan {
            renames: plan.renames,
            ..Plan::default()
        };
        assert!(!renamed.tells_nothing());
        let noted = Plan {
            notes: vec![Note::Dropped {
                tab_id: "w1:t9".into(),
            }],
            ..Plan::default()
        };
        assert!(!noted.tells_nothing());
        let new_tab = Plan {
            new_tabs: 1,
            ..Plan::default()
        };
        assert!(!new_tab.tells_nothing());
    }

    #[test]
    fn an_icon_stripper_after_a_seen_tab_is_a_fight_at_once() {
        // cowbell wrote "🔴 api", then "api" (done, seen), then "🔴 api".
        let s = settings();
        let mut now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = tracking(&mut tabs, &s, now);
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        // Its echoes came back (each is taken once, as the daemon does).
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        assert!(tracker.take_echo("w1:t1", "api", now, &s));
        assert_eq!(tabs[0].label, "api");
        tabs[0].status = Status::Blocked;
        // Now another plugin strips every icon cowbell puts on, 50 ms later.
        let mut own = 0;
        for _ in 0..40 {
            now += Duration::from_millis(100);
            let plan = tracker.resync(&tabs, &s, now);
            own += plan.renames.len();
            apply(&mut tracker, &mut tabs, &plan.renames);
            for rename in &plan.renames {
                tracker.take_echo(&rename.tab_id, &rename.label, now, &s);
            }
            now += Duration::from_millis(50);
            tabs[0].label = "api".into();
        }
        assert!(
            tracker.tabs["w1:t1"].fight.cooling_down(now),
            "no cool-down after {own} renames"
        );
        assert!(
            own <= 3,
            "{own} renames before the cool-down (spec: three fights)"
        );
    }

    #[test]
    fn a_renamer_that_puts_the_number_back_is_a_fight_too() {
        let mut s = settings();
        s.include_auto_named = true;
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 2, "2", Status::Blocked)];
        let (own_renames, now) = hostile(&mut tracker, &mut tabs, &s, "2", 10);
        assert_eq!(own_renames, 3);
        assert!(tracker.tabs["w1:t1"].fight.cooling_down(now));
        assert!(tracker.tabs["w1:t1"].auto_named);
    }

    #[test]
    fn with_the_spinner_off_a_braille_frame_is_someone_elses() {
        // A plugin with a braille spinner of its own writes cowbell's frames.
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Working)];
        let frame = s.labeler.spinner_label(0, "api");
        let (own_renames, _) = hostile(&mut tracker, &mut tabs, &s, &frame, 10);
        assert_eq!(own_renames, 3);
        assert!(!tracker.take_echo("w1:t1", &frame, Instant::now(), &s));
        // With it on, the frames are cowbell's own.
        let mut spinning = s.clone();
        spinning.spinner = true;
        assert!(tracker.take_echo("w1:t1", &frame, Instant::now(), &spinning));
    }

    #[test]
    fn restore_gives_back_the_base_or_keeps_a_later_name() {
        let mut s = settings();
        s.include_auto_named = true;
        let now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "api", Status::Blocked),
            tab("w1:t2", 2, "docs", Status::Blocked),
            tab("w1:t3", 3, "3", Status::Blocked),
            tab("w1:t4", 4, "🔵 stray", Status::Idle),
        ];
        let mut tracker = tracking(&mut tabs, &s, now);
        // A tab cowbell does not know, left with an icon by a crash.
        tracker.tabs.remove("w1:t4");
        tabs[3].label = "🔵 stray".into();
        tabs[1].label = "🟡 theirs".into();
        tabs[2].number = 2;
        let plan = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(
            plan.iter()
                .map(|r| (r.tab_id.as_str(), r.label.as_str()))
                .collect::<Vec<_>>(),
            [("w1:t1", "api"), ("w1:t2", "theirs"), ("w1:t3", "2")]
        );
        // Every tracked tab needs its rename, so all are still tracked.
        assert_eq!(tracker.tabs.len(), 3);
        let plan = tracker.restore_plan(&tabs, &s.labeler, true, now);
        assert_eq!(
            plan.last().unwrap(),
            &Rename {
                tab_id: "w1:t4".into(),
                label: "stray".into()
            }
        );
        // herdr did not answer that rename: the stray tab is tracked now,
        // so the next restore (even without every_tab) gives its name back.
        tracker.keep_for_restore(&tabs[3], "stray");
        let plan = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(
            plan.last().unwrap(),
            &Rename {
                tab_id: "w1:t4".into(),
                label: "stray".into()
            }
        );
    }

    #[test]
    fn renaming_back_to_a_label_cowbell_wrote_keeps_that_name() {
        let s = settings();
        let now = Instant::now();
        let later = now + Duration::from_secs(10);
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Done)];
        let mut tracker = tracking(&mut tabs, &s, now);
        // Seen: cowbell writes the plain "api".
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "api")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        // Within the echo memory, the person renames it "web", then back.
        tabs[0].label = "web".into();
        assert_eq!(renames(&tracker.resync(&tabs, &s, later)), []);
        assert_eq!(tracker.tabs["w1:t1"].base, "web");
        tabs[0].label = "api".into();
        // Turned off before any resync saw the rename back: "api" stays.
        let mut stopping = tracker.clone();
        assert_eq!(stopping.restore_plan(&tabs, &s.labeler, false, later), []);
        // Nothing left to give back: the tab is forgotten.
        assert!(stopping.tabs.is_empty());
        let plan = tracker.resync(&tabs, &s, later);
        assert_eq!(renames(&plan), []);
        assert_eq!(tracker.tabs["w1:t1"].base, "api");
        assert!(!tracker.take_echo("w1:t1", "api", later, &s));
    }

    #[test]
    fn a_tracked_tab_showing_its_position_is_auto_named_again() {
        // A new server reuses the id of a tab state.json remembers, for an
        // unnamed tab: its position is not a name to put an icon in front of.
        let s = settings();
        let now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = tracking(&mut tabs, &s, now);
        tabs[0].label = "1".into();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), []);
        assert!(tracker.tabs.is_empty());
        assert!(plan.notes.is_empty(), "{:?}", plan.notes);

        // Included, it becomes an auto-named tab that follows its position.
        let mut s = s;
        s.include_auto_named = true;
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].label = "1".into();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 1")]);
        assert!(tracker.tabs["w1:t1"].auto_named);
    }

    #[test]
    fn the_spinner_turns_only_working_tabs_and_sleeps_otherwise() {
        let mut s = settings();
        s.spinner = true;
        let now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "a", Status::Working),
            tab("w1:t2", 2, "b", Status::Blocked),
            tab("w1:t3", 3, "c", Status::Working),
        ];
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&tabs, &s, now);
        assert!(!plan.is_quiet(), "the first frame replaces a name");
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(tabs[0].label, s.labeler.spinner_label(0, "a"));
        assert!(tracker.spinning(&s, now));
        let later = now + Duration::from_secs(1);
        tracker.advance_spinner();
        let plan = tracker.resync(&tabs, &s, later);
        assert!(plan.is_quiet());
        // Every working tab moves to the same next frame, in one resync.
        assert_eq!(
            renames(&plan),
            [
                ("w1:t1", s.labeler.spinner_label(1, "a").as_str()),
                ("w1:t3", s.labeler.spinner_label(1, "c").as_str())
            ]
        );
        apply(&mut tracker, &mut tabs, &plan.renames);
        // Spinner frames are not own renames for the fight rules.
        assert_eq!(tracker.tabs["w1:t1"].fight.last_own_rename, Some(now));
        // A late echo of any frame is still cowbell's own.
        assert!(tracker.take_echo("w1:t1", &s.labeler.spinner_label(7, "a"), later, &s));
        // A user rename in the middle of spinning becomes the base.
        tabs[0].label = "renamed".into();
        let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(60));
        assert_eq!(
            renames(&plan),
            [("w1:t1", s.labeler.spinner_label(1, "renamed").as_str())]
        );
        assert!(!plan.is_quiet(), "a new name is news");
        apply(&mut tracker, &mut tabs, &plan.renames);
        tabs[0].status = Status::Idle;
        tabs[2].status = Status::Idle;
        tracker.resync(&tabs, &s, now);
        assert!(!tracker.spinning(&s, now));
    }

    /// herdr applies cowbell's renames but the answers are lost (a timeout,
    /// a connection dropped before the answer): only the echoes say so. An
    /// icon stripper puts the old label back 50 ms after each.
    #[test]
    fn an_echo_stands_in_for_a_lost_answer_so_a_stripper_is_caught() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut now = Instant::now();
        let mut renames = 0;
        for n in 0..20 {
            let plan = tracker.resync(&tabs, &s, now);
            renames += plan.renames.len();
            for rename in &plan.renames {
                tabs[0].label = rename.label.clone();
                // The echo comes before the timeout, or after the
                // connection closed without an answer.
                if n % 2 == 0 {
                    assert!(tracker.take_echo(&rename.tab_id, &rename.label, now, &s));
                    tracker.answer_lost(&rename.tab_id, &rename.label);
                } else {
                    tracker.answer_lost(&rename.tab_id, &rename.label);
                    assert!(tracker.take_echo(&rename.tab_id, &rename.label, now, &s));
                }
            }
            now += Duration::from_millis(50);
            tabs[0].label = "api".into();
            now += Duration::from_secs(1);
        }
        let fight = &tracker.tabs["w1:t1"].fight;
        assert!(fight.cooling_down(now), "{renames} renames: {fight:?}");
        assert_eq!(renames, 3);
    }

    #[test]
    fn only_the_echo_of_the_newest_label_whose_answer_was_lost_confirms_it() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let now = Instant::now();
        tracker.resync(&tabs, &s, now);
        tabs[0].status = Status::Working;
        tracker.resync(&tabs, &s, now);
        // Both answers lost; "🟡 api" is the newest, "🔴 api"'s echo late.
        tracker.answer_lost("w1:t1", "🔴 api");
        tracker.answer_lost("w1:t1", "🟡 api");
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        assert_eq!(tracker.tabs["w1:t1"].seen, "api");
        assert!(tracker.take_echo("w1:t1", "🟡 api", now, &s));
        assert_eq!(tracker.tabs["w1:t1"].seen, "🟡 api");
        assert_eq!(tracker.tabs["w1:t1"].written.as_deref(), Some("🟡 api"));
        // An echo alone (the replay of a new subscription brings old ones)
        // confirms nothing: the rename may still be queued.
        tabs[0].label = "🟡 api".into();
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(plan.renames[0].label, "🔴 api");
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        assert_eq!(tracker.tabs["w1:t1"].seen, "🟡 api");
    }

    /// Both answers lost, herdr applies the older rename after the newer
    /// one: the label on the tab is cowbell's own, no one else's.
    #[test]
    fn a_rename_herdr_applies_late_and_out_of_order_is_no_foreign_rename() {
        let s = settings();
        let now = Instant::now();
        let later = |ms| now + Duration::from_millis(ms);
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = Tracker::default();
        tracker.resync(&tabs, &s, now);
        tracker.answer_lost("w1:t1", "🔴 api");
        tracker.rename_failed("w1:t1", "🔴 api", Some(later(3000)));
        tabs[0].status = Status::Working;
        let plan = tracker.resync(&tabs, &s, later(3000));
        assert_eq!(renames(&plan), [("w1:t1", "🟡 api")]);
        tracker.answer_lost("w1:t1", "🟡 api");
        tracker.rename_failed("w1:t1", "🟡 api", Some(later(6000)));
        assert!(tracker.take_echo("w1:t1", "🔴 api", later(4000), &s));
        tabs[0].label = "🔴 api".into();
        let plan = tracker.resync(&tabs, &s, later(6000));
        assert_eq!(plan.notes, []);
        assert_eq!(tracker.tabs["w1:t1"].base, "api");
        assert_eq!(renames(&plan), [("w1:t1", "🟡 api")]);
    }

    /// Only until a newer rename lands: a renamer that then puts an older
    /// label of cowbell's back is fighting, as without the lost answer.
    #[test]
    fn a_lost_answer_hides_no_fight_once_a_newer_rename_landed() {
        let s = settings();
        let now = Instant::now();
        let later = |ms| now + Duration::from_millis(ms);
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = Tracker::default();
        tracker.resync(&tabs, &s, now);
        // "🔴 api" timed out, and landed: its echo came.
        tracker.answer_lost("w1:t1", "🔴 api");
        assert!(tracker.take_echo("w1:t1", "🔴 api", later(100), &s));
        tabs[0].label = "🔴 api".into();
        tabs[0].status = Status::Working;
        let plan = tracker.resync(&tabs, &s, later(1000));
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.take_echo("w1:t1", "🟡 api", later(1100), &s));
        // A plugin writes its own status icon back over cowbell's.
        tabs[0].label = "🔴 api".into();
        let plan = tracker.resync(&tabs, &s, later(2000));
        assert!(
            plan.notes
                .iter()
                .any(|note| matches!(note, Note::Fight { .. })),
            "{:?}",
            plan.notes
        );
    }

    /// An old echo (a new subscription's replay) of a label cowbell sent
    /// again, whose answer was lost and which herdr never applied, confirms
    /// it: the tab's real label, an older one of cowbell's, is still its own.
    #[test]
    fn a_rename_confirmed_by_an_old_echo_leaves_no_foreign_rename() {
        let s = settings();
        let now = Instant::now();
        let later = |ms| now + Duration::from_millis(ms);
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = tracking(&mut tabs, &s, now);
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        tabs[0].status = Status::Working;
        let plan = tracker.resync(&tabs, &s, later(1000));
        tracker.confirm("w1:t1", &plan.renames[0].label);
        assert!(tracker.take_echo("w1:t1", "🟡 api", later(1000), &s));
        tabs[0].label = "🟡 api".into();
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, later(2000));
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        tracker.answer_lost("w1:t1", "🔴 api");
        // The replayed echo of the first "🔴 api".
        assert!(tracker.take_echo("w1:t1", "🔴 api", later(4000), &s));
        let plan = tracker.resync(&tabs, &s, later(5000));
        assert_eq!(plan.notes, []);
        assert_eq!(tracker.tabs["w1:t1"].base, "api");
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
    }

    /// A renamer's mark put in front of a label whose answer was lost
    /// (herdr applied it; its echo is still on the way): the icon inside
    /// is cowbell's all the same (see the test below).
    #[test]
    fn a_mark_put_in_front_of_a_label_whose_answer_was_lost_keeps_the_icon_out() {
        let s = settings();
        let now = Instant::now();
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&[tab("w1:t1", 1, "api", Status::Blocked)], &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        tracker.answer_lost("w1:t1", "🔴 api");
        tracker.rename_failed("w1:t1", "🔴 api", Some(now + Duration::from_secs(3)));
        let tabs = [tab("w1:t1", 1, "★ 🔴 api", Status::Blocked)];
        tracker.resync(&tabs, &s, now + Duration::from_millis(2500));
        assert_eq!(tracker.tabs["w1:t1"].base, "★ api");
        let restore = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(restore[0].label, "★ api");
    }

    /// A renamer that puts its mark in front of whatever the tab shows
    /// wraps cowbell's label; the icon inside is cowbell's, not the name's.
    #[test]
    fn a_mark_put_in_front_of_cowbells_label_keeps_the_icon_out_of_the_base() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let now = Instant::now();
        for expected in ["★ api", "★ ★ api"] {
            let plan = tracker.resync(&tabs, &s, now);
            let label = plan.renames[0].label.clone();
            tracker.confirm("w1:t1", &label);
            tabs[0].label = format!("★ {label}");
            tracker.resync(&tabs, &s, now);
            assert_eq!(tracker.tabs["w1:t1"].base, expected);
        }
        // Turned off in a cool-down, with the rival's label on the tab.
        let renames = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(renames[0].label, "★ ★ api");
        // A name that merely ends like the label is a name (no icon in it).
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Idle)];
        tracker.resync(&tabs, &s, now);
        tabs[0].label = "my api".into();
        tracker.resync(&tabs, &s, now);
        assert_eq!(tracker.tabs["w1:t1"].base, "my api");
    }

    /// After a dropped subscription, herdr replays its buffer of old events
    /// (PROTOCOL.md, Replay). An old echo of a label that is also the newest
    /// one sent (its rename lost with the connection) must not confirm it.
    #[test]
    fn a_replayed_old_echo_does_not_confirm_a_rename_herdr_never_got() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let now = Instant::now();
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.take_echo("w1:t1", "api", now, &s));
        // Blocked again: "🔴 api" is queued; the connection drops before
        // it is sent (`disconnected` clears the queue).
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        // The new subscription replays the old events.
        let later = now + Duration::from_secs(2);
        tracker.take_echo("w1:t1", "🔴 api", later, &s);
        tracker.take_echo("w1:t1", "api", later, &s);
        // Nobody renamed the tab: it still shows "api".
        let plan = tracker.resync(&tabs, &s, later);
        assert!(
            !plan
                .notes
                .iter()
                .any(|n| matches!(n, Note::Fight { .. } | Note::NewBase { .. })),
            "{:?}",
            plan.notes
        );
    }

    /// The same replay while a tab is being given its number back: the
    /// record goes, and the tab keeps cowbell's icon as a "name".
    #[test]
    fn a_replayed_old_echo_does_not_let_go_of_a_tab_still_showing_the_icon() {
        let (mut s, mut tabs, mut tracker, now) = auto_named_with_icon();
        assert!(tracker.take_echo("w1:t1", "🔴 1", now, &s));
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.take_echo("w1:t1", "1", now, &s));
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert!(tracker.take_echo("w1:t1", "🔴 1", now, &s));
        assert_eq!(tabs[0].label, "🔴 1");
        // include_auto_named off: "1" is queued, lost with the connection.
        s.include_auto_named = false;
        assert_eq!(renames(&tracker.resync(&tabs, &s, now)), [("w1:t1", "1")]);
        let later = now + Duration::from_secs(2);
        for old in ["🔴 1", "1", "🔴 1"] {
            tracker.take_echo("w1:t1", old, later, &s);
        }
        // The tab still shows "🔴 1": the number must still be given back.
        let plan = tracker.resync(&tabs, &s, later);
        assert_eq!(
            renames(&plan),
            [("w1:t1", "1")],
            "record: {:?}",
            tracker.tabs.get("w1:t1")
        );
    }

    /// (an `off` in that moment, or a daemon killed then and `off` after).
    #[test]
    fn a_restore_unwraps_a_mark_put_in_front_since_the_last_look() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let now = Instant::now();
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(tabs[0].label, "🔴 api");
        tabs[0].label = "★ 🔴 api".into();
        let renames = tracker.restore_plan(&tabs, &s.labeler, false, now);
        assert_eq!(renames.first().map(|r| r.label.as_str()), Some("★ api"));
    }

    /// A word that ends with cowbell's label is someone's name, not a mark
    /// put in front of it: "Hey! api" with the icon "!".
    #[test]
    fn a_name_ending_with_cowbells_label_is_not_unwrapped() {
        let mut config = Config::default();
        config.icons[Status::Blocked.index()] = Some("!".into());
        let s = Settings::from_config(&config, Timing::REAL, 1);
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let now = Instant::now();
        let plan = tracker.resync(&tabs, &s, now);
        apply(&mut tracker, &mut tabs, &plan.renames);
        assert_eq!(tabs[0].label, "! api");
        tabs[0].label = "Hey! api".into();
        // off (or a daemon killed before it looked): the name comes back.
        let restore = tracker.clone().restore_plan(&tabs, &s.labeler, false, now);
        assert!(restore.is_empty(), "off renames to {restore:?}");
        // the daemon's resync: the base is the person's name.
        tracker.resync(&tabs, &s, now + Duration::from_secs(100));
        assert_eq!(tracker.tabs["w1:t1"].base, "Hey! api");
    }

    /// A new tab that a fresh herdr session gave an old tab's id
    /// (README: "gets its icon at once") and that a renamer then fights
    /// must get the spec's first cool-down, 60 s, not the old tab's 15 min.
    #[test]
    fn a_new_tab_on_a_reused_id_gets_a_sixty_second_first_cooldown() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (_, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        // The old tab had reached the cap: a 15 min cool-down runs.
        {
            let fight = &mut tracker.tabs.get_mut("w1:t1").unwrap().fight;
            let until = now + Duration::from_secs(890);
            fight.cooldown_until = Some(until);
            fight.last_cooldown = Some((until, Duration::from_secs(900)));
            fight.level = 5;
        }
        // A fresh herdr session: a new tab "build" has the id.
        let mut now = now + Duration::from_secs(31);
        tracker.looked_away = true;
        let mut tabs = vec![tab("w1:t1", 1, "build", Status::Blocked)];
        // A renamer strips cowbell's icon after every rename of the new tab.
        let mut seconds = None;
        for _ in 0..5 {
            let plan = tracker.resync(&tabs, &s, now);
            apply(&mut tracker, &mut tabs, &plan.renames);
            for note in &plan.notes {
                if let Note::Cooldown { seconds: s, .. } = note {
                    seconds = Some(*s);
                }
            }
            now += Duration::from_millis(50);
            tabs[0].label = "build".into();
            now += Duration::from_millis(100);
        }
        assert_eq!(seconds, Some(60), "the new tab's first cool-down");
    }

    /// A replayed (old) echo of an earlier rename with the same label
    /// must not make a refused rename skip its retry wait.
    #[test]
    fn an_old_echo_of_the_same_label_does_not_free_a_refused_rename() {
        let s = settings();
        let mut now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "api", Status::Blocked),
            tab("w1:t2", 2, "web", Status::Done),
        ];
        let mut tracker = Tracker::default();
        // "🔴 api" (A1), then "api" (idle), both applied with their echoes.
        for status in [Status::Blocked, Status::Idle] {
            tabs[0].status = status;
            let plan = tracker.resync(&tabs, &s, now);
            for r in &plan.renames {
                assert!(tracker.take_echo(&r.tab_id, &r.label, now, &s));
            }
            apply(&mut tracker, &mut tabs, &plan.renames);
            now += Duration::from_secs(2);
        }
        assert_eq!(tabs[0].label, "api");
        // Blocked again: "🔴 api" (A2) goes out ...
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        // ... while the replay of a new subscription brings A1's old
        // tab_renamed "🔴 api" (PROTOCOL.md: Replay) ...
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        // ... and herdr refuses A2: it did not land, herdr still shows "api".
        let retry = now + Duration::from_secs(1);
        tracker.rename_failed("w1:t1", "🔴 api", Some(retry));
        // A resync before the retry (a spinner frame, another tab's event)
        // must leave the tab alone, as a_tab_whose_rename_failed_waits_for_its_retry.
        let plan = tracker.resync(&tabs, &s, now + Duration::from_millis(250));
        assert_eq!(
            renames(&plan),
            Vec::<(&str, &str)>::new(),
            "refused rename resent before its retry"
        );
        assert_eq!(plan.waiting, 1);
    }

    /// README: a tab renamed when the daemon first looks "starts afresh"
    /// unless cowbell renamed it in the 30 s before, also when the old
    /// tab's cool-down has ended but its doubling would still apply: a new
    /// tab on a reused id gets 60 s first, not the old tab's 120 s.
    #[test]
    fn a_new_tab_on_a_reused_id_after_the_old_cooldown_ended_gets_sixty_seconds() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (_, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        assert_eq!(tracker.tabs["w1:t1"].fight.level, 1);
        // The 60 s cool-down has run out (no resync since), and a fresh
        // herdr session gave a new tab "build" the id.
        let now = now + Duration::from_secs(61);
        assert!(!tracker.tabs["w1:t1"].fight.cooling_down(now));
        tracker.looked_away = true;
        let mut tabs = vec![tab("w1:t1", 1, "build", Status::Blocked)];
        let (_, seconds, _) = hostile_from(&mut tracker, &mut tabs, &s, "build", 5, now);
        assert_eq!(seconds, Some(60), "the new tab's first cool-down");
    }

    /// A name given while a cool-down runs (no reconnect) is the new base,
    /// but the cool-down runs on: cowbell leaves the tab alone for its 60 s
    /// and keeps the doubling and the count.
    #[test]
    fn a_rename_during_a_cooldown_leaves_the_cooldown_running() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (_, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        let before = tracker.tabs["w1:t1"].fight.clone();
        assert!(before.cooling_down(now));
        tabs[0].label = "web".into();
        let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(1));
        assert_eq!(
            renames(&plan),
            Vec::<(&str, &str)>::new(),
            "icon back in a cool-down"
        );
        let record = &tracker.tabs["w1:t1"];
        assert_eq!(record.base, "web");
        assert_eq!(
            (
                record.fight.cooldown_until,
                record.fight.level,
                record.fight.total
            ),
            (before.cooldown_until, before.level, before.total)
        );
    }

    /// A daemon killed after a rename it never saved: its successor's
    /// first look finds cowbell's own label, more than 30 s after the last
    /// rename it knows of. That is no rename by anyone else: the tab keeps
    /// its fight history (README: "Fight history survives a daemon
    /// restart").
    #[test]
    fn cowbells_own_label_at_the_first_look_keeps_the_fight_history() {
        let s = settings();
        let mut tracker = Tracker::default();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let (_, now) = hostile(&mut tracker, &mut tabs, &s, "api", 10);
        // The cool-down ends and the icon comes back.
        let now = now + Duration::from_secs(61);
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        let before = tracker.tabs["w1:t1"].fight.clone();
        assert_eq!((before.level, before.total), (1, 3));
        // 40 s on, the tab is done; the daemon renames it and is killed
        // before it saves. The next one reads the state back.
        tracker.mark_left_by_killed_daemon();
        tracker.looked_away = true;
        tabs[0].status = Status::Done;
        tabs[0].label = "🔵 api".into();
        let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(40));
        assert_eq!(plan.notes, Vec::new());
        let fight = &tracker.tabs["w1:t1"].fight;
        assert_eq!(
            (fight.level, fight.total, fight.last_cooldown),
            (before.level, before.total, before.last_cooldown)
        );
    }

    /// A rename whose answer never came and whose echo has not come either
    /// may not have landed: it waits for its retry like a refused one
    /// (spinner frames and other tabs' events must not resend it).
    #[test]
    fn a_rename_whose_answer_was_lost_without_its_echo_waits_for_its_retry() {
        let s = settings();
        let now = Instant::now();
        let tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = Tracker::default();
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        // It timed out: the loop calls answer_lost, then rename_failed.
        tracker.answer_lost("w1:t1", "🔴 api");
        let retry = now + Duration::from_secs(1);
        tracker.rename_failed("w1:t1", "🔴 api", Some(retry));
        let plan = tracker.resync(&tabs, &s, now + Duration::from_millis(500));
        assert_eq!(renames(&plan), Vec::<(&str, &str)>::new());
        assert_eq!(plan.waiting, 1);
    }

    /// Only the newest rename's echo says it landed: an older rename of the
    /// same label that landed after its answer was lost must not free a
    /// refused one.
    #[test]
    fn an_older_landed_rename_of_the_same_label_does_not_free_a_refused_one() {
        let s = settings();
        let mut now = Instant::now();
        let mut tabs = vec![tab("w1:t1", 1, "api", Status::Blocked)];
        let mut tracker = Tracker::default();
        // "🔴 api": echo first, then its answer lost; it landed.
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        assert!(tracker.take_echo("w1:t1", "🔴 api", now, &s));
        tracker.answer_lost("w1:t1", "🔴 api");
        tabs[0].label = "🔴 api".into();
        now += Duration::from_secs(2);
        // "api" (idle), applied.
        tabs[0].status = Status::Idle;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "api")]);
        apply(&mut tracker, &mut tabs, &plan.renames);
        now += Duration::from_secs(2);
        // Blocked again: herdr refuses the new "🔴 api".
        tabs[0].status = Status::Blocked;
        let plan = tracker.resync(&tabs, &s, now);
        assert_eq!(renames(&plan), [("w1:t1", "🔴 api")]);
        let retry = now + Duration::from_secs(1);
        tracker.rename_failed("w1:t1", "🔴 api", Some(retry));
        let plan = tracker.resync(&tabs, &s, now + Duration::from_millis(250));
        assert_eq!(
            renames(&plan),
            Vec::<(&str, &str)>::new(),
            "refused rename resent before its retry"
        );
    }

    /// A spinner frame beside someone's new name for another tab is news:
    /// the resync is logged and saved (a quiet one is neither), or the new
    /// base is lost to a daemon killed before the next save.
    #[test]
    fn a_frame_beside_a_new_name_is_no_quiet_resync() {
        let mut s = settings();
        s.spinner = true;
        let now = Instant::now();
        let mut tabs = vec![
            tab("w1:t1", 1, "a", Status::Working),
            tab("w1:t2", 2, "b", Status::Idle),
        ];
        let mut tracker = tracking(&mut tabs, &s, now);
        tracker.advance_spinner();
        tabs[1].label = "docs".into();
        let plan = tracker.resync(&tabs, &s, now + Duration::from_secs(1));
        assert_eq!(plan.frames, 1);
        assert_eq!(renames(&plan).len(), 1);
        assert!(!plan.notes.is_empty());
        assert!(!plan.is_quiet(), "{plan:?}");
    }
}
