//! The label model: which icon each status shows, how an icon, the separator
//! and a tab's base name make a label, and how a label is taken apart again.
//!
//! Everything here is pure (no I/O, no clock, no environment), so the rules
//! that keep icons from doubling are pinned down by the tests below. A label
//! is `icon + separator + base`, or just the base when the status shows no
//! icon. `strip` removes leading icons of every preset, the custom icons and
//! the spinner frames, so a name that went through another renamer, or
//! through an older configuration, gets exactly one icon back.

/// A tab's rolled-up state, as herdr names it. The variants are declared in
/// herdr's priority order, so the derived `Ord` makes the most urgent status
/// the smallest: a tab shows `min()` of its panes' statuses.
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord, Hash)]
pub enum Status {
    Blocked,
    Done,
    Working,
    Idle,
    Unknown,
}

impl Status {
    /// Every status, most urgent first.
    pub const ALL: [Status; 5] = [
        Status::Blocked,
        Status::Done,
        Status::Working,
        Status::Idle,
        Status::Unknown,
    ];

    /// The status herdr calls `name`; `None` for a name herdr may add later,
    /// which the caller then treats as it sees fit (usually as unknown).
    pub fn from_name(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|status| status.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Blocked => "blocked",
            Status::Done => "done",
            Status::Working => "working",
            Status::Idle => "idle",
            Status::Unknown => "unknown",
        }
    }

    /// The position in `ALL`, which is also the index into a preset's icons.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A named table of icons, one per status in the order of `Status::ALL`.
/// An empty icon means the status shows no icon and the label is the base.
#[derive(Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub summary: &'static str,
    pub icons: [&'static str; 5],
}

/// The built-in presets; the first one is the default.
///
/// `symbols` uses only characters without an emoji form (no ✔, ⚠ or ▶), so
/// no terminal draws them as colour emoji. `ascii` brackets its marks so they
/// do not read as part of a name like "!important". `nerd` uses Font Awesome
/// code points, which every Nerd Font release keeps at the same place.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "emoji",
        summary: "default: herdr's own sidebar colours",
        icons: ["🔴", "🔵", "🟡", "", ""],
    },
    Preset {
        name: "symbols",
        summary: "plain Unicode marks, no emoji",
        icons: ["●", "✓", "◐", "", ""],
    },
    Preset {
        name: "ascii",
        summary: "printable ASCII only, for minimal terminals",
        icons: ["[!]", "[+]", "[~]", "", ""],
    },
    Preset {
        name: "nerd",
        summary: "Nerd Font glyphs (needs a Nerd Font)",
        icons: ["\u{f06a}", "\u{f058}", "\u{f110}", "", ""],
    },
    Preset {
        name: "attention",
        summary: "only blocked and done tabs get an icon",
        icons: ["🔴", "🔵", "", "", ""],
    },
];

pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|preset| preset.name == name)
}

/// The frames a working tab cycles through when the spinner is on.
pub const SPINNER_FRAMES: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// Emoji may arrive with or without this variation selector, depending on
/// who typed or rewrote the name; both forms are the same icon.
pub const EMOJI_PRESENTATION: char = '\u{FE0F}';

/// An icon without its one trailing U+FE0F, as `strip` knows it in both
/// forms; `None` for what is no icon: an empty one would match every label,
/// and variation selectors alone show nothing.
pub fn bare_icon(icon: &str) -> Option<&str> {
    let bare = icon.strip_suffix(EMOJI_PRESENTATION).unwrap_or(icon);
    (!bare.chars().all(|c| c == EMOJI_PRESENTATION)).then_some(bare)
}

/// Composes and strips labels for one configuration.
///
/// Stripping is idempotent for every configuration: it stops only when no
/// known icon followed by a separator is left at the front. Stripping a
/// composed label gives back the stripped base, `strip(compose(i, b)) ==
/// strip(b)`, as long as no icon is another icon followed by a space or the
/// separator's first character, and more (say the icons "a" and "a b" with
/// the separator "|"): such a pair makes "a b|c" ambiguous, and the longer
/// icon wins. No two built-in icons are like that (`ambiguous_icons`).
#[derive(Clone, Debug, PartialEq)]
pub struct Labeler {
    icons: [String; 5],
    separator: String,
    /// Every icon `strip` removes, longest first, so "🔴\u{FE0F}" is tried
    /// before "🔴" and a longer custom icon before its own prefix.
    strippable_icons: Vec<String>,
    /// What may follow a strippable icon, longest first: the configured
    /// separator and a plain space (the one a person types by hand).
    strippable_separators: Vec<String>,
}

impl Labeler {
    /// `custom[i]` overrides the preset's icon for `Status::ALL[i]`;
    /// `Some("")` means that status shows no icon.
    pub fn new(preset: &Preset, custom: &[Option<String>; 5], separator: &str) -> Labeler {
        let icons: [String; 5] = std::array::from_fn(|index| match &custom[index] {
            Some(icon) => icon.clone(),
            None => preset.icons[index].to_string(),
        });

        let mut strippable_icons: Vec<String> = Vec::new();
        let known = PRESETS
            .iter()
            .flat_map(|preset| preset.icons.iter().copied())
            .chain(custom.iter().flatten().map(String::as_str))
            .chain(SPINNER_FRAMES.iter().copied());
        for icon in known {
            let Some(bare) = bare_icon(icon) else {
                continue;
            };
            insert_longest_first(&mut strippable_icons, bare.to_string());
            insert_longest_first(&mut strippable_icons, format!("{bare}{EMOJI_PRESENTATION}"));
        }

        let mut strippable_separators = vec![" ".to_string()];
        if !separator.is_empty() {
            insert_longest_first(&mut strippable_separators, separator.to_string());
        }

        Labeler {
            icons,
            separator: separator.to_string(),
            strippable_icons,
            strippable_separators,
        }
    }

    /// The icon `status` shows; "" when it shows none.
    pub fn icon(&self, status: Status) -> &str {
        &self.icons[status.index()]
    }

    /// `icon + separator + base`, or the base alone when `icon` is empty.
    ///
    /// An empty base still gets the separator ("🔴 "), so that stripping the
    /// label gives the empty base back rather than leaving "🔴", which on its
    /// own reads as a name.
    pub fn compose(&self, icon: &str, base: &str) -> String {
        if icon.is_empty() {
            return base.to_string();
        }
        let mut label = String::with_capacity(icon.len() + self.separator.len() + base.len());
        label.push_str(icon);
        label.push_str(&self.separator);
        label.push_str(base);
        label
    }

    pub fn label(&self, status: Status, base: &str) -> String {
        self.compose(self.icon(status), base)
    }

    /// The label of a working tab at spinner frame `frame`; any frame number
    /// is fine, it wraps around.
    pub fn spinner_label(&self, frame: usize, base: &str) -> String {
        self.compose(SPINNER_FRAMES[frame % SPINNER_FRAMES.len()], base)
    }

    /// `label` without its leading icons and their separators.
    ///
    /// An icon counts only when a separator follows it: "🔴alert" and a lone
    /// "🔴" are names and stay as they are, while "🔴 " strips to "". The
    /// loop repeats so that labels which already doubled ("🔴 🟡 api", say
    /// from a renamer that copied our label) heal in one step, and so the
    /// result never starts with an icon and a separator, which is what makes
    /// stripping idempotent.
    pub fn strip<'a>(&self, label: &'a str) -> &'a str {
        let mut rest = label;
        while let Some(after) = self.strip_one(rest) {
            rest = after;
        }
        rest
    }

    /// Two icons that make stripping lose part of a name: the first is the
    /// second followed by a space or the separator's first character, and
    /// more; say "🔴 !" and "🔴" with the separator " ". A label "🔴 ! x" is
    /// then read as the icon "🔴 !" and the name "x", though cowbell made it
    /// from "! x". No two built-in icons are like that; custom icons and
    /// separators can be. Icons come back as configured.
    pub fn ambiguous_icons(&self) -> Option<(&str, &str)> {
        let first = self.separator.chars().next().unwrap_or(' ');
        let known = PRESETS
            .iter()
            .flat_map(|preset| preset.icons.iter().copied())
            .chain(self.icons.iter().map(String::as_str))
            .chain(SPINNER_FRAMES.iter().copied())
            .filter(|icon| bare_icon(icon).is_some());
        let known: Vec<&str> = known.collect();
        for &long in &known {
            for &short in &known {
                // Either form of the shorter icon, with or without U+FE0F,
                // exactly as `strip` knows them.
                let Some(bare) = bare_icon(short) else {
                    continue;
                };
                let Some(rest) = long.strip_prefix(bare) else {
                    continue;
                };
                let rest = rest.strip_prefix(EMOJI_PRESENTATION).unwrap_or(rest);
                if rest.starts_with([first, ' ']) {
                    return Some((long, short));
                }
            }
        }
        None
    }

    pub fn has_icon(&self, label: &str) -> bool {
        self.strip(label).len() != label.len()
    }

    /// Removes one icon and separator from the front, if there is one.
    /// Every icon is non-empty, so each success makes the label shorter and
    /// `strip` ends.
    fn strip_one<'a>(&self, label: &'a str) -> Option<&'a str> {
        self.strippable_icons.iter().find_map(|icon| {
            let after_icon = label.strip_prefix(icon.as_str())?;
            self.strippable_separators
                .iter()
                .find_map(|separator| after_icon.strip_prefix(separator.as_str()))
        })
    }
}

/// Adds `string` to `strings`, which stay longest first (ties in byte
/// order) and free of duplicates. A sorted insert rather than a sort: the
/// lists are a few dozen entries, and a sort would cost kilobytes of binary.
fn insert_longest_first(strings: &mut Vec<String>, string: String) {
    let order = |probe: &String| {
        string
            .len()
            .cmp(&probe.len())
            .then_with(|| probe.as_str().cmp(&string))
    };
    if let Err(at) = strings.binary_search_by(order) {
        strings.insert(at, string);
    }
}

/// The text of `cowbell presets`: every preset with its summary, and a
/// sample tab bar showing all five statuses in priority order.
pub fn presets_sample() -> String {
    const BASES: [&str; 5] = ["api", "docs", "build", "tests", "shell"];
    let mut text = String::new();
    for preset in PRESETS {
        let labeler = Labeler::new(preset, &Default::default(), " ");
        text.push_str(preset.name);
        for _ in preset.name.chars().count()..11 {
            text.push(' ');
        }
        text.push_str(preset.summary);
        text.push_str("\n           ");
        for (status, base) in Status::ALL.into_iter().zip(BASES) {
            if status != Status::Blocked {
                text.push_str("  ");
            }
            text.push_str(&labeler.label(status, base));
        }
        text.push('\n');
    }
    text.push_str("\nstatuses:  ");
    for (status, base) in Status::ALL.into_iter().zip(BASES) {
        if status != Status::Blocked {
            text.push_str(", ");
        }
        text.push_str(base);
        text.push_str(" is ");
        text.push_str(status.name());
    }
    text.push('\n');
    text
}

#[cfg(test)]
pub mod tests {
    use super::*;

    fn default_labeler() -> Labeler {
        Labeler::new(&PRESETS[0], &Default::default(), " ")
    }

    #[test]
    fn status_names_round_trip_in_priority_order() {
        for (index, status) in Status::ALL.into_iter().enumerate() {
            assert_eq!(status.index(), index);
            assert_eq!(Status::from_name(status.name()), Some(status));
        }
        assert_eq!(Status::from_name("Blocked"), None);
        assert_eq!(Status::from_name(""), None);
        assert_eq!(
            [Status::Idle, Status::Done, Status::Working].iter().min(),
            Some(&Status::Done)
        );
        assert!(Status::Blocked < Status::Unknown);
    }

    #[test]
    fn presets_are_complete_and_distinct() {
        assert_eq!(PRESETS[0].name, "emoji");
        for (index, preset) in PRESETS.iter().enumerate() {
            assert_eq!(super::preset(preset.name), Some(preset));
            assert!(
                PRESETS[..index]
                    .iter()
                    .all(|other| other.name != preset.name)
            );
            // The statuses that have an icon all differ, or a label would
            // not tell them apart.
            for (i, icon) in preset.icons.iter().enumerate() {
                assert!(!icon.contains(' ') && !icon.chars().any(char::is_control));
                if !icon.is_empty() {
                    assert!(!preset.icons[..i].contains(icon), "{}", preset.name);
                }
            }
        }
        assert_eq!(preset("nope"), None);
    }

    #[test]
    fn preset_icon_choices() {
        assert_eq!(preset("emoji").unwrap().icons, ["🔴", "🔵", "🟡", "", ""]);
        assert_eq!(preset("attention").unwrap().icons, ["🔴", "🔵", "", "", ""]);
        let ascii = preset("ascii").unwrap();
        assert!(
            ascii
                .icons
                .iter()
                .all(|icon| icon.bytes().all(|b| b.is_ascii_graphic()))
        );
        // No code point of the symbols preset has an emoji form; the ranges
        // of the emoji-capable ones near these marks are listed here.
        let symbols = preset("symbols").unwrap();
        for c in symbols.icons.iter().flat_map(|icon| icon.chars()) {
            let code = c as u32;
            assert!(code < 0x1F000, "{c}");
            assert!(!matches!(code, 0x2600..=0x27BF) || c == '✓', "{c}");
            assert!(!matches!(code, 0x25AA..=0x25AB | 0x25B6 | 0x25C0 | 0x25FB..=0x25FE));
        }
        let nerd = preset("nerd").unwrap();
        for c in nerd.icons.iter().flat_map(|icon| icon.chars()) {
            assert!(matches!(c as u32, 0xE000..=0xF8FF), "private use area");
        }
    }

    #[test]
    fn every_preset_composes_and_strips_every_status() {
        for preset in PRESETS {
            let labeler = Labeler::new(preset, &Default::default(), " ");
            for status in Status::ALL {
                let icon = preset.icons[status.index()];
                assert_eq!(labeler.icon(status), icon);
                let label = labeler.label(status, "api");
                if icon.is_empty() {
                    assert_eq!(label, "api", "{} {:?}", preset.name, status);
                    assert!(!labeler.has_icon(&label));
                } else {
                    assert_eq!(label, format!("{icon} api"));
                    assert!(labeler.has_icon(&label));
                }
                assert_eq!(labeler.strip(&label), "api", "{} {:?}", preset.name, status);
            }
        }
    }

    #[test]
    fn every_preset_strips_icons_of_every_other_preset() {
        let labeler = default_labeler();
        for preset in PRESETS {
            for icon in preset.icons.iter().filter(|icon| !icon.is_empty()) {
                assert_eq!(labeler.strip(&format!("{icon} docs")), "docs");
                assert_eq!(labeler.strip(&format!("{icon}\u{FE0F} docs")), "docs");
            }
        }
        for (frame, spinner) in SPINNER_FRAMES.iter().enumerate() {
            let label = labeler.spinner_label(frame, "docs");
            assert_eq!(label, format!("{spinner} docs"));
            assert_eq!(labeler.strip(&label), "docs");
        }
    }

    #[test]
    fn spinner_frames_wrap() {
        let labeler = default_labeler();
        assert_eq!(labeler.spinner_label(0, "x"), "⠋ x");
        assert_eq!(labeler.spinner_label(SPINNER_FRAMES.len() + 1, "x"), "⠙ x");
        assert_eq!(labeler.spinner_label(usize::MAX, "x").chars().count(), 3);
    }

    #[test]
    fn strip_decisions() {
        let labeler = default_labeler();
        let cases = [
            // An icon without a separator is part of a name.
            ("🔴alert", "🔴alert"),
            ("🔴", "🔴"),
            ("🔴\u{FE0F}", "🔴\u{FE0F}"),
            // An icon and separator with nothing after is an empty base.
            ("🔴 ", ""),
            ("", ""),
            // Doubled icons heal in one step, across presets.
            ("🔴 🟡 api", "api"),
            ("[!] ● ⠙ 🔵\u{FE0F} api", "api"),
            // The variation selector is optional on every icon.
            ("🔴\u{FE0F} api", "api"),
            ("✓\u{FE0F} api", "api"),
            // Only the front is stripped.
            ("api 🔴 x", "api 🔴 x"),
            (" 🔴 api", " 🔴 api"),
            // One separator goes with each icon; more spaces are the base's.
            ("🔴  api", " api"),
            // Other emoji are names, including ZWJ sequences that start
            // like nothing we know.
            ("👩‍💻 dev", "👩‍💻 dev"),
            ("🏳️‍🌈 pride", "🏳️‍🌈 pride"),
            ("[x] todo", "[x] todo"),
            ("! urgent", "! urgent"),
        ];
        for (label, stripped) in cases {
            assert_eq!(labeler.strip(label), stripped, "{label:?}");
            assert_eq!(labeler.has_icon(label), label != stripped, "{label:?}");
        }
    }

    #[test]
    fn compose_with_an_empty_base_strips_back_to_empty() {
        let labeler = default_labeler();
        assert_eq!(labeler.label(Status::Blocked, ""), "🔴 ");
        assert_eq!(labeler.strip(&labeler.label(Status::Blocked, "")), "");
        assert_eq!(labeler.label(Status::Idle, ""), "");
    }

    #[test]
    fn custom_icons_override_and_are_strippable() {
        let custom = [
            Some("🔔".to_string()),
            Some(String::new()),
            None,
            Some("zz".to_string()),
            None,
        ];
        let labeler = Labeler::new(preset("ascii").unwrap(), &custom, " | ");
        assert_eq!(labeler.label(Status::Blocked, "api"), "🔔 | api");
        assert_eq!(labeler.label(Status::Done, "api"), "api");
        assert_eq!(labeler.label(Status::Working, "api"), "[~] | api");
        assert_eq!(labeler.label(Status::Idle, "api"), "zz | api");
        assert_eq!(labeler.label(Status::Unknown, "api"), "api");
        assert_eq!(labeler.strip("🔔 | api"), "api");
        assert_eq!(labeler.strip("🔔\u{FE0F} | api"), "api");
        // A plain space also follows an icon, as when typed by hand.
        assert_eq!(labeler.strip("zz api"), "api");
        assert_eq!(labeler.strip("🔴 | zz | api"), "api");
        assert_eq!(labeler.strip("zz|api"), "zz|api");
        // Another configuration's labeler does not know "zz" or "🔔".
        assert_eq!(default_labeler().strip("zz api"), "zz api");
    }

    #[test]
    fn empty_custom_icon_and_separator_strip_nothing_extra() {
        let all_empty: [Option<String>; 5] = std::array::from_fn(|_| Some(String::new()));
        let labeler = Labeler::new(&PRESETS[0], &all_empty, "");
        for status in Status::ALL {
            assert_eq!(labeler.icon(status), "");
            assert_eq!(labeler.label(status, "api"), "api");
        }
        assert_eq!(labeler.strip("api"), "api");
        assert_eq!(labeler.strip(" api"), " api");
        assert_eq!(labeler.strip("   "), "   ");
        assert_eq!(labeler.strip("\u{FE0F} api"), "\u{FE0F} api");
        // With no separator configured only "icon + space" is stripped.
        assert_eq!(labeler.strip("🔴 api"), "api");
        assert_eq!(labeler.strip("🔴api"), "🔴api");

        let custom = [None, None, None, None, Some("\u{FE0F}".to_string())];
        let labeler = Labeler::new(&PRESETS[0], &custom, "");
        assert_eq!(labeler.label(Status::Working, "api"), "🟡api");
        assert_eq!(labeler.strip("\u{FE0F} api"), "\u{FE0F} api");
    }

    #[test]
    fn presets_sample_shows_every_preset_and_status() {
        let text = presets_sample();
        assert!(text.contains("emoji      default: herdr's own sidebar colours\n"));
        assert!(text.contains("🔴 api  🔵 docs  🟡 build  tests  shell\n"));
        assert!(text.contains("[!] api  [+] docs  [~] build  tests  shell\n"));
        for preset in PRESETS {
            assert!(text.contains(preset.name) && text.contains(preset.summary));
        }
        for status in Status::ALL {
            assert!(text.contains(status.name()));
        }
    }

    /// xorshift64*: deterministic, so a failure reproduces.
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const CUSTOM_ICONS: &[&str] = &[
        "🔔",
        "★",
        "[B]",
        "!!",
        "!",
        "✔\u{FE0F}",
        "⠋",
        "🔴\u{FE0F}",
        "",
    ];
    const SEPARATORS: &[&str] = &[" ", " | ", "-", "  ", "", "::"];

    fn random_labeler(rng: &mut Rng) -> Labeler {
        let preset = &PRESETS[rng.below(PRESETS.len())];
        let custom: [Option<String>; 5] = std::array::from_fn(|_| {
            if rng.below(3) == 0 {
                Some(rng.pick(CUSTOM_ICONS).to_string())
            } else {
                None
            }
        });
        Labeler::new(preset, &custom, rng.pick(SEPARATORS))
    }

    fn random_base(rng: &mut Rng) -> String {
        let mut pieces: Vec<&str> = PRESETS.iter().flat_map(|p| p.icons).collect();
        pieces.extend_from_slice(SPINNER_FRAMES);
        pieces.extend_from_slice(CUSTOM_ICONS);
        pieces.extend_from_slice(SEPARATORS);
        pieces.extend_from_slice(&[
            "\u{FE0F}",
            " ",
            " ",
            " ",
            "|",
            "👩‍💻",
            "🏳️‍🌈",
            "api",
            "x",
            "docs 2",
            "1",
            "[",
            "]",
        ]);
        let mut base = String::new();
        for _ in 0..rng.below(7) {
            base.push_str(rng.pick(&pieces));
        }
        base
    }

    /// True when the labeler's icons meet the condition under which
    /// `strip(compose(i, b)) == strip(b)` holds (see `Labeler`).
    fn unambiguous(labeler: &Labeler) -> bool {
        labeler.ambiguous_icons().is_none()
    }

    #[test]
    fn strip_properties_hold_for_random_labels() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut checked_composition = 0;
        for _ in 0..3000 {
            let labeler = random_labeler(&mut rng);
            let base = random_base(&mut rng);
            let stripped = labeler.strip(&base);
            assert_eq!(labeler.strip(stripped), stripped, "idempotent: {base:?}");
            assert!(base.ends_with(stripped));
            assert!(!labeler.has_icon(stripped));

            if labeler.separator.is_empty() || !unambiguous(&labeler) {
                continue;
            }
            checked_composition += 1;
            for status in Status::ALL {
                let label = labeler.label(status, &base);
                assert_eq!(labeler.strip(&label), stripped, "{label:?} {labeler:?}");
            }
            let label = labeler.spinner_label(rng.below(100), &base);
            assert_eq!(labeler.strip(&label), stripped, "{label:?}");
            // Icons never double: relabelling a stripped label is stable.
            let label = labeler.label(Status::Blocked, &base);
            let again = labeler.label(Status::Blocked, labeler.strip(&label));
            assert_eq!(labeler.strip(&again), stripped);
        }
        assert!(checked_composition > 1500, "{checked_composition}");
    }

    #[test]
    fn ambiguous_custom_icons_prefer_the_longer_icon() {
        // The documented exception: "a b" is an icon, so "a b c" is that
        // icon and "c" even though it was composed from "a" and "b c".
        let custom = [
            Some("a".to_string()),
            Some("a b".to_string()),
            None,
            None,
            None,
        ];
        let labeler = Labeler::new(&PRESETS[0], &custom, " ");
        assert_eq!(labeler.strip(&labeler.compose("a", "b c")), "c");
        assert_eq!(labeler.strip("b c"), "b c");
    }

    /// A stripper that stops after one icon passes the composition property
    /// for most bases but not idempotence; this test keeps `strip` honest.
    #[test]
    fn strip_is_idempotent_on_stacked_icons() {
        let labeler = default_labeler();
        let mut label = String::from("api");
        for round in 0..20 {
            let icon = if round % 2 == 0 { "🔴" } else { "⠼" };
            label = format!("{icon} {label}");
            let once = labeler.strip(&label);
            assert_eq!(once, "api");
            assert_eq!(labeler.strip(once), once);
        }
    }

    /// An icon ending in two U+FE0F is judged as `strip` reads it: a pair
    /// that loses part of a name is warned about.
    #[test]
    fn icons_with_variation_selectors_are_checked_as_strip_reads_them() {
        let cases = [
            ("a\u{FE0F}\u{FE0F}", "a\u{FE0F}\u{FE0F}|c", "|", "c|d"),
            ("a\u{FE0F}\u{FE0F}", "a\u{FE0F}\u{FE0F} x", " ", "x y"),
        ];
        for (short, long, separator, base) in cases {
            let custom = [
                Some(short.to_string()),
                Some(long.to_string()),
                None,
                None,
                None,
            ];
            let labeler = Labeler::new(&PRESETS[0], &custom, separator);
            let label = labeler.label(Status::Blocked, base);
            assert!(
                labeler.ambiguous_icons().is_some() || labeler.strip(&label) == base,
                "{label:?} strips to {:?} without a warning",
                labeler.strip(&label)
            );
        }
        // Made of them, it is no icon (the config refuses it).
        assert_eq!(bare_icon("\u{FE0F}\u{FE0F}"), None);
        assert_eq!(bare_icon("🔴\u{FE0F}"), Some("🔴"));
    }
}
