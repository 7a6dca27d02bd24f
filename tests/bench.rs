//! The benchmark of issue 6, as `#[ignore]`d tests so that `cargo test`
//! skips them. `bench/run.sh` runs them with
//! `cargo test --release --test bench -- --ignored --nocapture --test-threads=1`
//! and turns their `BENCH <table> key=value ...` lines into BENCH.md.
//!
//! Every measurement drives the daemon binary named by `COWBELL_BENCH_BIN`
//! (the script passes `bin/cowbell` from `build.sh`; default: the binary
//! cargo built for this test) against the fake herdr server, and reads the
//! daemon's costs from /proc. `COWBELL_BENCH_QUICK=1` makes every count
//! small (the `--quick` run in CI that keeps the script from rotting).
//!
//! A value written `a~b~c` is a median with its minimum and maximum; the
//! script prints it as `a (b–c)`.

mod support;

use support::rng::Rng;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::fake_herdr::{FakeHerdr, LoggedRequest, Options};
use support::hooks;
use support::tempdir::TempDir;

/// The specification's debounce, for the latency goal.
const DEBOUNCE_MS: f64 = 100.0;
/// Panes per tab in every measurement.
const PANES: usize = 3;

// ---------------------------------------------------------------------------
// Knobs
// ---------------------------------------------------------------------------

fn quick() -> bool {
    std::env::var("COWBELL_BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// `full` in a full run, `quick` with `COWBELL_BENCH_QUICK=1`.
fn pick<T>(full: T, quick_value: T) -> T {
    if quick() { quick_value } else { full }
}

/// The daemon binary under test, as an absolute path.
fn bin() -> PathBuf {
    let path = std::env::var_os("COWBELL_BENCH_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cowbell")));
    let path = if path.is_absolute() {
        path
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
    };
    assert!(path.is_file(), "no cowbell binary at {}", path.display());
    path
}

// ---------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------

/// Prints one result line: `BENCH <table> k=v ...` (values without spaces).
fn emit(table: &str, fields: &[(&str, String)]) {
    let mut line = format!("BENCH {table}");
    for (key, value) in fields {
        assert!(
            !value.contains(char::is_whitespace),
            "bench value with a space: {key}={value}"
        );
        line.push_str(&format!(" {key}={value}"));
    }
    println!("{line}");
}

/// `median~min~max` with `decimals` decimals.
fn mmm(values: &[f64], decimals: usize) -> String {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return "n/a".into();
    }
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    format!(
        "{median:.decimals$}~{:.decimals$}~{:.decimals$}",
        v[0],
        v[v.len() - 1]
    )
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn goal(met: bool) -> String {
    if met { "met" } else { "MISSED" }.to_string()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------
// /proc and rusage
// ---------------------------------------------------------------------------

/// What /proc says about a process at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct ProcSample {
    /// CPU time on the CPU in nanoseconds (schedstat; falls back to ticks).
    cpu_ns: u64,
    /// utime + stime in clock ticks.
    ticks: u64,
    voluntary: u64,
    involuntary: u64,
    hwm_kib: u64,
    rss_kib: u64,
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes no pointers.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

fn sample(pid: u32) -> ProcSample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("daemon {pid} gone? /proc/{pid}/status: {e}"));
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let num = |i: usize| rest.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let ticks = num(11) + num(12);
    let cpu_ns = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(ticks * 1_000_000_000 / clock_ticks_per_second());
    ProcSample {
        cpu_ns,
        ticks,
        voluntary: field("voluntary_ctxt_switches:"),
        involuntary: field("nonvoluntary_ctxt_switches:"),
        hwm_kib: field("VmHWM:"),
        rss_kib: field("VmRSS:"),
    }
}

/// User + system CPU of this process's waited-for children, in ms.
fn children_cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

// ---------------------------------------------------------------------------
// A cheap deterministic random source
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// The fixture
// ---------------------------------------------------------------------------

/// The statuses the measurements cycle a tab's first pane through; each one
/// changes the label.
const CYCLE: [&str; 3] = ["blocked", "working", "unknown"];

fn icon_label(status: &str, name: &str) -> String {
    match status {
        "blocked" => format!("🔴 {name}"),
        "working" => format!("🟡 {name}"),
        "done" => format!("🔵 {name}"),
        _ => name.to_string(),
    }
}

struct BenchTab {
    id: String,
    name: String,
    panes: Vec<String>,
    /// The status the tab shows now (its first pane's; the others are
    /// unknown).
    shown: &'static str,
}

impl BenchTab {
    /// Moves the first pane to the next status of the cycle; returns it.
    fn advance(&mut self) -> &'static str {
        let at = CYCLE.iter().position(|s| *s == self.shown);
        self.shown = CYCLE[at.map_or(0, |at| (at + 1) % CYCLE.len())];
        self.shown
    }

    fn expected(&self) -> String {
        icon_label(self.shown, &self.name)
    }
}

struct Bench {
    herdr: FakeHerdr,
    // Kept for its Drop (removes the directory).
    _dir: TempDir,
    socket: PathBuf,
    state_dir: PathBuf,
    config_dir: PathBuf,
    root: PathBuf,
    scale: f64,
    workspace: String,
    tabs: Vec<BenchTab>,
    index: HashMap<String, usize>,
    daemon: Option<u32>,
}

/// herdr's options: replay off (a fresh server run, so the daemon does not
/// first chew through 512 old events), delivery at once or herdr's 100 ms.
fn options(deliver_interval: Duration) -> Options {
    Options {
        replay: false,
        deliver_interval,
    }
}

impl Bench {
    fn new(options: Options, scale: f64) -> Bench {
        let dir = TempDir::new();
        let socket = dir.join("herdr.sock");
        let herdr = FakeHerdr::start_with(&socket, options);
        let workspace = herdr.add_workspace("bench");
        let state_dir = dir.join("state");
        let config_dir = dir.subdir("config");
        Bench {
            herdr,
            socket,
            state_dir,
            config_dir,
            _dir: dir,
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            scale,
            workspace,
            tabs: Vec::new(),
            index: HashMap::new(),
            daemon: None,
        }
    }

    /// Adds `n` named tabs of `PANES` panes; every pane has an agent that
    /// reports `unknown` (so no `pane.agent_detected` arrives later).
    fn add_tabs(&mut self, n: usize) {
        for _ in 0..n {
            let name = format!("tab-{}", self.tabs.len() + 1);
            let id = self.herdr.add_tab(&self.workspace, Some(&name));
            for _ in 1..PANES {
                self.herdr.add_pane(&id);
            }
            let panes = self.herdr.panes_of(&id);
            for pane in &panes {
                self.herdr.set_status(pane, "unknown");
            }
            self.index.insert(id.clone(), self.tabs.len());
            self.tabs.push(BenchTab {
                id,
                name,
                panes,
                shown: "unknown",
            });
        }
    }

    /// Gives every tab an icon: blocked, working and done in turn (done is
    /// an idle agent in a tab nobody looked at; the focused first tab gets
    /// blocked).
    fn set_icons(&mut self) -> Vec<(String, String)> {
        let mut wanted = Vec::new();
        for (i, tab) in self.tabs.iter_mut().enumerate() {
            let status = if i == 0 {
                "blocked"
            } else {
                ["blocked", "working", "idle"][i % 3]
            };
            self.herdr.set_status(&tab.panes[0], status);
            tab.shown = if status == "idle" { "done" } else { status };
            wanted.push((tab.id.clone(), tab.expected()));
        }
        wanted
    }

    /// Moves tab `i` one step along the cycle; returns the label it should
    /// get.
    fn change(&mut self, i: usize) -> String {
        let status = self.tabs[i].advance();
        self.herdr.set_status(&self.tabs[i].panes[0], status);
        self.tabs[i].expected()
    }

    fn wanted(&self) -> Vec<(String, String)> {
        self.tabs
            .iter()
            .map(|t| (t.id.clone(), t.expected()))
            .collect()
    }

    fn env(&self, event: &str) -> Vec<(String, String)> {
        let mut env = hooks::herdr_env(
            &self.socket,
            &self.state_dir,
            &self.config_dir,
            &self.root,
            event,
        );
        env.push(("COWBELL_TIME_SCALE".into(), self.scale.to_string()));
        env
    }

    /// Runs the startup hook the way herdr does and waits for the daemon's
    /// pid; returns how long the hook command took.
    fn start_daemon(&mut self) -> Duration {
        let bin = bin();
        let started = Instant::now();
        let outcome = hooks::run_hook(
            &self.root,
            &[bin.to_str().unwrap(), "daemon", "--replace"],
            &self.env("startup"),
        );
        let took = started.elapsed();
        assert!(
            outcome.status.success(),
            "startup hook failed: {}",
            outcome.stderr
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(pid) = self.pid() {
                self.daemon = Some(pid);
                return took;
            }
            assert!(Instant::now() < deadline, "no daemon pid after 5 s");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Runs the `pane.agent_detected` hook the way herdr does, until herdr
    /// would see it finish (its pipes at end of file, the process reaped).
    fn run_watchdog(&mut self) -> Duration {
        let bin = bin();
        let started = Instant::now();
        let outcome = hooks::run_hook(
            &self.root,
            &[bin.to_str().unwrap(), "watchdog"],
            &self.env("pane.agent_detected"),
        );
        let took = started.elapsed();
        assert!(
            outcome.status.success(),
            "watchdog failed: {}",
            outcome.stderr
        );
        took
    }

    fn pid(&self) -> Option<u32> {
        let dir = std::fs::read_dir(&self.state_dir).ok()?.flatten().next()?;
        let text = std::fs::read_to_string(dir.path().join("cowbell.pid")).ok()?;
        let pid: u32 = text.split_whitespace().next()?.parse().ok()?;
        // SAFETY: signal 0 only checks that the process exists.
        (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0).then_some(pid)
    }

    fn daemon_pid(&self) -> u32 {
        self.daemon.expect("daemon started")
    }

    fn log(&self) -> String {
        std::fs::read_dir(&self.state_dir)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|d| d.ok())
            .and_then(|d| std::fs::read_to_string(d.path().join("cowbell.log")).ok())
            .unwrap_or_default()
    }

    /// Waits until every tab in `wanted` has its label.
    fn wait_labels(&self, wanted: &[(String, String)], timeout: Duration) {
        let ok = self.herdr.wait_until(timeout, |s| {
            wanted.iter().all(|(id, label)| s.label(id) == label)
        });
        if !ok {
            let wrong: Vec<String> = wanted
                .iter()
                .filter(|(id, label)| self.herdr.label(id) != *label)
                .take(5)
                .map(|(id, label)| format!("{id}: want {label:?}, have {:?}", self.herdr.label(id)))
                .collect();
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "labels not right after {timeout:?}: {wrong:?}\nlog tail (newest first):\n{}",
                tail.join("\n")
            );
        }
    }

    /// Waits until no request reached the server for `quiet`.
    fn wait_quiet(&self, quiet: Duration, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut count = self.herdr.request_count();
        let mut since = Instant::now();
        while since.elapsed() < quiet {
            assert!(Instant::now() < deadline, "daemon never went quiet");
            std::thread::sleep(Duration::from_millis(5));
            let now = self.herdr.request_count();
            if now != count {
                count = now;
                since = Instant::now();
            }
        }
    }

    /// The daemon is up, subscribed (lifecycle and status) and quiet.
    fn settle(&self) {
        assert!(
            self.herdr.wait_for_subscribers(2, Duration::from_secs(20)),
            "daemon did not subscribe; log:\n{}",
            self.log()
        );
        self.wait_quiet(Duration::from_millis(300), Duration::from_secs(60));
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon.take().or_else(|| self.pid()) {
            // SAFETY: kill takes no pointers; this is the daemon we started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

/// Waits for the tab.rename of `tab_id` to `label`, looking at requests from
/// `cursor` on; returns it and moves the cursor past what was read.
fn wait_rename(
    herdr: &FakeHerdr,
    cursor: &mut usize,
    tab_id: &str,
    label: &str,
    timeout: Duration,
) -> Option<LoggedRequest> {
    let deadline = Instant::now() + timeout;
    loop {
        let new = herdr.requests_since(*cursor);
        for (i, r) in new.iter().enumerate() {
            if r.method == "tab.rename"
                && r.param("tab_id").as_deref() == Some(tab_id)
                && r.param("label").as_deref() == Some(label)
            {
                *cursor += i + 1;
                return Some(r.clone());
            }
        }
        *cursor += new.len();
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// For the analysis only, since tracing changes what is measured: with
/// `COWBELL_BENCH_STRACE=<dir>`, `strace -f <args>` follows the daemon and
/// writes `<dir>/<name>.strace`.
struct Strace(Option<std::process::Child>);

impl Strace {
    fn attach(pid: u32, name: &str, args: &[&str]) -> Strace {
        let Some(dir) = std::env::var_os("COWBELL_BENCH_STRACE") else {
            return Strace(None);
        };
        let child = Command::new("strace")
            .arg("-f")
            .args(args)
            .arg("-o")
            .arg(Path::new(&dir).join(format!("{name}.strace")))
            .args(["-p", &pid.to_string()])
            .stderr(Stdio::null())
            .spawn()
            .expect("strace");
        std::thread::sleep(Duration::from_millis(500));
        Strace(Some(child))
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // SIGINT lets strace detach and write its summary.
            // SAFETY: kill takes no pointers; this is our strace.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            let _ = child.wait();
        }
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---------------------------------------------------------------------------
// 2. Peak resident memory
// ---------------------------------------------------------------------------

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m2_memory() {
    let reps = pick(3, 1);
    for n in [10, 100, 1000] {
        let mut hwm = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..reps {
            let mut b = Bench::new(options(Duration::ZERO), 1.0);
            b.add_tabs(n);
            let wanted = b.set_icons();
            b.start_daemon();
            b.wait_labels(&wanted, Duration::from_secs(60));
            b.settle();
            // One more round: a tenth of the tabs change status.
            for i in (0..n).step_by(10) {
                b.change(i);
            }
            b.wait_labels(&b.wanted(), Duration::from_secs(30));
            b.wait_quiet(Duration::from_millis(300), Duration::from_secs(30));
            let s = sample(b.daemon_pid());
            hwm.push(s.hwm_kib as f64);
            rss.push(s.rss_kib as f64);
        }
        let mut fields = vec![
            ("tabs", n.to_string()),
            ("panes", (n * PANES).to_string()),
            ("runs", reps.to_string()),
            ("VmHWM_KiB", mmm(&hwm, 0)),
            ("VmRSS_KiB", mmm(&rss, 0)),
        ];
        if n == 1000 {
            fields.push(("goal_under_2MiB", goal(median(&hwm) < 2048.0)));
        } else {
            fields.push(("goal_under_2MiB", "-".into()));
        }
        emit("memory", &fields);
    }
}

// ---------------------------------------------------------------------------
// 3. Idle cost
// ---------------------------------------------------------------------------

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m3_idle() {
    // Full: 60 s of real time with the real 60 s heartbeat. Quick: time
    // scaled by 40 (heartbeat 1.5 s) over 3 s.
    let (scale, idle) = pick((1.0, 60.0), (40.0, 3.0));
    let heartbeat = 60.0 / scale;
    let mut b = Bench::new(options(Duration::ZERO), scale);
    b.add_tabs(100);
    let wanted = b.set_icons();
    b.start_daemon();
    b.wait_labels(&wanted, Duration::from_secs(30));
    b.settle();
    let pid = b.daemon_pid();
    let cursor = b.herdr.request_count();
    let mut strace = Strace::attach(pid, "idle", &["-tt"]);
    let s0 = sample(pid);
    std::thread::sleep(Duration::from_secs_f64(idle));
    let s1 = sample(pid);
    strace.stop();
    let requests = b.herdr.requests_since(cursor);
    let count = |m: &str| requests.iter().filter(|r| r.method == m).count();
    let heartbeats = count("plugin.list");
    let renames = count("tab.rename");
    let wakeups = s1.voluntary - s0.voluntary;
    let periods = idle / heartbeat;
    let per_period = wakeups as f64 / periods;
    let ticks = s1.ticks - s0.ticks;
    emit(
        "idle",
        &[
            ("tabs", "100".into()),
            ("idle_s", format!("{idle}")),
            ("heartbeat_s", format!("{heartbeat}")),
            ("heartbeats_seen", heartbeats.to_string()),
            ("requests", requests.len().to_string()),
            ("events_caused", renames.to_string()),
            ("wakeups", wakeups.to_string()),
            ("involuntary", (s1.involuntary - s0.involuntary).to_string()),
            ("wakeups_per_heartbeat", format!("{per_period:.1}")),
            ("cpu_ticks", ticks.to_string()),
            (
                "cpu_us",
                format!("{:.0}", (s1.cpu_ns - s0.cpu_ns) as f64 / 1000.0),
            ),
            ("goal_wakeups", goal(per_period <= 2.0)),
            ("goal_0_ticks", goal(ticks == 0)),
        ],
    );
}

/// How long the fake itself takes to answer a `tab.list` (a plain client,
/// median of 10): its share of every resync, not cowbell's.
fn fake_list_ms(b: &Bench) -> f64 {
    let times: Vec<f64> = (0..10)
        .map(|_| {
            let t0 = Instant::now();
            let answer =
                support::request(&b.socket, r#"{"id":"b","method":"tab.list","params":{}}"#);
            assert!(answer.contains("tab_list"), "fake tab.list: {answer}");
            ms(t0.elapsed())
        })
        .collect();
    median(&times)
}

/// How long the fake takes to deliver a status change to a plain subscriber
/// of every pane (median of 10): its share of the latency, not cowbell's.
fn fake_event_ms(b: &mut Bench) -> f64 {
    let entries: Vec<String> = b
        .tabs
        .iter()
        .flat_map(|t| t.panes.iter())
        .map(|p| format!(r#"{{"type":"pane.agent_status_changed","pane_id":"{p}"}}"#))
        .collect();
    let line = format!(
        r#"{{"id":"b","method":"events.subscribe","params":{{"subscriptions":[{}]}}}}"#,
        entries.join(",")
    );
    let mut sub = support::SubReader::open(&b.socket, &line);
    let ack = sub.line(Duration::from_secs(5));
    assert!(
        ack.contains("subscription_started"),
        "fake subscribe: {ack}"
    );
    let mut times = Vec::new();
    for _ in 0..10 {
        let t0 = Instant::now();
        b.change(0);
        sub.line(Duration::from_secs(5));
        times.push(ms(t0.elapsed()));
        std::thread::sleep(Duration::from_millis(3));
    }
    // Back to where it was (unknown), so the daemon starts from plain names.
    while b.tabs[0].shown != "unknown" {
        b.change(0);
        sub.line(Duration::from_secs(5));
    }
    drop(sub);
    assert!(b.herdr.wait_for_subscribers(0, Duration::from_secs(5)));
    median(&times)
}

// ---------------------------------------------------------------------------
// 4. Latency from a status change to the rename
// ---------------------------------------------------------------------------

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m4_latency() {
    let changes = pick(1000, 30);
    // Changes come at random gaps of 0..20 ms (mean 10 ms) on random tabs;
    // a tab changes again only after its previous rename arrived.
    let max_gap = Duration::from_millis(20);
    for (delivery, interval) in [("at_once", 0u64), ("herdr_100ms", 100)] {
        for n in [10, 100, 1000] {
            // For analysis: COWBELL_BENCH_TABS=100 runs one size only.
            if std::env::var("COWBELL_BENCH_TABS").is_ok_and(|t| t != n.to_string()) {
                continue;
            }
            let mut b = Bench::new(options(Duration::from_millis(interval)), 1.0);
            b.add_tabs(n);
            let fake_list = fake_list_ms(&b);
            let fake_event = fake_event_ms(&mut b);
            b.start_daemon();
            b.settle();
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ n as u64);
            let mut outstanding: HashMap<usize, (Instant, String)> = HashMap::new();
            let mut latencies = Vec::new();
            let mut timeouts = 0;
            let mut issued = 0;
            let mut cursor = b.herdr.request_count();
            let first = cursor;
            let mut strace = Strace::attach(
                b.daemon_pid(),
                &format!("latency-{delivery}-{n}"),
                &["-c", "-w"],
            );
            let cpu0 = sample(b.daemon_pid()).cpu_ns;
            let mut next_at = Instant::now();
            let started = Instant::now();
            while latencies.len() + timeouts < changes {
                for r in b.herdr.requests_since(cursor) {
                    cursor += 1;
                    if r.method != "tab.rename" {
                        continue;
                    }
                    let Some(&i) = r.param("tab_id").and_then(|id| b.index.get(&id)) else {
                        continue;
                    };
                    if let Some((t0, label)) = outstanding.get(&i)
                        && r.param("label").as_deref() == Some(label.as_str())
                        && r.at >= *t0
                    {
                        latencies.push(ms(r.at - *t0));
                        outstanding.remove(&i);
                    }
                }
                outstanding.retain(|_, (t0, _)| {
                    let late = t0.elapsed() > Duration::from_secs(5);
                    timeouts += usize::from(late);
                    !late
                });
                let now = Instant::now();
                if issued < changes && now >= next_at && outstanding.len() < n {
                    let mut i = rng.below(n);
                    while outstanding.contains_key(&i) {
                        i = (i + 1) % n;
                    }
                    let t0 = Instant::now();
                    let label = b.change(i);
                    outstanding.insert(i, (t0, label));
                    issued += 1;
                    next_at = now + rng.duration(max_gap);
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            let took = started.elapsed();
            if timeouts > 0 {
                let log = b.log();
                let tail: Vec<&str> = log.lines().rev().take(60).collect();
                println!(
                    "latency: {timeouts} changes never got their rename; daemon log, newest first:\n{}",
                    tail.join("\n")
                );
            }
            let cpu_ms = (sample(b.daemon_pid()).cpu_ns - cpu0) as f64 / 1e6;
            strace.stop();
            let resyncs = b
                .herdr
                .requests_since(first)
                .iter()
                .filter(|r| r.method == "tab.list")
                .count();
            latencies.sort_by(|a, b| a.total_cmp(b));
            let p99 = percentile(&latencies, 99.0);
            let mean = latencies.iter().sum::<f64>() / latencies.len().max(1) as f64;
            emit(
                "latency",
                &[
                    ("delivery", delivery.into()),
                    ("tabs", n.to_string()),
                    ("changes", latencies.len().to_string()),
                    ("p50_ms", format!("{:.1}", percentile(&latencies, 50.0))),
                    ("p90_ms", format!("{:.1}", percentile(&latencies, 90.0))),
                    ("p99_ms", format!("{p99:.1}")),
                    (
                        "max_ms",
                        format!("{:.1}", latencies.last().unwrap_or(&f64::NAN)),
                    ),
                    ("mean_ms", format!("{mean:.1}")),
                    ("p99_minus_debounce_ms", format!("{:.1}", p99 - DEBOUNCE_MS)),
                    ("lost", timeouts.to_string()),
                    ("resyncs", resyncs.to_string()),
                    (
                        "daemon_cpu_ms_per_resync",
                        format!("{:.2}", cpu_ms / resyncs.max(1) as f64),
                    ),
                    ("fake_event_ms", format!("{fake_event:.1}")),
                    ("fake_tab_list_ms", format!("{fake_list:.1}")),
                    ("run_s", format!("{:.1}", took.as_secs_f64())),
                    (
                        "goal_p99_within_20ms",
                        if interval == 0 {
                            goal(p99 <= DEBOUNCE_MS + 20.0 && timeouts == 0)
                        } else {
                            "-".into()
                        },
                    ),
                ],
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 5. CPU per 1000 status changes; requests per resync
// ---------------------------------------------------------------------------

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m5_cpu_per_change() {
    // Every change gets a resync of its own: time is scaled by 20 so the
    // debounce is 5 ms, and the next change waits until the previous
    // resync is over. The work per resync does not depend on the scale.
    let changes = pick(1000, 100);
    let blocks = 5;
    let per_block = changes / blocks;
    let scale = 20.0;
    let debounce = Duration::from_secs_f64(0.1 / scale);
    let mut b = Bench::new(options(Duration::ZERO), scale);
    b.add_tabs(100);
    b.start_daemon();
    b.settle();
    let pid = b.daemon_pid();
    let first = b.herdr.request_count();
    let mut windows = Vec::new(); // (request index at the change, tab index)
    let mut block_cpu = Vec::new();
    let mut block_ticks = Vec::new();
    let mut missing = 0;
    let mut cursor = first;
    let mut strace = Strace::attach(pid, "cpu", &["-c", "-w"]);
    let mut s = sample(pid);
    let started = Instant::now();
    for block in 0..blocks {
        for k in 0..per_block {
            let i = ((block * per_block + k) * 37) % b.tabs.len();
            windows.push((b.herdr.request_count(), i));
            let label = b.change(i);
            let id = b.tabs[i].id.clone();
            if wait_rename(&b.herdr, &mut cursor, &id, &label, Duration::from_secs(5)).is_none() {
                missing += 1;
            }
            // Let the resync finish (answer read, state saved).
            std::thread::sleep(debounce + Duration::from_millis(3));
        }
        let s1 = sample(pid);
        let scale_to_1000 = 1000.0 / per_block as f64;
        block_cpu.push((s1.cpu_ns - s.cpu_ns) as f64 / 1e6 * scale_to_1000);
        block_ticks.push((s1.ticks - s.ticks) as f64 * scale_to_1000);
        s = s1;
    }
    let took = started.elapsed();
    strace.stop();
    // Requests: each change's window holds exactly one tab.list and one
    // tab.rename of the changed tab, nothing else, apart from a heartbeat
    // (one plugin.list with its own tab.list) that may fall into it.
    let requests = b.herdr.requests_since(first);
    let mut bad = Vec::new();
    for (w, &(start, i)) in windows.iter().enumerate() {
        let end = windows.get(w + 1).map_or(first + requests.len(), |x| x.0);
        let window = &requests[start - first..end - first];
        let beats = window.iter().filter(|r| r.method == "plugin.list").count();
        let lists = window
            .iter()
            .filter(|r| r.method == "tab.list")
            .count()
            .saturating_sub(beats.min(1));
        let renames: Vec<String> = window
            .iter()
            .filter(|r| r.method == "tab.rename")
            .filter_map(|r| r.param("tab_id"))
            .collect();
        if lists != 1 || window.len() != 2 + 2 * beats || renames != [b.tabs[i].id.clone()] {
            let methods: Vec<String> = window
                .iter()
                .map(|r| match r.param("tab_id") {
                    Some(t) => format!("{}({t})", r.method),
                    None => r.method.clone(),
                })
                .collect();
            bad.push(format!("change {w} of {}: {methods:?}", b.tabs[i].id));
        }
    }
    let lists = requests.iter().filter(|r| r.method == "tab.list").count();
    let renames = requests.iter().filter(|r| r.method == "tab.rename").count();
    let ticks = clock_ticks_per_second();
    emit(
        "cpu",
        &[
            ("tabs", "100".into()),
            ("changes", changes.to_string()),
            ("blocks", blocks.to_string()),
            ("cpu_ms_per_1000", mmm(&block_cpu, 1)),
            ("ticks_per_1000", mmm(&block_ticks, 0)),
            ("tick_ms", format!("{}", 1000 / ticks)),
            ("cpu_us_per_resync", format!("{:.0}", median(&block_cpu))),
            ("tab_list", lists.to_string()),
            ("tab_rename", renames.to_string()),
            (
                "other_requests",
                (requests.len() - lists - renames).to_string(),
            ),
            ("windows_wrong", bad.len().to_string()),
            ("lost", missing.to_string()),
            ("run_s", format!("{:.1}", took.as_secs_f64())),
            (
                "requests_per_resync",
                if bad.is_empty() && missing == 0 {
                    "1_list+1_rename:ok".into()
                } else {
                    "WRONG".into()
                },
            ),
        ],
    );
    for line in bad.iter().take(10) {
        println!("cpu: request window wrong: {line}");
    }
    assert!(
        bad.is_empty() && missing == 0,
        "{} of {changes} changes did not get exactly one tab.list and one tab.rename \
         ({missing} renames never came)",
        bad.len()
    );
}

// ---------------------------------------------------------------------------
// 6. Side by side: a process per event, a Python start per event, the daemon
// ---------------------------------------------------------------------------

/// The same events for every contender: (tab index) in a seeded order.
fn event_order(events: usize, tabs: usize) -> Vec<usize> {
    let mut rng = Rng(0xC0FF_EE00_D15E_A5E5);
    (0..events).map(|_| rng.below(tabs)).collect()
}

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m6_side_by_side() {
    let events = pick(1000, 50);
    let blocks = 5;
    let per_block = events / blocks;
    let pace = Duration::from_millis(10);
    let order = event_order(events, 100);
    let bin = bin();

    // (a) `cowbell sync` once per event: one process doing a full
    // reconcile, as herdr-tab-status does, started when the event happens.
    let (sync_cpu, sync_wall, sync_blocks, sync_proc_ms) = {
        let mut b = Bench::new(options(Duration::ZERO), 1.0);
        b.add_tabs(100);
        let env = b.env("pane.agent_status_changed");
        let mut block_cpu = Vec::new();
        let mut proc_ms = Vec::new();
        let cpu0 = children_cpu_ms();
        let mut cpu_mark = cpu0;
        let t0 = Instant::now();
        for (k, &i) in order.iter().enumerate() {
            let slot = t0 + pace * k as u32;
            if let Some(wait) = slot.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            b.change(i);
            let p0 = Instant::now();
            let status = Command::new(&bin)
                .arg("sync")
                .current_dir(&b.root)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run cowbell sync");
            proc_ms.push(ms(p0.elapsed()));
            assert!(status.success(), "cowbell sync failed: {status}");
            if (k + 1) % per_block == 0 {
                let now = children_cpu_ms();
                block_cpu.push((now - cpu_mark) / per_block as f64 * 1000.0);
                cpu_mark = now;
            }
        }
        let wall = t0.elapsed();
        b.wait_labels(&b.wanted(), Duration::from_secs(1));
        (children_cpu_ms() - cpu0, wall, block_cpu, proc_ms)
    };

    // (b) the daemon, herdr delivering every 100 ms, the same events at the
    // same pace.
    let (daemon_cpu, daemon_wall, daemon_blocks, resyncs) = {
        let mut b = Bench::new(options(Duration::from_millis(100)), 1.0);
        b.add_tabs(100);
        b.start_daemon();
        b.settle();
        let pid = b.daemon_pid();
        let first = b.herdr.request_count();
        let mut block_cpu = Vec::new();
        let s0 = sample(pid);
        let mut mark = s0;
        let t0 = Instant::now();
        for (k, &i) in order.iter().enumerate() {
            let slot = t0 + pace * k as u32;
            if let Some(wait) = slot.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            b.change(i);
            if (k + 1) % per_block == 0 {
                let s = sample(pid);
                block_cpu.push((s.cpu_ns - mark.cpu_ns) as f64 / 1e6 / per_block as f64 * 1000.0);
                mark = s;
            }
        }
        b.wait_labels(&b.wanted(), Duration::from_secs(10));
        b.wait_quiet(Duration::from_millis(300), Duration::from_secs(30));
        let s1 = sample(pid);
        // The last block also pays for the final resync.
        if let Some(last) = block_cpu.last_mut() {
            *last += (s1.cpu_ns - mark.cpu_ns) as f64 / 1e6 / per_block as f64 * 1000.0;
        }
        let requests = b.herdr.requests_since(first);
        let last_rename = requests
            .iter()
            .filter(|r| r.method == "tab.rename")
            .map(|r| r.at)
            .max()
            .unwrap_or(t0);
        let resyncs = requests.iter().filter(|r| r.method == "tab.list").count();
        (
            (s1.cpu_ns - s0.cpu_ns) as f64 / 1e6,
            last_rename.saturating_duration_since(t0),
            block_cpu,
            resyncs,
        )
    };

    // (c) the floor of a Python plugin: the interpreter start alone.
    let python = std::env::var("COWBELL_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    // 500 starts give the per-event floor well enough and keep the run
    // inside its time budget.
    let python_runs = pick(500, 20);
    let py = (|| {
        let cpu0 = children_cpu_ms();
        let t0 = Instant::now();
        let mut block_cpu = Vec::new();
        let py_block = (python_runs / blocks).max(1);
        let mut mark = cpu0;
        for k in 0..python_runs {
            let status = Command::new(&python)
                .args(["-c", "import json,socket"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .ok()?;
            if !status.success() {
                return None;
            }
            if (k + 1) % py_block == 0 {
                let now = children_cpu_ms();
                block_cpu.push((now - mark) / py_block as f64 * 1000.0);
                mark = now;
            }
        }
        Some((children_cpu_ms() - cpu0, t0.elapsed(), block_cpu))
    })();

    let per_event_us = |cpu_ms: f64, n: usize| cpu_ms * 1000.0 / n as f64;
    let daemon_per_event = per_event_us(daemon_cpu, events);
    let row = |approach: &str, n: usize, cpu_ms: f64, wall: String, blocks: &[f64], note: &str| {
        let per = per_event_us(cpu_ms, n);
        emit(
            "side",
            &[
                ("approach", approach.into()),
                ("events", n.to_string()),
                ("cpu_ms_total", format!("{cpu_ms:.0}")),
                ("cpu_us_per_event", mmm(blocks, 0)),
                ("wall_s", wall),
                (
                    "cpu_ratio_vs_daemon",
                    format!("{:.1}x", per / daemon_per_event),
                ),
                ("note", note.into()),
            ],
        );
    };
    row(
        "daemon",
        events,
        daemon_cpu,
        format!("{:.2}", daemon_wall.as_secs_f64()),
        &daemon_blocks,
        &format!("{resyncs}_resyncs_(debounced)"),
    );
    row(
        "cowbell_sync_per_event",
        events,
        sync_cpu,
        format!("{:.2}", sync_wall.as_secs_f64()),
        &sync_blocks,
        &format!("median_process_wall_{:.1}_ms", median(&sync_proc_ms)),
    );
    match py {
        Some((cpu, wall, blocks)) => row(
            "python3_start_per_event",
            python_runs,
            cpu,
            format!("{:.2}", wall.as_secs_f64()),
            &blocks,
            "back_to_back,_interpreter_start_only",
        ),
        None => emit(
            "side",
            &[
                ("approach", "python3_start_per_event".into()),
                ("events", "0".into()),
                ("cpu_ms_total", "-".into()),
                ("cpu_us_per_event", "-".into()),
                ("wall_s", "-".into()),
                ("cpu_ratio_vs_daemon", "-".into()),
                ("note", format!("python3_missing_({python})")),
            ],
        ),
    }
}

// ---------------------------------------------------------------------------
// 7. Startup
// ---------------------------------------------------------------------------

#[test]
#[ignore = "benchmark: run by bench/run.sh"]
fn m7_startup() {
    let reps = pick(5, 2);
    let mut total = Vec::new();
    let mut hook = Vec::new();
    let mut first_request = Vec::new();
    let mut watchdog_running = Vec::new();
    let mut watchdog_starting = Vec::new();
    for _ in 0..reps {
        // herdr as it is: 100 ms delivery, replay of the buffered events.
        let mut b = Bench::new(Options::default(), 1.0);
        b.add_tabs(100);
        let wanted = b.set_icons();
        let first = b.herdr.request_count();
        let t0 = Instant::now();
        hook.push(ms(b.start_daemon()));
        b.wait_labels(&wanted, Duration::from_secs(10));
        let requests = b.herdr.requests_since(first);
        let last_rename = requests
            .iter()
            .filter(|r| r.method == "tab.rename")
            .map(|r| r.at)
            .max()
            .expect("renames");
        total.push(ms(last_rename - t0));
        first_request.push(ms(requests[0].at - t0));
        // The watchdog hook, with the daemon running (every agent detected),
        // and after it was killed, when it starts a new one.
        for _ in 0..pick(10, 3) {
            watchdog_running.push(ms(b.run_watchdog()));
        }
        let killed = b.daemon.take().expect("daemon started");
        // SAFETY: kill takes no pointers; this is the daemon we started.
        unsafe { libc::kill(killed as libc::pid_t, libc::SIGKILL) };
        assert!(
            support::cowbell::wait_dead(killed, Duration::from_secs(5)),
            "daemon survived SIGKILL"
        );
        watchdog_starting.push(ms(b.run_watchdog()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while b.daemon.is_none() {
            b.daemon = b.pid().filter(|pid| *pid != killed);
            assert!(Instant::now() < deadline, "the watchdog started no daemon");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    emit(
        "startup",
        &[
            ("tabs", "100".into()),
            ("runs", reps.to_string()),
            ("hook_returns_ms", mmm(&hook, 1)),
            ("first_request_ms", mmm(&first_request, 1)),
            ("all_icons_ms", mmm(&total, 1)),
            ("goal_under_1s", goal(median(&total) < 1000.0)),
            ("watchdog_running_ms", mmm(&watchdog_running, 1)),
            ("watchdog_starting_ms", mmm(&watchdog_starting, 1)),
            (
                "goal_watchdog_under_50ms",
                goal(median(&watchdog_running).max(median(&watchdog_starting)) < 50.0),
            ),
        ],
    );
}
