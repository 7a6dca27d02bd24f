//! Private files: how cowbell creates, reads and replaces what it keeps on
//! disk.
//!
//! Directories are 0700 and files 0600; nothing is opened through a
//! symlink (`O_NOFOLLOW`), every fd is close-on-exec, and a file is
//! replaced by writing a temporary file beside it, syncing it and renaming
//! it over the old one, so a crash leaves either the old or the new file.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::sys;

/// FNV-1a: a stable, tiny hash of bytes, to name a server's directory
/// after its socket and to know whether a file's text changed.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Whether nothing is at `path`; a file that cannot be looked at (no
/// permission) is not missing.
pub fn is_missing(path: &Path) -> bool {
    matches!(fs::symlink_metadata(path), Err(error) if error.kind() == io::ErrorKind::NotFound)
}

/// Creates `dir` (and its parents) as 0700 if missing, makes an existing
/// one 0700, and refuses a directory that is a symlink or not a directory.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_dir() => {
            // Left open by an older version or by hand, it would let others
            // plant a state.json. Not ours to change (EPERM): leave it.
            if meta.permissions().mode() & 0o077 != 0 {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
            }
            return Ok(());
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a directory", dir.display()),
            ));
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    // (0700 under the umask `sys::private_umask` sets; set it anyway.)
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Opens a private file for appending or locking, creating it 0600 (and
/// making an existing one 0600). Only a regular file will do: a FIFO
/// planted there would block us.
pub fn open_private(path: &Path, append: bool) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK);
    if append {
        options.append(true);
    } else {
        options.write(true);
    }
    let file = regular(options.open(path)?)?;
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        let _ = file.set_permissions(fs::Permissions::from_mode(0o600));
    }
    Ok(file)
}

/// Opens an existing private file read-only, for a look that must not
/// create or change anything.
pub fn open_existing(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    regular(file)
}

/// Refuses anything but a regular file, and makes reads block again.
fn regular(file: File) -> io::Result<File> {
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    sys::set_blocking(file.as_fd())?;
    Ok(file)
}

/// Reads a file without following a symlink; `Ok(None)` when it is absent.
/// A file longer than `cap` bytes is an error rather than a huge allocation.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    read_regular(path, cap, libc::O_NOFOLLOW)
}

/// `read_capped` through a symlink: a config file may be a link into a
/// dotfiles repository.
pub fn read_capped_following(path: &Path, cap: u64) -> io::Result<Option<Vec<u8>>> {
    read_regular(path, cap, 0)
}

fn read_regular(path: &Path, cap: u64, flags: libc::c_int) -> io::Result<Option<Vec<u8>>> {
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(file) => regular(file)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {cap} bytes"),
        )
    };
    let length = file.metadata()?.len();
    if length > cap {
        return Err(too_big());
    }
    // The file may grow after the check, so the read is capped too.
    let mut bytes = Vec::with_capacity(length as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_big());
    }
    Ok(Some(bytes))
}

/// A directory held by its descriptor: what is written through it lands in
/// this directory, even after its path was deleted and made again (then it
/// fails, as the directory has gone). See `daemon::Lock::dir`.
pub struct Dir(OwnedFd);

impl Dir {
    pub fn open(path: &Path) -> io::Result<Dir> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Dir(dir.into()))
    }

    /// Takes this directory's `flock`, waiting up to `wait` for another
    /// holder, for as long as this `Dir` is open. Where the file system
    /// cannot lock a directory (Linux's NFS client refuses an exclusive
    /// lock on a descriptor not open for writing), it goes on without.
    pub fn lock(&self, wait: Duration) -> io::Result<()> {
        let give_up = Instant::now() + wait;
        loop {
            match sys::try_lock_exclusive(self.0.as_fd()) {
                Ok(true) | Err(_) => return Ok(()),
                Ok(false) if Instant::now() >= give_up => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "another cowbell process kept writing there",
                    ));
                }
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// The device and inode of `name` here, a symlink not followed.
    pub fn identity(&self, name: &str) -> io::Result<(u64, u64)> {
        sys::identity_at(self.0.as_fd(), name)
    }

    /// Replaces `name` with `bytes`: temp file beside it, 0600,
    /// `sync_file`, `rename`. A symlink at `name` is replaced, not
    /// followed. The caller is the only writer (it holds the pidfile lock
    /// beside it), so the temp file has one name, and the next save clears
    /// what a killed one left.
    pub fn write_atomically(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let dir = self.0.as_fd();
        let temp = format!(".{name}.tmp");
        // A leftover of a killed writer would make the create fail.
        let _ = sys::unlink_at(dir, &temp);
        let result = (|| {
            let mut file = File::from(sys::create_new_at(dir, &temp, 0o600)?);
            file.write_all(bytes)?;
            sys::sync_file(&file)?;
            sys::rename_at(dir, &temp, name)
        })();
        if result.is_err() {
            let _ = sys::unlink_at(dir, &temp);
        }
        result
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory under the system temp dir, removed on drop.
    pub struct TempDir(pub PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let dir =
                std::env::temp_dir().join(format!("cowbell-unit-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn private_dirs_and_files_have_private_modes() {
        let temp = TempDir::new("files");
        let dir = temp.0.join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let file = dir.join("f");
        let held = Dir::open(&dir).unwrap();
        held.write_atomically("f", b"one").unwrap();
        // A temp file left by a crash does not block the next save.
        fs::write(dir.join(".f.tmp"), b"stale").unwrap();
        held.write_atomically("f", b"two").unwrap();
        assert_eq!(fs::read(&file).unwrap(), b"two");
        assert!(!dir.join(".f.tmp").exists());
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp file left behind"
        );
    }

    #[test]
    fn existing_dirs_and_files_are_made_private() {
        let temp = TempDir::new("loose");
        let dir = temp.0.join("server");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let file = dir.join("cowbell.log");
        fs::write(&file, b"").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        ensure_private_dir(&dir).unwrap();
        open_private(&file, true).unwrap();
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn symlinks_are_never_followed() {
        let temp = TempDir::new("links");
        let target = temp.0.join("target");
        fs::write(&target, b"precious").unwrap();
        let link = temp.0.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(read_capped(&link, 100).is_err());
        assert!(open_private(&link, true).is_err());
        Dir::open(&temp.0)
            .unwrap()
            .write_atomically("link", b"new")
            .unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"precious");
        let dir_link = temp.0.join("dirlink");
        std::os::unix::fs::symlink(&temp.0, &dir_link).unwrap();
        assert!(ensure_private_dir(&dir_link).is_err());
        assert!(Dir::open(&dir_link).is_err());
    }

    /// A directory whose lock another writer keeps past the wait (one
    /// stopped between its check and its write): this writer must not go
    /// on without the lock, or that one's write could land after its own
    /// (an old save over a new `off`). It fails, to be tried again.
    #[test]
    fn a_directory_locked_past_the_wait_is_not_taken_without_its_lock() {
        let temp = TempDir::new("dir-lock-wait");
        let busy = File::open(&temp.0).unwrap();
        assert!(sys::try_lock_exclusive(busy.as_fd()).unwrap());
        let held = Dir::open(&temp.0).unwrap();
        let asked = Instant::now();
        let error = held
            .lock(Duration::from_millis(100))
            .expect_err("went on without the lock");
        assert_eq!(error.kind(), io::ErrorKind::WouldBlock);
        assert!(asked.elapsed() >= Duration::from_millis(100));
        drop(busy);
        held.lock(Duration::ZERO).unwrap();
    }

    /// A writer waiting for the directory gets it soon after the other
    /// one lets go: the daemon's loop waits meanwhile.
    #[test]
    fn a_writer_gets_the_directory_soon_after_it_is_let_go() {
        let temp = TempDir::new("dir-lock-soon");
        let busy = File::open(&temp.0).unwrap();
        assert!(sys::try_lock_exclusive(busy.as_fd()).unwrap());
        let path = temp.0.clone();
        let writer = std::thread::spawn(move || {
            let held = Dir::open(&path).unwrap();
            held.lock(Duration::from_secs(1)).map(|()| Instant::now())
        });
        std::thread::sleep(Duration::from_millis(100));
        let freed = Instant::now();
        drop(busy);
        let got = writer.join().unwrap().unwrap();
        let after = got.saturating_duration_since(freed);
        assert!(after < Duration::from_millis(300), "got it {after:?} later");
    }

    /// The state directory deleted and made again by someone else: a write
    /// through the old one must not land in the new one, over what its
    /// pidfile's holder wrote there.
    #[test]
    fn a_held_directory_deleted_and_made_again_gets_no_write() {
        let temp = TempDir::new("remade");
        let dir = temp.0.join("server");
        ensure_private_dir(&dir).unwrap();
        let held = Dir::open(&dir).unwrap();
        fs::remove_dir(&dir).unwrap();
        ensure_private_dir(&dir).unwrap();
        fs::write(dir.join("state.json"), b"theirs").unwrap();
        assert!(held.write_atomically("state.json", b"mine").is_err());
        assert_eq!(fs::read(dir.join("state.json")).unwrap(), b"theirs");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        assert!(held.identity("state.json").is_err());
    }

    #[test]
    fn reads_are_capped_and_absence_is_not_an_error() {
        let temp = TempDir::new("cap");
        assert!(read_capped(&temp.0.join("missing"), 10).unwrap().is_none());
        let file = temp.0.join("big");
        fs::write(&file, vec![b'x'; 11]).unwrap();
        assert!(read_capped(&file, 10).is_err());
        assert_eq!(read_capped(&file, 11).unwrap().unwrap().len(), 11);
    }

    #[test]
    fn a_replace_that_fails_leaves_no_temp_file() {
        let temp = TempDir::new("replace-fails");
        let path = temp.0.join("state.json");
        // A non-empty directory where the file goes: the rename fails.
        fs::create_dir_all(path.join("x")).unwrap();
        let held = Dir::open(&temp.0).unwrap();
        assert!(held.write_atomically("state.json", b"new").is_err());
        let names: Vec<_> = fs::read_dir(&temp.0)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn the_fingerprint_is_fnv1a_64() {
        // Hashed server directories are named by it: another hash would
        // leave every such server's state.json behind on upgrade.
        assert_eq!(fingerprint(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fingerprint(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fingerprint(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
