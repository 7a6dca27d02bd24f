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
use crate::text::remove_controls;

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

    /// Opens the log again if its path no longer names the open file:
    /// someone deleted or moved `cowbell.log`, and lines written into the
    /// old file would be lost until the next rotation, days away on a
    /// quiet server.
    pub fn reopen_if_moved(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let same = match (&self.file, std::fs::symlink_metadata(&self.path)) {
            (Some(file), Ok(there)) => file
                .metadata()
                .is_ok_and(|mine| mine.dev() == there.dev() && mine.ino() == there.ino()),
            _ => false,
        };
        if !same {
            self.reopen();
        }
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
    /// `format!` at each of 30 callers cost 1.4 KiB of a binary with a size
    /// budget, see BENCH.md).
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
        let mut written = self.write(&line);
        // A file size limit (ulimit -f) below the cap: rotate there, or
        // every later line is lost. An incoming cap's worth makes sure the
        // full file goes even if it cannot be renamed. (Not an empty log:
        // under a limit smaller than a line, that would put an empty file
        // over the one the last rotation kept.)
        if self.size > 0
            && written
                .as_ref()
                .is_err_and(|e| e.raw_os_error() == Some(libc::EFBIG))
        {
            self.rotate(MAX_LOG_BYTES);
            written = self.write(&line);
        }
        if written.is_ok() {
            self.size += line.len() as u64;
        }
    }

    fn write(&mut self, line: &str) -> std::io::Result<()> {
        match &mut self.file {
            Some(file) => file.write_all(line.as_bytes()),
            None => Err(std::io::ErrorKind::NotFound.into()),
        }
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
    fn a_log_deleted_or_moved_is_opened_again_where_one_looks() {
        let temp = TempDir::new("log-moved");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        log.line("first");
        log.reopen_if_moved();
        log.line("second");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("first") && text.contains("second"), "{text}");
        std::fs::remove_file(&path).unwrap();
        log.reopen_if_moved();
        log.line("after the delete");
        std::fs::rename(&path, temp.0.join("old.log")).unwrap();
        log.reopen_if_moved();
        log.line("after the move");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("after the move"), "{text}");
        assert!(!text.contains("after the delete"), "{text}");
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

    /// logrotate's `create`: the log is moved away and a new empty file put
    /// in its place. The heartbeat must write into the new one, not on
    /// into the moved file.
    #[test]
    fn a_log_replaced_by_a_new_file_is_opened_again() {
        let temp = TempDir::new("log-replaced");
        let path = temp.0.join("cowbell.log");
        let mut log = Log::open(path.clone());
        log.line("before");
        std::fs::rename(&path, temp.0.join("cowbell.log.1")).unwrap();
        std::fs::write(&path, b"").unwrap();
        log.reopen_if_moved();
        log.line("after the rotation");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("after the rotation"), "{text:?}");
        let old = std::fs::read_to_string(temp.0.join("cowbell.log.1")).unwrap();
        assert!(!old.contains("after the rotation"), "{old}");
    }
}
