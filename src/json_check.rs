//! config.json's reader. One walk over the text gives either its values,
//! with the keys written twice, or the line, the column and the nature of
//! the first error, which a person editing the file needs and miniserde
//! cannot give: it only says that a text is broken. state.json, which only
//! cowbell writes, is read by miniserde; when that fails, `locate_error`
//! says where.
//!
//! It accepts exactly RFC 8259 JSON, as miniserde does, including its
//! refusal of unpaired UTF-16 surrogates in `\u` escapes and of numbers
//! too large for an f64. Nesting is capped so that a hostile file cannot
//! overflow the stack of this recursive walk. It is its own reader rather
//! than a second walk after miniserde's `Value`, whose map of values and
//! float formatting cost 4 KiB of binary for six settings.

use crate::text::quote_short;

/// The first error in a JSON text. `line` and `column` count from 1, and
/// the column counts characters, not bytes, as editors do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    pub line: usize,
    pub column: usize,
    pub what: String,
}

/// A JSON value as the config needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// As written: a setting wants a whole number, and a message shows the
    /// number the way the user wrote it.
    Number(String),
    String(String),
    /// Its elements are checked, not kept: no setting is an array.
    Array,
    /// In the file's order. A key written twice keeps its first place and
    /// its last value, as miniserde would read it.
    Object(Vec<(String, Json)>),
}

/// Deeper nesting is reported as an error rather than walked.
pub const MAX_DEPTH: usize = 128;

/// Whether `text` nests arrays and objects at most `MAX_DEPTH` deep. Read
/// before miniserde gets a text from outside: it keeps a heap entry of
/// some 40 bytes per open bracket, even in a field it skips, so a 4 MiB
/// line of `[` would take it 170 MB.
pub fn nesting_is_shallow(text: &[u8]) -> bool {
    shape_is_small(text, usize::MAX)
}

/// `nesting_is_shallow`, and no array holds more than `max_elements`. A
/// typed field keeps every element, 8 bytes a number and twice that while
/// its `Vec` grows, so 8 MiB of `0,` would take miniserde 100 MB.
pub fn shape_is_small(text: &[u8], max_elements: usize) -> bool {
    // Per open bracket: in an array, the commas seen at its own level;
    // `OBJECT` in an object. On the stack: this runs on every line herdr
    // sends.
    const OBJECT: usize = usize::MAX;
    let mut open = [0usize; MAX_DEPTH];
    let mut depth = 0;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                if depth == MAX_DEPTH {
                    return false;
                }
                open[depth] = if byte == b'[' { 0 } else { OBJECT };
                depth += 1;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' if depth > 0 && open[depth - 1] != OBJECT => {
                open[depth - 1] += 1;
                if open[depth - 1] >= max_elements {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// More keys in one object of a config are an error: a config has a
/// handful, and each key is compared with those before it, so a file of
/// 100,000 keys would take seconds.
pub const MAX_KEYS: usize = 256;

/// Repeated keys named one by one; finding each one's line costs a walk
/// from the start of the file, and a long list helps nobody.
pub const MAX_REPEATS_SHOWN: usize = 20;

/// The value of a JSON text, and a warning for each key written twice in
/// one object (at its second place: the first one does nothing, and a
/// person editing config.json should hear that); or the first error.
pub fn parse(text: &str) -> Result<(Json, Vec<JsonError>), JsonError> {
    let mut reader = Reader::new(text, true);
    let value = reader.document().map_err(|failure| at(text, failure))?;
    let mut repeats: Vec<JsonError> = reader
        .duplicates
        .into_iter()
        .map(|failure| at(text, failure))
        .collect();
    if let Some(last) = repeats.last_mut()
        && reader.more_duplicates > 0
    {
        last.what.push_str(&format!(
            "; {} more keys after it appear again, not listed",
            reader.more_duplicates
        ));
    }
    Ok((value, repeats))
}

/// `None` when `text` is one valid JSON value surrounded by whitespace.
pub fn locate_error(text: &str) -> Option<JsonError> {
    let mut reader = Reader::new(text, false);
    reader.document().err().map(|failure| at(text, failure))
}

fn at(text: &str, (pos, what): Failure) -> JsonError {
    let (line, column) = line_and_column(text, pos);
    JsonError { line, column, what }
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
    // The power of ten of the first significant digit: 2 for 123.4,
    // -3 for 0.00123. A mantissa of zeros is zero, never too large.
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let whole = whole.trim_start_matches('0');
    let magnitude = if !whole.is_empty() {
        whole.len() as i64 - 1
    } else {
        match fraction.find(|c| c != '0') {
            Some(zeros) => -(zeros as i64) - 1,
            None => return false,
        }
    };
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
    magnitude.saturating_add(exponent) > 308
}

/// A byte offset into the text and what went wrong there.
type Failure = (usize, String);

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Whether objects keep their entries and have their keys judged
    /// (repeats, `MAX_KEYS`). Locating an error in state.json, whose tabs
    /// object has a key per tab, needs neither.
    keep: bool,
    /// Where a key repeats, and the message that says so: the first
    /// `MAX_REPEATS_SHOWN`, then a count of the others.
    duplicates: Vec<Failure>,
    more_duplicates: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str, keep: bool) -> Reader<'a> {
        Reader {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            keep,
            duplicates: Vec::new(),
            more_duplicates: 0,
        }
    }

    fn repeated(&mut self, start: usize, key: &str) {
        if self.duplicates.len() < MAX_REPEATS_SHOWN {
            let what = format!(
                "the key {} appears again; only the last one counts",
                quote_short(key)
            );
            self.duplicates.push((start, what));
        } else {
            self.more_duplicates += 1;
        }
    }

    /// The whole text: one value, surrounded by whitespace only.
    fn document(&mut self) -> Result<Json, Failure> {
        self.skip_whitespace();
        let value = self.value(0)?;
        self.skip_whitespace();
        match self.peek() {
            None => Ok(value),
            Some(_) => Err((
                self.pos,
                format!(
                    "unexpected characters after the JSON value, {}",
                    self.found(self.pos)
                ),
            )),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// "found 'x'" or "found the end of the file", for the character at
    /// `pos`; the walk only stops on ASCII bytes or at the start of a
    /// character, so `pos` is always on a character boundary. A character
    /// that would be invisible or turn the terminal's text around is named
    /// by its code point instead: a stray BOM, a zero-width space or a
    /// right-to-left override are exactly what a person cannot see.
    fn found(&self, pos: usize) -> String {
        match self.text.get(pos..).and_then(|rest| rest.chars().next()) {
            None => "found the end of the file".to_string(),
            Some(c) if c.is_ascii_control() => format!("found {}", c.escape_default()),
            Some(c) if c != ' ' && crate::text::is_invisible(c) => {
                format!("found U+{:04X}", c as u32)
            }
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

    fn value(&mut self, depth: usize) -> Result<Json, Failure> {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true").map(|()| Json::Bool(true)),
            Some(b'f') => self.literal("false").map(|()| Json::Bool(false)),
            Some(b'n') => self.literal("null").map(|()| Json::Null),
            _ => Err(self.expected("a value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<(), Failure> {
        if depth > MAX_DEPTH {
            return Err((self.pos, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<Json, Failure> {
        self.enter(depth)?;
        self.pos += 1;
        self.skip_whitespace();
        let mut entries: Vec<(String, Json)> = Vec::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(entries));
        }
        let mut keys = 0;
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.expected("a string key in double quotes"));
            }
            let start = self.pos;
            let key = self.string()?;
            keys += 1;
            if self.keep && keys > MAX_KEYS {
                return Err((start, format!("more than {MAX_KEYS} keys in one object")));
            }
            let earlier = match self.keep {
                true => entries.iter().position(|(seen, _)| *seen == key),
                false => None,
            };
            if earlier.is_some() {
                self.repeated(start, &key);
            }
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.expected("':' after the key"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let value = self.value(depth)?;
            match earlier {
                Some(index) => entries[index].1 = value,
                None if self.keep => entries.push((key, value)),
                None => {}
            }
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
                    return Ok(Json::Object(entries));
                }
                _ => return Err(self.expected("',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, Failure> {
        // The elements are checked, not kept (no setting is an array), so
        // objects in them need neither their entries nor judged keys.
        let keep = std::mem::replace(&mut self.keep, false);
        let elements = self.elements(depth);
        self.keep = keep;
        elements.map(|()| Json::Array)
    }

    fn elements(&mut self, depth: usize) -> Result<(), Failure> {
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

    /// The string that starts at the opening quote, escapes decoded.
    fn string(&mut self) -> Result<String, Failure> {
        let start = self.pos;
        self.pos += 1;
        let mut string = String::new();
        // The bytes since the last escape, copied in one piece.
        let mut run = self.pos;
        loop {
            match self.peek() {
                None => {
                    return Err((
                        start,
                        "string not closed: the file ends before its '\"'".to_string(),
                    ));
                }
                Some(b'"') => {
                    string.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Ok(string);
                }
                Some(b'\\') => {
                    string.push_str(&self.text[run..self.pos]);
                    string.push(self.escape()?);
                    run = self.pos;
                }
                Some(byte) if byte < 0x20 => {
                    let what = if byte == b'\n' {
                        "string not closed before the end of the line".to_string()
                    } else {
                        format!(
                            "control character {} in a string, write it as an escape",
                            char::from(byte).escape_default()
                        )
                    };
                    return Err((self.pos, what));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// The character an escape stands for; `pos` is at its backslash.
    fn escape(&mut self) -> Result<char, Failure> {
        let start = self.pos;
        self.pos += 1;
        let simple = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape(start);
            }
            _ => {
                return Err((
                    start,
                    format!(
                        "invalid escape: allowed are \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX, {}",
                        self.found(self.pos)
                    ),
                ));
            }
        };
        self.pos += 1;
        Ok(simple)
    }

    /// A `\uXXXX` escape that starts at `start`, or two for a character
    /// beyond the BMP; `pos` is after the `u`.
    fn unicode_escape(&mut self, start: usize) -> Result<char, Failure> {
        let lone = |what: &str| (start, format!("\\u escape is a {what}"));
        let unit = self.hex4(start)?;
        let scalar = match unit {
            0xDC00..=0xDFFF => return Err(lone("low surrogate without a high one before it")),
            0xD800..=0xDBFF => {
                let second = self.pos;
                if self.bytes.get(second..second + 2) != Some(b"\\u") {
                    return Err(lone("high surrogate without a low one after it"));
                }
                self.pos += 2;
                match self.hex4(second)? {
                    low @ 0xDC00..=0xDFFF => 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00),
                    _ => return Err(lone("high surrogate without a low one after it")),
                }
            }
            _ => unit,
        };
        // Surrogates were paired or refused above, so this is a character.
        Ok(char::from_u32(scalar).unwrap_or(char::REPLACEMENT_CHARACTER))
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

    fn number(&mut self) -> Result<Json, Failure> {
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
        let literal = &self.text[start..self.pos];
        if too_large(literal) {
            return Err((
                start,
                // A number literal is ASCII, so any cut is on a boundary.
                match literal.get(..40) {
                    Some(start) if literal.len() > 40 => {
                        format!("number too large: {start}... (beyond about 1.8e308)")
                    }
                    _ => format!("number too large: {literal} (beyond about 1.8e308)"),
                },
            ));
        }
        Ok(Json::Number(literal.to_string()))
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

/// The 1-based line and character column of byte offset `pos`. Lines end
/// where editors end them: at LF, CRLF, or a lone CR (old Mac files).
pub fn line_and_column(text: &str, pos: usize) -> (usize, usize) {
    let before = text.get(..pos).unwrap_or(text);
    let mut line = 1;
    let mut line_start = 0;
    for (at, byte) in before.bytes().enumerate() {
        let lone_cr = byte == b'\r' && text.as_bytes().get(at + 1) != Some(&b'\n');
        if byte == b'\n' || lone_cr {
            line += 1;
            line_start = at + 1;
        }
    }
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::tests::Rng;

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

    fn read(text: &str) -> (Json, Vec<JsonError>) {
        parse(text).unwrap_or_else(|error| panic!("{text:?}: {error:?}"))
    }

    fn string(text: &str) -> Json {
        Json::String(text.to_string())
    }

    #[test]
    fn values_are_read_in_the_files_order() {
        let text =
            r#"{"z": null, "a": [1, {"b": 2}], "m": {"x": true, "y": false}, "n": -12.5e+3}"#;
        let object = Json::Object(vec![
            ("z".into(), Json::Null),
            ("a".into(), Json::Array),
            (
                "m".into(),
                Json::Object(vec![
                    ("x".into(), Json::Bool(true)),
                    ("y".into(), Json::Bool(false)),
                ]),
            ),
            ("n".into(), Json::Number("-12.5e+3".into())),
        ]);
        assert_eq!(read(text), (object, Vec::new()));
        assert_eq!(read(" 0 ").0, Json::Number("0".into()));
        assert_eq!(read("{}").0, Json::Object(Vec::new()));
    }

    #[test]
    fn strings_are_decoded_as_miniserde_decodes_them() {
        let texts = [
            r#""""#,
            r#""plain 🔴 text""#,
            r#""a \" \\ \/ \b \f \n \r \t end""#,
            r#""\u00e9\u0041\u20AC\uD83D\uDD34\u0000""#,
            r#""\ud83d\udd35 mixed \"quotes\" and é""#,
        ];
        for text in texts {
            let Ok(miniserde::json::Value::String(expected)) = miniserde::json::from_str(text)
            else {
                panic!("miniserde cannot read {text:?}");
            };
            assert_eq!(read(text).0, string(&expected), "{text:?}");
        }
        assert_eq!(read(r#""\uD83D\uDD34""#).0, string("🔴"));
    }

    #[test]
    fn a_key_written_twice_keeps_its_place_and_its_last_value() {
        let (value, duplicates) = read("{\"a\": 1, \"b\": 2,\n \"\\u0061\": {\"c\": 3, \"c\": 4}}");
        assert_eq!(
            value,
            Json::Object(vec![
                (
                    "a".into(),
                    Json::Object(vec![("c".into(), Json::Number("4".into()))])
                ),
                ("b".into(), Json::Number("2".into())),
            ])
        );
        // In the file's order: the outer key is met before the inner one.
        let places: Vec<_> = duplicates
            .iter()
            .map(|d| (d.line, d.column, d.what.as_str()))
            .collect();
        assert_eq!(
            places,
            [
                (
                    2,
                    2,
                    "the key \"a\" appears again; only the last one counts"
                ),
                (
                    2,
                    21,
                    "the key \"c\" appears again; only the last one counts"
                ),
            ]
        );
    }

    #[test]
    fn keys_are_capped_when_read_but_not_when_an_error_is_located() {
        let object = |keys: usize| {
            let entries: Vec<String> = (0..keys).map(|n| format!("\"k{n}\": {n}")).collect();
            format!("{{{}}}", entries.join(", "))
        };
        let Json::Object(entries) = read(&object(MAX_KEYS)).0 else {
            panic!("not an object");
        };
        assert_eq!(entries.len(), MAX_KEYS);
        let many = object(MAX_KEYS + 1);
        let error = parse(&many).unwrap_err();
        assert_eq!(
            error.what,
            format!("more than {MAX_KEYS} keys in one object")
        );
        let last = many.find(&format!("\"k{MAX_KEYS}\"")).unwrap();
        assert_eq!((error.line, error.column), (1, last + 1));
        // state.json has a key per tab: a valid one locates no error.
        assert_eq!(locate_error(&object(5000)), None);
        let broken = object(5000) + "x";
        assert_eq!(
            locate_error(&broken).map(|error| error.what),
            Some("unexpected characters after the JSON value, found 'x'".to_string())
        );
    }

    /// A random JSON text: a value of small depth whose strings, keys and
    /// numbers come from pieces that exercise escapes, surrogates and
    /// number forms.
    fn random_value(rng: &mut Rng, depth: usize, text: &mut String) {
        const STRINGS: &[&str] = &[
            "",
            "a",
            "spinner",
            "🔴",
            "é",
            "\\\"",
            "\\\\",
            "\\/",
            "\\n",
            "\\t",
            "\\b",
            "\\u0041",
            "\\u00e9",
            "\\uD83D\\uDD34",
            "\\u20ac",
            "\\u0000",
            " ",
            "x y",
        ];
        const NUMBERS: &[&str] = &[
            "0",
            "-0",
            "7",
            "500",
            "-12",
            "1.5",
            "0.25",
            "1e3",
            "2E-2",
            "-3.5e+2",
            "18446744073709551615",
            "18446744073709551616",
            "1e300",
            "-1e-300",
            "0e400",
            "0.01e300",
        ];
        let kind = if depth >= 4 {
            2 + rng.below(4)
        } else {
            rng.below(6)
        };
        match kind {
            0 | 1 => {
                let (open, close) = if kind == 0 { ('{', '}') } else { ('[', ']') };
                text.push(open);
                for n in 0..rng.below(4) {
                    if n > 0 {
                        text.push(',');
                    }
                    if kind == 0 {
                        text.push('"');
                        for _ in 0..rng.below(3) {
                            text.push_str(rng.pick(STRINGS));
                        }
                        text.push_str("\":");
                    }
                    random_value(rng, depth + 1, text);
                }
                text.push(close);
            }
            2 => {
                text.push('"');
                for _ in 0..rng.below(4) {
                    text.push_str(rng.pick(STRINGS));
                }
                text.push('"');
            }
            3 => text.push_str(rng.pick(NUMBERS)),
            _ => text.push_str(rng.pick(&["true", "false", "null"])),
        }
    }

    /// Whether our value is the one miniserde read: strings exact, numbers
    /// equal as f64 (but for miniserde's rounding), objects as maps
    /// (miniserde sorts them), arrays only as arrays (elements not kept).
    fn same(ours: &Json, theirs: &miniserde::json::Value) -> bool {
        use miniserde::json::{Number, Value};
        match (ours, theirs) {
            (Json::Null, Value::Null) => true,
            (Json::Bool(a), Value::Bool(b)) => a == b,
            (Json::String(a), Value::String(b)) => a == b,
            (Json::Number(literal), Value::Number(number)) => {
                let theirs = match number {
                    Number::U64(n) => *n as f64,
                    Number::I64(n) => *n as f64,
                    Number::F64(n) => *n,
                };
                // miniserde's float parsing can be off in the last digit.
                literal.parse::<f64>().is_ok_and(|ours| {
                    ours == theirs || (ours - theirs).abs() <= 1e-12 * ours.abs().max(theirs.abs())
                })
            }
            (Json::Array, Value::Array(_)) => true,
            (Json::Object(entries), Value::Object(map)) => {
                entries.len() == map.len()
                    && entries
                        .iter()
                        .all(|(key, value)| map.get(key).is_some_and(|v| same(value, v)))
            }
            _ => false,
        }
    }

    #[test]
    fn reads_random_texts_as_miniserde_does() {
        const BREAKERS: &[char] = &[
            '"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\n', 'e', '-', '.', '0', '7', 'u', 'D',
            'x',
        ];
        let mut rng = Rng(0x5EED_0FC0_FFEE);
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..100_000 {
            let mut text = String::new();
            random_value(&mut rng, 0, &mut text);
            // Half the texts get one character deleted, inserted or replaced.
            if rng.below(2) == 0 {
                let mut chars: Vec<char> = text.chars().collect();
                let at = rng.below(chars.len() + 1);
                let breaker = BREAKERS[rng.below(BREAKERS.len())];
                match rng.below(3) {
                    0 if at < chars.len() => drop(chars.remove(at)),
                    1 if at < chars.len() => chars[at] = breaker,
                    _ => chars.insert(at, breaker),
                }
                text = chars.into_iter().collect();
            }
            let theirs = miniserde::json::from_str::<miniserde::json::Value>(&text);
            match (parse(&text), &theirs) {
                (Ok((ours, _)), Ok(theirs)) => {
                    assert!(same(&ours, theirs), "{text:?}: {ours:?} vs {theirs:?}");
                    valid += 1;
                }
                (Err(_), Err(_)) => invalid += 1,
                (ours, _) => panic!("{text:?}: we say {ours:?}, miniserde {}", theirs.is_ok()),
            }
            assert_eq!(locate_error(&text).is_none(), theirs.is_ok(), "{text:?}");
        }
        // Both kinds were tried often enough to mean something.
        assert!(
            valid > 25_000 && invalid > 25_000,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn repeats_are_listed_up_to_a_limit_and_arrays_only_checked() {
        let text = format!("{{{}}}", vec!["\"a\": 0"; 31].join(", "));
        let (_, repeats) = read(&text);
        assert_eq!(repeats.len(), MAX_REPEATS_SHOWN);
        assert!(
            repeats[MAX_REPEATS_SHOWN - 1]
                .what
                .ends_with("; 10 more keys after it appear again, not listed"),
            "{repeats:?}"
        );
        // An array's objects are checked, but their keys are not judged:
        // no setting is an array, so nothing in one can count.
        let keys: Vec<String> = (0..=MAX_KEYS).map(|n| format!("\"k{n}\": 0")).collect();
        let text = format!("[{{\"a\": 1, \"a\": 2}}, {{{}}}]", keys.join(", "));
        assert_eq!(read(&text), (Json::Array, Vec::new()));
        assert!(parse("[{\"a\": 1,}]").is_err());
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
            (
                "{} {}",
                1,
                4,
                "unexpected characters after the JSON value, found '{'",
            ),
            (
                "{}}",
                1,
                3,
                "unexpected characters after the JSON value, found '}'",
            ),
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
            "0.001e312",
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
            "0e400",
            "-0e99999999999",
            "0.01e310",
            "0.0001e312",
            "000.000e999",
        ] {
            assert!(!too_large(literal), "{literal}");
        }
    }

    #[test]
    fn number_errors() {
        let cases = [
            ("01", 1, 1, "number with a leading zero"),
            (
                "{\"x\": -1e400}",
                1,
                7,
                "number too large: -1e400 (beyond about 1.8e308)",
            ),
            (
                "[1000e306]",
                1,
                2,
                "number too large: 1000e306 (beyond about 1.8e308)",
            ),
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
        // A lone CR ends a line, as it does in an editor (old Mac files).
        assert_eq!(
            error("{\r\r  x}"),
            (
                3,
                3,
                "expected a string key in double quotes, found 'x'".into()
            )
        );
    }

    #[test]
    fn invisible_and_bidi_characters_are_named_by_code_point() {
        for (text, found) in [
            ("{\u{202e} \"a\": 1}", "U+202E"),
            ("{\u{2028}}", "U+2028"),
            ("\u{feff}{}", "U+FEFF"),
            ("{\u{200b}}", "U+200B"),
            ("{\u{a0}}", "U+00A0"),
            ("{\u{fe0f}}", "U+FE0F"),
            ("{\u{301}}", "U+0301"),
            ("{}\u{0}", "\\u{0}"),
            ("{“a”: 1}", "'“'"),
        ] {
            let what = error(text).2;
            assert!(
                what.ends_with(&format!("found {found}")),
                "{text:?}: {what}"
            );
            assert!(
                !what.chars().any(crate::text::is_control),
                "{text:?}: {what}"
            );
        }
        let long = format!("[1e{}]", "9".repeat(100));
        assert_eq!(
            error(&long).2,
            format!(
                "number too large: 1e{}... (beyond about 1.8e308)",
                "9".repeat(38)
            )
        );
    }

    #[test]
    fn shape_is_small_counts_the_elements_of_each_array_on_its_own() {
        let array = |n: usize| format!("[{}]", vec!["[1,2]"; n].join(","));
        assert!(shape_is_small(array(64).as_bytes(), 64));
        assert!(!shape_is_small(array(65).as_bytes(), 64));
        // Commas in objects and strings are not elements.
        let object = format!("{{{}}}", vec![r#""k":"a,b,c""#; 100].join(","));
        assert!(shape_is_small(format!("[{object}]").as_bytes(), 2));
        assert!(shape_is_small(b"[]", 1));
        assert!(!shape_is_small(b"[1,2]", 1));
    }

    #[test]
    fn nesting_is_shallow_counts_brackets_outside_strings() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(nesting_is_shallow(ok.as_bytes()));
        let deep = "{\"a\":".to_string() + &"[".repeat(MAX_DEPTH);
        assert!(!nesting_is_shallow(deep.as_bytes()));
        // Closed levels count no more; brackets in strings, escaped quotes
        // and all, are text.
        let flat = "[[]]".repeat(10 * MAX_DEPTH);
        assert!(nesting_is_shallow(flat.as_bytes()));
        let quoted = "[\"\\\"".to_string() + &"[".repeat(10 * MAX_DEPTH) + "\"]";
        assert!(nesting_is_shallow(quoted.as_bytes()));
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
            // Every C0 control must be escaped, the last one (U+001F) too.
            "\"a\u{1f}b\"",
            // JSON's whitespace is space, tab, LF and CR: no form feed.
            "\u{c}{}",
            "{}\u{c}",
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
