//! Where is a JSON text broken? miniserde only says that it is, so when it
//! rejects a file a person edits (config.json), this small validator walks
//! the text again and names the line, the column and what it expected.
//!
//! It accepts exactly RFC 8259 JSON, as miniserde does, including its
//! refusal of unpaired UTF-16 surrogates in `\u` escapes and of numbers
//! too large for an f64. Nesting is capped so that a hostile file cannot
//! overflow the stack of this recursive walk.

/// The first error in a JSON text. `line` and `column` count from 1, and
/// the column counts characters, not bytes, as editors do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    pub line: usize,
    pub column: usize,
    pub what: String,
}

/// Deeper nesting is reported as an error rather than walked.
pub const MAX_DEPTH: usize = 128;

/// `None` when `text` is one valid JSON value surrounded by whitespace.
pub fn locate_error(text: &str) -> Option<JsonError> {
    let mut checker = Checker::new(text);
    checker.skip_whitespace();
    let (pos, what) = match checker.value(0) {
        Err(failure) => failure,
        Ok(()) => {
            checker.skip_whitespace();
            checker.peek()?;
            (
                checker.pos,
                "unexpected characters after the JSON value".to_string(),
            )
        }
    };
    let (line, column) = line_and_column(text, pos);
    Some(JsonError { line, column, what })
}

/// Keys written twice in one object, each at its second place. miniserde
/// keeps the last value without a word, and a person editing config.json
/// should hear that the first one does nothing.
pub fn duplicate_keys(text: &str) -> Vec<JsonError> {
    let mut checker = Checker::new(text);
    checker.skip_whitespace();
    let _ = checker.value(0);
    checker
        .duplicates
        .into_iter()
        .map(|(pos, key)| {
            let (line, column) = line_and_column(text, pos);
            JsonError {
                line,
                column,
                what: format!("the key {key} appears again; only the last one counts"),
            }
        })
        .collect()
}

/// Whether a valid number literal is at least 1e309, beyond an f64, which
/// miniserde refuses. Told from the digits rather than by parsing: core's
/// float parser costs 20 KiB of binary. Between 1.8e308 and 1e309 it says
/// no where miniserde refuses; the message then only lacks the place.
fn too_large(literal: &str) -> bool {
    let unsigned = literal.trim_start_matches('-');
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], &unsigned[at + 1..]),
        None => (unsigned, ""),
    };
    let integer_digits = mantissa
        .split('.')
        .next()
        .unwrap_or("")
        .trim_start_matches('0')
        .len() as i64;
    let (negative, digits) = match exponent.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, exponent.trim_start_matches('+')),
    };
    let exponent = digits.bytes().fold(0i64, |value, digit| {
        value
            .saturating_mul(10)
            .saturating_add(i64::from(digit - b'0'))
    });
    let exponent = if negative { -exponent } else { exponent };
    integer_digits.saturating_sub(1).saturating_add(exponent) > 308
}

/// A byte offset into the text and what went wrong there.
type Failure = (usize, String);

struct Checker<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Repeated keys (as written, quotes included), where they repeat.
    duplicates: Vec<Failure>,
}

impl<'a> Checker<'a> {
    fn new(text: &'a str) -> Checker<'a> {
        Checker {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            duplicates: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// "found 'x'" or "found the end of the file", for the character at
    /// `pos`; the walk only stops on ASCII bytes or at the start of a
    /// character, so `pos` is always on a character boundary.
    fn found(&self, pos: usize) -> String {
        match self.text.get(pos..).and_then(|rest| rest.chars().next()) {
            None => "found the end of the file".to_string(),
            Some(c) if c.is_control() => format!("found {}", c.escape_default()),
            Some(c) => format!("found '{c}'"),
        }
    }

    fn expected(&self, what: &str) -> Failure {
        let found = self.found(self.pos);
        (self.pos, format!("expected {what}, {found}"))
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), Failure> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            _ => Err(self.expected("a value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<(), Failure> {
        if depth > MAX_DEPTH {
            return Err((self.pos, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<(), Failure> {
        self.enter(depth)?;
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        let mut keys: Vec<&str> = Vec::new();
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.expected("a string key in double quotes"));
            }
            let start = self.pos;
            self.string()?;
            let key = &self.text[start..self.pos];
            if keys.contains(&key) {
                self.duplicates.push((start, key.to_string()));
            } else {
                keys.push(key);
            }
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.expected("':' after the key"));
            }
            self.pos += 1;
            self.skip_whitespace();
            self.value(depth)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.peek() == Some(b'}') {
                        return Err((self.pos, "trailing comma before '}'".to_string()));
                    }
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.expected("',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Failure> {
        self.enter(depth)?;
        self.pos += 1;
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.value(depth)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_whitespace();
                    if self.peek() == Some(b']') {
                        return Err((self.pos, "trailing comma before ']'".to_string()));
                    }
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.expected("',' or ']'")),
            }
        }
    }

    fn string(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                None => {
                    return Err((
                        start,
                        "string not closed: the file ends before its '\"'".to_string(),
                    ));
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => self.escape()?,
                Some(byte) if byte < 0x20 => {
                    let what = if byte == b'\n' {
                        "string not closed before the end of the line".to_string()
                    } else {
                        format!(
                            "control character {} in a string, write it as an escape",
                            self.found(self.pos).trim_start_matches("found ")
                        )
                    };
                    return Err((self.pos, what));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn escape(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        self.pos += 1;
        match self.peek() {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                self.pos += 1;
                Ok(())
            }
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4(start)?;
                match unit {
                    0xDC00..=0xDFFF => Err((
                        start,
                        "\\u escape is a low surrogate without a high one before it".to_string(),
                    )),
                    0xD800..=0xDBFF => {
                        let second = self.pos;
                        if self.bytes.get(second..second + 2) != Some(b"\\u") {
                            return Err((
                                start,
                                "\\u escape is a high surrogate without a low one after it"
                                    .to_string(),
                            ));
                        }
                        self.pos += 2;
                        match self.hex4(second)? {
                            0xDC00..=0xDFFF => Ok(()),
                            _ => Err((
                                start,
                                "\\u escape is a high surrogate without a low one after it"
                                    .to_string(),
                            )),
                        }
                    }
                    _ => Ok(()),
                }
            }
            _ => Err((
                start,
                format!(
                    "invalid escape: allowed are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX, {}",
                    self.found(self.pos)
                ),
            )),
        }
    }

    /// The four hex digits of a `\u` escape that starts at `start`.
    fn hex4(&mut self, start: usize) -> Result<u32, Failure> {
        let mut unit = 0;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(byte @ b'0'..=b'9') => byte - b'0',
                Some(byte @ b'a'..=b'f') => byte - b'a' + 10,
                Some(byte @ b'A'..=b'F') => byte - b'A' + 10,
                _ => {
                    return Err((start, "\\u escape needs four hex digits".to_string()));
                }
            };
            unit = unit * 16 + u32::from(digit);
            self.pos += 1;
        }
        Ok(unit)
    }

    fn number(&mut self) -> Result<(), Failure> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err((start, "number with a leading zero".to_string()));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.expected("a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.expected("a digit after '.'"));
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.expected("a digit in the exponent"));
            }
            self.digits();
        }
        if too_large(&self.text[start..self.pos]) {
            return Err((start, "number too large".to_string()));
        }
        Ok(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str) -> Result<(), Failure> {
        let start = self.pos;
        for expected in word.bytes() {
            if self.peek() != Some(expected) {
                return Err((
                    start,
                    format!("expected '{word}' (JSON words are true, false and null)"),
                ));
            }
            self.pos += 1;
        }
        // "nullx" is one misspelt word, not null followed by garbage.
        if let Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_') = self.peek() {
            return Err((
                start,
                format!("expected '{word}' (JSON words are true, false and null)"),
            ));
        }
        Ok(())
    }
}

/// The 1-based line and character column of byte offset `pos`.
fn line_and_column(text: &str, pos: usize) -> (usize, usize) {
    let before = text.get(..pos).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> (usize, usize, String) {
        let error = locate_error(text).unwrap_or_else(|| panic!("{text:?} should be invalid"));
        (error.line, error.column, error.what)
    }

    #[test]
    fn valid_json_has_no_error() {
        let texts = [
            "{}",
            "[]",
            " \n\t\r{ } \n",
            "null",
            "true",
            "false",
            "0",
            "-0",
            "-12.5e+3",
            "1E9",
            "0.0001",
            r#""""#,
            r#""a \" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDD34 🔴""#,
            r#"{"a": [1, 2, {"b": null}], "c": {"d": [[], {}]}, "e": "🔴"}"#,
        ];
        for text in texts {
            assert_eq!(locate_error(text), None, "{text:?}");
            assert!(miniserde::json::from_str::<miniserde::json::Value>(text).is_ok());
        }
    }

    #[test]
    fn empty_input() {
        assert_eq!(
            error(""),
            (1, 1, "expected a value, found the end of the file".into())
        );
        assert_eq!(
            error("  \n "),
            (2, 2, "expected a value, found the end of the file".into())
        );
    }

    #[test]
    fn structure_errors() {
        let cases = [
            (
                "{\n  \"a\": 1\n  \"b\": 2\n}",
                3,
                3,
                "expected ',' or '}', found '\"'",
            ),
            ("{\"a\": 1,}", 1, 9, "trailing comma before '}'"),
            ("[1, 2,]", 1, 7, "trailing comma before ']'"),
            ("[1 2]", 1, 4, "expected ',' or ']', found '2'"),
            ("{\"a\" 1}", 1, 6, "expected ':' after the key, found '1'"),
            (
                "{a: 1}",
                1,
                2,
                "expected a string key in double quotes, found 'a'",
            ),
            ("{\"a\": }", 1, 7, "expected a value, found '}'"),
            (
                "{\"a\": 1",
                1,
                8,
                "expected ',' or '}', found the end of the file",
            ),
            ("[", 1, 2, "expected a value, found the end of the file"),
            ("{} {}", 1, 4, "unexpected characters after the JSON value"),
            ("{}}", 1, 3, "unexpected characters after the JSON value"),
            ("'a'", 1, 1, "expected a value, found '''"),
            ("{\"é\": ü}", 1, 7, "expected a value, found 'ü'"),
        ];
        for (text, line, column, what) in cases {
            assert_eq!(error(text), (line, column, what.to_string()), "{text:?}");
        }
    }

    #[test]
    fn string_errors() {
        let cases = [
            (
                "\"abc",
                1,
                1,
                "string not closed: the file ends before its '\"'",
            ),
            (
                "{\"a\": \"b\n}",
                1,
                9,
                "string not closed before the end of the line",
            ),
            (
                "\"a\tb\"",
                1,
                3,
                "control character \\t in a string, write it as an escape",
            ),
            (
                r#""\x""#,
                1,
                2,
                "invalid escape: allowed are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX, found 'x'",
            ),
            (r#""\u12G4""#, 1, 2, "\\u escape needs four hex digits"),
            (r#""\u12"#, 1, 2, "\\u escape needs four hex digits"),
            (
                r#""\uDC00""#,
                1,
                2,
                "\\u escape is a low surrogate without a high one before it",
            ),
            (
                r#""\uD800""#,
                1,
                2,
                "\\u escape is a high surrogate without a low one after it",
            ),
            (
                r#""\uD800\u0041""#,
                1,
                2,
                "\\u escape is a high surrogate without a low one after it",
            ),
            (
                r#""\"#,
                1,
                2,
                "invalid escape: allowed are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX, found the end of the file",
            ),
        ];
        for (text, line, column, what) in cases {
            assert_eq!(error(text), (line, column, what.to_string()), "{text:?}");
        }
    }

    #[test]
    fn too_large_means_at_least_1e309() {
        for literal in [
            "1e309",
            "-1e309",
            "0.1e310",
            "1000e306",
            "1e99999999999999999999",
        ] {
            assert!(too_large(literal), "{literal}");
        }
        for literal in [
            "1e308",
            "0",
            "-0.0",
            "1e-400",
            "123456789012345678901234567890",
        ] {
            assert!(!too_large(literal), "{literal}");
        }
    }

    #[test]
    fn number_errors() {
        let cases = [
            ("01", 1, 1, "number with a leading zero"),
            ("{\"x\": -1e400}", 1, 7, "number too large"),
            ("[1000e306]", 1, 2, "number too large"),
            ("-", 1, 2, "expected a digit, found the end of the file"),
            ("-a", 1, 2, "expected a digit, found 'a'"),
            (
                "1.",
                1,
                3,
                "expected a digit after '.', found the end of the file",
            ),
            ("1.e5", 1, 3, "expected a digit after '.', found 'e'"),
            (
                "1e",
                1,
                3,
                "expected a digit in the exponent, found the end of the file",
            ),
            (
                "1e+",
                1,
                4,
                "expected a digit in the exponent, found the end of the file",
            ),
            ("+1", 1, 1, "expected a value, found '+'"),
            (".5", 1, 1, "expected a value, found '.'"),
            ("[1.5.2]", 1, 5, "expected ',' or ']', found '.'"),
        ];
        for (text, line, column, what) in cases {
            assert_eq!(error(text), (line, column, what.to_string()), "{text:?}");
        }
    }

    #[test]
    fn word_errors() {
        let words = "(JSON words are true, false and null)";
        assert_eq!(error("tru"), (1, 1, format!("expected 'true' {words}")));
        assert_eq!(error("[nul]"), (1, 2, format!("expected 'null' {words}")));
        assert_eq!(error("falsey"), (1, 1, format!("expected 'false' {words}")));
        assert_eq!(error("True"), (1, 1, "expected a value, found 'T'".into()));
    }

    #[test]
    fn columns_count_characters_on_the_right_line() {
        assert_eq!(
            error("{\"🔴🔵\": x}"),
            (1, 8, "expected a value, found 'x'".into())
        );
        assert_eq!(
            error("\n\n  [\r\n   1,,]"),
            (4, 6, "expected a value, found ','".into())
        );
        assert_eq!(
            error("[\u{1}]"),
            (1, 2, "expected a value, found \\u{1}".into())
        );
    }

    #[test]
    fn nesting_is_capped() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert_eq!(locate_error(&ok), None);
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let what = format!("nested deeper than {MAX_DEPTH} levels");
        assert_eq!(error(&deep), (1, MAX_DEPTH + 1, what.clone()));
        let hostile = "{\"a\":".repeat(100_000);
        assert_eq!(error(&hostile).2, what);
    }

    #[test]
    fn agrees_with_miniserde_on_what_is_invalid() {
        let texts = [
            "",
            "{",
            "{\"a\":1,}",
            "[1 2]",
            "\"\\uD800\"",
            "01",
            "1.",
            "tru",
            "{} x",
            "\"a\nb\"",
        ];
        for text in texts {
            assert!(
                miniserde::json::from_str::<miniserde::json::Value>(text).is_err(),
                "{text:?}"
            );
            assert!(locate_error(text).is_some(), "{text:?}");
        }
    }
}
