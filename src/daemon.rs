//! The daemon's lifecycle: one per herdr server, found through its pidfile.
//!
//! The pidfile in the per-server directory carries an exclusive `flock` for
//! the daemon's whole life. Whoever can take the lock knows no daemon runs,
//! and then the pid written in the file means nothing, so a stale pid is
//! never signalled. Only while the lock is held does the pid name the live
//! daemon, and the daemon empties the file before it lets go. Short
//! commands hold the lock too, for a moment (`status` looks with a shared
//! lock, and every command takes it before it clears a pid a crashed daemon
//! left), so a pid is only trusted when the lock is held with that same pid
//! twice, `CONFIRM` apart. Commands reach the daemon through signals:
//! SIGUSR1 hands over (exit, names untouched), SIGUSR2 stops and restores,
//! SIGHUP reloads.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::event_loop::{Durations, EventLoop};
use crate::files::{self, Dir};
use crate::log::Log;
use crate::paths::{PID_FILE, Paths};
use crate::signals::Signals;
use crate::state::{self, Clock, State};
use crate::sys;

/// How long `--replace` waits for the old daemon to hand over, and `off`
/// and `remove-icons` for a daemon to take their signal.
pub const HANDOVER_WAIT: Duration = Duration::from_secs(5);
/// How long `off` and `remove-icons` wait, once signalled, for the daemon
/// to give every name back and exit (its restore retries for up to 10 s).
pub const STOP_WAIT: Duration = Duration::from_secs(15);

/// How long a writer of state.json waits for another one to finish (a
/// write and a sync: milliseconds) before its write fails, to be tried
/// again at the next save.
const WRITE_WAIT: Duration = Duration::from_secs(1);

/// How long a pid must stay in a held pidfile to be trusted (see above).
const CONFIRM: Duration = Duration::from_millis(20);

/// The pidfile, locked by this process.
pub struct Lock {
    file: File,
}

impl Lock {
    /// Records the pid of the process that holds the lock now, and where
    /// that pid means something (see `pid_scope`).
    fn write_pid(&mut self) -> io::Result<()> {
        // The pid alone in the first 32 bytes, which is all an older
        // cowbell reads: a downgraded one can still stop this daemon.
        let line = format!("{:<31} {}\n", std::process::id(), pid_scope()?);
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        // One write: a reader never sees the pid without its scope.
        self.file.write_all(line.as_bytes())?;
        Ok(())
    }

    /// Empties the pidfile, so the pid names nobody once the lock is free.
    pub fn clear_pid(&self) -> io::Result<()> {
        self.file.set_len(0)
    }

    /// The per-server directory, if it still holds this lock's pidfile,
    /// locked until dropped: state.json belongs to whoever holds the
    /// pidfile beside it, and is written only through this. A save checks,
    /// then writes; in between, the pidfile can be deleted and a new one's
    /// holder record `off`. By path, the save would land in a directory
    /// made since, over that `off`; through the directory's descriptor it
    /// lands in the deleted one, or fails. And when only the files were
    /// deleted, the directory's lock makes the new holder's write wait
    /// for the save, so its `off` comes last. `None` when the pidfile was
    /// deleted or replaced.
    pub fn dir(&self, paths: &Paths) -> io::Result<Option<Dir>> {
        let dir = match Dir::open(&paths.server_dir) {
            Ok(dir) => dir,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        // Looked at before the lock too: a pidfile not ours needs no wait
        // for whoever writes there now.
        if !self.is_in(&dir)? {
            return Ok(None);
        }
        dir.lock(WRITE_WAIT)?;
        Ok(self.is_in(&dir)?.then_some(dir))
    }

    fn is_in(&self, dir: &Dir) -> io::Result<bool> {
        let mine = self.file.metadata()?;
        match dir.identity(PID_FILE) {
            Ok(there) => Ok(there == (mine.dev(), mine.ino())),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Whether `path` is still the file this lock is on. Deleting the
    /// state directory (or the pidfile) under a running daemon leaves its
    /// lock on a file nobody finds, and the next start runs a second daemon
    /// beside it, which `off` would stop alone.
    pub fn is_at(&self, path: &Path) -> bool {
        match (self.file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(mine), Ok(there)) => mine.dev() == there.dev() && mine.ino() == there.ino(),
            _ => false,
        }
    }
}

/// For a running daemon whose pidfile is gone or replaced (see
/// `Lock::is_at`): the lock on the pidfile as it is now, with this pid
/// written, or who holds it.
pub fn relock(paths: &Paths) -> io::Result<Holder> {
    // Confirmed: a pid read once may be a crashed daemon's (see above).
    let mut holder = try_lock_confirmed(paths)?;
    if let Holder::Free(lock) = &mut holder {
        lock.write_pid()?;
    }
    Ok(holder)
}

/// Who holds the pidfile.
pub enum Holder {
    /// Nobody: the lock is now ours.
    Free(Lock),
    /// Someone else, with the pid a daemon wrote. None while a daemon is
    /// starting, while a short command (`sync`, `off`) holds the lock, or
    /// for a daemon whose pid means nothing here (another host).
    Held(Option<u32>),
}

/// How long a start waits for a lock holder that wrote no pid: a daemon
/// that is starting, or a short command that holds the lock a moment.
const PIDLESS_WAIT: Duration = Duration::from_millis(500);

/// How often a command waiting for the lock (or for a daemon to go) looks
/// again: short next to every wait above, cheap next to a process start.
const LOOK_AGAIN: Duration = Duration::from_millis(10);

/// How long `signal_daemon` waits for a holder that wrote no pid.
const SIGNAL_PIDLESS_WAIT: Duration = Duration::from_secs(1);

fn open_pidfile(paths: &Paths) -> io::Result<File> {
    files::ensure_private_dir(&paths.server_dir)?;
    files::open_private(&paths.pid_file(), false)
}

pub fn try_lock(paths: &Paths) -> io::Result<Holder> {
    let file = open_pidfile(paths)?;
    if sys::try_lock_exclusive(file.as_fd())? {
        // Clear a stale pid at once, so nobody reads it while we hold the lock.
        file.set_len(0)?;
        return Ok(Holder::Free(Lock { file }));
    }
    Ok(Holder::Held(read_pid(&file)?))
}

/// Where a pid names a process: this boot of this host (its boot id, which
/// no host rename changes) and, on Linux, this pid namespace (which tells a
/// container from its host, whose boot id it shares). A state directory
/// can be shared beyond one machine (an NFS home, a container with the
/// home mounted), and a pid that a daemon elsewhere wrote would name an
/// unrelated process here.
///
/// Read once per process, and by `start` before it forks: the detached
/// daemon has fewer descriptors to spare (its log, its signal pipe). One
/// that cannot be read is an error, never a scope without the boot id,
/// which every other command would take for another host's.
fn pid_scope() -> io::Result<&'static str> {
    static SCOPE: OnceLock<String> = OnceLock::new();
    if let Some(scope) = SCOPE.get() {
        return Ok(scope);
    }
    let boot = crate::sys::boot_id()?.unwrap_or_default();
    let namespace = std::fs::read_link("/proc/self/ns/pid")
        .map(|link| link.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(SCOPE.get_or_init(|| format!("{boot} {namespace}").trim().to_string()))
}

/// The pid a daemon wrote into its pidfile; `None` while it has not yet
/// written it, and for a daemon on another host or in another pid
/// namespace, which is never signalled. A bare pid is an older cowbell's,
/// from this host. A pidfile that something else filled is not read whole.
fn read_pid(file: &File) -> io::Result<Option<u32>> {
    let mut buffer = [0u8; 320];
    // From the start whatever the file's position: `probe` reads twice.
    let length = file.read_at(&mut buffer, 0)?;
    let Ok(text) = std::str::from_utf8(&buffer[..length]) else {
        return Ok(None);
    };
    let mut words = text.split_whitespace();
    let Some(pid) = words.next() else {
        return Ok(None);
    };
    let mut scope = words.peekable();
    if scope.peek().is_some() && !scope.eq(pid_scope()?.split_whitespace()) {
        return Ok(None);
    }
    Ok(pid.parse().ok())
}

/// `try_lock`, with a pid only when the lock is still held with the same
/// pid `CONFIRM` later: a pid seen once may be a crashed daemon's, read
/// while a short command held the lock for a moment.
fn try_lock_confirmed(paths: &Paths) -> io::Result<Holder> {
    let pid = match try_lock(paths)? {
        Holder::Held(Some(pid)) => pid,
        holder => return Ok(holder),
    };
    std::thread::sleep(CONFIRM);
    Ok(match try_lock(paths)? {
        Holder::Held(Some(again)) if again == pid => Holder::Held(Some(pid)),
        Holder::Held(_) => Holder::Held(None),
        free => free,
    })
}

/// What `signal_daemon` found.
pub enum Reached {
    Signalled,
    /// No daemon runs: the lock is now ours.
    Free(Lock),
}

/// Signals the daemon that holds the lock, or takes the lock when none
/// runs. A holder that wrote no pid (a starting daemon, a short command)
/// is given a second to write one or let go.
pub fn signal_daemon(paths: &Paths, signal: libc::c_int) -> io::Result<Reached> {
    let give_up = Instant::now() + SIGNAL_PIDLESS_WAIT;
    loop {
        match try_lock_confirmed(paths)? {
            Holder::Free(lock) => return Ok(Reached::Free(lock)),
            Holder::Held(Some(pid)) => match sys::kill(pid, signal) {
                Ok(()) => return Ok(Reached::Signalled),
                // It exited between the lock check and the signal: look again.
                Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
                Err(error) => return Err(error),
            },
            Holder::Held(None) if Instant::now() < give_up => std::thread::sleep(LOOK_AGAIN),
            Holder::Held(None) => {
                return Err(io::Error::other(
                    "the pidfile stays locked without a pid: a cowbell command holds it, \
                     or a daemon starting or on its way out",
                ));
            }
        }
    }
}

/// What `stop` did: the lock, and whether a daemon was stopped (it gave
/// the names back itself, as far as it could).
pub struct Stopped {
    pub lock: Lock,
    pub daemon_ran: bool,
}

/// Stops the daemon (SIGUSR2: it restores the names, records the off flag
/// and exits) and returns the lock; `None` if it is still held in the end.
/// A lock found free is kept, not dropped and taken again, so no hook can
/// start a daemon in between; a daemon a hook started anyway is stopped
/// too.
pub fn stop(paths: &Paths) -> io::Result<Option<Stopped>> {
    let mut signalled = None;
    let started = Instant::now();
    let mut give_up = started + HANDOVER_WAIT;
    loop {
        match try_lock_confirmed(paths)? {
            Holder::Free(lock) => {
                return Ok(Some(Stopped {
                    lock,
                    daemon_ran: signalled.is_some(),
                }));
            }
            Holder::Held(Some(pid)) if signalled != Some(pid) => {
                match sys::kill(pid, libc::SIGUSR2) {
                    Ok(()) => {
                        signalled = Some(pid);
                        give_up = Instant::now() + STOP_WAIT;
                    }
                    Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(error) => return Err(error),
                }
            }
            // A daemon that could not write its pid gives the names back
            // and exits, which may take its restore's whole time. (Not a
            // pid from another host, which never lets go for this.)
            Holder::Held(None) if pidfile_is_empty(paths) => {
                give_up = give_up.max(started + STOP_WAIT)
            }
            Holder::Held(_) => {}
        }
        if Instant::now() >= give_up {
            return Ok(None);
        }
        std::thread::sleep(LOOK_AGAIN);
    }
}

fn pidfile_is_empty(paths: &Paths) -> bool {
    std::fs::symlink_metadata(paths.pid_file()).is_ok_and(|m| m.len() == 0)
}

/// What `start` did.
pub enum Started {
    /// The daemon runs detached (we are the launching process).
    Detached,
    /// A daemon already ran; nothing changed.
    AlreadyRunning(Option<u32>),
    /// cowbell is off for this server; the lock is still held, so a
    /// restore that a stop left unfinished can be finished under it.
    Off(Lock),
    /// `--foreground`, or the detached child: the loop ran and returned.
    Exited(u8),
    /// No daemon runs now.
    Failed(Failed),
}

/// Why `start` ended without a daemon.
pub enum Failed {
    /// Nothing changed: state.json cannot be read just now (starting empty
    /// would forget every name and an `off`), or too few descriptors are
    /// left to start one.
    Unchanged(io::Error),
    /// No process could be made for the daemon; the lock is still held, so
    /// the names an old daemon handed over can be given back under it,
    /// from the state as read (`loaded`, with its warning).
    CannotFork {
        lock: Lock,
        error: io::Error,
        loaded: (State, Option<String>),
    },
}

/// The descriptors a start needs once it holds the lock: one for the
/// state's read, then, in the detached daemon, /dev/null for its standard
/// streams, its log and the two ends of its signal pipe; and its first
/// save, once the read and /dev/null are closed, two (the directory and
/// the temp file).
const START_DESCRIPTORS: usize = 5;

/// Starts the daemon for this server unless one runs. With `replace`, an
/// old daemon is asked to hand over (it exits without touching names, so
/// a server restart does not make icons flicker).
pub fn start(paths: &Paths, replace: bool, foreground: bool) -> io::Result<Started> {
    pid_scope()?;
    // Kept until the lock is ours: at a descriptor limit, a start that
    // ran out after an old daemon handed over would leave no daemon at
    // all, so it must find out before it asks.
    let reserve = (0..START_DESCRIPTORS)
        .map(|_| File::open("/dev/null"))
        .collect::<io::Result<Vec<File>>>();
    let mut reserve = match reserve {
        Ok(reserve) => reserve,
        Err(error) => {
            return Ok(Started::Failed(Failed::Unchanged(io::Error::new(
                error.kind(),
                format!("too few file descriptors left to start it ({error})"),
            ))));
        }
    };
    let mut detached = false;
    let lock = match try_lock_patiently(paths)? {
        Holder::Free(lock) => lock,
        Holder::Held(_) if replace => match take_over(paths)? {
            Ok(lock) => lock,
            Err(newer) => return Ok(Started::AlreadyRunning(newer)),
        },
        // Held with no pid for longer than a start takes: a short command
        // (a `sync` against a slow herdr holds it for seconds) or a daemon
        // on its way out. No daemon runs, and one must once it lets go;
        // unless cowbell is off, when the holder is giving names back and
        // there is nothing to start (a watchdog must not wait in one of
        // herdr's 32 command slots for it). A detached start waits as the
        // daemon-to-be, not in its launching command: one watchdog per
        // agent detected during a slow `sync` would fill the slots.
        Holder::Held(None) if !state::peek_off(&paths.state_file()).unwrap_or(false) => {
            if !foreground {
                match sys::fork() {
                    Ok(sys::Forked::Parent) => return Ok(Started::Detached),
                    Ok(sys::Forked::Child) => {
                        detach()?;
                        // Nothing the launcher let it inherit stays open
                        // for the wait (the reserve matters only to a
                        // handover).
                        reserve.clear();
                        // Standard input stands for "keep nothing above 2".
                        sys::close_inherited(std::io::stdin().as_fd());
                        detached = true;
                    }
                    // Then it waits here, as a foreground start does.
                    Err(_) => {}
                }
            }
            match try_lock_after_commands(paths, STOP_WAIT)? {
                Holder::Free(lock) => lock,
                Holder::Held(pid) => {
                    // Its command has ended: only the log can say so.
                    if detached && pid.is_none() {
                        Log::open(paths.log_file()).line_fmt(format_args!(
                            "no daemon started: a cowbell command held the pidfile for {} s",
                            STOP_WAIT.as_secs()
                        ));
                    }
                    return Ok(Started::AlreadyRunning(pid));
                }
            }
        }
        Holder::Held(pid) => return Ok(Started::AlreadyRunning(pid)),
    };
    drop(reserve);
    // Read here, under the lock and before the fork, not by the detached
    // daemon, which has fewer descriptors to spare (its log, its signal
    // pipe): one that could not read it would leave no daemon at all after
    // an old one handed over. Both clocks are read once while it holds:
    // every save converts instants with the same offset, so an unchanged
    // state gives the same text and is not written (and synced) again (see
    // `EventLoop::save`).
    let clock = Clock::now();
    let loaded = match state::load(&paths.state_file(), clock.wall_ms / 1000) {
        Ok(loaded) => loaded,
        Err(error) => return Ok(Started::Failed(Failed::Unchanged(error))),
    };
    if loaded.0.off {
        return Ok(Started::Off(lock));
    }
    if !foreground && !detached {
        match sys::fork() {
            Err(error) => {
                return Ok(Started::Failed(Failed::CannotFork {
                    lock,
                    error,
                    loaded,
                }));
            }
            Ok(sys::Forked::Parent) => return Ok(Started::Detached),
            Ok(sys::Forked::Child) => {
                detach()?;
                sys::close_inherited(lock.file.as_fd());
            }
        }
    }
    Ok(Started::Exited(run(paths, lock, foreground, loaded, clock)))
}

/// `try_lock`, but a holder that wrote no pid gets a moment to either
/// write one (a starting daemon) or let go (a short command). So does a
/// holder beside a dead process's pid: a crashed daemon's, read while a
/// `status` holds the lock for its look.
pub fn try_lock_patiently(paths: &Paths) -> io::Result<Holder> {
    let give_up = Instant::now() + PIDLESS_WAIT;
    loop {
        match try_lock(paths)? {
            Holder::Held(pid)
                if pid.is_none_or(|pid| !sys::is_alive(pid)) && Instant::now() < give_up =>
            {
                std::thread::sleep(LOOK_AGAIN);
            }
            holder => return Ok(holder),
        }
    }
}

/// `try_lock`, but a holder that wrote nothing in the pidfile (a short
/// command, a daemon starting or on its way out) is waited for, up to
/// `wait`. Not a pid from another host, which never lets go for this.
pub fn try_lock_after_commands(paths: &Paths, wait: Duration) -> io::Result<Holder> {
    let give_up = Instant::now() + wait;
    loop {
        match try_lock(paths)? {
            Holder::Held(None) if pidfile_is_empty(paths) && Instant::now() < give_up => {
                std::thread::sleep(LOOK_AGAIN);
            }
            holder => return Ok(holder),
        }
    }
}

/// The pid of the running daemon, if one runs, found without taking the
/// lock (which would look like a daemon to a hook starting at the same
/// moment) and without creating anything. A lock held without a pid (a
/// short command, a daemon starting this very moment) is no daemon.
pub fn probe(paths: &Paths) -> io::Result<Option<u32>> {
    let file = match files::open_existing(&paths.pid_file()) {
        Ok(file) => file,
        // (Under a plain file where a directory should be, no pidfile can
        // be either.)
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let held_pid = || -> io::Result<Option<u32>> {
        if sys::is_locked(file.as_fd())? {
            read_pid(&file)
        } else {
            Ok(None)
        }
    };
    let Some(pid) = held_pid()? else {
        if file.metadata()?.len() > 0 {
            // A pid with no lock is a crashed daemon's: empty the file (under
            // the lock, as every command does), so nobody pairs it with a
            // lock someone else holds a moment later.
            let _ = try_lock(paths);
        }
        return Ok(None);
    };
    std::thread::sleep(CONFIRM);
    Ok(held_pid()?.filter(|again| *again == pid))
}

/// Waits up to `timeout` for a daemon just started to write its pid, and
/// returns it; `None` for one that left, or stayed without a pid (one
/// that cannot write it gives the names back and exits).
pub fn wait_for_pid(paths: &Paths, timeout: Duration) -> io::Result<Option<u32>> {
    let give_up = Instant::now() + timeout;
    loop {
        if let Some(pid) = probe(paths)? {
            return Ok(Some(pid));
        }
        if Instant::now() >= give_up {
            return Ok(None);
        }
        std::thread::sleep(LOOK_AGAIN);
    }
}

/// Asks the running daemon to hand over and waits for its lock. When
/// another replacing start wins the race, its fresh daemon is kept:
/// `Err(pid)` says so.
fn take_over(paths: &Paths) -> io::Result<Result<Lock, Option<u32>>> {
    let mut give_up = Instant::now() + HANDOVER_WAIT;
    let mut signalled = None;
    // When the signal went: the waits count from there, so that a start
    // stopped before it (Ctrl-Z) and resumed late does not ask and leave
    // at once.
    let mut asked = Instant::now();
    // Held with nothing in the pidfile: the old daemon has decided to go
    // (it empties the pidfile then: see the event loop's handover), or a
    // daemon is starting, or a short command looks.
    let mut emptied = false;
    loop {
        match try_lock_confirmed(paths)? {
            Holder::Free(lock) => return Ok(Ok(lock)),
            // A daemon started since the one this start asked, or since
            // the pidfile was seen empty: another start won the race.
            Holder::Held(Some(pid)) if signalled.is_some_and(|old| old != pid) => {
                return Ok(Err(Some(pid)));
            }
            Holder::Held(Some(pid)) if signalled.is_none() && emptied => {
                return Ok(Err(Some(pid)));
            }
            Holder::Held(Some(pid)) if signalled.is_none() => match sys::request_handover(pid) {
                Ok(()) => {
                    signalled = Some(pid);
                    asked = Instant::now();
                    give_up = give_up.max(asked + HANDOVER_WAIT);
                }
                // It exited on its own (an idle exit, say): its lock is
                // about to be free.
                Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
                Err(error) => return Err(error),
            },
            // A daemon that decided lets go once its last save is on disk,
            // and a short command once its renames are done: against a
            // slow herdr, a list and 5 s of renames, longer than the wait
            // above. Giving up then would leave no daemon at all (a command
            // stopped with Ctrl-Z holds the startup hook this long).
            Holder::Held(None) if pidfile_is_empty(paths) => {
                emptied = true;
                give_up = give_up.max(asked + STOP_WAIT);
            }
            Holder::Held(_) => {}
        }
        if Instant::now() >= give_up {
            return Err(io::Error::other(match (signalled, emptied) {
                (Some(_), true) => format!(
                    "the old daemon is on its way out but still held the pidfile after {} s; \
                     no daemon runs now",
                    STOP_WAIT.as_secs()
                ),
                // Stopped, it carries on once it runs again: this process
                // will be gone by then (see the event loop's SIGUSR1). A
                // restore under way goes on instead of the handover.
                (Some(_), false) => format!(
                    "the old daemon did not hand over within {} s: if it was stopped, \
                     it stays the daemon; if it is giving names back (`off`, a stop), \
                     it exits when done",
                    HANDOVER_WAIT.as_secs()
                ),
                (None, true) => format!(
                    "the pidfile stayed locked for {} s with no pid in it (a cowbell \
                     command under way, or a daemon starting or on its way out)",
                    STOP_WAIT.as_secs()
                ),
                // Nothing this process could signal: a daemon on another
                // host or in another pid namespace sharing this state
                // directory.
                (None, false) => format!(
                    "the pidfile stayed locked for {} s by a process with no pid \
                     to signal here (a daemon on another host or in another pid \
                     namespace)",
                    HANDOVER_WAIT.as_secs()
                ),
            }));
        }
        std::thread::sleep(LOOK_AGAIN);
    }
}

/// Leaves herdr's hook behind: a new session, and standard streams that are
/// not herdr's pipes (herdr reads them to end of file).
fn detach() -> io::Result<()> {
    sys::setsid()?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    sys::redirect_stdio(null.as_fd())
}

/// The daemon, with `loaded` the state `start` read and `clock` the
/// reading of both clocks it read it with.
fn run(
    paths: &Paths,
    mut lock: Lock,
    foreground: bool,
    loaded: (State, Option<String>),
    clock: Clock,
) -> u8 {
    let mut log = Log::open(paths.log_file());
    log.echo_to_stderr = foreground;
    // Handlers first: a signal that arrives once the pid is visible must
    // find them installed, not the default action.
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            log.line_fmt(format_args!("cannot install signal handlers: {error}"));
            return 1;
        }
    };
    let pid_written = lock.write_pid();
    let durations = Durations::from_env();
    let mut event_loop =
        EventLoop::new(paths.clone(), lock, log, signals, durations, loaded, clock);
    if let Err(error) = pid_written {
        // Without its pid nobody can stop or replace this daemon (off and
        // --replace signal the pid), so it must not run on. But an old
        // daemon may have handed its tabs over already (a full disk at the
        // startup hook): with nobody to keep their icons right, it gives
        // the names back first.
        event_loop.stop_at_once(&format!(
            "cannot write the pidfile {}: {error}; not starting",
            paths.pid_file().display()
        ));
    }
    let (code, lock) = event_loop.run();
    if let Err(error) = lock.clear_pid() {
        Log::open(paths.log_file()).line_fmt(format_args!(
            "cannot empty the pidfile {}: {error}",
            paths.pid_file().display()
        ));
    }
    drop(lock);
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::tests::TempDir;

    fn pid_in(text: &[u8]) -> Option<u32> {
        let dir = TempDir::new("pidfile");
        let path = dir.0.join("daemon.pid");
        std::fs::write(&path, text).unwrap();
        read_pid(&File::open(&path).unwrap()).unwrap()
    }

    fn paths_in(dir: &TempDir) -> Paths {
        Paths {
            socket: dir.0.join("herdr.sock"),
            config_file: dir.0.join("config.json"),
            server_dir: dir.0.join("server"),
            plugin_id: "cowbell".into(),
        }
    }

    /// A pid a crashed daemon left, read while a short command holds the
    /// lock for a moment, must not pass for a live daemon.
    #[test]
    fn a_stale_pid_under_a_passing_lock_is_not_trusted() {
        let dir = TempDir::new("confirm");
        let paths = paths_in(&dir);
        let file = open_pidfile(&paths).unwrap();
        std::fs::write(paths.pid_file(), "4242\n").unwrap();
        // Another command's look: the lock held by another open file,
        // let go on a word from this thread (a sleep-timed hand-off failed
        // now and then on a busy machine).
        assert!(sys::try_lock_exclusive(file.as_fd()).unwrap());
        let (let_go, told) = std::sync::mpsc::channel::<()>();
        let passer = std::thread::spawn(move || {
            told.recv().unwrap();
            drop(file);
        });
        assert!(matches!(
            try_lock(&paths).unwrap(),
            Holder::Held(Some(4242))
        ));
        // The look lets go well within the 20 ms the confirmation waits.
        let_go.send(()).unwrap();
        assert!(matches!(
            try_lock_confirmed(&paths).unwrap(),
            Holder::Free(_)
        ));
        passer.join().unwrap();
        assert_eq!(
            read_pid(&File::open(paths.pid_file()).unwrap()).unwrap(),
            None
        );
    }

    /// A relock (the pidfile deleted under a running daemon) must not
    /// take a crashed daemon's pid, read while a command held the lock a
    /// moment, for a daemon to leave the server to.
    #[test]
    fn a_relock_does_not_hand_over_to_a_stale_pid() {
        let dir = TempDir::new("relock-stale");
        let paths = paths_in(&dir);
        // The command lets go 5 ms in, well within the 20 ms the pid must
        // stay; a loaded machine may run its thread later than that, so a
        // few tries, of which one must come right.
        let tries = (0..5).map(|_| {
            let file = open_pidfile(&paths).unwrap();
            std::fs::write(paths.pid_file(), "4242\n").unwrap();
            assert!(sys::try_lock_exclusive(file.as_fd()).unwrap());
            let passer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                drop(file);
            });
            let holder = relock(&paths).unwrap();
            passer.join().unwrap();
            matches!(holder, Holder::Held(Some(4242)))
        });
        assert!(
            tries.into_iter().any(|stale| !stale),
            "a crashed daemon's pid, read once, taken for a new daemon"
        );
    }

    #[test]
    fn a_daemon_holding_its_lock_with_its_pid_is_trusted() {
        let dir = TempDir::new("trusted");
        let paths = paths_in(&dir);
        let Holder::Free(mut lock) = try_lock(&paths).unwrap() else {
            panic!("the lock should be free");
        };
        lock.write_pid().unwrap();
        let me = std::process::id();
        assert!(
            matches!(try_lock_confirmed(&paths).unwrap(), Holder::Held(Some(pid)) if pid == me)
        );
        assert_eq!(probe(&paths).unwrap(), Some(me));
        // An older cowbell reads 32 bytes and wants a bare pid in them.
        let written = std::fs::read(paths.pid_file()).unwrap();
        let first = std::str::from_utf8(&written[..32]).unwrap();
        assert_eq!(first.trim().parse::<u32>().ok(), Some(me));
        // Letting go empties the file first.
        lock.clear_pid().unwrap();
        drop(lock);
        assert_eq!(probe(&paths).unwrap(), None);
        assert!(matches!(try_lock(&paths).unwrap(), Holder::Free(_)));
    }

    /// The pidfile and state.json deleted (the directory kept) while a
    /// save is between its check and its write, and a command locked a new
    /// pidfile meanwhile: the command's write must wait for the save's.
    #[test]
    fn a_writer_holds_the_directory_from_its_check_to_its_write() {
        let dir = TempDir::new("write-lock");
        let paths = paths_in(&dir);
        let Holder::Free(daemon) = try_lock(&paths).unwrap() else {
            panic!("the lock should be free");
        };
        let saving = daemon
            .dir(&paths)
            .unwrap()
            .expect("the pidfile is the daemon's");
        std::fs::remove_file(paths.pid_file()).unwrap();
        let Holder::Free(command) = try_lock(&paths).unwrap() else {
            panic!("the new pidfile should be free");
        };
        saving.write_atomically("state.json", b"saved").unwrap();
        let waited = Instant::now();
        let writer = {
            let paths = paths.clone();
            std::thread::spawn(move || {
                let mine = command.dir(&paths).unwrap().is_some();
                (mine, waited.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        drop(saving);
        let (mine, after) = writer.join().unwrap();
        assert!(mine, "the new pidfile's holder writes next");
        assert!(
            after >= Duration::from_millis(100),
            "it wrote after {after:?}"
        );
        // And the old holder finds its pidfile gone.
        assert!(daemon.dir(&paths).unwrap().is_none());
    }

    /// A save that passed its first look while a command held the
    /// directory's lock, and meanwhile the pidfile was deleted and a new
    /// one locked (the command recording `off` there): once the save gets
    /// the directory, the pidfile is no longer its own, and it must not
    /// write over that `off`.
    #[test]
    fn a_writer_that_waited_for_the_directory_looks_at_the_pidfile_again() {
        let dir = TempDir::new("write-lock-again");
        let paths = paths_in(&dir);
        let Holder::Free(daemon) = try_lock(&paths).unwrap() else {
            panic!("the lock should be free");
        };
        // Another open file description of the directory: its flock is
        // what a writer's `Dir::lock` waits for.
        let busy = File::open(&paths.server_dir).unwrap();
        assert!(sys::try_lock_exclusive(busy.as_fd()).unwrap());
        let saver = {
            let paths = paths.clone();
            std::thread::spawn(move || daemon.dir(&paths).unwrap().is_some())
        };
        // The saver is past its first look (the pidfile is still its own)
        // and waits for the directory.
        std::thread::sleep(Duration::from_millis(200));
        std::fs::remove_file(paths.pid_file()).unwrap();
        let Holder::Free(_command) = try_lock(&paths).unwrap() else {
            panic!("the new pidfile should be free");
        };
        drop(busy);
        assert!(
            !saver.join().unwrap(),
            "a save wrote beside a pidfile that is no longer its own"
        );
    }

    /// A daemon whose pidfile was deleted, alone or with its directory:
    /// there is nowhere of its own to write, which is no failure to log
    /// ("cannot save") at every save until it locks a new pidfile.
    #[test]
    fn a_writer_whose_pidfile_was_deleted_has_no_directory_and_no_error() {
        let dir = TempDir::new("pidfile-gone");
        let paths = paths_in(&dir);
        let Holder::Free(daemon) = try_lock(&paths).unwrap() else {
            panic!("the lock should be free");
        };
        std::fs::remove_file(paths.pid_file()).unwrap();
        assert!(matches!(daemon.dir(&paths), Ok(None)));
        std::fs::remove_dir_all(&paths.server_dir).unwrap();
        assert!(matches!(daemon.dir(&paths), Ok(None)));
    }

    #[test]
    fn a_pidfile_gives_its_pid_or_none() {
        assert_eq!(pid_in(b"4242\n"), Some(4242));
        assert_eq!(pid_in(b"4242"), Some(4242));
        assert_eq!(pid_in(b""), None, "the daemon has not written it yet");
        assert_eq!(pid_in(b"not a pid"), None);
        assert_eq!(pid_in(b"\xff\xfe"), None);
        assert_eq!(
            pid_in(format!("4242 {}\n", pid_scope().unwrap()).as_bytes()),
            Some(4242)
        );
        // Another host's (or boot's) or pid namespace's pid names nobody
        // here: the namespace alone does not tell, every host's first is
        // the same.
        let here: Vec<String> = pid_scope()
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        // On every platform: a Mac's daemon once wrote no scope, and its
        // bare pid was signalled by a Linux cowbell sharing the directory.
        assert!(!here.is_empty(), "this host's pids carry no scope");
        let elsewhere = "4242 0d5e1f00-0000-4000-8000-000000000000\n";
        assert_eq!(pid_in(elsewhere.as_bytes()), None, "another boot's pid");
        if let [boot, namespace] = &here[..] {
            let elsewhere = format!("4242 0d5e1f00-0000-4000-8000-000000000000 {namespace}\n");
            assert_eq!(pid_in(elsewhere.as_bytes()), None);
            let other_namespace = format!("4242 {boot} pid:[1]\n");
            assert_eq!(pid_in(other_namespace.as_bytes()), None);
            // However the spaces fall.
            let spaced = format!("  4242\t{boot}   {namespace} \n");
            assert_eq!(pid_in(spaced.as_bytes()), Some(4242));
        }
        // Only the start is read: what follows 320 bytes does not count.
        let mut long = b"4242\n".to_vec();
        long.extend([b' '; 400]);
        long.extend(b"junk");
        assert_eq!(pid_in(&long), Some(4242));
    }
}
