//! Runs plugin commands the way herdr 0.8 launches them: working directory =
//! plugin root, a cleared environment plus the `HERDR_*` variables, stdin
//! null, stdout and stderr on pipes read to end of file. herdr counts a
//! command as running until both pipes close, and allows only 32 in flight,
//! so a daemon that keeps an inherited pipe open is a bug this runner catches.
#![allow(dead_code)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long the pipes may stay open after the process exits.
pub const PIPE_GRACE: Duration = Duration::from_secs(5);
/// How long the process itself may run before the runner kills it.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct HookOutcome {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Time from the process's exit until both pipes reached end of file.
    pub pipe_close_after_exit: Duration,
}

#[derive(Debug)]
pub enum HookError {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// The process did not exit within `EXIT_TIMEOUT`; it was killed.
    DidNotExit { argv: Vec<String> },
    /// The process exited but something (a daemon it started) still held
    /// stdout or stderr open `PIPE_GRACE` later.
    PipesHeldOpen {
        argv: Vec<String>,
        status: ExitStatus,
        /// What was read before giving up.
        stdout: String,
        stderr: String,
    },
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookError::Spawn(e) => write!(f, "could not start the hook command: {e}"),
            HookError::DidNotExit { argv } => {
                write!(f, "hook {argv:?} did not exit within {EXIT_TIMEOUT:?}")
            }
            HookError::PipesHeldOpen {
                argv,
                status,
                stdout,
                stderr,
            } => write!(
                f,
                "hook {argv:?} exited ({status}) but its stdout/stderr were still open \
                 {PIPE_GRACE:?} later: a process it left behind inherited the pipes, \
                 which would keep the command \"running\" in herdr for ever \
                 (stdout so far: {stdout:?}, stderr so far: {stderr:?})"
            ),
        }
    }
}

/// Runs the command and panics with a clear message if it cannot start, does
/// not exit, or leaves its pipes open after exiting.
pub fn run_hook(plugin_root: &Path, argv: &[&str], env: &[(String, String)]) -> HookOutcome {
    try_run_hook(plugin_root, argv, env).unwrap_or_else(|e| panic!("{e}"))
}

/// Like `run_hook` but returns the failure instead of panicking.
pub fn try_run_hook(
    plugin_root: &Path,
    argv: &[&str],
    env: &[(String, String)],
) -> Result<HookOutcome, HookError> {
    let argv_owned: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    // herdr resolves a relative program containing a `/` against the root.
    let program = if argv[0].contains('/') && !argv[0].starts_with('/') {
        plugin_root.join(argv[0])
    } else {
        argv[0].into()
    };
    let mut cmd = Command::new(program);
    cmd.args(&argv[1..])
        .current_dir(plugin_root)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for key in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd.spawn().map_err(HookError::Spawn)?;

    // One reader thread per pipe; each reports (which, bytes) at EOF. The
    // threads are detached: if a daemon holds a pipe for ever, its reader
    // stays blocked, but the test gets its answer.
    let (tx, rx) = mpsc::channel::<(u8, Vec<u8>)>();
    // Partial output, for the error message when a pipe stays open.
    let partial = std::sync::Arc::new(std::sync::Mutex::new([Vec::new(), Vec::new()]));
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for (which, mut pipe) in pipes.into_iter().enumerate() {
        let tx = tx.clone();
        let partial = partial.clone();
        thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        all.extend_from_slice(&buf[..n]);
                        partial.lock().unwrap()[which].extend_from_slice(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send((which as u8, all));
        });
    }
    drop(tx);

    // Wait for the exit, polling so that a hung command cannot hang the test.
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(HookError::Spawn)? {
            break status;
        }
        if started.elapsed() > EXIT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HookError::DidNotExit { argv: argv_owned });
        }
        thread::sleep(Duration::from_millis(5));
    };
    let exited = Instant::now();

    let mut out: [Option<Vec<u8>>; 2] = [None, None];
    while out.iter().any(Option::is_none) {
        let left = (exited + PIPE_GRACE).saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((which, bytes)) => out[which as usize] = Some(bytes),
            Err(_) => {
                let p = partial.lock().unwrap();
                return Err(HookError::PipesHeldOpen {
                    argv: argv_owned,
                    status,
                    stdout: String::from_utf8_lossy(&p[0]).into_owned(),
                    stderr: String::from_utf8_lossy(&p[1]).into_owned(),
                });
            }
        }
    }
    let pipe_close_after_exit = exited.elapsed();
    let [stdout, stderr] = out.map(|b| String::from_utf8_lossy(&b.unwrap()).into_owned());
    Ok(HookOutcome {
        status,
        stdout,
        stderr,
        pipe_close_after_exit,
    })
}

/// The environment herdr gives a hook command (`event` is `startup` for the
/// startup hook, or an event name such as `pane.agent_detected`).
/// `HERDR_BIN_PATH` points at `/bin/false`: there is no herdr binary in the
/// tests, and a plugin that shells out to it should fail visibly.
pub fn herdr_env(
    socket: &Path,
    state_dir: &Path,
    config_dir: &Path,
    plugin_root: &Path,
    event: &str,
) -> Vec<(String, String)> {
    let context = format!(
        r#"{{"invocation_source":"{}","correlation_id":"plugin.{}"}}"#,
        if event == "startup" {
            "startup"
        } else {
            "event"
        },
        event
    );
    let p = |p: &Path| p.to_string_lossy().into_owned();
    vec![
        ("HERDR_SOCKET_PATH".into(), p(socket)),
        ("HERDR_BIN_PATH".into(), "/bin/false".into()),
        ("HERDR_ENV".into(), "1".into()),
        ("HERDR_PLUGIN_ID".into(), "cowbell".into()),
        ("HERDR_PLUGIN_ROOT".into(), p(plugin_root)),
        ("HERDR_PLUGIN_CONFIG_DIR".into(), p(config_dir)),
        ("HERDR_PLUGIN_STATE_DIR".into(), p(state_dir)),
        ("HERDR_PLUGIN_CONTEXT_JSON".into(), context),
        ("HERDR_PLUGIN_EVENT".into(), event.into()),
    ]
}
