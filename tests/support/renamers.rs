//! Other renamers for the fight tests: a thread that answers each of
//! cowbell's `tab.rename` requests for one tab with a rename of its own,
//! made through the fake server (so herdr emits `tab_renamed` for it, as
//! it would for another plugin's rename).
//!
//! The thread watches the fake server's request log, so it sees every one
//! of cowbell's renames (the fake records a request before it applies it)
//! and none of its own (it renames the way a user or another plugin does,
//! which is no request of cowbell's). It runs inside `std::thread::scope`,
//! so it can borrow the server, and a guard stops it if the test panics.
#![allow(dead_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::fake_herdr::FakeHerdr;

/// How often the renamer looks at the request log.
const POLL: Duration = Duration::from_millis(5);

/// The state shared between the test and the renamer thread.
pub struct Renamer<'a> {
    herdr: &'a FakeHerdr,
    tab: String,
    delay: Duration,
    answer: Box<dyn Fn(&str) -> String + Send + Sync + 'a>,
    stop: AtomicBool,
    paused: AtomicBool,
    answered: AtomicUsize,
    /// When each answer was made.
    answers: Mutex<Vec<Instant>>,
}

impl<'a> Renamer<'a> {
    /// Renames it has made so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    pub fn answer_times(&self) -> Vec<Instant> {
        self.answers.lock().unwrap().clone()
    }

    /// While paused it notes cowbell's renames but does not answer them.
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    fn run(&self) {
        let mut seen = self.herdr.renames_of(&self.tab);
        while !self.stop.load(Ordering::SeqCst) {
            let now_seen = self.herdr.renames_of(&self.tab);
            if now_seen == seen {
                thread::sleep(POLL);
                continue;
            }
            seen = now_seen;
            if self.paused.load(Ordering::SeqCst) {
                continue;
            }
            // Sleep in small steps so a stop is not held up by a long delay.
            let until = Instant::now() + self.delay;
            while Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
                thread::sleep(until.saturating_duration_since(Instant::now()).min(POLL));
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            // The tab may have been closed by the test meanwhile.
            let Some(current) = self
                .herdr
                .tabs()
                .into_iter()
                .find(|t| t.tab_id == self.tab)
                .map(|t| t.label)
            else {
                return;
            };
            let label = (self.answer)(&current);
            self.herdr.rename_tab(&self.tab, &label);
            self.answered.fetch_add(1, Ordering::SeqCst);
            self.answers.lock().unwrap().push(Instant::now());
        }
    }
}

/// Stops the renamer when dropped, also while a failed assertion unwinds
/// (the scope would otherwise wait for the thread for ever).
struct StopOnDrop<'r, 'a>(&'r Renamer<'a>);

impl Drop for StopOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
    }
}

/// Runs `body` while a renamer answers every cowbell rename of `tab`,
/// `delay` after it, with the label `answer(current label)`.
pub fn with_renamer<'a, R>(
    herdr: &'a FakeHerdr,
    tab: &str,
    delay: Duration,
    answer: impl Fn(&str) -> String + Send + Sync + 'a,
    body: impl FnOnce(&Renamer<'a>) -> R,
) -> R {
    let renamer = Renamer {
        herdr,
        tab: tab.to_string(),
        delay,
        answer: Box::new(answer),
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        answered: AtomicUsize::new(0),
        answers: Mutex::new(Vec::new()),
    };
    thread::scope(|scope| {
        let renamer = &renamer;
        scope.spawn(move || renamer.run());
        let _guard = StopOnDrop(renamer);
        body(renamer)
    })
}
