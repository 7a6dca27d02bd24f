//! The invariants every fault test and the soak end with (issue 5): the
//! daemon is alive, every tab shows the icon of its status, and after a
//! restore every tab carries exactly the name it had before cowbell
//! touched it.
//!
//! The test keeps the names itself (`Names`): the name a tab was created
//! with, replaced by every rename a user or another plugin makes. Statuses
//! come from the fake server, which is the truth about them (a restart
//! resets them, focusing a tab turns `done` into `idle`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::cowbell::Cowbell;
use super::fake_herdr::{FakeHerdr, Snapshot};

/// The default preset's icon for a rolled-up status ("emoji").
pub fn icon(status: &str) -> &'static str {
    match status {
        "blocked" => "🔴",
        "done" => "🔵",
        "working" => "🟡",
        _ => "",
    }
}

/// `icon + " " + base`, or the base alone when the status shows no icon.
pub fn wanted(status: &str, base: &str) -> String {
    match icon(status) {
        "" => base.to_string(),
        icon => format!("{icon} {base}"),
    }
}

/// What a configuration makes tabs show, for the soak's configurations;
/// `Shows::default()` is the default one, as `wanted` knows it.
#[derive(Clone, Debug)]
pub struct Shows {
    /// Status to icon; a status missing here shows none.
    pub icons: BTreeMap<&'static str, &'static str>,
    pub separator: String,
    /// README: "working tabs show a braille spinner instead of the static
    /// icon", whichever frame is up.
    pub spinner: bool,
    /// `include_auto_named`: a tab herdr named by position gets an icon in
    /// front of its position too (a restore gives it the position, as
    /// `name_mismatches` wants anyway).
    pub auto_named: bool,
}

/// The spinner's braille frames (README, Limitations: "`⠹ build`").
pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl Default for Shows {
    fn default() -> Shows {
        let statuses = ["blocked", "done", "working"];
        Shows {
            icons: statuses.into_iter().map(|s| (s, icon(s))).collect(),
            separator: " ".into(),
            spinner: false,
            auto_named: false,
        }
    }
}

impl Shows {
    /// The label a tab should show; `<spinner>` stands for any frame.
    pub fn wanted(&self, status: &str, base: &str) -> String {
        let icon = match self.spinner && status == "working" {
            true => "<spinner>",
            false => self.icons.get(status).copied().unwrap_or(""),
        };
        match icon {
            "" => base.to_string(),
            icon => format!("{icon}{}{base}", self.separator),
        }
    }

    /// `label` is `want` (from `wanted`), with any frame for `<spinner>`.
    fn accepts(&self, want: &str, label: &str) -> bool {
        match want.strip_prefix("<spinner>") {
            Some(rest) => SPINNER.iter().any(|f| label.strip_prefix(f) == Some(rest)),
            None => label == want,
        }
    }
}

/// The real name of every tab that has one. A tab missing here was named
/// by herdr (its label is its position) and cowbell must leave it alone.
#[derive(Clone, Debug, Default)]
pub struct Names(pub BTreeMap<String, String>);

impl Names {
    pub fn new() -> Names {
        Names::default()
    }

    pub fn set(&mut self, tab: &str, name: &str) {
        self.0.insert(tab.to_string(), name.to_string());
    }

    pub fn forget(&mut self, tab: &str) {
        self.0.remove(tab);
    }

    pub fn get(&self, tab: &str) -> Option<&str> {
        self.0.get(tab).map(String::as_str)
    }

    /// Adds a tab to the fixture's workspace and remembers its name.
    pub fn tab(&mut self, cb: &Cowbell, name: Option<&str>) -> (String, String) {
        let (tab, pane) = cb.tab(name);
        if let Some(name) = name {
            self.set(&tab, name);
        }
        (tab, pane)
    }

    /// A rename by the user (or another plugin): it is the tab's name now.
    pub fn rename(&mut self, herdr: &FakeHerdr, tab: &str, name: &str) {
        herdr.rename_tab(tab, name);
        self.set(tab, name);
    }

    /// Every tab whose label is not what it should show: (tab, have, want).
    pub fn icon_mismatches(&self, snapshot: &Snapshot) -> Vec<(String, String, String)> {
        self.icon_mismatches_with(snapshot, &Shows::default())
    }

    /// The same under the configuration `shows`.
    pub fn icon_mismatches_with(
        &self,
        snapshot: &Snapshot,
        shows: &Shows,
    ) -> Vec<(String, String, String)> {
        let mut wrong = Vec::new();
        for tab in &snapshot.tabs {
            let number = tab.number.to_string();
            let want = match self.get(&tab.tab_id) {
                Some(base) => shows.wanted(&tab.status, base),
                None if shows.auto_named => shows.wanted(&tab.status, &number),
                None => number,
            };
            if !shows.accepts(&want, &tab.label) {
                wrong.push((tab.tab_id.clone(), tab.label.clone(), want));
            }
        }
        wrong
    }

    /// Every tab whose label is not its own name (after a restore).
    pub fn name_mismatches(&self, snapshot: &Snapshot) -> Vec<(String, String, String)> {
        let mut wrong = Vec::new();
        for tab in &snapshot.tabs {
            let want = match self.get(&tab.tab_id) {
                Some(base) => base.to_string(),
                None => tab.number.to_string(),
            };
            if tab.label != want {
                wrong.push((tab.tab_id.clone(), tab.label.clone(), want));
            }
        }
        wrong
    }
}

/// Shortens long labels in failure messages.
fn short(wrong: &[(String, String, String)]) -> String {
    let cut = |s: &str| {
        if s.chars().count() > 60 {
            format!(
                "{}… ({} bytes)",
                s.chars().take(60).collect::<String>(),
                s.len()
            )
        } else {
            s.to_string()
        }
    };
    let lines: Vec<String> = wrong
        .iter()
        .take(20)
        .map(|(tab, have, want)| format!("  {tab}: have {:?}, want {:?}", cut(have), cut(want)))
        .collect();
    format!("{} tabs wrong:\n{}", wrong.len(), lines.join("\n"))
}

/// The last lines of the log, for failure messages.
pub fn log_tail(cb: &Cowbell, lines: usize) -> String {
    let log = cb.log();
    let all: Vec<&str> = log.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..]
        .iter()
        .map(|line| line.chars().take(300).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until every tab shows the icon of its status; `Err` says which
/// did not.
pub fn wait_icons(cb: &Cowbell, names: &Names, timeout: Duration) -> Result<(), String> {
    wait_icons_with(cb, names, &Shows::default(), timeout)
}

/// The same under the configuration `shows`.
pub fn wait_icons_with(
    cb: &Cowbell,
    names: &Names,
    shows: &Shows,
    timeout: Duration,
) -> Result<(), String> {
    let wrong = |s: &Snapshot| names.icon_mismatches_with(s, shows);
    if cb.herdr.wait_until(timeout, |s| wrong(s).is_empty()) {
        return Ok(());
    }
    Err(short(&wrong(&cb.herdr.snapshot())))
}

/// Invariant 2: every tab shows the icon of its status within `timeout`.
pub fn assert_icons(cb: &Cowbell, names: &Names, timeout: Duration) {
    if let Err(why) = wait_icons(cb, names, timeout) {
        panic!(
            "icons not right within {timeout:?}: {why}\nlog (last 40 lines):\n{}",
            log_tail(cb, 40)
        );
    }
}

/// Invariant 1: exactly one daemon runs for this server.
pub fn assert_one_daemon(cb: &Cowbell) -> u32 {
    // A replaced daemon may take a moment to go.
    let ok = cb
        .herdr
        .wait_until(Duration::from_secs(3), |_| cb.daemons().len() == 1);
    let daemons = cb.daemons();
    assert!(
        ok,
        "expected exactly one daemon, found {daemons:?}\nlog (last 40 lines):\n{}",
        log_tail(cb, 40)
    );
    daemons[0]
}

/// Invariant 3: `cowbell off` gives every tab exactly its own name back and
/// leaves no daemon behind.
pub fn assert_restore(cb: &Cowbell, names: &Names) {
    let outcome = cb.run_as(&["off"], "action");
    assert!(
        outcome.status.success(),
        "`cowbell off` failed: {}\nlog:\n{}",
        outcome.stderr,
        log_tail(cb, 40)
    );
    let ok = cb.herdr.wait_until(Duration::from_secs(2), |s| {
        names.name_mismatches(s).is_empty()
    });
    assert!(
        ok,
        "names not restored: {}\noff said: {}{}\nlog (last 40 lines):\n{}",
        short(&names.name_mismatches(&cb.herdr.snapshot())),
        outcome.stdout,
        outcome.stderr,
        log_tail(cb, 40)
    );
    assert!(
        cb.wait_for_no_daemon(Duration::from_secs(3)),
        "a daemon still runs after `off`: {:?}",
        cb.daemons()
    );
}

/// All three, in order: one daemon, icons right within 2 s, a clean restore.
pub fn assert_invariants(cb: &Cowbell, names: &Names) {
    assert_one_daemon(cb);
    assert_icons(cb, names, Duration::from_secs(2));
    assert_restore(cb, names);
}
