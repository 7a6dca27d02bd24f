//! Several herdr servers at once, sharing one plugin state directory, and
//! the environment herdr hands to cowbell: each command reaches its own
//! server's daemon and state, and one server's socket maps to one
//! per-server directory when a command run by hand spells its path
//! relative to where it runs, or names it by `HERDR_SESSION`.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::cowbell::{alive, bin, processes, signal, wait_dead};
use support::fake_herdr::{FakeHerdr, Options};
use support::tempdir::TempDir;

const SECOND: Duration = Duration::from_secs(1);

/// One user: a HOME with herdr's default socket and sessions directory, the
/// shared plugin state and config directories.
struct User {
    dir: TempDir,
    home: PathBuf,
    state_dir: PathBuf,
    config_dir: PathBuf,
    scale: u32,
}

/// A server of that user, with one workspace.
struct Server {
    herdr: FakeHerdr,
    workspace: String,
}

impl Server {
    fn tab(&self, name: &str) -> (String, String) {
        let tab = self.herdr.add_tab(&self.workspace, Some(name));
        let pane = self.herdr.panes_of(&tab)[0].clone();
        (tab, pane)
    }

    fn expect_label(&self, tab: &str, label: &str, timeout: Duration) {
        let ok = self.herdr.wait_until(timeout, |s| s.label(tab) == label);
        assert!(
            ok,
            "{}: tab {tab}: expected {label:?}, have {:?} after {timeout:?}",
            self.herdr.socket_path().display(),
            self.herdr.label(tab),
        );
    }

    fn expect_steady(&self, tab: &str, label: &str, period: Duration) {
        let deadline = Instant::now() + period;
        while Instant::now() < deadline {
            assert_eq!(
                self.herdr.label(tab),
                label,
                "{}: tab {tab} changed",
                self.herdr.socket_path().display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl User {
    fn new() -> User {
        let dir = TempDir::new();
        let home = dir.subdir("h");
        std::fs::create_dir_all(home.join(".config/herdr/sessions")).unwrap();
        let state_dir = dir.join("state");
        let config_dir = dir.subdir("config");
        User {
            dir,
            home,
            state_dir,
            config_dir,
            scale: 1,
        }
    }

    fn default_socket(&self) -> PathBuf {
        self.home.join(".config/herdr/herdr.sock")
    }

    fn session_socket(&self, name: &str) -> PathBuf {
        let dir = self.home.join(".config/herdr/sessions").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("herdr.sock")
    }

    fn serve(&self, socket: &Path) -> Server {
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let herdr = FakeHerdr::start_with(socket, Options::default());
        let workspace = herdr.add_workspace("alpha");
        Server { herdr, workspace }
    }

    /// herdr's environment for a command of the server at `socket`, with
    /// HOME (herdr's own environment passes it on).
    fn env(&self, socket: &Path) -> Vec<(String, String)> {
        let p = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            ("HOME".into(), p(&self.home)),
            ("HERDR_SOCKET_PATH".into(), p(socket)),
            ("HERDR_ENV".into(), "1".into()),
            ("HERDR_PLUGIN_ID".into(), "cowbell".into()),
            ("HERDR_PLUGIN_CONFIG_DIR".into(), p(&self.config_dir)),
            ("HERDR_PLUGIN_STATE_DIR".into(), p(&self.state_dir)),
            ("COWBELL_TIME_SCALE".into(), self.scale.to_string()),
        ]
    }

    /// Runs `cowbell <args>` in `cwd` with exactly `env` (and PATH).
    fn run_env(&self, cwd: &Path, env: &[(String, String)], args: &[&str]) -> Output {
        let mut command = Command::new(bin());
        command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .stdin(Stdio::null());
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.envs(env.iter().map(|(k, v)| (k, v)));
        command.output().expect("run cowbell")
    }

    /// Runs `cowbell <args>` for the server at `socket` (spelled as given).
    fn run(&self, socket: &Path, args: &[&str]) -> Output {
        self.run_env(self.dir.path(), &self.env(socket), args)
    }

    fn startup(&self, socket: &Path) {
        let out = self.run(socket, &["daemon", "--replace"]);
        assert!(out.status.success(), "startup: {}", text(&out));
    }

    /// The per-server directories, by name.
    fn server_dirs(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.state_dir)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Every live cowbell daemon of this user (any server), as
    /// (pid, its HERDR_SOCKET_PATH).
    fn daemons(&self) -> Vec<(u32, String)> {
        let needle = format!(
            "HERDR_PLUGIN_STATE_DIR={}",
            self.state_dir.to_string_lossy()
        );
        let mut found: Vec<(u32, String)> = processes()
            .into_iter()
            .filter(|(_, environ)| environ.contains(&needle))
            .map(|(pid, environ)| {
                let socket = environ
                    .iter()
                    .find_map(|kv| kv.strip_prefix("HERDR_SOCKET_PATH="))
                    .unwrap_or("")
                    .to_string();
                (pid, socket)
            })
            .collect();
        found.sort();
        found
    }

    fn wait_for_daemons(&self, n: usize, timeout: Duration) -> Vec<(u32, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            let daemons = self.daemons();
            if daemons.len() == n || Instant::now() >= deadline {
                return daemons;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for User {
    fn drop(&mut self) {
        for (pid, _) in self.daemons() {
            signal(pid, libc::SIGKILL);
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn pid_in(status_json: &str) -> Option<u32> {
    let rest = status_json.split("\"pid\":").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

// ---------------------------------------------------------------------------
// Three servers at once
// ---------------------------------------------------------------------------

#[test]
fn three_servers_each_command_reaches_only_its_own_daemon() {
    let user = User::new();
    let sockets = [
        user.default_socket(),
        user.session_socket("work"),
        user.dir.join("other.sock"),
    ];
    let servers: Vec<Server> = sockets.iter().map(|s| user.serve(s)).collect();
    let tabs: Vec<(String, String)> = servers.iter().map(|s| s.tab("api")).collect();
    for socket in &sockets {
        user.startup(socket);
    }
    let daemons = user.wait_for_daemons(3, 3 * SECOND);
    assert_eq!(daemons.len(), 3, "{daemons:?}");
    let dirs = user.server_dirs();
    assert_eq!(dirs.len(), 3, "{dirs:?}");
    assert!(dirs.contains(&"default".into()) && dirs.contains(&"session-work".into()));
    for (server, (tab, pane)) in servers.iter().zip(&tabs) {
        server.herdr.set_status(pane, "blocked");
        server.expect_label(tab, "🔴 api", 2 * SECOND);
    }
    // status names each server's own daemon.
    let mut pids = Vec::new();
    for socket in &sockets {
        let out = user.run(socket, &["status", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let json = String::from_utf8_lossy(&out.stdout).into_owned();
        let pid = pid_in(&json).unwrap_or_else(|| panic!("no pid: {json}"));
        let (_, daemon_socket) = daemons.iter().find(|(p, _)| *p == pid).unwrap();
        assert_eq!(Path::new(daemon_socket), socket.as_path());
        pids.push(pid);
    }
    // sync and the watchdog reach only their own.
    for socket in &sockets {
        let out = user.run(socket, &["sync"]);
        assert!(out.status.success(), "{}", text(&out));
        let out = user.run(socket, &["watchdog"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    assert_eq!(user.daemons().len(), 3);
    // off on the session leaves the others' icons and daemons alone.
    let out = user.run(&sockets[1], &["off"]);
    assert!(out.status.success(), "{}", text(&out));
    servers[1].expect_label(&tabs[1].0, "api", SECOND);
    assert!(wait_dead(pids[1], 2 * SECOND));
    for index in [0, 2] {
        assert!(alive(pids[index]));
        servers[index].expect_steady(&tabs[index].0, "🔴 api", Duration::from_millis(300));
        servers[index].herdr.set_status(&tabs[index].1, "working");
        servers[index].expect_label(&tabs[index].0, "🟡 api", 2 * SECOND);
    }
    // The watchdog of the server that is off starts nothing; the others' run.
    let out = user.run(&sockets[1], &["watchdog"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(user.daemons().len(), 2);
    // remove-icons on the default server touches only its tabs.
    let out = user.run(&sockets[0], &["remove-icons"]);
    assert!(out.status.success(), "{}", text(&out));
    servers[0].expect_label(&tabs[0].0, "api", SECOND);
    servers[2].expect_steady(&tabs[2].0, "🟡 api", Duration::from_millis(300));
    assert!(alive(pids[2]));
    // on for the session brings back its daemon only.
    let out = user.run(&sockets[1], &["on"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(user.wait_for_daemons(2, 2 * SECOND).len(), 2);
}

#[test]
fn one_server_going_away_or_disabling_the_plugin_leaves_the_others() {
    let mut user = User::new();
    user.scale = 60; // idle exit after 2 s, heartbeat every second
    let sockets = [
        user.default_socket(),
        user.session_socket("a"),
        user.session_socket("b"),
    ];
    let mut servers: Vec<Server> = sockets.iter().map(|s| user.serve(s)).collect();
    let tabs: Vec<(String, String)> = servers.iter().map(|s| s.tab("api")).collect();
    for socket in &sockets {
        user.startup(socket);
    }
    assert_eq!(user.wait_for_daemons(3, 3 * SECOND).len(), 3);
    for (server, (tab, pane)) in servers.iter().zip(&tabs) {
        server.herdr.set_status(pane, "working");
        server.expect_label(tab, "🟡 api", 2 * SECOND);
    }
    // Session a stops for good: its daemon exits after the idle time.
    servers[1].herdr.stop();
    // Session b's plugin is disabled: its daemon restores and exits.
    servers[2].herdr.set_plugin("cowbell", false);
    servers[2].expect_label(&tabs[2].0, "api", 4 * SECOND);
    let left = user.wait_for_daemons(1, 6 * SECOND);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(Path::new(&left[0].1), sockets[0].as_path());
    servers[0].herdr.set_status(&tabs[0].1, "blocked");
    servers[0].expect_label(&tabs[0].0, "🔴 api", 2 * SECOND);
}

// ---------------------------------------------------------------------------
// One server, one directory, however its path is spelled
// ---------------------------------------------------------------------------

/// Starts a daemon with the socket spelled `first`, then runs `off` with it
/// spelled `second`: the daemon must be stopped and the name given back.
fn off_through_another_spelling(user: &User, first: &Path, second: &Path, cwd: Option<&Path>) {
    let server = user.serve(first);
    let (tab, pane) = server.tab("api");
    user.startup(first);
    assert_eq!(user.wait_for_daemons(1, 3 * SECOND).len(), 1);
    server.herdr.set_status(&pane, "blocked");
    server.expect_label(&tab, "🔴 api", 2 * SECOND);
    let out = match cwd {
        Some(cwd) => user.run_env(cwd, &user.env(second), &["off"]),
        None => user.run(second, &["off"]),
    };
    let dirs = user.server_dirs();
    let daemons = user.wait_for_daemons(0, 2 * SECOND);
    assert!(
        daemons.is_empty(),
        "`off` with the socket spelled {second:?} left the daemon started as {first:?} \
         running: {daemons:?}; per-server dirs {dirs:?}; off said {}",
        text(&out)
    );
    server.expect_label(&tab, "api", SECOND);
    server.expect_steady(&tab, "api", Duration::from_millis(500));
}

#[test]
fn a_relative_socket_path_is_the_same_server_as_the_absolute_one() {
    let user = User::new();
    let run = user.dir.subdir("run");
    off_through_another_spelling(&user, &run.join("h.sock"), Path::new("h.sock"), Some(&run));
}

/// Two servers reached by the same relative spelling from two working
/// directories are two servers: they must not share one directory (one
/// daemon would replace the other's).
#[test]
fn the_same_relative_socket_path_from_two_directories_is_two_servers() {
    let user = User::new();
    let a = user.dir.subdir("a");
    let b = user.dir.subdir("b");
    let server_a = user.serve(&a.join("h.sock"));
    let server_b = user.serve(&b.join("h.sock"));
    let (tab_a, pane_a) = server_a.tab("api");
    let (tab_b, pane_b) = server_b.tab("web");
    let relative = user.env(Path::new("h.sock"));
    for cwd in [&a, &b] {
        let out = user.run_env(cwd, &relative, &["daemon", "--replace"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let daemons = user.wait_for_daemons(2, 3 * SECOND);
    server_b.herdr.set_status(&pane_b, "blocked");
    server_b.expect_label(&tab_b, "🔴 web", 2 * SECOND);
    server_a.herdr.set_status(&pane_a, "blocked");
    let ok = server_a
        .herdr
        .wait_until(2 * SECOND, |s| s.label(&tab_a) == "🔴 api");
    assert!(
        ok && daemons.len() == 2,
        "server a has no daemon once server b's started: label {:?}, daemons {daemons:?}, \
         dirs {:?}",
        server_a.herdr.label(&tab_a),
        user.server_dirs()
    );
}

// ---------------------------------------------------------------------------
// The environment
// ---------------------------------------------------------------------------

#[test]
fn xdg_config_home_set_relative_is_ignored_for_the_default_server() {
    let user = User::new();
    let socket = user.default_socket();
    let server = user.serve(&socket);
    let (tab, pane) = server.tab("api");
    let mut env = user.env(&socket);
    env.push(("XDG_CONFIG_HOME".into(), "rel".into()));
    env.push(("XDG_STATE_HOME".into(), "rel".into()));
    let out = user.run_env(user.dir.path(), &env, &["daemon", "--replace"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(user.wait_for_daemons(1, 3 * SECOND).len(), 1);
    server.herdr.set_status(&pane, "blocked");
    server.expect_label(&tab, "🔴 api", 2 * SECOND);
    assert_eq!(user.server_dirs(), vec!["default".to_string()]);
    assert!(!user.dir.join("rel").exists());
}

// ---------------------------------------------------------------------------
// A server replaced on the same path while its daemon waits to reconnect
// ---------------------------------------------------------------------------

/// A named session is deleted (its directory too) and made again with
/// other tabs while the daemon waits out its backoff: the new session's
/// tabs, which reuse the old ids, get their own names, icons by their own
/// status, and `off` gives them their own names, never the old session's.
#[test]
fn a_session_deleted_and_made_again_keeps_its_new_tabs_names() {
    let mut user = User::new();
    user.scale = 10; // backoff 50 ms .. 3 s, idle exit 12 s
    let socket = user.session_socket("work");
    let other = user.serve(&user.session_socket("other"));
    let (other_tab, other_pane) = other.tab("keep");
    let mut old = user.serve(&socket);
    let (t1, p1) = old.tab("api");
    let (t2, p2) = old.tab("docs");
    user.startup(&socket);
    user.startup(other.herdr.socket_path());
    assert_eq!(user.wait_for_daemons(2, 3 * SECOND).len(), 2);
    old.herdr.set_status(&p1, "blocked");
    old.herdr.set_status(&p2, "working");
    other.herdr.set_status(&other_pane, "blocked");
    old.expect_label(&t1, "🔴 api", 2 * SECOND);
    old.expect_label(&t2, "🟡 docs", 2 * SECOND);
    other.expect_label(&other_tab, "🔴 keep", 2 * SECOND);
    // The session goes, with its directory.
    old.herdr.stop();
    drop(old);
    std::fs::remove_dir_all(socket.parent().unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Made again: the first tab unnamed (herdr's "1"), the second another name.
    let new = user.serve(&user.session_socket("work"));
    let n1 = new.herdr.add_tab(&new.workspace, None);
    let (n2, q2) = new.tab("web");
    assert_eq!((n1.as_str(), n2.as_str()), (t1.as_str(), t2.as_str()));
    new.herdr.set_status(&new.herdr.panes_of(&n1)[0], "blocked");
    new.herdr.set_status(&q2, "blocked");
    new.expect_label(&n2, "🔴 web", 5 * SECOND);
    new.expect_steady(&n1, "1", Duration::from_millis(500));
    let out = user.run(&socket, &["off"]);
    assert!(out.status.success(), "{}", text(&out));
    new.expect_label(&n2, "web", SECOND);
    new.expect_steady(&n1, "1", Duration::from_millis(300));
    // The other session was never touched.
    other.expect_steady(&other_tab, "🔴 keep", Duration::from_millis(300));
    assert_eq!(user.daemons().len(), 1);
}

#[test]
fn state_and_config_directories_with_spaces_and_newlines_work() {
    let mut user = User::new();
    user.state_dir = user.dir.join("st ate\nx");
    user.config_dir = user.dir.subdir("con fig\ny");
    std::fs::write(user.config_dir.join("config.json"), r#"{"preset":"ascii"}"#).unwrap();
    let socket = user.session_socket("work");
    let server = user.serve(&socket);
    let (tab, pane) = server.tab("api");
    user.startup(&socket);
    assert_eq!(user.wait_for_daemons(1, 3 * SECOND).len(), 1);
    server.herdr.set_status(&pane, "blocked");
    server.expect_label(&tab, "[!] api", 2 * SECOND);
    let out = user.run(&socket, &["status"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = user.run(&socket, &["off"]);
    assert!(out.status.success(), "{}", text(&out));
    server.expect_label(&tab, "api", SECOND);
    assert!(user.wait_for_daemons(0, 2 * SECOND).is_empty());
}

#[test]
fn an_unwritable_state_directory_is_said_and_starts_no_daemon() {
    // (Tests may run as root, which writes through any mode: a path under a
    // plain file cannot be made by anyone.)
    let mut user = User::new();
    std::fs::write(user.dir.join("file"), "").unwrap();
    user.state_dir = user.dir.join("file/state");
    let socket = user.session_socket("work");
    let server = user.serve(&socket);
    let (tab, pane) = server.tab("api");
    server.herdr.set_status(&pane, "blocked");
    for args in [&["daemon", "--replace"][..], &["watchdog"], &["sync"]] {
        let out = user.run(&socket, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1)
                && stderr.contains("session-work/cowbell.pid")
                && stderr.contains("Not a directory"),
            "{args:?}: {}",
            text(&out)
        );
    }
    // No daemon can run there: status says so, and why the state is unusable.
    let out = user.run(&socket, &["status"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("daemon: not running") && stdout.contains("state.json unusable"),
        "{}",
        text(&out)
    );
    assert!(user.daemons().is_empty());
    server.expect_steady(&tab, "api", Duration::from_millis(300));
}

/// Under a umask of 177 (files 0600), mkdir made the missing parents of
/// the state directory 0600: no daemon could start, then or later.
#[test]
fn a_state_directory_made_under_a_strict_umask_can_be_used() {
    let mut user = User::new();
    user.state_dir = user.dir.join("state/herdr/plugins/cowbell");
    let socket = user.default_socket();
    let server = user.serve(&socket);
    let (tab, pane) = server.tab("api");
    server.herdr.set_status(&pane, "blocked");
    let mut command = Command::new("sh");
    command
        .args(["-c", "umask 177 && exec \"$0\" daemon --replace"])
        .arg(bin())
        .current_dir(user.dir.path())
        .env_clear()
        .envs(user.env(&socket))
        .stdin(Stdio::null());
    let out = command.output().expect("run sh");
    assert!(out.status.success(), "{}", text(&out));
    server.expect_label(&tab, "🔴 api", 3 * SECOND);
    let mut dir = user.state_dir.join("default");
    while dir != user.dir.path() {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
        dir.pop();
    }
}

/// herdr's own CLI picks a named session from HERDR_SESSION (`herdr
/// --session work` sets it; its panes carry it) when HERDR_SOCKET_PATH is
/// not set. `HERDR_SESSION=work cowbell off`, run outside herdr, must turn
/// off the session "work", not the default server.
#[test]
fn herdr_session_picks_the_named_session_when_no_socket_path_is_set() {
    let user = User::new();
    let default = user.serve(&user.default_socket());
    let work_socket = user.session_socket("work");
    let work = user.serve(&work_socket);
    let (dtab, dpane) = default.tab("api");
    let (wtab, wpane) = work.tab("web");
    user.startup(&user.default_socket());
    user.startup(&work_socket);
    assert_eq!(user.wait_for_daemons(2, 3 * SECOND).len(), 2);
    default.herdr.set_status(&dpane, "blocked");
    work.herdr.set_status(&wpane, "blocked");
    default.expect_label(&dtab, "🔴 api", 2 * SECOND);
    work.expect_label(&wtab, "🔴 web", 2 * SECOND);
    let mut env: Vec<(String, String)> = user
        .env(&work_socket)
        .into_iter()
        .filter(|(k, _)| k != "HERDR_SOCKET_PATH")
        .collect();
    env.push(("HERDR_SESSION".into(), "work".into()));
    let out = user.run_env(user.dir.path(), &env, &["off"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        work.herdr.label(&wtab) == "web" && default.herdr.label(&dtab) == "🔴 api",
        "HERDR_SESSION=work cowbell off: session work shows {:?}, the default server {:?}; \
         off said {}",
        work.herdr.label(&wtab),
        default.herdr.label(&dtab),
        text(&out)
    );
}

/// herdr reads `HERDR_SESSION=default` as its default server
/// (`~/.config/herdr/herdr.sock`): `session::normalize_name` maps
/// "default" to no session, and `herdr session list` names the default
/// server "default". `HERDR_SESSION=default cowbell off` must turn off the
/// default server, not a `sessions/default/herdr.sock` nobody serves.
#[test]
fn herdr_session_default_is_the_default_server() {
    let user = User::new();
    let default = user.serve(&user.default_socket());
    let (tab, pane) = default.tab("api");
    user.startup(&user.default_socket());
    assert_eq!(user.wait_for_daemons(1, 3 * SECOND).len(), 1);
    default.herdr.set_status(&pane, "blocked");
    default.expect_label(&tab, "🔴 api", 2 * SECOND);
    let mut env: Vec<(String, String)> = user
        .env(&user.default_socket())
        .into_iter()
        .filter(|(k, _)| k != "HERDR_SOCKET_PATH")
        .collect();
    env.push(("HERDR_SESSION".into(), "default".into()));
    let status = user.run_env(user.dir.path(), &env, &["status", "--json"]);
    let out = user.run_env(user.dir.path(), &env, &["off"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        default.herdr.label(&tab) == "api" && user.daemons().is_empty(),
        "HERDR_SESSION=default cowbell off: the default server shows {:?}, daemons {:?}, \
         dirs {:?}; status said {}; off said {}",
        default.herdr.label(&tab),
        user.daemons(),
        user.server_dirs(),
        text(&status),
        text(&out)
    );
}

/// The README: "A socket path spelled ... relative to the working
/// directory reaches the same server's daemon and state as herdr's own
/// spelling". A shell's working directory reached through a symlink (a
/// symlinked home or project directory; /tmp on macOS) is the physical
/// path to getcwd(3), so the relative spelling names another directory
/// than herdr's absolute one, and `off` misses the daemon.
#[test]
fn a_relative_socket_path_from_a_symlinked_directory_is_the_same_server() {
    let user = User::new();
    let real = user.dir.subdir("real");
    let link = user.dir.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    // herdr's spelling goes through the link, as $PWD or a config spells it.
    let server = user.serve(&link.join("h.sock"));
    let (tab, pane) = server.tab("api");
    user.startup(&link.join("h.sock"));
    assert_eq!(user.wait_for_daemons(1, 3 * SECOND).len(), 1);
    server.herdr.set_status(&pane, "blocked");
    server.expect_label(&tab, "🔴 api", 2 * SECOND);
    // `cd link; HERDR_SOCKET_PATH=h.sock cowbell off` (the shell sets PWD).
    let mut env = user.env(Path::new("h.sock"));
    env.push(("PWD".into(), link.to_string_lossy().into_owned()));
    let out = user.run_env(&link, &env, &["off"]);
    let dirs = user.server_dirs();
    let daemons = user.wait_for_daemons(0, 2 * SECOND);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        daemons.is_empty() && server.herdr.label(&tab) == "api",
        "off from the symlinked directory left {daemons:?} running, label {:?}; \
         dirs {dirs:?}; off said {}",
        server.herdr.label(&tab),
        text(&out)
    );
}

/// A command run by hand from a working directory that was deleted cannot
/// tell which server a relative socket path means: it says so, and makes
/// no directory that every relative `h.sock` would share afterwards.
#[test]
fn a_relative_socket_path_from_a_deleted_directory_is_refused() {
    let user = User::new();
    let gone = user.dir.subdir("gone");
    let relative = user.env(Path::new("h.sock"));
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", r#"cd "$0" && rmdir "$0" && exec "$1" sync"#])
        .arg(&gone)
        .arg(bin())
        .current_dir(user.dir.path())
        .env_clear()
        .stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command.envs(relative.iter().map(|(k, v)| (k, v)));
    let out = command.output().unwrap();
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("the working directory is gone"),
        "{}",
        text(&out)
    );
    assert_eq!(user.server_dirs(), Vec::<String>::new());
}
