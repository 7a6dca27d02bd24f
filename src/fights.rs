//! Fight detection: noticing another renamer that undoes cowbell's renames.
//!
//! Pure: it takes the time as an argument and never reads a clock. Per tab,
//! a foreign rename within `fight_window` (30 s) of cowbell's own last rename
//! of that tab is a fight. Three fights within `fight_span` (120 s) start a
//! cool-down during which cowbell leaves the tab alone: 60 s the first time,
//! doubling with each further cool-down of that tab up to 15 min.
//!
//! The doubling resets after a quiet period: when the first of the three
//! fights that start a new cool-down comes at least as long after the end of
//! the last cool-down as that cool-down lasted, the new one is 60 s again.
//! A renamer that has gone away for that long is treated as new.

use std::time::{Duration, Instant};

/// The windows and lengths of the rules, shortened together for tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub fight_window: Duration,
    pub fight_span: Duration,
    pub first_cooldown: Duration,
    pub max_cooldown: Duration,
}

pub const FIGHTS_FOR_COOLDOWN: usize = 3;

impl Timing {
    pub const REAL: Timing = Timing {
        fight_window: Duration::from_secs(30),
        fight_span: Duration::from_secs(120),
        first_cooldown: Duration::from_secs(60),
        max_cooldown: Duration::from_secs(15 * 60),
    };

    /// Every duration divided by `scale` (see `COWBELL_TIME_SCALE`).
    pub fn scaled(scale: u32) -> Timing {
        let shrink = |d: Duration| d / scale.max(1);
        Timing {
            fight_window: shrink(Self::REAL.fight_window),
            fight_span: shrink(Self::REAL.fight_span),
            first_cooldown: shrink(Self::REAL.first_cooldown),
            max_cooldown: shrink(Self::REAL.max_cooldown),
        }
    }

    /// Length of the cool-down number `level` (0 for the first).
    pub fn cooldown(&self, level: u32) -> Duration {
        let factor = 1u32 << level.min(16);
        self.first_cooldown
            .saturating_mul(factor)
            .min(self.max_cooldown)
    }
}

/// What a foreign rename meant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    NotAFight,
    Fight { recent: usize },
    CooldownStarted { until: Instant },
}

/// One tab's fight history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FightRecord {
    /// When cowbell last renamed this tab (spinner frames excluded).
    pub last_own_rename: Option<Instant>,
    /// Fights since the last cool-down started, oldest first.
    pub fights: Vec<Instant>,
    pub cooldown_until: Option<Instant>,
    /// End and length of the last cool-down, for the doubling and its reset.
    pub last_cooldown: Option<(Instant, Duration)>,
    /// How many cool-downs in a row, the exponent of the doubling.
    pub level: u32,
    /// Every fight this tab has seen, for `cowbell status`.
    pub total: u32,
}

impl FightRecord {
    pub fn own_rename(&mut self, now: Instant) {
        self.last_own_rename = Some(now);
    }

    pub fn cooling_down(&self, now: Instant) -> bool {
        self.cooldown_until.is_some_and(|until| now < until)
    }

    /// Whether a foreign rename now could answer cowbell's own: cowbell
    /// renamed the tab within the fight window.
    pub fn provoked(&self, now: Instant, timing: &Timing) -> bool {
        self.last_own_rename
            .is_some_and(|own| now.saturating_duration_since(own) <= timing.fight_window)
    }

    /// Records a rename that was not cowbell's and says what it was.
    pub fn foreign_rename(&mut self, now: Instant, timing: &Timing) -> Verdict {
        if self.cooling_down(now) {
            // cowbell is not renaming this tab now, so nobody is fighting it.
            return Verdict::NotAFight;
        }
        if !self.provoked(now, timing) {
            return Verdict::NotAFight;
        }
        self.fights
            .retain(|at| now.saturating_duration_since(*at) <= timing.fight_span);
        self.fights.push(now);
        self.total = self.total.saturating_add(1);
        if self.fights.len() < FIGHTS_FOR_COOLDOWN {
            return Verdict::Fight {
                recent: self.fights.len(),
            };
        }
        if let Some((end, length)) = self.last_cooldown {
            let first = self.fights[0];
            if first.saturating_duration_since(end) >= length {
                self.level = 0;
            }
        }
        let length = timing.cooldown(self.level);
        let until = now + length;
        self.level = self.level.saturating_add(1);
        self.cooldown_until = Some(until);
        self.last_cooldown = Some((until, length));
        self.fights.clear();
        Verdict::CooldownStarted { until }
    }

    /// Forgets a cool-down that has ended, so it is not reported as running.
    pub fn expire(&mut self, now: Instant) {
        if self.cooldown_until.is_some_and(|until| now >= until) {
            self.cooldown_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing::REAL;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// cowbell renames at `at`, the other side answers `delay` later.
    fn exchange(record: &mut FightRecord, start: Instant, at: f64, delay: f64) -> Verdict {
        record.own_rename(start + secs(at));
        record.foreign_rename(start + secs(at + delay), &T)
    }

    #[test]
    fn two_fights_are_tolerated_the_third_starts_sixty_seconds() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        assert_eq!(
            exchange(&mut record, t0, 0.0, 0.05),
            Verdict::Fight { recent: 1 }
        );
        assert_eq!(
            exchange(&mut record, t0, 1.0, 0.05),
            Verdict::Fight { recent: 2 }
        );
        assert!(!record.cooling_down(t0 + secs(1.1)));
        let verdict = exchange(&mut record, t0, 2.0, 0.05);
        assert_eq!(
            verdict,
            Verdict::CooldownStarted {
                until: t0 + secs(2.05) + secs(60.0)
            }
        );
        assert!(record.cooling_down(t0 + secs(62.0)));
        assert_eq!(record.total, 3, "status reports every fight");
        assert!(!record.cooling_down(t0 + secs(62.05)));
    }

    #[test]
    fn each_cooldown_doubles_up_to_fifteen_minutes() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        let mut now = 0.0;
        let mut lengths = Vec::new();
        for _ in 0..7 {
            let mut verdict = Verdict::NotAFight;
            for _ in 0..3 {
                verdict = exchange(&mut record, t0, now, 0.05);
                now += 0.1;
            }
            let Verdict::CooldownStarted { until } = verdict else {
                panic!("{verdict:?}")
            };
            let length = until.duration_since(t0 + secs(now - 0.05)).as_secs_f64();
            lengths.push(length.round() as u64);
            // The renamer is still there when the cool-down ends.
            now = until.duration_since(t0).as_secs_f64();
        }
        assert_eq!(lengths, [60, 120, 240, 480, 900, 900, 900]);
    }

    #[test]
    fn the_thirty_second_window_is_inclusive() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        assert_eq!(
            exchange(&mut record, t0, 0.0, 30.0),
            Verdict::Fight { recent: 1 }
        );
        assert_eq!(exchange(&mut record, t0, 40.0, 30.001), Verdict::NotAFight);
        assert_eq!(record.fights.len(), 1);
    }

    #[test]
    fn a_slow_renamer_is_never_a_fight() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        for round in 0..100 {
            let at = round as f64 * 35.0;
            assert_eq!(
                exchange(&mut record, t0, at, 35.0 - 0.001 + 0.002),
                Verdict::NotAFight
            );
        }
        assert!(record.cooldown_until.is_none());
    }

    #[test]
    fn fights_older_than_the_span_do_not_count() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        exchange(&mut record, t0, 0.0, 1.0);
        exchange(&mut record, t0, 60.0, 1.0);
        // 121 s after the first fight: it has left the 120 s span.
        assert_eq!(
            exchange(&mut record, t0, 121.5, 0.5),
            Verdict::Fight { recent: 2 }
        );
        // Exactly 120 s after the second one still counts.
        assert!(matches!(
            exchange(&mut record, t0, 180.0, 1.0),
            Verdict::CooldownStarted { .. }
        ));
    }

    #[test]
    fn no_fights_are_counted_during_a_cooldown() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        for at in [0.0, 1.0, 2.0] {
            exchange(&mut record, t0, at, 0.1);
        }
        let until = record.cooldown_until.unwrap();
        assert_eq!(
            record.foreign_rename(t0 + secs(10.0), &T),
            Verdict::NotAFight
        );
        assert_eq!(record.cooldown_until, Some(until));
        assert!(record.fights.is_empty());
    }

    #[test]
    fn the_doubling_resets_after_a_quiet_period_as_long_as_the_last_cooldown() {
        let t0 = Instant::now();
        let mut record = FightRecord::default();
        for at in [0.0, 1.0, 2.0] {
            exchange(&mut record, t0, at, 0.1);
        }
        // First cool-down: 60 s, ends at 62.1 s. Fights right after: doubled.
        for at in [62.2, 63.0, 64.0] {
            exchange(&mut record, t0, at, 0.1);
        }
        let (end, length) = record.last_cooldown.unwrap();
        assert_eq!(length, secs(120.0));
        // Quiet for less than 120 s after it: still doubling (240 s).
        let start = end.duration_since(t0).as_secs_f64() + 119.0;
        for offset in [0.0, 1.0, 2.0] {
            exchange(&mut record, t0, start + offset, 0.1);
        }
        let (end, length) = record.last_cooldown.unwrap();
        assert_eq!(length, secs(240.0));
        // Quiet for the whole 240 s: back to 60 s.
        let start = end.duration_since(t0).as_secs_f64() + 240.0;
        for offset in [0.0, 1.0, 2.0] {
            exchange(&mut record, t0, start + offset, 0.1);
        }
        assert_eq!(record.last_cooldown.unwrap().1, secs(60.0));
    }

    #[test]
    fn a_rename_without_an_own_rename_is_not_a_fight() {
        let mut record = FightRecord::default();
        assert_eq!(
            record.foreign_rename(Instant::now(), &T),
            Verdict::NotAFight
        );
        assert_eq!(record, FightRecord::default());
    }

    #[test]
    fn scaled_timing_divides_every_duration() {
        let t = Timing::scaled(60);
        assert_eq!(t.fight_window, secs(0.5));
        assert_eq!(t.first_cooldown, secs(1.0));
        assert_eq!(t.max_cooldown, secs(15.0));
        assert_eq!(Timing::scaled(0), Timing::REAL);
    }
}
