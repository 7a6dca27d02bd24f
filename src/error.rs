//! The errors a short command can end with, and their exit codes.
//!
//! Printed as `cowbell: <what failed>: <why>`. Inside the daemon nothing
//! ends like this: failures there are logged and recovered from.

use std::fmt;
use std::io;

#[derive(Debug)]
pub enum Error {
    /// A file or directory could not be read or written.
    Io { what: String, source: io::Error },
    /// The herdr server could not be reached, or refused a request.
    Herdr { what: String, why: String },
    /// The configuration has errors (already printed).
    Config { problems: usize },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Io { .. } | Error::Config { .. } => 1,
            Error::Herdr { .. } => 3,
        }
    }

    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }

    pub fn herdr(what: impl Into<String>) -> impl FnOnce(crate::herdr::CallError) -> Error {
        let what = what.into();
        move |error| Error::Herdr {
            what,
            why: error.to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "cowbell: {what}: {source}"),
            Error::Herdr { what, why } => write!(f, "cowbell: {what}: {why}"),
            Error::Config { problems } => write!(f, "cowbell: configuration: {problems} error(s)"),
        }
    }
}
