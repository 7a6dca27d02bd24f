//! Test support shared by the integration tests: a fake herdr server
//! (`fake_herdr`), a runner that launches plugin commands the way herdr does
//! (`hooks`), self-removing temporary directories (`tempdir`), and a few small
//! helpers: a one-request socket client, a subscription reader, access to the
//! recorded herdr transcripts, and an order-preserving JSON scanner used to
//! compare the *shape* (keys and key order) of lines.
#![allow(dead_code)]

pub mod cowbell;
pub mod fake_herdr;
pub mod hooks;
pub mod invariants;
pub mod renamers;
pub mod rng;
pub mod tempdir;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Transcripts recorded from a real herdr 0.8.2
// ---------------------------------------------------------------------------

/// Path of a file in `tests/transcripts/`: the lines recorded from a real
/// herdr 0.8.2, copied verbatim from the project's `shared/herdr/transcripts/`
/// so a clone or a release tarball tests on its own.
pub fn transcript_path(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/transcripts")).join(name)
}

/// Reads a transcript; a missing file fails the test loudly (the shape checks
/// are the whole point of the fake, so they must never be skipped silently).
pub fn read_transcript(name: &str) -> String {
    let path = transcript_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read herdr transcript {}: {e}\n\
             (tests/transcripts/ holds herdr's recorded lines)",
            path.display()
        )
    })
}

/// The JSON lines of a transcript: for `requests.jsonl`, the received (`< `)
/// lines that are JSON; for the other files, every non-empty line.
pub fn transcript_lines(name: &str) -> Vec<String> {
    read_transcript(name)
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("< ").unwrap_or(l);
            l.starts_with('{').then(|| l.to_string())
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Plain clients
// ---------------------------------------------------------------------------

/// Sends one request line on a fresh connection (herdr answers one request
/// per connection) and returns everything the server wrote, trimmed.
pub fn request(socket: &Path, line: &str) -> String {
    try_request(socket, line).unwrap_or_else(|e| panic!("request {line} failed: {e}"))
}

pub fn try_request(socket: &Path, line: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(line.as_bytes())?;
    s.write_all(b"\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out.trim_end().to_string())
}

/// What a subscription reader saw next.
#[derive(Debug, PartialEq)]
pub enum Next {
    Line(String),
    Eof,
    Timeout,
}

/// A subscription connection read line by line with timeouts.
pub struct SubReader {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    // Bytes of a line not yet complete when a read timed out.
    pending: Vec<u8>,
}

impl SubReader {
    /// Connects and writes the subscribe line; does not read the ack.
    pub fn open(socket: &Path, subscribe_line: &str) -> SubReader {
        let mut stream = UnixStream::connect(socket).expect("connect for subscription");
        stream.write_all(subscribe_line.as_bytes()).unwrap();
        stream.write_all(b"\n").unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        SubReader {
            stream,
            reader,
            pending: Vec::new(),
        }
    }

    /// The next line within `timeout`, or end of file, or a timeout.
    pub fn next(&mut self, timeout: Duration) -> Next {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Next::Timeout;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.reader.read_until(b'\n', &mut self.pending) {
                Ok(0) => return Next::Eof,
                Ok(_) if self.pending.ends_with(b"\n") => {
                    let line = String::from_utf8_lossy(&self.pending)
                        .trim_end()
                        .to_string();
                    self.pending.clear();
                    return Next::Line(line);
                }
                Ok(_) => return Next::Eof, // a partial last line, then EOF
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Next::Timeout;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // A reset counts as the end of the connection.
                Err(_) => return Next::Eof,
            }
        }
    }

    /// The next line; panics on EOF or timeout.
    pub fn line(&mut self, timeout: Duration) -> String {
        match self.next(timeout) {
            Next::Line(l) => l,
            other => panic!("expected a line from the subscription, got {other:?}"),
        }
    }

    /// Reads lines until EOF (or `timeout`), returning them; panics on timeout.
    pub fn until_eof(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            match self.next(deadline.saturating_duration_since(Instant::now())) {
                Next::Line(l) => lines.push(l),
                Next::Eof => return lines,
                Next::Timeout => panic!("no EOF within {timeout:?}; got {lines:?}"),
            }
        }
    }

    /// The raw stream, e.g. to write on it (which herdr punishes).
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }
}

// ---------------------------------------------------------------------------
// Order-preserving JSON scanning (miniserde's Object sorts its keys, so it
// cannot tell us the order a server wrote them in)
// ---------------------------------------------------------------------------

/// The shape of a JSON text: objects keep their keys in written order, arrays
/// show their first element, scalars become `s`, `n`, `b`, `null`.
/// `{"a":1,"b":[{"c":"x"}]}` becomes `{a:n,b:[{c:s}]}`.
pub fn json_shape(text: &str) -> String {
    let mut sc = Scanner::new(text);
    let shape = sc.shape();
    sc.ws();
    assert!(
        shape.is_some() && sc.i == sc.b.len(),
        "not a single JSON value: {text}"
    );
    shape.unwrap()
}

/// The raw text of a top-level field of a JSON object, e.g. `raw_field(line,
/// "params")`; None if the text is not an object or lacks the key.
pub fn raw_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let mut sc = Scanner::new(text);
    sc.ws();
    if !sc.eat(b'{') {
        return None;
    }
    loop {
        sc.ws();
        if sc.eat(b'}') {
            return None;
        }
        let k = sc.string()?;
        sc.ws();
        if !sc.eat(b':') {
            return None;
        }
        sc.ws();
        let start = sc.i;
        sc.skip()?;
        if k == key {
            return Some(&text[start..sc.i]);
        }
        sc.ws();
        sc.eat(b',');
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            b: text.as_bytes(),
            i: 0,
        }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A string's raw contents (escapes left as written).
    fn string(&mut self) -> Option<String> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.i;
        while self.i < self.b.len() {
            match self.b[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    let s = String::from_utf8_lossy(&self.b[start..self.i]).into_owned();
                    self.i += 1;
                    return Some(s);
                }
                _ => self.i += 1,
            }
        }
        None
    }

    fn skip(&mut self) -> Option<()> {
        self.shape().map(|_| ())
    }

    fn shape(&mut self) -> Option<String> {
        self.ws();
        match *self.b.get(self.i)? {
            b'"' => self.string().map(|_| "s".to_string()),
            b'{' => {
                self.i += 1;
                let mut parts = Vec::new();
                loop {
                    self.ws();
                    if self.eat(b'}') {
                        return Some(format!("{{{}}}", parts.join(",")));
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(b':') {
                        return None;
                    }
                    let v = self.shape()?;
                    parts.push(format!("{k}:{v}"));
                    self.ws();
                    self.eat(b',');
                }
            }
            b'[' => {
                self.i += 1;
                let mut first = None;
                loop {
                    self.ws();
                    if self.eat(b']') {
                        return Some(format!("[{}]", first.unwrap_or_default()));
                    }
                    let v = self.shape()?;
                    first.get_or_insert(v);
                    self.ws();
                    self.eat(b',');
                }
            }
            b't' | b'f' | b'n' => {
                let word_end = self.b[self.i..]
                    .iter()
                    .position(|c| !c.is_ascii_alphabetic())
                    .map_or(self.b.len(), |p| self.i + p);
                let word = &self.b[self.i..word_end];
                self.i = word_end;
                match word {
                    b"true" | b"false" => Some("b".into()),
                    b"null" => Some("null".into()),
                    _ => None,
                }
            }
            b'-' | b'0'..=b'9' => {
                while self.i < self.b.len()
                    && matches!(
                        self.b[self.i],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.i += 1;
                }
                Some("n".into())
            }
            _ => None,
        }
    }
}
