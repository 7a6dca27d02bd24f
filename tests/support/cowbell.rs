//! A cowbell installation against a fake herdr: temp directories, the real
//! binary run the way herdr runs hooks and actions, and looks at the
//! daemon (pidfile, log, state.json). Dropping it kills any daemon left.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::fake_herdr::{FakeHerdr, Options};
use super::hooks::{self, HookOutcome};
use super::tempdir::TempDir;

/// The binary under test, an absolute path: `COWBELL_TEST_BIN` when set
/// (CI points it at the `--tiny` build, so that build runs the end-to-end
/// tests too), else the one cargo built.
pub fn bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("COWBELL_TEST_BIN")
            .ok()
            .filter(|path| !path.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_cowbell").to_string())
    })
}

pub struct Cowbell {
    pub herdr: FakeHerdr,
    pub dir: TempDir,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    pub config_dir: PathBuf,
    pub plugin_root: PathBuf,
    /// `COWBELL_TIME_SCALE` for every command run.
    pub scale: f64,
    pub workspace: String,
}

impl Cowbell {
    pub fn new() -> Cowbell {
        Cowbell::with(Options::default(), 1.0)
    }

    /// With herdr's delivery options and a time scale (N > 1 divides every
    /// duration of the specification by N).
    pub fn with(options: Options, scale: f64) -> Cowbell {
        let dir = TempDir::new();
        let socket = dir.join("herdr.sock");
        let herdr = FakeHerdr::start_with(&socket, options);
        let workspace = herdr.add_workspace("alpha");
        let state_dir = dir.join("state");
        let config_dir = dir.join("config");
        std::fs::create_dir_all(&config_dir).unwrap();
        let plugin_root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        Cowbell {
            herdr,
            dir,
            socket,
            state_dir,
            config_dir,
            plugin_root,
            scale,
            workspace,
        }
    }

    pub fn env(&self, event: &str) -> Vec<(String, String)> {
        let mut env = hooks::herdr_env(
            &self.socket,
            &self.state_dir,
            &self.config_dir,
            &self.plugin_root,
            event,
        );
        env.push(("COWBELL_TIME_SCALE".into(), self.scale.to_string()));
        env
    }

    /// Runs `cowbell <args>` as herdr runs a hook: pipes read to end of
    /// file, and a failure if a daemon kept them open.
    pub fn run(&self, args: &[&str]) -> HookOutcome {
        self.run_as(args, "startup")
    }

    pub fn run_as(&self, args: &[&str], event: &str) -> HookOutcome {
        let mut argv = vec![bin()];
        argv.extend_from_slice(args);
        hooks::run_hook(&self.plugin_root, &argv, &self.env(event))
    }

    /// cowbell as a launcher other than herdr starts it: with herdr's
    /// environment for `event`, and no standard stream anyone reads.
    pub fn launched(&self, args: &[&str], event: &str) -> std::process::Command {
        let mut command = std::process::Command::new(bin());
        command
            .args(args)
            .env_clear()
            .envs(self.env(event))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    }

    /// Runs a menu action (sets HERDR_PLUGIN_ACTION_ID like herdr does).
    pub fn action(&self, id: &str) -> HookOutcome {
        let mut env = self.env("action");
        env.push(("HERDR_PLUGIN_ACTION_ID".into(), id.into()));
        hooks::run_hook(&self.plugin_root, &[bin(), id], &env)
    }

    /// The startup hook, as herdr runs it on every server start.
    pub fn startup(&self) -> HookOutcome {
        let outcome = self.run(&["daemon", "--replace"]);
        assert!(
            outcome.status.success(),
            "startup hook failed: {}",
            outcome.stderr
        );
        outcome
    }

    pub fn watchdog(&self) -> HookOutcome {
        self.run_as(&["watchdog"], "pane.agent_detected")
    }

    /// The per-server directory (there is exactly one server here).
    pub fn server_dir(&self) -> PathBuf {
        let entries: Vec<PathBuf> = std::fs::read_dir(&self.state_dir)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            entries.len() <= 1,
            "more than one server directory: {entries:?}"
        );
        entries
            .into_iter()
            .next()
            .unwrap_or_else(|| self.state_dir.join("missing"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.server_dir().join("cowbell.log")).unwrap_or_default()
    }

    pub fn state_json(&self) -> String {
        std::fs::read_to_string(self.server_dir().join("state.json")).unwrap_or_default()
    }

    /// Deletes the whole state directory under whatever runs, as a user's
    /// `rm -rf` would. A daemon may write a file into it between the
    /// emptying and the `rmdir` (its log, a state.json temp file), which a
    /// user answers by deleting again; so does this.
    pub fn delete_state_dir(&self) {
        for _ in 0..50 {
            match std::fs::remove_dir_all(&self.state_dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("deleting {}: {e}", self.state_dir.display()),
            }
        }
        panic!("{} kept filling up while deleted", self.state_dir.display());
    }

    pub fn write_config(&self, json: &str) {
        std::fs::write(self.config_dir.join("config.json"), json).unwrap();
    }

    /// The pid in the pidfile, if that process is alive.
    pub fn daemon_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.server_dir().join("cowbell.pid")).ok()?;
        // "<pid> <boot id> <pid namespace>" (on Linux)
        let pid: u32 = text.split_whitespace().next()?.parse().ok()?;
        alive(pid).then_some(pid)
    }

    /// Waits for a daemon to be up (pid written and alive).
    pub fn wait_for_daemon(&self, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(pid) = self.daemon_pid() {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no daemon after {timeout:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every live process that is a cowbell daemon for this test's sockets.
    pub fn daemons(&self) -> Vec<u32> {
        let needle = format!("HERDR_SOCKET_PATH={}", self.socket.to_string_lossy());
        processes()
            .into_iter()
            .filter(|(_, environ)| environ.contains(&needle))
            .map(|(pid, _)| pid)
            .collect()
    }

    pub fn wait_for_no_daemon(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.daemons().is_empty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn tab(&self, name: Option<&str>) -> (String, String) {
        let tab = self.herdr.add_tab(&self.workspace, name);
        let pane = self.herdr.panes_of(&tab)[0].clone();
        (tab, pane)
    }

    /// Waits until state.json records every tab of `tabs` with the label it
    /// shows now: the daemon saves just after herdr answers its renames,
    /// so a test that kills it must wait for that save first.
    pub fn wait_state_saved(&self, tabs: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let state = self.state_json();
            let saved = tabs.iter().all(|tab| {
                let label = super::fake_herdr::quote(&self.herdr.label(tab));
                state.contains(&format!("\"{tab}\":{{"))
                    && state.contains(&format!("\"written\":{label}"))
            });
            if saved {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "state.json never caught up:\n{state}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until the tab's label is `label`; fails with the log if not.
    pub fn expect_label(&self, tab: &str, label: &str, timeout: Duration) {
        let ok = self.herdr.wait_until(timeout, |s| s.label(tab) == label);
        assert!(
            ok,
            "tab {tab}: expected {label:?}, have {:?} after {timeout:?}\nlog:\n{}",
            self.herdr.label(tab),
            self.log()
        );
    }

    /// Asserts the label stays `label` for `period`.
    pub fn expect_steady(&self, tab: &str, label: &str, period: Duration) {
        let deadline = Instant::now() + period;
        while Instant::now() < deadline {
            assert_eq!(
                self.herdr.label(tab),
                label,
                "tab {tab} changed; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cowbell {
    fn drop(&mut self) {
        for pid in self.daemons() {
            signal(pid, libc::SIGKILL);
        }
    }
}

/// Every live (not zombie) process of the binary under test, with its
/// environment as `KEY=value` strings.
pub fn processes() -> Vec<(u32, Vec<String>)> {
    let mut found = Vec::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in proc_dir.filter_map(|e| e.ok()) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if !cmdline.starts_with(bin().as_bytes()) || is_zombie(pid) {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let environ = String::from_utf8_lossy(&environ)
            .split('\0')
            .map(str::to_string)
            .collect();
        found.push((pid, environ));
    }
    found
}

pub fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

pub fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

pub fn wait_dead(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !alive(pid) || is_zombie(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

pub fn path_str(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
