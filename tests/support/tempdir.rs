//! A unique temporary directory removed (with its contents) on drop.
//! Paths are kept short because a Unix socket path must fit in ~107 bytes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/cb-<pid>-<n>/`. `<tmp>` is `std::env::temp_dir()`
    /// unless that is long (a deep `$TMPDIR`), then `/tmp`, so that sockets
    /// inside it stay well under the Unix socket path limit.
    pub fn new() -> TempDir {
        let mut base = std::env::temp_dir();
        if base.as_os_str().len() > 40 {
            base = PathBuf::from("/tmp");
        }
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("cb-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return TempDir { path },
                // Left over from an earlier run that reused our pid: next n.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("cannot create temp dir {}: {e}", path.display()),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path/name`.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Creates (and returns) the subdirectory `name`, parents included.
    pub fn subdir(&self, name: &str) -> PathBuf {
        let p = self.path.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
