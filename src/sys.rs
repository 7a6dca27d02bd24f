//! The system calls std does not offer, behind safe functions.
//!
//! Every `unsafe` block of cowbell except the signal handling (in
//! `signals`) lives here: a non-blocking Unix socket connect, `poll(2)`,
//! `flock(2)`, the `*at` calls that write inside a directory held open,
//! the pieces of detaching (fork, setsid, dup2), `kill(2)` and
//! `sigqueue(2)`, and the macOS flush and boot id. Each returns `io::Result`,
//! with `cvt` turning `-1` into the `errno` error, and owns its fds as
//! `OwnedFd` so nothing is closed twice or leaked across `exec`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Puts `file`'s data on the disk, before a rename makes it state.json.
/// On Apple std's `sync_all` is `F_FULLFSYNC`, which SMB, WebDAV, ZFS and
/// FUSE file systems refuse (no save would ever succeed there) and which
/// empties the whole drive cache on every save. A barrier keeps the data
/// ahead of the rename, which is all the atomic replace needs; plain fsync
/// where even that is refused.
pub fn sync_file(file: &std::fs::File) -> io::Result<()> {
    #[cfg(target_vendor = "apple")]
    {
        // SAFETY: fcntl and fsync on a valid, open fd touch only its file.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_BARRIERFSYNC) } != -1 {
            return Ok(());
        }
        cvt(unsafe { libc::fsync(file.as_raw_fd()) })?;
        Ok(())
    }
    #[cfg(not(target_vendor = "apple"))]
    file.sync_all()
}

/// This boot of this machine, as the kernel names it (a random UUID per
/// boot); `None` where the system has none to give (no /proc). A failure
/// of the moment (no descriptor or memory left) is an error: a pid scope
/// without the boot id would pass for another host's (see
/// `daemon::pid_scope`).
pub fn boot_id() -> io::Result<Option<String>> {
    #[cfg(target_vendor = "apple")]
    {
        let mut buffer = [0u8; 64];
        let mut length = buffer.len();
        // SAFETY: sysctlbyname writes at most `length` bytes into `buffer`
        // and the length it wrote back into `length`.
        let ret = unsafe {
            libc::sysctlbyname(
                c"kern.bootsessionuuid".as_ptr(),
                buffer.as_mut_ptr().cast(),
                &mut length,
                std::ptr::null_mut(),
                0,
            )
        };
        if cvt(ret).is_err() {
            return Ok(None);
        }
        let text = buffer
            .get(..length)
            .and_then(|b| std::str::from_utf8(b).ok());
        Ok(text.map(|text| text.trim_end_matches('\0').trim().to_string()))
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        // 36 characters and a newline: one read into a buffer does, and
        // costs 1 KiB less binary than `fs::read_to_string` (BENCH.md has
        // the size budget).
        use std::io::Read;
        let mut buffer = [0u8; 64];
        // Only a failure of the moment is an error; a file this system
        // keeps from us (no /proc, a security policy) means no boot id.
        let mut file = match std::fs::File::open("/proc/sys/kernel/random/boot_id") {
            Ok(file) => file,
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
                ) =>
            {
                return Err(error);
            }
            Err(_) => return Ok(None),
        };
        let length = file.read(&mut buffer)?;
        Ok(std::str::from_utf8(&buffer[..length])
            .ok()
            .map(|text| text.trim().to_string()))
    }
}

/// Turns the C convention (`-1` and `errno`) into an `io::Result`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A pipe whose both ends are non-blocking and close-on-exec.
pub fn pipe_nonblocking() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // SAFETY: `fds` is a valid array of two ints for pipe to fill.
        cvt(unsafe { libc::pipe(fds.as_mut_ptr()) })?;
    }
    // SAFETY: pipe just returned two fresh fds that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    for fd in [&read, &write] {
        set_cloexec(std::os::fd::AsFd::as_fd(fd))?;
        set_nonblocking(std::os::fd::AsFd::as_fd(fd))?;
    }
    Ok((read, write))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_cloexec(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_SETFD on a valid fd touches only that fd's flags.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    Ok(())
}

fn set_status_flag(fd: BorrowedFd<'_>, flag: libc::c_int, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL on a valid fd reads its status flags.
    let flags = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let flags = if on { flags | flag } else { flags & !flag };
    // SAFETY: F_SETFL on a valid fd sets only its status flags.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) })?;
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_status_flag(fd, libc::O_NONBLOCK, true)
}

/// Makes reads and writes on `fd` wait again: for a file opened
/// `O_NONBLOCK` only so that opening a FIFO could not hang, and for a
/// short command's socket, connected without blocking so that a full
/// listen queue could not hang it.
pub fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_status_flag(fd, libc::O_NONBLOCK, false)
}

/// Starts a connection to a Unix socket without ever blocking.
///
/// std's `UnixStream::connect` blocks when the server's backlog is full,
/// which a hung herdr could make last for ever. A Unix socket connect either
/// completes at once or fails (`EAGAIN` for a full backlog), so the result
/// is a connected, non-blocking stream or an error.
pub fn connect_unix(path: &Path) -> io::Result<UnixStream> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data; all-zero is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= address.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (slot, byte) in address.sun_path.iter_mut().zip(bytes) {
        *slot = *byte as libc::c_char;
    }
    let fd = new_stream_socket()?;
    let length =
        (std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: `address` is an initialised sockaddr_un and `length` is within it.
    let ret = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            &address as *const libc::sockaddr_un as *const libc::sockaddr,
            length,
        )
    };
    if ret == -1 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(error);
        }
    }
    Ok(UnixStream::from(fd))
}

fn new_stream_socket() -> io::Result<OwnedFd> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        // SAFETY: socket takes no pointers; a non-negative result is a new fd we own.
        let raw = cvt(unsafe { libc::socket(libc::AF_UNIX, kind, 0) })?;
        // SAFETY: `raw` was just created and is owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        // SAFETY: socket takes no pointers; a non-negative result is a new fd we own.
        let raw = cvt(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) })?;
        // SAFETY: `raw` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        set_cloexec(std::os::fd::AsFd::as_fd(&fd))?;
        set_nonblocking(std::os::fd::AsFd::as_fd(&fd))?;
        Ok(fd)
    }
}

/// The events a poll entry asks for.
pub const READABLE: libc::c_short = libc::POLLIN;
pub const WRITABLE: libc::c_short = libc::POLLOUT;

/// One entry of a poll set.
pub fn poll_entry(fd: BorrowedFd<'_>, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }
}

/// `poll(2)`; an interrupted wait counts as "nothing happened".
pub fn poll(entries: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    // SAFETY: the pointer and length describe the caller's live slice.
    let ret = unsafe {
        libc::poll(
            entries.as_mut_ptr(),
            entries.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    match cvt(ret) {
        Ok(n) => Ok(n as usize),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(error) => Err(error),
    }
}

/// Everything cowbell makes is private (directories 0700, files 0600), so
/// the umask it inherits gets no say: 177, which keeps files 0600, would
/// make directories without their search bit, and a chmod after each
/// mkdir leaves a moment in which another command is stopped by one.
pub fn private_umask() {
    // SAFETY: umask takes a plain mode and cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// A name inside a directory, for the `*at` calls.
fn c_name(name: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Creates `name` in `dir`, which must not exist yet (no symlink is
/// followed), for writing; close-on-exec, with `mode` less the umask.
pub fn create_new_at(dir: BorrowedFd<'_>, name: &str, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `name` is a valid C string for the call's duration, and the
    // fd openat returns is fresh and owned by nothing else.
    unsafe {
        let fd = cvt(libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags,
            mode as libc::c_uint,
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Renames `from` to `to`, both in `dir`.
pub fn rename_at(dir: BorrowedFd<'_>, from: &str, to: &str) -> io::Result<()> {
    let (from, to) = (c_name(from)?, c_name(to)?);
    // SAFETY: both names are valid C strings for the call's duration.
    cvt(unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) })?;
    Ok(())
}

/// Removes the file `name` from `dir`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: `name` is a valid C string for the call's duration.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
    Ok(())
}

/// The device and inode of `name` in `dir`, a symlink not followed.
pub fn identity_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<(u64, u64)> {
    let name = c_name(name)?;
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstatat fills `stat` when it returns 0, and only then is it read.
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            stat.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast)] // u64 on Linux, not on every target
    Ok((stat.st_dev as u64, stat.st_ino as u64))
}

/// Tries to take an exclusive `flock` without waiting: `Ok(false)` when
/// another open file description holds it.
pub fn try_lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<bool> {
    loop {
        // SAFETY: flock takes no pointers and only affects this fd's lock.
        match cvt(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) {
            Ok(_) => return Ok(true),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
}

/// Whether another open file description holds an exclusive `flock`,
/// found with a shared lock that is given back at once.
pub fn is_locked(fd: BorrowedFd<'_>) -> io::Result<bool> {
    loop {
        // SAFETY: flock takes no pointers and only affects this fd's lock.
        match cvt(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) }) {
            Ok(_) => {
                // SAFETY: as for the call above; this drops our shared lock.
                unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_UN) };
                return Ok(false);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
}

pub enum Forked {
    Parent,
    Child,
}

/// `fork(2)`. Only called before the daemon has any thread but the main one.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: cowbell is single-threaded when it forks, so the child starts
    // with a consistent copy of every lock and allocator state.
    match cvt(unsafe { libc::fork() })? {
        0 => Ok(Forked::Child),
        _ => Ok(Forked::Parent),
    }
}

/// Leaves the launching hook's session and process group.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    cvt(unsafe { libc::setsid() })?;
    Ok(())
}

/// Points fd 0, 1 and 2 at `target`, so that the pipes herdr reads to end
/// of file are closed in the daemon.
pub fn redirect_stdio(target: BorrowedFd<'_>) -> io::Result<()> {
    for standard in 0..3 {
        // SAFETY: dup2 onto 0..2 replaces those descriptors atomically; the
        // process owns its standard descriptors.
        cvt(unsafe { libc::dup2(target.as_raw_fd(), standard) })?;
    }
    Ok(())
}

/// Closes every descriptor above 2 but `keep`: whatever the launcher let
/// the daemon inherit beyond its standard ones (a shell's `3>&1` onto a
/// pipe someone reads to end of file, say). Called in the forked daemon,
/// or a start waiting detached, before it opens anything else.
pub fn close_inherited(keep: BorrowedFd<'_>) {
    let keep = keep.as_raw_fd();
    // SAFETY: getrlimit fills a plain struct that outlives the call.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is valid.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        // An unlimited or huge limit would take long to walk; a launcher
        // leaks its first few descriptors, not its millionth.
        limit.rlim_cur.min(65536) as libc::c_int
    } else {
        1024
    };
    for fd in (3..top).filter(|fd| *fd != keep) {
        // SAFETY: no object in this process owns these descriptors: it
        // has opened nothing but `keep` yet, and close on a number
        // that is not open only fails with EBADF.
        unsafe { libc::close(fd) };
    }
}

/// Asks the daemon `pid` to hand over (SIGUSR1). On Linux the signal is
/// queued, which marks it as cowbell's own request: the daemon then
/// ignores it if this process has gone by the time it looks (a `--replace`
/// that gave up), while a person's plain `kill -USR1` always counts.
/// macOS has no sigqueue: there a stopped daemon still leaves once it runs.
pub fn request_handover(pid: u32) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let pid = process_id(pid)?;
        let value = libc::sigval {
            sival_ptr: std::ptr::null_mut(),
        };
        // SAFETY: sigqueue takes no pointers it dereferences; the value is
        // passed through as data.
        cvt(unsafe { libc::sigqueue(pid, libc::SIGUSR1, value) })?;
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    kill(pid, libc::SIGUSR1)
}

/// Whether a process with this pid runs: it exists (signal 0 checks
/// without sending) and, on Linux, is not a zombie, which signal 0 still
/// finds until its parent reaps it (a hook that gave up waiting, before
/// herdr collects it). Pids 0 and 1 are not asked about and count as alive.
pub fn is_alive(pid: u32) -> bool {
    let exists = match kill(pid, 0) {
        Ok(()) => true,
        Err(error) => error.raw_os_error() != Some(libc::ESRCH),
    };
    exists && !is_zombie(pid)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn is_zombie(pid: u32) -> bool {
    // "<pid> (<name>) <state> ...": the name may hold any character, so
    // the state is what follows the last ')'.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, rest) = stat.rsplit_once(')')?;
            Some(rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn is_zombie(_pid: u32) -> bool {
    false
}

/// A pid from a pidfile, as the system calls take it. Never 0, -1 or 1:
/// `kill` would take the first two for a process group or every process,
/// and 1 is init, not a daemon.
fn process_id(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid)
        .ok()
        .filter(|pid| *pid > 1)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a process id"))
}

/// Sends `signal` to `pid`.
pub fn kill(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = process_id(pid)?;
    // SAFETY: kill takes no pointers.
    cvt(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_boot_id_is_the_kernels() {
        let kernels = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert_eq!(super::boot_id().unwrap().as_deref(), Some(kernels.trim()));
    }
}
