//! Where things are: herdr's socket, the config file, and the per-server
//! state directory holding state.json, the pidfile and the log.
//!
//! The plugin state directory is shared by every herdr server (session) of
//! the user, so each server gets a subdirectory named after its socket:
//! `default` for herdr's default socket, `session-<name>` for
//! `~/.config/herdr/sessions/<name>/herdr.sock`, and `socket-<hash>` for any
//! other path. Only this module reads the environment for paths.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The names in the per-server directory.
pub const STATE_FILE: &str = "state.json";
pub const PID_FILE: &str = "cowbell.pid";

#[derive(Clone, Debug, PartialEq)]
pub struct Paths {
    pub socket: PathBuf,
    pub config_file: PathBuf,
    pub server_dir: PathBuf,
    pub plugin_id: String,
}

/// A name the environment answers for, or not.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

impl Paths {
    pub fn from_env() -> Result<Paths, String> {
        Paths::from_lookup(&from_env)
    }

    /// The paths from the environment `lookup` gives. Fails, saying what to
    /// set, only when a path is needed that only an absolute HOME could
    /// give: guessing `/` would put files at the root of the filesystem.
    pub fn from_lookup(lookup: Lookup) -> Result<Paths, String> {
        let default_socket = under_home(lookup, "XDG_CONFIG_HOME", ".config")
            .map(|dir| dir.join("herdr/herdr.sock"));
        let socket = match lookup("HERDR_SOCKET_PATH") {
            Some(socket) => PathBuf::from(socket),
            None => {
                let default = default_socket
                    .clone()
                    .ok_or_else(|| unknown("herdr's socket", "HERDR_SOCKET_PATH"))?;
                // herdr's own command line picks a named session so;
                // "default" is its name for the default server.
                match lookup("HERDR_SESSION").filter(|session| session != "default") {
                    Some(session) => default
                        .with_file_name("sessions")
                        .join(session_name(&session)?)
                        .join("herdr.sock"),
                    None => default,
                }
            }
        };
        let state_dir = lookup("HERDR_PLUGIN_STATE_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                Some(
                    under_home(lookup, "XDG_STATE_HOME", ".local/state")?
                        .join("herdr/plugins/cowbell"),
                )
            })
            .ok_or_else(|| unknown("the state directory", "HERDR_PLUGIN_STATE_DIR"))?;
        let plugin_id = lookup("HERDR_PLUGIN_ID")
            .and_then(|id| id.into_string().ok())
            .unwrap_or_else(|| "cowbell".to_string());
        let server_dir = server_dir(&state_dir, &socket, default_socket.as_deref(), lookup)?;
        Ok(Paths {
            socket,
            config_file: config_file(lookup)?,
            server_dir,
            plugin_id,
        })
    }

    pub fn state_file(&self) -> PathBuf {
        self.server_dir.join(STATE_FILE)
    }

    pub fn pid_file(&self) -> PathBuf {
        self.server_dir.join(PID_FILE)
    }

    pub fn log_file(&self) -> PathBuf {
        self.server_dir.join("cowbell.log")
    }
}

fn from_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// Just the config file (`config check` needs nothing else).
pub fn config_file_from_env() -> Result<PathBuf, String> {
    config_file(&from_env)
}

fn config_file(lookup: Lookup) -> Result<PathBuf, String> {
    lookup("HERDR_PLUGIN_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            Some(
                under_home(lookup, "XDG_CONFIG_HOME", ".config")?
                    .join("herdr/plugins/config/cowbell"),
            )
        })
        .map(|dir| dir.join("config.json"))
        .ok_or_else(|| unknown("the config directory", "HERDR_PLUGIN_CONFIG_DIR"))
}

/// `$XDG_…` or `$HOME/…`. A relative XDG value is invalid by the XDG spec,
/// and a relative HOME as bad: the files would move with the working
/// directory.
fn under_home(lookup: Lookup, xdg: &str, in_home: &str) -> Option<PathBuf> {
    let absolute = |name: &str| {
        lookup(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute(xdg).or_else(|| Some(absolute("HOME")?.join(in_home)))
}

fn unknown(what: &str, variable: &str) -> String {
    format!("cannot tell where {what} is without an absolute HOME; set {variable} or HOME")
}

/// `HERDR_SESSION`, if herdr would take it for a session's name.
fn session_name(session: &OsStr) -> Result<&str, String> {
    session
        .to_str()
        .filter(|name| is_session_name(name))
        .ok_or_else(|| {
            format!(
                "HERDR_SESSION={} is no herdr session name (at most 64 of A-Z a-z 0-9 . _ -)",
                session.display()
            )
        })
}

/// A session name as herdr allows it.
fn is_session_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The server's subdirectory of `state_dir`, named by `server_dir_name`.
///
/// A socket path relative to where a command runs (by hand: herdr hands
/// its hooks an absolute one) is named as the absolute path it stands
/// for, or the same server would get a second directory (and a second
/// daemon), and two servers with an `h.sock` each would share one. Any
/// other absolute path is named by a hash of its bytes as spelled:
/// tidying a `//` away would rename the directory of a server whose socket
/// herdr spells so, and a daemon running there would be missed at the
/// upgrade.
fn server_dir(
    state_dir: &Path,
    socket: &Path,
    default_socket: Option<&Path>,
    lookup: Lookup,
) -> Result<PathBuf, String> {
    let name = if socket.is_relative() {
        let cwd = working_dir(lookup).map_err(|error| {
            let why = if error.kind() == std::io::ErrorKind::NotFound {
                "is gone".to_string()
            } else {
                format!("cannot be read ({error})")
            };
            format!(
                "cannot tell where the socket {} is: the working directory {why}",
                socket.display()
            )
        })?;
        server_dir_name(&tidy(&cwd.join(socket)), default_socket)
    } else {
        server_dir_name(socket, default_socket)
    };
    Ok(state_dir.join(name))
}

/// The working directory as the shell spells it (`$PWD` keeps the name of
/// a symlinked directory, as herdr's own spelling of a socket there
/// would), when it is the working directory; else as the system has it.
fn working_dir(lookup: Lookup) -> std::io::Result<PathBuf> {
    let here = std::fs::metadata(".")?;
    let logical = lookup("PWD").map(PathBuf::from).filter(|pwd| {
        pwd.is_absolute()
            && std::fs::metadata(pwd).is_ok_and(|m| m.dev() == here.dev() && m.ino() == here.ino())
    });
    logical.map_or_else(std::env::current_dir, Ok)
}

/// The name of a server's subdirectory (any socket is "another path" when
/// herdr's default is unknown).
pub fn server_dir_name(socket: &Path, default_socket: Option<&Path>) -> String {
    let Some(default_socket) = default_socket else {
        return hashed(socket);
    };
    // (Paths compare by components: a `//` or `/./` here is no matter.)
    if socket == default_socket {
        return "default".to_string();
    }
    // Only herdr's own sessions directory gives a readable name: the same
    // "sessions/<name>/herdr.sock" elsewhere is another server, and two
    // servers must never share a directory (one pidfile, one state.json).
    let sessions = default_socket.with_file_name("sessions");
    let in_sessions = socket.file_name() == Some("herdr.sock".as_ref())
        && socket.parent().and_then(Path::parent) == Some(sessions.as_path());
    let name = socket
        .parent()
        .and_then(Path::file_name)
        .and_then(|name| name.to_str());
    if in_sessions
        && let Some(name) = name
        && is_session_name(name)
        && !name.starts_with('.')
    {
        return format!("session-{name}");
    }
    hashed(socket)
}

/// `path` rid of empty and `.` components: the same file for any file
/// system.
fn tidy(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    let mut tidy = Vec::with_capacity(bytes.len());
    for part in bytes.split(|b| *b == b'/') {
        if part.is_empty() || part == b"." {
            continue;
        }
        if !tidy.is_empty() || bytes.starts_with(b"/") {
            tidy.push(b'/');
        }
        tidy.extend_from_slice(part);
    }
    PathBuf::from(OsString::from_vec(tidy))
}

fn hashed(socket: &Path) -> String {
    format!(
        "socket-{:016x}",
        crate::files::fingerprint(socket.as_os_str().as_encoded_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::tests::TempDir;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn herdr_environment_wins() {
        let paths = Paths::from_lookup(&lookup(&[
            ("HOME", "/home/u"),
            ("HERDR_SOCKET_PATH", "/home/u/.config/herdr/herdr.sock"),
            ("HERDR_PLUGIN_STATE_DIR", "/s"),
            ("HERDR_PLUGIN_CONFIG_DIR", "/c"),
            ("HERDR_PLUGIN_ID", "cowbell-dev"),
        ]))
        .unwrap();
        assert_eq!(paths.server_dir, PathBuf::from("/s/default"));
        assert_eq!(paths.config_file, PathBuf::from("/c/config.json"));
        assert_eq!(paths.plugin_id, "cowbell-dev");
        assert_eq!(paths.state_file(), PathBuf::from("/s/default/state.json"));
    }

    #[test]
    fn fallbacks_follow_xdg_then_home() {
        let paths = Paths::from_lookup(&lookup(&[("HOME", "/home/u")])).unwrap();
        // Run by hand, without herdr's HERDR_PLUGIN_ID: the manifest's id,
        // which the heartbeat looks for among the installed plugins.
        assert_eq!(paths.plugin_id, "cowbell");
        assert_eq!(
            paths.socket,
            PathBuf::from("/home/u/.config/herdr/herdr.sock")
        );
        assert_eq!(
            paths.server_dir,
            PathBuf::from("/home/u/.local/state/herdr/plugins/cowbell/default")
        );
        assert_eq!(
            paths.config_file,
            PathBuf::from("/home/u/.config/herdr/plugins/config/cowbell/config.json")
        );
        let paths = Paths::from_lookup(&lookup(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "/x"),
            ("XDG_STATE_HOME", "/y"),
        ]))
        .unwrap();
        assert_eq!(paths.socket, PathBuf::from("/x/herdr/herdr.sock"));
        assert_eq!(
            paths.server_dir,
            PathBuf::from("/y/herdr/plugins/cowbell/default")
        );
        assert_eq!(
            paths.config_file,
            PathBuf::from("/x/herdr/plugins/config/cowbell/config.json")
        );
    }

    #[test]
    fn relative_values_are_ignored_and_no_home_is_said_not_guessed() {
        let paths = Paths::from_lookup(&lookup(&[
            ("HOME", "/h"),
            ("XDG_CONFIG_HOME", "x"),
            ("XDG_STATE_HOME", "./y"),
        ]))
        .unwrap();
        assert_eq!(paths.socket, PathBuf::from("/h/.config/herdr/herdr.sock"));
        assert_eq!(
            paths.server_dir,
            PathBuf::from("/h/.local/state/herdr/plugins/cowbell/default")
        );
        for home in [&[][..], &[("HOME", "home/u")][..]] {
            let error = Paths::from_lookup(&lookup(home)).unwrap_err();
            assert!(error.contains("HERDR_SOCKET_PATH or HOME"), "{error}");
        }
        let error = Paths::from_lookup(&lookup(&[("HERDR_SOCKET_PATH", "/s.sock")])).unwrap_err();
        assert!(error.contains("the state directory"), "{error}");
        // `config check` needs only its file.
        assert_eq!(
            config_file(&lookup(&[("HERDR_PLUGIN_CONFIG_DIR", "/c")])),
            Ok(PathBuf::from("/c/config.json"))
        );
        // herdr's hooks give everything: no HOME needed. The default socket
        // is unknown then, so the server's directory is named by hash.
        let paths = Paths::from_lookup(&lookup(&[
            ("HERDR_SOCKET_PATH", "/s.sock"),
            ("HERDR_PLUGIN_STATE_DIR", "/s"),
            ("HERDR_PLUGIN_CONFIG_DIR", "/c"),
        ]))
        .unwrap();
        assert!(
            paths.server_dir.to_str().unwrap().starts_with("/s/socket-"),
            "{paths:?}"
        );
    }

    #[test]
    fn each_server_gets_its_own_directory() {
        let default = Path::new("/home/u/.config/herdr/herdr.sock");
        assert_eq!(server_dir_name(default, Some(default)), "default");
        let session = Path::new("/home/u/.config/herdr/sessions/work/herdr.sock");
        assert_eq!(server_dir_name(session, Some(default)), "session-work");
        // The same shape elsewhere is another server: a directory of its own.
        let elsewhere = Path::new("/srv/herdr/sessions/work/herdr.sock");
        assert!(server_dir_name(elsewhere, Some(default)).starts_with("socket-"));
        let odd = Path::new("/home/u/.config/herdr/sessions/../x/herdr.sock");
        assert!(server_dir_name(odd, Some(default)).starts_with("socket-"));
        let a = server_dir_name(Path::new("/tmp/a.sock"), Some(default));
        let b = server_dir_name(Path::new("/tmp/b.sock"), Some(default));
        assert!(a.starts_with("socket-") && a.len() == 23 && a != b);
        assert_eq!(a, server_dir_name(Path::new("/tmp/a.sock"), Some(default)));
    }

    /// The server directory for `socket` as a command would find it, with
    /// HOME /h, the state directory `state` and the environment `more`.
    fn dir_for(state: &Path, socket: &str, more: &[(&str, &str)]) -> PathBuf {
        let state = state.to_str().unwrap();
        let mut vars = vec![
            ("HOME", "/h"),
            ("HERDR_PLUGIN_STATE_DIR", state),
            ("HERDR_SOCKET_PATH", socket),
        ];
        vars.extend_from_slice(more);
        Paths::from_lookup(&lookup(&vars)).unwrap().server_dir
    }

    /// By hand, a socket path relative to the working directory names the
    /// same server as the absolute path: one directory, or a second daemon
    /// would start for it.
    #[test]
    fn a_relative_socket_finds_the_absolute_paths_directory() {
        let state = Path::new("/nowhere/state");
        let cwd = std::env::current_dir().unwrap();
        let want = dir_for(state, cwd.join("h.sock").to_str().unwrap(), &[]);
        for spelling in ["h.sock", "./h.sock", ".//h.sock"] {
            assert_eq!(dir_for(state, spelling, &[]), want, "{spelling}");
        }
        // A PWD that is not the working directory is not believed.
        assert_eq!(dir_for(state, "h.sock", &[("PWD", "/elsewhere")]), want);
        // An absolute path is named as spelled (herdr's own spelling).
        assert_ne!(
            dir_for(state, "/run//h.sock", &[]),
            dir_for(state, "/run/h.sock", &[])
        );
        assert_eq!(tidy(Path::new("/a//./b/")), PathBuf::from("/a/b"));
    }

    /// `..` after a symlinked working directory (`$PWD` names it by the
    /// link) does not lead back up the spelling: read off the text, it
    /// would name another server's directory. Kept as spelled, it names one
    /// of its own.
    #[test]
    fn a_dot_dot_never_names_another_servers_directory() {
        let temp = TempDir::new("pwd-dotdot");
        std::fs::create_dir(temp.0.join("a")).unwrap();
        let cwd = std::env::current_dir().unwrap();
        let link = temp.0.join("a/link");
        std::os::unix::fs::symlink(&cwd, &link).unwrap();
        let state = temp.0.join("state");
        let pwd = [("PWD", link.to_str().unwrap())];
        let beside_the_link = temp.0.join("a/h.sock");
        assert_ne!(
            dir_for(&state, "../h.sock", &pwd),
            dir_for(&state, beside_the_link.to_str().unwrap(), &[])
        );
    }

    /// The shell's PWD keeps the name of a symlinked working directory,
    /// which is how herdr's own spelling of a socket there goes.
    #[test]
    fn a_relative_socket_is_read_against_the_shells_working_directory() {
        let temp = TempDir::new("pwd");
        let link = temp.0.join("link");
        std::os::unix::fs::symlink(std::env::current_dir().unwrap(), &link).unwrap();
        let state = temp.0.join("state");
        let through_link = link.join("h.sock");
        let pwd = [("PWD", link.to_str().unwrap())];
        assert_eq!(
            dir_for(&state, "h.sock", &pwd),
            dir_for(&state, through_link.to_str().unwrap(), &[])
        );
    }

    #[test]
    fn herdr_session_names_a_session_socket_unless_one_is_given() {
        let home = [("HOME", "/h"), ("HERDR_PLUGIN_STATE_DIR", "/s")];
        let with = |more: &[(&'static str, &'static str)]| {
            let vars: Vec<_> = home.iter().chain(more).copied().collect();
            Paths::from_lookup(&lookup(&vars))
        };
        let paths = with(&[("HERDR_SESSION", "work")]).unwrap();
        assert_eq!(
            paths.socket,
            PathBuf::from("/h/.config/herdr/sessions/work/herdr.sock")
        );
        assert_eq!(paths.server_dir, PathBuf::from("/s/session-work"));
        // herdr's name for its default server.
        let paths = with(&[("HERDR_SESSION", "default")]).unwrap();
        assert_eq!(paths.socket, PathBuf::from("/h/.config/herdr/herdr.sock"));
        assert_eq!(paths.server_dir, PathBuf::from("/s/default"));
        let paths = with(&[("HERDR_SESSION", "work"), ("HERDR_SOCKET_PATH", "/x.sock")]).unwrap();
        assert_eq!(paths.socket, PathBuf::from("/x.sock"));
        for bad in ["../x", "a/b", "..", "my work"] {
            let error = with(&[("HERDR_SESSION", bad)]).unwrap_err();
            assert!(error.contains("no herdr session name"), "{bad}: {error}");
        }
        let error = Paths::from_lookup(&lookup(&[("HERDR_SESSION", "work")])).unwrap_err();
        assert!(error.contains("HERDR_SOCKET_PATH or HOME"), "{error}");
    }

    #[test]
    fn only_short_plain_session_names_are_used_as_they_are() {
        let default = Path::new("/h/.config/herdr/herdr.sock");
        let dir = |name: &str| {
            let socket = format!("/h/.config/herdr/sessions/{name}/herdr.sock");
            server_dir_name(Path::new(&socket), Some(default))
        };
        let longest = "x".repeat(64);
        assert_eq!(dir(&longest), format!("session-{longest}"));
        assert_eq!(dir("a.b_c-1"), "session-a.b_c-1");
        // "session-" and 250 bytes would not fit in a file name (255).
        for name in [
            "x".repeat(65),
            "x".repeat(250),
            ".hidden".into(),
            "my work".into(),
            "wörk".into(),
        ] {
            assert!(
                dir(&name).starts_with("socket-"),
                "{name:?}: {}",
                dir(&name)
            );
        }
        // Another socket in a session's directory is another server.
        let other = Path::new("/h/.config/herdr/sessions/work/other.sock");
        assert!(server_dir_name(other, Some(default)).starts_with("socket-"));
    }
}
