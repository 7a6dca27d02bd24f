//! The command line: a pure parse into `Command`, and the help texts.

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Daemon { replace: bool, foreground: bool },
    Watchdog,
    On,
    Off,
    RemoveIcons,
    Status { json: bool },
    Sync,
    Presets,
    ConfigCheck,
    Help(&'static str),
    Version,
}

pub const HELP: &str = "\
cowbell: status icons in front of herdr tab names

Usage: cowbell <command> [options]

Commands:
  daemon          run the daemon for this herdr server (--replace, --foreground)
  watchdog        start the daemon if none runs (the pane.agent_detected hook)
  on              clear the off flag and start (or replace) the daemon
  off             stop the daemon, restore every tab name, stay off until `on`
  remove-icons    like off, and strip a leading icon from every tab herdr lists
  status [--json] show the daemon, the server, the configuration and every tab
  sync            one resync in the foreground (or the daemon's, if it runs)
  presets         show every icon preset as a sample tab bar
  config check    print the effective configuration, or its problems
  help            show this text (also -h, --help; `cowbell <command> --help`)
  version         show the version (also -V, --version)

Exit codes:
  0  success (also: a daemon already runs, or cowbell is off)
  1  failure: a file could not be read or written, `on` could not keep a daemon
     up, or (config check) the configuration has errors
  2  usage error
  3  the herdr server could not be reached or refused a request

Environment: HERDR_SOCKET_PATH, HERDR_PLUGIN_STATE_DIR, HERDR_PLUGIN_CONFIG_DIR
and HERDR_PLUGIN_ID, as herdr sets them for plugins (see README.md).
";

const HELP_DAEMON: &str = "\
Usage: cowbell daemon [--replace] [--foreground]

Runs the daemon for the herdr server at HERDR_SOCKET_PATH. If one already runs,
exits 0 with a note. --replace asks the running daemon to hand over (it exits
without touching tab names) and takes its place; the startup hook uses it.
--foreground stays attached and copies the log to stderr.
Signals: SIGTERM or SIGINT restore every tab name and exit; SIGHUP reloads the
configuration; SIGUSR1 exits without touching names; SIGUSR2 restores every
name, records that cowbell is off for this server, and exits (`cowbell off`).
";

const HELP_WATCHDOG: &str = "\
Usage: cowbell watchdog

Starts the daemon if none runs for this server and cowbell is not off;
otherwise does nothing. Silent on success.
";

const HELP_ON: &str = "Usage: cowbell on\n\nClears the off flag and starts (or replaces) the daemon; exits 1 if the\ndaemon did not stay up.\n";
const HELP_OFF: &str = "\
Usage: cowbell off

Stops the daemon, which gives every tab its name back, and keeps cowbell off
for this server (the hooks start nothing) until `cowbell on`.
";
const HELP_REMOVE_ICONS: &str = "\
Usage: cowbell remove-icons

Like `off`, and also strips a leading icon of any preset from every tab herdr
lists, so it cleans up after a crash or before uninstalling. Needs no daemon.
";
const HELP_STATUS: &str = "\
Usage: cowbell status [--json]

Shows whether the daemon runs, the socket and whether herdr answers, on or off,
problems with state.json or the configuration, and per tab: base, current
label, status, fights, cool-down. Exits 3 when herdr does not answer.
";
const HELP_SYNC: &str = "\
Usage: cowbell sync

One resync in the foreground, then exit. With a daemon running, asks it
instead to reload the configuration and resync (SIGHUP).
";
const HELP_PRESETS: &str =
    "Usage: cowbell presets\n\nShows every icon preset as a sample tab bar.\n";
const HELP_CONFIG: &str = "\
Usage: cowbell config check

Prints the effective configuration as JSON, with any warnings on stderr
(exit 0), or its errors (exit 1).
";

/// A parse that failed: the message for stderr.
#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

impl From<lexopt::Error> for UsageError {
    fn from(error: lexopt::Error) -> UsageError {
        // lexopt copies what was typed into its message as it is: an
        // escape sequence in an argument must not reach the terminal raw.
        let text = error.to_string();
        if text.chars().any(crate::text::is_control) {
            let quoted = crate::text::quote(&text);
            return UsageError(quoted[1..quoted.len() - 1].to_string());
        }
        UsageError(text)
    }
}

pub fn parse_from_env() -> Result<Command, UsageError> {
    parse(lexopt::Parser::from_env())
}

#[cfg(test)]
pub fn parse_args<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Result<Command, UsageError> {
    parse(lexopt::Parser::from_args(args))
}

fn parse(mut parser: lexopt::Parser) -> Result<Command, UsageError> {
    use lexopt::prelude::*;
    let Some(arg) = parser.next()? else {
        return Err(UsageError("no command given; try `cowbell --help`".into()));
    };
    let name = match arg {
        Short('h') | Long("help") => return no_more(parser, Command::Help(HELP), HELP),
        Short('V') | Long("version") => return no_more(parser, Command::Version, HELP),
        Value(name) => name.string()?,
        other => return Err(other.unexpected().into()),
    };
    match name.as_str() {
        "daemon" => {
            let (mut replace, mut foreground) = (false, false);
            while let Some(arg) = parser.next()? {
                match arg {
                    Long("replace") => replace = true,
                    Long("foreground") => foreground = true,
                    Short('h') | Long("help") => return Ok(Command::Help(HELP_DAEMON)),
                    other => return Err(other.unexpected().into()),
                }
            }
            Ok(Command::Daemon {
                replace,
                foreground,
            })
        }
        "status" => {
            let mut json = false;
            while let Some(arg) = parser.next()? {
                match arg {
                    Long("json") => json = true,
                    Short('h') | Long("help") => return Ok(Command::Help(HELP_STATUS)),
                    other => return Err(other.unexpected().into()),
                }
            }
            Ok(Command::Status { json })
        }
        "config" => match parser.next()? {
            Some(Value(sub)) if sub == "check" => {
                no_more(parser, Command::ConfigCheck, HELP_CONFIG)
            }
            Some(Short('h') | Long("help")) => Ok(Command::Help(HELP_CONFIG)),
            Some(other) => {
                let UsageError(unexpected) = other.unexpected().into();
                Err(UsageError(format!(
                    "{unexpected}; the config command has one subcommand: check"
                )))
            }
            None => Err(UsageError(
                "config: missing subcommand; try `cowbell config check`".into(),
            )),
        },
        "watchdog" => no_more(parser, Command::Watchdog, HELP_WATCHDOG),
        "on" => no_more(parser, Command::On, HELP_ON),
        "off" => no_more(parser, Command::Off, HELP_OFF),
        "remove-icons" => no_more(parser, Command::RemoveIcons, HELP_REMOVE_ICONS),
        "sync" => no_more(parser, Command::Sync, HELP_SYNC),
        "presets" => no_more(parser, Command::Presets, HELP_PRESETS),
        "help" => no_more(parser, Command::Help(HELP), HELP),
        "version" => no_more(parser, Command::Version, HELP),
        other => Err(UsageError(format!(
            "unknown command {}; try `cowbell --help`",
            crate::text::quote(other)
        ))),
    }
}

/// A command without options still answers `--help`.
fn no_more(
    mut parser: lexopt::Parser,
    command: Command,
    help: &'static str,
) -> Result<Command, UsageError> {
    use lexopt::prelude::*;
    match parser.next()? {
        None => Ok(command),
        Some(Short('h') | Long("help")) => Ok(Command::Help(help)),
        Some(other) => Err(other.unexpected().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, UsageError> {
        parse_args(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn every_command_parses() {
        let table: &[(&[&str], Command)] = &[
            (
                &["daemon"],
                Command::Daemon {
                    replace: false,
                    foreground: false,
                },
            ),
            (
                &["daemon", "--replace"],
                Command::Daemon {
                    replace: true,
                    foreground: false,
                },
            ),
            (
                &["daemon", "--foreground", "--replace"],
                Command::Daemon {
                    replace: true,
                    foreground: true,
                },
            ),
            (&["watchdog"], Command::Watchdog),
            (&["on"], Command::On),
            (&["off"], Command::Off),
            (&["remove-icons"], Command::RemoveIcons),
            (&["status"], Command::Status { json: false }),
            (&["status", "--json"], Command::Status { json: true }),
            (&["sync"], Command::Sync),
            (&["presets"], Command::Presets),
            (&["config", "check"], Command::ConfigCheck),
            (&["--version"], Command::Version),
            (&["-V"], Command::Version),
            (&["version"], Command::Version),
            (&["--help"], Command::Help(HELP)),
            (&["help"], Command::Help(HELP)),
            (&["daemon", "--help"], Command::Help(HELP_DAEMON)),
            (&["off", "-h"], Command::Help(HELP_OFF)),
            (&["config", "--help"], Command::Help(HELP_CONFIG)),
        ];
        for (args, expected) in table {
            assert_eq!(parse(args).as_ref(), Ok(expected), "{args:?}");
        }
    }

    #[test]
    fn unknown_input_is_a_usage_error() {
        for args in [
            &[][..],
            &["dance"],
            &["daemon", "--fast"],
            &["off", "now"],
            &["config"],
            &["config", "show"],
            &["status", "--yaml"],
            &["--frobnicate"],
            &["--help", "bogus"],
            &["--version", "extra"],
        ] {
            let error = parse(args).unwrap_err();
            assert!(!error.0.is_empty(), "{args:?}");
        }
    }

    #[test]
    fn help_lists_every_command() {
        for command in [
            "daemon",
            "watchdog",
            "on",
            "off",
            "remove-icons",
            "status",
            "sync",
            "presets",
            "config check",
        ] {
            assert!(HELP.contains(&format!("\n  {command}")), "{command}");
        }
        // One line each: no description wraps onto a line of its own.
        let commands = HELP.split("Commands:\n").nth(1).unwrap();
        for line in commands.lines().take_while(|line| !line.is_empty()) {
            assert!(!line.starts_with("   "), "{line:?}");
        }
    }

    #[test]
    fn every_command_answers_help_with_its_own_text() {
        let table: &[(&[&str], &'static str, &str)] = &[
            (&["daemon", "-h"], HELP_DAEMON, "daemon"),
            (&["daemon", "--replace", "--help"], HELP_DAEMON, "daemon"),
            (&["watchdog", "--help"], HELP_WATCHDOG, "watchdog"),
            (&["on", "--help"], HELP_ON, "on"),
            (&["off", "--help"], HELP_OFF, "off"),
            (
                &["remove-icons", "--help"],
                HELP_REMOVE_ICONS,
                "remove-icons",
            ),
            (&["status", "--help"], HELP_STATUS, "status"),
            (&["status", "--json", "-h"], HELP_STATUS, "status"),
            (&["sync", "--help"], HELP_SYNC, "sync"),
            (&["presets", "--help"], HELP_PRESETS, "presets"),
            (&["config", "check", "--help"], HELP_CONFIG, "config check"),
            (&["config", "-h"], HELP_CONFIG, "config check"),
        ];
        for (args, help, name) in table {
            assert_eq!(parse(args), Ok(Command::Help(help)), "{args:?}");
            assert!(
                help.starts_with(&format!("Usage: cowbell {name}")),
                "{args:?}"
            );
        }
    }

    #[test]
    fn extra_words_and_unknown_short_options_are_usage_errors() {
        for args in [
            &["version", "extra"][..],
            &["help", "me"],
            &["status", "-j"],
            &["sync", "-x"],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn usage_errors_carry_no_control_characters() {
        for args in [
            &["\u{1b}[31mred"][..],
            &["--\u{1b}[31mred"],
            &["daemon", "--\u{1b}]0;title\u{7}"],
            &["status", "-\u{9b}"],
            &["off", "x\u{1b}[2J"],
            &["config", "--x\u{202e}y"],
        ] {
            let error = parse(args).unwrap_err();
            assert!(
                !error.0.chars().any(crate::text::is_control),
                "{args:?}: {:?}",
                error.0
            );
        }
        let error = parse(&["--\u{1b}[31mred"]).unwrap_err();
        assert_eq!(error.0, "invalid option '--\\u001b[31mred'");
    }
}
