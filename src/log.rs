//! The daemon's log: `cowbell.log` in the per-server directory.
//!
//! One line per notable event, prefixed with a UTC timestamp, cut after
//! 4 KiB and free of control characters. The file is capped at 1 MiB: past
//! that it becomes `cowbell.log.1` (replacing the previous one) and a new
//! file starts, or, when it cannot be renamed, starts again empty. A log
//! that cannot be written is not a reason to stop keeping icons right, so
//! write failures are ignored (and `status` still shows the daemon and
//! every tab).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::files;

pub const MAX_LOG_BYTES: u64 = 1 << 20;

/// A line longer than this (a rename to a name of a megabyte, say) is cut.
pub const MAX_LINE_BYTES: usize = 4096;

pub struct Log {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    /// Also copy lines to stderr (`daemon --foreground`).
    pub echo_to_stderr: bool,
}

impl Log {
    pub fn open(path: PathBuf) -> Log {
        let mut log = Log {
            path,
            file: None,
            size: 0,
            echo_to_stderr: false,
        };
        log.reopen();
        log
    }

    fn reopen(&mut self) {
        self.file = files::open_private(&self.path, true).ok();
        self.size = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
    }

    /// The full log becomes `cowbell.log.1` and a new one starts (also
    /// when someone moved or deleted the log meanwhile). When the rename
    /// fails and the full file is still there (a read-only directory, a
    /// directory in the way) it starts again empty instead, so it never
    /// outgrows its cap.
    fn rotate(&mut self, incoming: u64) {
        let mut rotated = self.path.clone().into_os_string();
        rotated.push(".1");
        let _ = std::fs::rename(&self.path, rotated);
        self.reopen();
        if self.size + incoming > MAX_LOG_BYTES
            && let Some(file) = &self.file
            && file.set_len(0).is_ok()
        {
            self.size = 0;
        }
    }

    pub fn line(&mut self, message: &str) {
        self.line_fmt(format_args!("{message}"));
    }

    /// `line` for a message with values in it: `format_args!` hands the
    /// pieces over, so the caller builds no `String` of its own (that
    /// `format!` at each of 30 callers cost 1.4 KiB of binary, issue 2).
    pub fn line_fmt(&mut self, message: std::fmt::Arguments<'_>) {
        let stamp = utc_timestamp(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        let mut line = format!("{stamp} [{}] {message}", std::process::id());
        // Text from herdr reaches messages quoted, but one raw escape
        // sequence would be one too many in a file people `cat`.
        remove_controls(&mut line);
        if line.len() > MAX_LINE_BYTES {
            let mut cut = MAX_LINE_BYTES;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            let more = line.len() - cut;
            line.truncate(cut);
            line.push_str(&format!(" ... ({more} bytes more)"));
        }
        line.push('\n');
        if self.echo_to_stderr {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        if self.size + line.len() as u64 > MAX_LOG_BYTES {
            self.rotate(line.len() as u64);
        }
        if let Some(file) = &mut self.file
            && file.write_all(line.as_bytes()).is_ok()
        {
            self.size += line.len() as u64;
        }
    }
}

/// A character that must not reach a line of text raw: the C0 and C1
/// controls (U+009B is a CSI), the Unicode line and paragraph separators,
/// which break a line as surely as a newline, and the bidirectional
/// controls, which would turn the rest of it around.
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Drops every `is_control` character (one copy of `retain` for both users).
pub fn remove_controls(text: &mut String) {
    text.retain(|c| !is_control(c));
}

/// A character that shows nothing by itself: a mark on the character
/// before it (a variation selector, a combining accent), a zero-width one,
/// or a blank filler.
pub fn shows_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{0300}'..='\u{036f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'..='\u{2064}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{e0100}'..='\u{e01ef}'
    )
}

/// A string as it appears in messages: JSON-quoted, so control characters
/// and quotes are visible (and without std's Debug machinery).
pub fn quote(text: &str) -> String {
    // JSON escapes only C0 controls: the others are escaped here, and so is
    // what shows nothing before the first character that shows (a lone
    // U+FE0F would print as `""`); after it, a mark belongs to an emoji.
    let mut quoted = String::new();
    let mut shown = false;
    for c in miniserde::json::to_string(text).chars() {
        if is_control(c) || (!shown && shows_nothing(c)) {
            // As JSON writes it: beyond U+FFFF, a UTF-16 surrogate pair.
            for unit in c.encode_utf16(&mut [0; 2]) {
                quoted.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            shown |= c != '"' && !c.is_whitespace();
            quoted.push(c);
        }
    }
    quoted
}

/// An id as it appears in messages: as it is, unless it holds a control
/// character (herdr's ids never do, but a message must not carry one).
pub fn shown(id: &str) -> std::borrow::Cow<'_, str> {
    if id.chars().any(is_control) {
        std::borrow::Cow::Owned(quote(id))
    } else {
        std::borrow::Cow::Borrowed(id)
    }
}

/// `quote` for what a person wrote (a config key or value): past 40
/// characters it is cut, with `...` after the closing quote, so one long
/// string cannot flood a message.
pub fn quote_short(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", quote(&text[..cut])),
        None => quote(text),
    }
}

/// `2026-11-30T05:02:36Z` from Unix seconds (days-to-civil, Howard
/// Hinnant's algorithm), to avoid a date crate.
pub fn utc_timestamp(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let seconds = unix_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::tests::TempDir;

    #[test]
    fn quote_shows_what_would_print_as_nothing() {
        assert_eq!(quote("\u{fe0f}"), r#""\ufe0f""#);
        assert_eq!(quote("\u{e0100}"), r#""\udb40\udd00""#);
        assert_eq!(quote(" \u{200b}x"), r#"" \u200bx""#);
        assert_eq!(quote("a\u{202e}b\n"), r#""a\u202eb\n""#);
        // A variation selector after an emoji is part of it.
        assert_eq!(quote("\u{2764}\u{fe0f}"), "\"\u{2764}\u{fe0f}\"");
        assert_eq!(quote(r#"say "hi""#), r#""say \"hi\"""#);
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_796_014_956), "2026-11-30T05:02:36Z");
    }

    #[test]
    fn the_log_rotates_at_one_mebibyte() {
        let temp = TempDir::new("log");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        let message = "x".repeat(1000);
        for _ in 0..1100 {
            log.line(&message);
        }
        let size = std::fs::metadata(&path).unwrap().len();
        let rotated = std::fs::metadata(temp.0.join("cowbell.log.1"))
            .unwrap()
            .len();
        assert!(
            size <= MAX_LOG_BYTES && rotated <= MAX_LOG_BYTES,
            "{size} {rotated}"
        );
        assert!(size + rotated > 1_000_000);
    }

    #[test]
    fn a_log_that_cannot_rotate_starts_again_instead_of_growing() {
        let temp = TempDir::new("log-stuck");
        let path = temp.0.join("cowbell.log");
        // A non-empty directory where the rotated file would go.
        std::fs::create_dir_all(temp.0.join("cowbell.log.1/x")).unwrap();
        let mut log = Log::open(path.clone());
        let message = "x".repeat(1000);
        for _ in 0..3000 {
            log.line(&message);
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size <= MAX_LOG_BYTES, "{size}");
    }

    #[test]
    fn a_log_deleted_while_open_comes_back_at_the_next_rotation() {
        let temp = TempDir::new("log-deleted");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        std::fs::remove_file(&path).unwrap();
        let message = "x".repeat(1000);
        for _ in 0..1100 {
            log.line(&message);
        }
        assert!(path.exists());
    }

    #[test]
    fn lines_are_cut_and_rid_of_control_characters() {
        let temp = TempDir::new("log-lines");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        log.line("a \u{1b}[2J\u{9b}31m\tb\rc\nd");
        log.line(&"é".repeat(100_000));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].ends_with("] a [2J31mbcd"), "{}", lines[0]);
        assert!(lines[1].len() <= MAX_LINE_BYTES + 40, "{}", lines[1].len());
        assert!(lines[1].ends_with("bytes more)"), "{}", &lines[1][4000..]);
    }

    #[test]
    fn an_unwritable_log_is_not_fatal() {
        let mut log = Log::open(PathBuf::from("/nonexistent/dir/cowbell.log"));
        log.line("still fine");
    }

    #[test]
    fn a_long_line_is_cut_after_four_kibibytes() {
        let temp = TempDir::new("log-4k");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        log.line(&"x".repeat(10_000));
        let text = std::fs::read_to_string(&path).unwrap();
        let (kept, more) = text.split_once(" ... (").unwrap();
        assert_eq!(kept.len(), 4096);
        assert!(more.ends_with(" bytes more)\n"), "{more}");
    }

    #[test]
    fn bidirectional_controls_and_separators_are_control_characters() {
        for c in [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{2028}', '\u{2029}',
            '\u{85}', '\u{9b}', '\u{7f}',
        ] {
            assert!(is_control(c), "U+{:04X}", c as u32);
        }
        // Emoji sequences need the joiner and the variation selector.
        for c in [
            'a', 'é', '🔴', '\u{200d}', '\u{fe0f}', '\u{2065}', '\u{206a}',
        ] {
            assert!(!is_control(c), "U+{:04X}", c as u32);
        }
    }
}
