//! config.json: reading the user's settings, judging every key on its own,
//! and showing the configuration in force.
//!
//! A broken setting never stops cowbell. Each invalid value becomes an error
//! that names the file, the key, what was found and what is allowed, and that
//! key keeps its default while the rest of the file still applies; an
//! unknown key is only a warning, so a newer config file works with an older
//! cowbell. `config check` prints these problems and fails on errors.

use std::fmt::Write as _;
use std::path::Path;
use std::string::FromUtf8Error;

use crate::files;
use crate::json_check::{self, Json};
use crate::labels::{self, Labeler, Status};
use crate::text::{quote, quote_short};

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The name of one of `labels::PRESETS`.
    pub preset: String,
    /// Overrides of the preset's icons, by `Status::index`; `Some("")`
    /// turns the icon of that status off.
    pub icons: [Option<String>; 5],
    pub separator: String,
    pub spinner: bool,
    pub spinner_interval_ms: u64,
    pub include_auto_named: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            preset: labels::PRESETS[0].name.to_string(),
            icons: Default::default(),
            separator: " ".to_string(),
            spinner: false,
            spinner_interval_ms: 500,
            include_auto_named: false,
        }
    }
}

/// A faster spinner costs a rename, and a `tab.renamed` event for every
/// listener, several times a second per working tab.
pub const MIN_SPINNER_INTERVAL_MS: u64 = 250;
/// Beyond a minute a spinner is no spinner; the cap also keeps
/// `Instant + interval` far from overflowing.
pub const MAX_SPINNER_INTERVAL_MS: u64 = 60_000;
/// A config file is a few hundred bytes; anything this big is a mistake,
/// and reading it whole would waste the daemon's memory.
pub const MAX_FILE_SIZE: u64 = 1024 * 1024;

const KEYS: &str =
    r#""preset", "icons", "separator", "spinner", "spinner_interval_ms", "include_auto_named""#;

impl Config {
    pub fn labeler(&self) -> Labeler {
        // `parse` only keeps preset names that exist; the fallback covers a
        // Config built by hand.
        let preset = labels::preset(&self.preset).unwrap_or(&labels::PRESETS[0]);
        Labeler::new(preset, &self.icons, &self.separator)
    }

    /// The configuration in force as a config.json. The icons are the
    /// effective ones (the preset's, overridden by the custom ones, "" for
    /// none), so the output shows what every status looks like and, fed back
    /// as config.json, gives the same labels.
    pub fn to_json(&self) -> String {
        let labeler = self.labeler();
        let mut json = String::from("{\n");
        let _ = writeln!(json, "  \"preset\": {},", quote(&self.preset));
        json.push_str("  \"icons\": {\n");
        for status in Status::ALL {
            let comma = if status == Status::Unknown { "" } else { "," };
            let icon = quote(labeler.icon(status));
            let _ = writeln!(json, "    \"{}\": {icon}{comma}", status.name());
        }
        json.push_str("  },\n");
        let _ = writeln!(json, "  \"separator\": {},", quote(&self.separator));
        let _ = writeln!(json, "  \"spinner\": {},", self.spinner);
        let _ = writeln!(
            json,
            "  \"spinner_interval_ms\": {},",
            self.spinner_interval_ms
        );
        let _ = writeln!(
            json,
            "  \"include_auto_named\": {}",
            self.include_auto_named
        );
        json.push_str("}\n");
        json
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub severity: Severity,
    /// A whole sentence for the user, starting with the file's name.
    pub message: String,
}

/// A config file as read: the configuration to use (defaults where the file
/// had nothing valid) and everything wrong with the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    pub config: Config,
    pub problems: Vec<Problem>,
}

impl Loaded {
    pub fn has_errors(&self) -> bool {
        self.problems
            .iter()
            .any(|problem| problem.severity == Severity::Error)
    }
}

/// Reads the config file at `path`. A missing file is no problem: it means
/// defaults. A file that cannot be used at all is one error, and defaults.
pub fn load(path: &Path) -> Loaded {
    let file = path.display().to_string();
    let (config, problems) = match read_file(path) {
        Ok(Some(text)) => parse(&text, &file),
        Ok(None) => (Config::default(), Vec::new()),
        Err(why) => (Config::default(), vec![error(format!("{file}: {why}"))]),
    };
    Loaded { config, problems }
}

/// The file's text, `None` when there is no file.
fn read_file(path: &Path) -> Result<Option<String>, String> {
    match files::read_capped_following(path, MAX_FILE_SIZE) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => String::from_utf8(bytes).map(Some).map_err(not_utf8),
        Err(error) => Err(format!("cannot be read: {error}")),
    }
}

/// JSON is UTF-8 text: where the first byte that is not is (an editor
/// that saved the file as Latin-1, say).
fn not_utf8(error: FromUtf8Error) -> String {
    let bytes = error.as_bytes();
    let valid = error.utf8_error().valid_up_to();
    let before = std::str::from_utf8(&bytes[..valid]).unwrap_or_default();
    let (line, column) = json_check::line_and_column(before, valid);
    let byte = bytes.get(valid).copied().unwrap_or_default();
    format!("line {line}, column {column}: not UTF-8 text (byte 0x{byte:02X})")
}

/// Parses the text of a config file; `file` names it in the messages.
pub fn parse(text: &str, file: &str) -> (Config, Vec<Problem>) {
    let mut config = Config::default();
    let mut problems = Vec::new();
    // Some editors start a UTF-8 file with a byte order mark; it is
    // invisible, so it should not be an error either.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);

    let (value, duplicates) = match json_check::parse(text) {
        Ok(read) => read,
        Err(at) => {
            problems.push(error(format!(
                "{file}: line {}, column {}: {}",
                at.line, at.column, at.what
            )));
            return (config, problems);
        }
    };
    for duplicate in duplicates {
        problems.push(Problem {
            severity: Severity::Warning,
            message: format!(
                "{file}: line {}, column {}: {}",
                duplicate.line, duplicate.column, duplicate.what
            ),
        });
    }
    let Json::Object(object) = value else {
        problems.push(error(format!(
            "{file}: the top level is {}, allowed: an object with the keys {KEYS}",
            describe(&value)
        )));
        return (config, problems);
    };

    for (key, value) in &object {
        let problem = |allowed: &str| {
            error(format!(
                "{file}: {}: found {}, allowed: {allowed}",
                quote_short(key),
                describe(value)
            ))
        };
        match key.as_str() {
            "preset" => match value {
                Json::String(name) if labels::preset(name).is_some() => {
                    config.preset = name.clone();
                }
                _ => problems.push(problem(&preset_names())),
            },
            "icons" => parse_icons(value, file, &mut config, &mut problems),
            "separator" => match value {
                Json::String(separator)
                    if !separator.is_empty()
                        && !has_control(separator)
                        && !separator.starts_with(labels::EMOJI_PRESENTATION) =>
                {
                    config.separator = separator.clone();
                }
                // An empty separator would glue the icon to the name, and
                // "🔴api" cannot be told from a name that starts with 🔴, so
                // icons would double on the next rename. One that starts with
                // U+FE0F would be taken for part of the icon when stripping.
                _ => problems.push(problem(
                    "a non-empty string without control characters or newlines, \
                     not starting with U+FE0F",
                )),
            },
            "spinner" => match value {
                Json::Bool(spinner) => config.spinner = *spinner,
                _ => problems.push(problem("true or false")),
            },
            "spinner_interval_ms" => match whole_number(value) {
                Some(ms) if (MIN_SPINNER_INTERVAL_MS..=MAX_SPINNER_INTERVAL_MS).contains(&ms) => {
                    config.spinner_interval_ms = ms;
                }
                _ => problems.push(problem(&format!(
                    "a whole number from {MIN_SPINNER_INTERVAL_MS} to \
                     {MAX_SPINNER_INTERVAL_MS}, without a decimal point or exponent"
                ))),
            },
            "include_auto_named" => match value {
                Json::Bool(include) => config.include_auto_named = *include,
                _ => problems.push(problem("true or false")),
            },
            _ => problems.push(Problem {
                severity: Severity::Warning,
                message: format!(
                    "{file}: unknown key {}, ignored; valid keys: {KEYS}",
                    quote_short(key)
                ),
            }),
        }
    }
    if let Some((long, short)) = config.labeler().ambiguous_icons() {
        problems.push(Problem {
            severity: Severity::Warning,
            message: format!(
                "{file}: \"icons\": {} starts with {}, another icon cowbell strips, then a \
                 space or the separator's first character: some tab names would lose their \
                 first characters when icons are stripped; choose icons that do not start \
                 with another icon and a space or the separator",
                quote_short(long),
                quote_short(short)
            ),
        });
    }
    (config, problems)
}

fn parse_icons(value: &Json, file: &str, config: &mut Config, problems: &mut Vec<Problem>) {
    let statuses = status_names();
    let Json::Object(icons) = value else {
        problems.push(error(format!(
            "{file}: \"icons\": found {}, allowed: an object from status ({statuses}) to icon",
            describe(value)
        )));
        return;
    };
    for (name, icon) in icons {
        let Some(status) = Status::from_name(name) else {
            // A warning, like an unknown top-level key: a status a later
            // herdr adds must not make this file unusable.
            problems.push(Problem {
                severity: Severity::Warning,
                message: format!(
                    "{file}: \"icons\": unknown status {}, ignored; valid statuses: {statuses}",
                    quote_short(name)
                ),
            });
            continue;
        };
        match icon {
            // An icon that shows nothing (blanks, U+FE0F alone) is no icon
            // a person could see, and one of blanks would strip the
            // leading blanks of names.
            Json::String(icon)
                if !has_control(icon)
                    && (icon.is_empty() || !icon.chars().all(crate::text::is_invisible)) =>
            {
                config.icons[status.index()] = Some(icon.clone());
            }
            _ => problems.push(error(format!(
                "{file}: \"icons\".{}: found {}, allowed: a string that shows \
                 something, without control characters or newlines (\"\" for no icon)",
                quote_short(name),
                describe(icon)
            ))),
        }
    }
}

fn error(message: String) -> Problem {
    Problem {
        severity: Severity::Error,
        message,
    }
}

fn has_control(text: &str) -> bool {
    text.chars().any(crate::text::is_control)
}

/// A number written without a sign, a decimal point or an exponent.
fn whole_number(value: &Json) -> Option<u64> {
    match value {
        Json::Number(literal) if literal.bytes().all(|b| b.is_ascii_digit()) => {
            literal.parse().ok()
        }
        _ => None,
    }
}

/// A found value as the message shows it: scalars as written, long ones
/// cut short so one bad value cannot flood the terminal.
fn describe(value: &Json) -> String {
    // A number literal is ASCII: any byte is a char boundary.
    const MAX_DIGITS: usize = 40;
    match value {
        Json::Null => "null".to_string(),
        Json::Bool(boolean) => boolean.to_string(),
        Json::Number(literal) if literal.len() > MAX_DIGITS => {
            format!("{}...", &literal[..MAX_DIGITS])
        }
        Json::Number(literal) => literal.clone(),
        Json::String(string) => quote_short(string),
        Json::Array => "an array".to_string(),
        Json::Object(_) => "an object".to_string(),
    }
}

fn preset_names() -> String {
    join_quoted(labels::PRESETS.iter().map(|preset| preset.name))
}

fn status_names() -> String {
    join_quoted(Status::ALL.into_iter().map(Status::name))
}

fn join_quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut joined = String::new();
    for name in names {
        if !joined.is_empty() {
            joined.push_str(", ");
        }
        joined.push('"');
        joined.push_str(name);
        joined.push('"');
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Config {
        let (config, problems) = parse(text, "config.json");
        assert_eq!(problems, Vec::new(), "{text}");
        config
    }

    fn messages(text: &str) -> (Config, Vec<String>) {
        let (config, problems) = parse(text, "config.json");
        let messages = problems
            .into_iter()
            .map(|problem| problem.message)
            .collect();
        (config, messages)
    }

    fn only_error(text: &str) -> String {
        let (config, problems) = parse(text, "config.json");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].severity, Severity::Error);
        assert_eq!(config, Config::default(), "the bad key keeps its default");
        problems[0].message.clone()
    }

    #[test]
    fn defaults() {
        let config = Config::default();
        assert_eq!(config.preset, "emoji");
        assert_eq!(config.icons, [None, None, None, None, None]);
        assert_eq!(config.separator, " ");
        assert!(!config.spinner);
        assert_eq!(config.spinner_interval_ms, 500);
        assert!(!config.include_auto_named);
        assert_eq!(parse_ok("{}"), config);
        assert_eq!(parse_ok("\u{FEFF} {\n}\n"), config);
    }

    #[test]
    fn full_valid_file() {
        let text = r#"{
            "preset": "ascii",
            "icons": {"blocked": "🔔", "done": "", "idle": "zz"},
            "separator": " | ",
            "spinner": true,
            "spinner_interval_ms": 250,
            "include_auto_named": true
        }"#;
        let config = parse_ok(text);
        assert_eq!(
            config,
            Config {
                preset: "ascii".to_string(),
                icons: [
                    Some("🔔".to_string()),
                    Some(String::new()),
                    None,
                    Some("zz".to_string()),
                    None
                ],
                separator: " | ".to_string(),
                spinner: true,
                spinner_interval_ms: 250,
                include_auto_named: true,
            }
        );
        let labeler = config.labeler();
        assert_eq!(labeler.label(Status::Blocked, "api"), "🔔 | api");
        assert_eq!(labeler.label(Status::Done, "api"), "api");
        assert_eq!(labeler.label(Status::Working, "api"), "[~] | api");
        assert_eq!(labeler.label(Status::Idle, "api"), "zz | api");
        assert_eq!(
            parse_ok(r#"{"spinner_interval_ms": 60000}"#).spinner_interval_ms,
            60000
        );
    }

    #[test]
    fn to_json_is_valid_readable_and_round_trips() {
        let default_json = Config::default().to_json();
        assert_eq!(
            default_json,
            "{\n  \"preset\": \"emoji\",\n  \"icons\": {\n    \"blocked\": \"🔴\",\n    \
             \"done\": \"🔵\",\n    \"working\": \"🟡\",\n    \"idle\": \"\",\n    \
             \"unknown\": \"\"\n  },\n  \"separator\": \" \",\n  \"spinner\": false,\n  \
             \"spinner_interval_ms\": 500,\n  \"include_auto_named\": false\n}\n"
        );
        let config = Config {
            preset: "nerd".to_string(),
            icons: [
                None,
                Some("\"q\\".to_string()),
                None,
                Some("é".to_string()),
                None,
            ],
            separator: " / ".to_string(),
            spinner: true,
            spinner_interval_ms: 1000,
            include_auto_named: true,
        };
        for config in [Config::default(), config] {
            let json = config.to_json();
            assert_eq!(json_check::locate_error(&json), None, "{json}");
            let again = parse_ok(&json);
            assert_eq!(again.labeler().strip("x"), "x");
            for status in Status::ALL {
                assert_eq!(
                    again.labeler().label(status, "b"),
                    config.labeler().label(status, "b")
                );
            }
            assert_eq!(again.to_json(), json);
        }
    }

    #[test]
    fn broken_json_names_line_and_column() {
        let text = "{\n  \"preset\": \"ascii\"\n  \"spinner\": true\n}";
        assert_eq!(
            only_error(text),
            "config.json: line 3, column 3: expected ',' or '}', found '\"'"
        );
        assert_eq!(
            only_error(""),
            "config.json: line 1, column 1: expected a value, found the end of the file"
        );
        assert_eq!(
            only_error("{\"spinner\": true,}"),
            "config.json: line 1, column 18: trailing comma before '}'"
        );
        // Valid JSON by the grammar, but beyond what miniserde will read.
        assert_eq!(
            only_error("{\"a\": 1e999}"),
            "config.json: line 1, column 7: number too large: 1e999 (beyond about 1.8e308)"
        );
    }

    #[test]
    fn top_level_must_be_an_object() {
        let allowed = format!("allowed: an object with the keys {KEYS}");
        for (text, found) in [
            ("[]", "an array"),
            ("\"emoji\"", "\"emoji\""),
            ("null", "null"),
            ("3", "3"),
        ] {
            assert_eq!(
                only_error(text),
                format!("config.json: the top level is {found}, {allowed}")
            );
        }
    }

    #[test]
    fn bad_values_are_errors_and_keep_their_defaults() {
        let cases = [
            (
                r#"{"preset": "fancy"}"#,
                r#"config.json: "preset": found "fancy", allowed: "emoji", "symbols", "ascii", "nerd", "attention""#,
            ),
            (
                r#"{"preset": 1}"#,
                r#"config.json: "preset": found 1, allowed: "emoji", "symbols", "ascii", "nerd", "attention""#,
            ),
            (
                r#"{"separator": ""}"#,
                r#"config.json: "separator": found "", allowed: a non-empty string without control characters or newlines, not starting with U+FE0F"#,
            ),
            (
                r#"{"separator": " \n "}"#,
                r#"config.json: "separator": found " \n ", allowed: a non-empty string without control characters or newlines, not starting with U+FE0F"#,
            ),
            (
                r#"{"separator": ["-"]}"#,
                r#"config.json: "separator": found an array, allowed: a non-empty string without control characters or newlines, not starting with U+FE0F"#,
            ),
            (
                r#"{"spinner": "yes"}"#,
                r#"config.json: "spinner": found "yes", allowed: true or false"#,
            ),
            (
                r#"{"include_auto_named": 1}"#,
                r#"config.json: "include_auto_named": found 1, allowed: true or false"#,
            ),
            (
                r#"{"spinner_interval_ms": 100}"#,
                r#"config.json: "spinner_interval_ms": found 100, allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"spinner_interval_ms": -500}"#,
                r#"config.json: "spinner_interval_ms": found -500, allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"spinner_interval_ms": 500.5}"#,
                r#"config.json: "spinner_interval_ms": found 500.5, allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"spinner_interval_ms": 0.00000000000000000000000000000000000000000000000001}"#,
                r#"config.json: "spinner_interval_ms": found 0.00000000000000000000000000000000000000..., allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"spinner_interval_ms": "500"}"#,
                r#"config.json: "spinner_interval_ms": found "500", allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"spinner_interval_ms": 18446744073709551615}"#,
                r#"config.json: "spinner_interval_ms": found 18446744073709551615, allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"icons": ["🔴"]}"#,
                r#"config.json: "icons": found an array, allowed: an object from status ("blocked", "done", "working", "idle", "unknown") to icon"#,
            ),
            (
                r#"{"spinner_interval_ms": 5e2}"#,
                r#"config.json: "spinner_interval_ms": found 5e2, allowed: a whole number from 250 to 60000, without a decimal point or exponent"#,
            ),
            (
                r#"{"separator": "\ufe0f "}"#,
                "config.json: \"separator\": found \"\\ufe0f \", allowed: a non-empty string \
                 without control characters or newlines, not starting with U+FE0F",
            ),
            (
                r#"{"icons": {"done": "\ufe0f"}}"#,
                "config.json: \"icons\".\"done\": found \"\\ufe0f\", allowed: a string that \
                 shows something, without control characters or newlines (\"\" for no icon)",
            ),
            (
                r#"{"icons": {"done": "\u0085x\u009b31m"}}"#,
                r#"config.json: "icons"."done": found "\u0085x\u009b31m", allowed: a string that shows something, without control characters or newlines ("" for no icon)"#,
            ),
            (
                r#"{"icons": {"blocked": null}}"#,
                r#"config.json: "icons"."blocked": found null, allowed: a string that shows something, without control characters or newlines ("" for no icon)"#,
            ),
            (
                r#"{"icons": {"done": "a\u0007"}}"#,
                r#"config.json: "icons"."done": found "a\u0007", allowed: a string that shows something, without control characters or newlines ("" for no icon)"#,
            ),
            (
                r#"{"separator": " \u202e "}"#,
                r#"config.json: "separator": found " \u202e ", allowed: a non-empty string without control characters or newlines, not starting with U+FE0F"#,
            ),
            (
                r#"{"icons": {"done": "\u2028"}}"#,
                r#"config.json: "icons"."done": found "\u2028", allowed: a string that shows something, without control characters or newlines ("" for no icon)"#,
            ),
            (
                r#"{"icons": {"done": "\n"}}"#,
                r#"config.json: "icons"."done": found "\n", allowed: a string that shows something, without control characters or newlines ("" for no icon)"#,
            ),
        ];
        for (text, message) in cases {
            assert_eq!(only_error(text), message, "{text}");
        }
    }

    #[test]
    fn long_found_values_are_cut_short() {
        let long = "x".repeat(500);
        let message = only_error(&format!(r#"{{"preset": "{long}"}}"#));
        assert!(
            message.contains(&format!("found \"{}\"...,", "x".repeat(40))),
            "{message}"
        );
        assert!(message.len() < 200);
    }

    #[test]
    fn one_bad_key_leaves_the_rest_in_force() {
        let text = r#"{
            "preset": "symbols",
            "spinner": "on",
            "spinner_interval_ms": 10,
            "icons": {"blocked": "!!", "stuck": "?", "done": 3},
            "include_auto_named": true,
            "colour": "red"
        }"#;
        let (config, problems) = parse(text, "config.json");
        assert_eq!(config.preset, "symbols");
        assert!(!config.spinner);
        assert_eq!(config.spinner_interval_ms, 500);
        assert_eq!(
            config.icons,
            [Some("!!".to_string()), None, None, None, None]
        );
        assert!(config.include_auto_named);
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        // "stuck" is an unknown status: a warning, like "colour".
        assert_eq!((errors, problems.len()), (3, 5));
    }

    #[test]
    fn a_key_written_twice_is_a_warning_and_the_last_one_counts() {
        let text = "{\"preset\": \"ascii\",\n \"preset\": \"nerd\",\n \"icons\": {\"done\": \"d\", \"done\": \"D\"}}";
        let (config, problems) = parse(text, "config.json");
        assert_eq!(config.preset, "nerd");
        assert_eq!(config.icons[Status::Done.index()].as_deref(), Some("D"));
        assert_eq!(
            problems,
            [
                Problem {
                    severity: Severity::Warning,
                    message: "config.json: line 2, column 2: the key \"preset\" appears again; \
                              only the last one counts"
                        .into(),
                },
                Problem {
                    severity: Severity::Warning,
                    message: "config.json: line 3, column 25: the key \"done\" appears again; \
                              only the last one counts"
                        .into(),
                },
            ]
        );
    }

    #[test]
    fn unknown_keys_are_warnings_listing_the_valid_keys() {
        let (config, problems) = parse(r#"{"spiner": true, "preset": "nerd"}"#, "/x/config.json");
        assert_eq!(config.preset, "nerd");
        assert_eq!(
            problems,
            vec![Problem {
                severity: Severity::Warning,
                message: "/x/config.json: unknown key \"spiner\", ignored; valid keys: \
                          \"preset\", \"icons\", \"separator\", \"spinner\", \
                          \"spinner_interval_ms\", \"include_auto_named\""
                    .to_string(),
            }]
        );
        let loaded = Loaded { config, problems };
        assert!(!loaded.has_errors());
    }

    #[test]
    fn icons_that_would_eat_the_start_of_names_are_a_warning() {
        let (config, problems) = messages(r#"{"icons": {"blocked": "🔴", "done": "🔴 !"}}"#);
        assert_eq!(config.icons[1].as_deref(), Some("🔴 !"), "still applies");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("config.json: \"icons\": \"🔴 !\" starts with \"🔴\", another icon"),
            "{}",
            problems[0]
        );
        // Also when only part of the separator follows the shorter icon, or
        // a space (the separator a person types) does; icons as configured.
        for (text, pair) in [
            (
                r#"{"separator": "::", "icons": {"done": "a", "idle": "a:"}}"#,
                r#""a:" starts with "a""#,
            ),
            (
                r#"{"separator": "|", "icons": {"idle": "🔴 !"}}"#,
                r#""🔴 !" starts with "🔴""#,
            ),
            (
                r#"{"icons": {"done": "⚠️", "idle": "⚠️ !"}}"#,
                r#""⚠️ !" starts with "⚠️""#,
            ),
        ] {
            let (_, problems) = messages(text);
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
            assert!(problems[0].contains(pair), "{text}: {}", problems[0]);
        }
        // Built-in icons never do, whatever the separator.
        for preset in labels::PRESETS {
            for separator in [" ", " | ", ": ", "|", "·", "] ", "> ", "  "] {
                let text = format!(
                    r#"{{"preset": "{}", "separator": "{separator}"}}"#,
                    preset.name
                );
                assert_eq!(messages(&text).1, Vec::<String>::new(), "{text}");
            }
        }
    }

    #[test]
    fn unknown_keys_may_hold_anything() {
        let (_, messages) = messages(r#"{"future": {"deep": [1, {"x": null}]}}"#);
        assert_eq!(messages.len(), 1);
        assert!(messages[0].contains("unknown key \"future\""));
    }

    #[test]
    fn long_keys_are_cut_in_messages_like_long_values() {
        let key = "k".repeat(200_000);
        let text = format!(r#"{{"{key}": 1, "{key}": 2, "icons": {{"{key}": ""}}}}"#);
        let (_, messages) = messages(&text);
        assert_eq!(messages.len(), 3, "{messages:?}");
        for message in &messages {
            assert!(message.len() < 300, "{message}");
            assert!(message.contains(&format!("\"{}\"...", "k".repeat(40))));
        }
    }

    use crate::files::tests::TempDir;

    #[test]
    fn an_icon_that_shows_nothing_is_refused() {
        for icon in [
            r"\ufe0f\ufe0f",
            " ",
            r"  \u3000",
            r"\u200b",
            r" \u0301",
            r"\u2800",
        ] {
            let (config, messages) = messages(&format!(r#"{{"icons": {{"done": "{icon}"}}}}"#));
            assert_eq!(messages.len(), 1, "{icon}: {messages:?}");
            assert!(messages[0].contains("shows something"), "{messages:?}");
            assert_eq!(config.icons[Status::Done.index()], None, "{icon}");
        }
        // A blank beside something that shows is part of the icon.
        let (config, messages) = messages(r#"{"icons": {"done": " [x] "}}"#);
        assert_eq!(messages, Vec::<String>::new());
        assert_eq!(config.icons[Status::Done.index()].as_deref(), Some(" [x] "));
    }

    #[test]
    fn load_missing_file_gives_defaults_without_problems() {
        let dir = TempDir::new("missing");
        let path = dir.0.join("config.json");
        let loaded = load(&path);
        assert_eq!(loaded.config, Config::default());
        assert_eq!(loaded.problems, Vec::new());
        assert!(!loaded.has_errors());
        let loaded = load(&dir.0.join("no-such-dir/config.json"));
        assert_eq!(loaded.problems, Vec::new());
    }

    #[test]
    fn load_reads_a_file_and_names_it_in_messages() {
        let dir = TempDir::new("read");
        let path = dir.0.join("config.json");
        std::fs::write(&path, "{\"preset\": \"ascii\", \"spinner\": 2}").unwrap();
        let loaded = load(&path);
        assert_eq!(loaded.config.preset, "ascii");
        assert!(loaded.has_errors());
        assert_eq!(
            loaded.problems[0].message,
            format!(
                "{}: \"spinner\": found 2, allowed: true or false",
                path.display()
            )
        );
    }

    /// JSON is UTF-8: a byte that is not is an invalid file, found where
    /// it is (an editor saving Latin-1), not a file that "cannot be read".
    #[test]
    fn a_file_that_is_not_utf8_is_placed_by_line_and_column() {
        let dir = TempDir::new("latin1");
        let file = dir.0.join("config.json");
        let expect = |bytes: &[u8], why: &str| {
            std::fs::write(&file, bytes).unwrap();
            let loaded = load(&file);
            assert_eq!(loaded.config, Config::default());
            assert_eq!(
                loaded.problems,
                vec![error(format!("{}: {why}", file.display()))]
            );
        };
        expect(
            b"{\"preset\": \"\xff\"}",
            "line 1, column 13: not UTF-8 text (byte 0xFF)",
        );
        expect(
            b"{\n  \"icons\": {\"done\": \"caf\xe9\"}}",
            "line 2, column 25: not UTF-8 text (byte 0xE9)",
        );
    }

    #[test]
    fn load_refuses_what_is_not_a_small_regular_text_file() {
        let dir = TempDir::new("refuse");
        let expect = |path: &Path, why: &str| {
            let loaded = load(path);
            assert_eq!(loaded.config, Config::default());
            assert!(loaded.has_errors());
            assert_eq!(
                loaded.problems,
                vec![error(format!("{}: cannot be read: {why}", path.display()))]
            );
        };

        expect(&dir.0, "not a regular file");

        let fifo = dir.0.join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|status| status.success()));
        expect(&fifo, "not a regular file");

        let big = dir.0.join("big.json");
        let size = MAX_FILE_SIZE + 1;
        std::fs::write(&big, " ".repeat(size as usize)).unwrap();
        expect(&big, &format!("larger than {MAX_FILE_SIZE} bytes"));
        let just_fits = dir.0.join("fits.json");
        std::fs::write(
            &just_fits,
            format!("{{}}{}", " ".repeat(MAX_FILE_SIZE as usize - 2)),
        )
        .unwrap();
        assert_eq!(load(&just_fits).problems, Vec::new());

        let link = dir.0.join("dangling.json");
        std::os::unix::fs::symlink(dir.0.join("nowhere"), &link).unwrap();
        assert_eq!(
            load(&link).problems,
            Vec::new(),
            "a dangling link is a missing file"
        );

        // Permission bits do not stop root, so this only bites as a user.
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let secret = dir.0.join("secret.json");
        std::fs::write(&secret, "{}").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::metadata(&secret).unwrap().uid() != 0 {
            assert!(load(&secret).has_errors());
        }
    }

    #[test]
    fn the_size_cap_is_one_mebibyte_as_the_readme_says() {
        // The other size test derives its sizes from MAX_FILE_SIZE, so it
        // cannot notice the cap itself moving.
        let dir = TempDir::new("cap-1mib");
        let big = dir.0.join("config.json");
        std::fs::write(&big, format!("{{}}{}", " ".repeat(1024 * 1024 - 1))).unwrap();
        let loaded = load(&big);
        assert_eq!(
            loaded.problems,
            vec![error(format!(
                "{}: cannot be read: larger than 1048576 bytes",
                big.display()
            ))]
        );
    }
}
