//! Signals as one more readable fd: the self-pipe.
//!
//! The handler does the least a handler may: it saves `errno`, sets the flag
//! of its signal, writes one byte to a non-blocking pipe and restores
//! `errno`. The poll loop wakes on the pipe, drains it, then reads and
//! clears the flags, and acts outside any handler.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::sys;

/// What a signal asks of the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// SIGTERM or SIGINT: restore every tab name, then exit.
    StopAndRestore,
    /// SIGUSR1: another daemon takes over; exit without touching names.
    /// `from` is the cowbell process that asked (`daemon --replace`,
    /// `on`), when it can be told; `None` for a person's `kill -USR1`.
    Handover { from: Option<u32> },
    /// SIGHUP: read the configuration again and resync.
    Reload,
    /// SIGUSR2 (`cowbell off`): restore every name, record that cowbell is
    /// off for this server, then exit.
    TurnOff,
}

const WATCHED: [(libc::c_int, Request); 5] = [
    (libc::SIGTERM, Request::StopAndRestore),
    (libc::SIGINT, Request::StopAndRestore),
    (libc::SIGUSR1, Request::Handover { from: None }),
    (libc::SIGHUP, Request::Reload),
    (libc::SIGUSR2, Request::TurnOff),
];

static PIPE_WRITE_FD: AtomicI32 = AtomicI32::new(-1);
/// The cowbell process that asked for the last handover, or 0.
static HANDOVER_FROM: AtomicI32 = AtomicI32::new(0);
static PENDING: [AtomicBool; WATCHED.len()] = [const { AtomicBool::new(false) }; WATCHED.len()];

#[cfg(any(target_os = "linux", target_os = "android"))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; always valid.
    unsafe { libc::__errno_location() }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn errno_location() -> *mut libc::c_int {
    // SAFETY: returns the calling thread's errno slot; always valid.
    unsafe { libc::__error() }
}

/// The pid of a cowbell process that queued this SIGUSR1 (see
/// `sys::request_handover`); 0 for a plain `kill`, whose sender may well
/// have exited at once and still meant it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn handover_requester(info: *const libc::siginfo_t) -> libc::pid_t {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t; a
    // queued signal carries the sender's pid.
    unsafe {
        if (*info).si_code == libc::SI_QUEUE {
            (*info).si_pid()
        } else {
            0
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn handover_requester(_info: *const libc::siginfo_t) -> libc::pid_t {
    0
}

extern "C" fn on_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: reading and writing this thread's errno slot is
    // async-signal-safe; we put back what the interrupted code had.
    let saved_errno = unsafe { *errno_location() };
    if signal == libc::SIGUSR1 && !info.is_null() {
        HANDOVER_FROM.store(handover_requester(info), Ordering::SeqCst);
    }
    for (index, (watched, _)) in WATCHED.iter().enumerate() {
        if *watched == signal {
            PENDING[index].store(true, Ordering::SeqCst);
        }
    }
    let fd = PIPE_WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the fd is non-blocking, so a
        // full pipe just drops the byte, and a wake-up is already pending.
        unsafe { libc::write(fd, &byte as *const u8 as *const libc::c_void, 1) };
    }
    // SAFETY: writing back this thread's errno slot is async-signal-safe.
    unsafe { *errno_location() = saved_errno };
}

/// A file size limit (ulimit -f) should make a write fail with EFBIG, which
/// the log and the saves handle, rather than kill the process with SIGXFSZ:
/// a command killed half way through a `sync` or an `off` says nothing.
pub fn ignore_file_size_limit() {
    // SAFETY: SIG_IGN needs no handler; SIGXFSZ is a valid signal.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The read end of the self-pipe, and the owner of the handlers.
pub struct Signals {
    read: File,
    // Kept open for the process's life: the handler writes to it.
    _write: OwnedFd,
}

impl Signals {
    /// Installs the handlers. Call once, before the loop starts.
    pub fn install() -> io::Result<Signals> {
        let (read, write) = sys::pipe_nonblocking()?;
        PIPE_WRITE_FD.store(write.as_raw_fd(), Ordering::SeqCst);
        for (signal, _) in WATCHED {
            // SAFETY: sigaction is plain data; all-zero is a valid start.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = on_signal
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
            // SAFETY: the mask pointer is valid; on_signal only does
            // async-signal-safe work.
            unsafe {
                libc::sigemptyset(&mut action.sa_mask);
                if libc::sigaction(signal, &action, std::ptr::null_mut()) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        // A launcher may have blocked these (the mask survives fork and
        // exec), and a blocked signal never reaches the handler: the daemon
        // could then be neither replaced nor turned off.
        // SAFETY: sigset_t is plain data that sigemptyset initialises; the
        // pointers are valid for the calls; SIG_IGN needs no handler.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for (signal, _) in WATCHED {
                libc::sigaddset(&mut set, signal);
            }
            if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Signals {
            read: File::from(read),
            _write: write,
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Empties the pipe, then takes the flags: a signal that lands between
    /// the two is seen now or wakes the next poll, never lost.
    pub fn take(&self) -> Vec<Request> {
        let mut buffer = [0u8; 64];
        while matches!((&self.read).read(&mut buffer), Ok(n) if n > 0) {}
        let mut requests = Vec::new();
        for (index, (_, request)) in WATCHED.iter().enumerate() {
            if PENDING[index].swap(false, Ordering::SeqCst) && !requests.contains(request) {
                requests.push(match request {
                    Request::Handover { .. } => Request::Handover {
                        from: u32::try_from(HANDOVER_FROM.load(Ordering::SeqCst))
                            .ok()
                            .filter(|pid| *pid > 0),
                    },
                    other => *other,
                });
            }
        }
        requests
    }
}
