//! Text from outside (herdr's names and ids, what a person wrote in the
//! config) as it may appear in the log, on the terminal and in messages:
//! never a control character raw, never a string that prints as nothing.

/// A character that must not reach a line of text raw: the C0 and C1
/// controls (U+009B is a CSI), the Unicode line and paragraph separators,
/// which break a line as surely as a newline, and the bidirectional
/// controls, which would turn the rest of it around.
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// Drops every `is_control` character (one copy of `retain` for both users).
pub fn remove_controls(text: &mut String) {
    text.retain(|c| !is_control(c));
}

/// A character that shows nothing by itself: a mark on the character
/// before it (a variation selector, a combining accent), a zero-width one,
/// or a blank filler.
pub fn shows_nothing(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{0300}'..='\u{036f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{e0100}'..='\u{e01ef}'
    )
}

/// A character that prints as nothing, as a space, as a change of
/// direction or as a mark on the character before.
pub fn is_invisible(c: char) -> bool {
    is_control(c) || c.is_whitespace() || shows_nothing(c)
}

/// A string as it appears in messages: JSON-quoted, so control characters
/// and quotes are visible (and without std's Debug machinery).
pub fn quote(text: &str) -> String {
    // JSON escapes only C0 controls: the others are escaped here, and so is
    // what shows nothing before the first character that shows (a lone
    // U+FE0F would print as `""`); after it, a mark belongs to an emoji.
    let mut quoted = String::new();
    let mut shown = false;
    for c in miniserde::json::to_string(text).chars() {
        if is_control(c) || (!shown && shows_nothing(c)) {
            // As JSON writes it: beyond U+FFFF, a UTF-16 surrogate pair.
            for unit in c.encode_utf16(&mut [0; 2]) {
                quoted.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            shown |= c != '"' && !c.is_whitespace();
            quoted.push(c);
        }
    }
    quoted
}

/// An id as it appears in messages: as it is, unless it holds a control
/// character (herdr's ids never do, but a message must not carry one).
pub fn shown(id: &str) -> std::borrow::Cow<'_, str> {
    if id.chars().any(is_control) {
        std::borrow::Cow::Owned(quote(id))
    } else {
        std::borrow::Cow::Borrowed(id)
    }
}

/// `quote` for what a person wrote (a config key or value): past 40
/// characters it is cut, with `...` after the closing quote, so one long
/// string cannot flood a message.
pub fn quote_short(text: &str) -> String {
    const MAX_CHARS: usize = 40;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}...", quote(&text[..cut])),
        None => quote(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_shows_what_would_print_as_nothing() {
        assert_eq!(quote("\u{fe0f}"), r#""\ufe0f""#);
        assert_eq!(quote("\u{e0100}"), r#""\udb40\udd00""#);
        assert_eq!(quote(" \u{200b}x"), r#"" \u200bx""#);
        assert_eq!(quote("a\u{202e}b\n"), r#""a\u202eb\n""#);
        // A variation selector after an emoji is part of it.
        assert_eq!(quote("\u{2764}\u{fe0f}"), "\"\u{2764}\u{fe0f}\"");
        assert_eq!(quote(r#"say "hi""#), r#""say \"hi\"""#);
    }

    #[test]
    fn bidirectional_controls_and_separators_are_control_characters() {
        for c in [
            '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{2028}', '\u{2029}',
            '\u{85}', '\u{9b}', '\u{7f}',
        ] {
            assert!(is_control(c), "U+{:04X}", c as u32);
        }
        // Emoji sequences need the joiner and the variation selector.
        for c in [
            'a', 'é', '🔴', '\u{200d}', '\u{fe0f}', '\u{2065}', '\u{206a}',
        ] {
            assert!(!is_control(c), "U+{:04X}", c as u32);
        }
    }
}
