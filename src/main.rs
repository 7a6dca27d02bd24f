//! cowbell: status icons in front of herdr tab names.
//!
//! `main` parses the command line and hands over to the command; every
//! concern lives in a module of its own:
//! - the pure core: `labels` (icons, compose, strip), `resync` (what every
//!   tab should be called, with `tab_map` its tabs by id), `fights` (rename
//!   fights and cool-downs), `pane_statuses` (which status events are news);
//! - the herdr client: `herdr`;
//! - the daemon: `daemon` (pidfile lock, detaching), `event_loop` (the one
//!   poll loop), `signals` (the self-pipe), `sys` (the system calls);
//! - on disk: `config` (with `json_check`, its JSON reader that knows
//!   lines and columns), `state`, `log`, `files`, `paths`;
//! - the command line: `cli`, `commands`, `error`;
//! - `text`: outside text made safe for the log, terminal and messages.

/// `print!` and `println!` for the person at the terminal, without their
/// panic on a closed pipe (`cowbell presets | head -1`): by the time a
/// command prints, its work is done, and a reader that left changes nothing.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}
/// `eprintln!` without the panic on a closed stderr.
macro_rules! complain {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod cli;
mod commands;
mod config;
mod daemon;
mod error;
mod event_loop;
mod fights;
mod files;
mod herdr;
mod json_check;
mod labels;
mod log;
mod pane_statuses;
mod paths;
mod resync;
mod signals;
mod state;
mod sys;
mod tab_map;
mod text;

use std::process::ExitCode;

use cli::Command;
use paths::Paths;

fn main() -> ExitCode {
    signals::ignore_file_size_limit();
    sys::private_umask();
    let command = match cli::parse_from_env() {
        Ok(command) => command,
        Err(error) => {
            complain!("cowbell: {}", error.0);
            return ExitCode::from(2);
        }
    };
    // Only the commands that use them need the paths (and HOME).
    let paths = Paths::from_env();
    let result = match (command, &paths) {
        (Command::Help(text), _) => {
            say_raw!("{text}");
            Ok(0)
        }
        (Command::Version, _) => {
            say!("cowbell {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        (Command::Presets, _) => commands::presets(),
        (Command::ConfigCheck, _) => match paths::config_file_from_env() {
            Ok(config_file) => commands::config_check(&config_file),
            Err(why) => Err(no_paths(&why)),
        },
        (_, Err(why)) => Err(no_paths(why)),
        (
            Command::Daemon {
                replace,
                foreground,
            },
            Ok(paths),
        ) => commands::daemon(paths, replace, foreground),
        (Command::Watchdog, Ok(paths)) => commands::watchdog(paths),
        (Command::On, Ok(paths)) => commands::on(paths),
        (Command::Off, Ok(paths)) => commands::off(paths, false),
        (Command::RemoveIcons, Ok(paths)) => commands::off(paths, true),
        (Command::Status { json }, Ok(paths)) => commands::status(paths, json),
        (Command::Sync, Ok(paths)) => commands::sync(paths),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            complain!("{error}");
            if let Ok(paths) = &paths {
                commands::notify_action_failure(paths, &error);
            }
            ExitCode::from(error.exit_code())
        }
    }
}

fn no_paths(why: &str) -> error::Error {
    error::Error::Io {
        what: "finding cowbell's files".into(),
        source: std::io::Error::other(why),
    }
}
