//! Text that others wrote (notes, holder names, reasons, issue ids from refs), made safe to
//! print on a terminal.
//!
//! A pushed ledger can hold any string. Printed raw, an escape sequence in a note could
//! rewrite the reader's terminal (move the cursor, recolour, retitle, overwrite earlier
//! lines), a carriage return could hide what precedes it, and a bidi override or a
//! zero-width character could make one holder or issue look like another. Human output
//! therefore shows such characters as escapes, the way Rust and git's quoting spell them:
//! `\t`, `\n`, `\r`, `\xNN` for the other ASCII controls and DEL, `\u{NNNN}` for the rest.
//! Backslashes are left as they are, so ordinary text is printed unchanged (a literal `\x1b`
//! in a note looks like an escaped ESC, which is harmless). JSON output keeps the exact
//! strings: serde escapes what JSON must.

use std::borrow::Cow;

/// Returns `text` with every character that a terminal would act on, or that would not be
/// seen, shown as an escape: C0 and C1 control characters, DEL, format characters (Unicode
/// category Cf: bidi controls and isolates, zero-width spaces and joiners, the BOM, soft
/// hyphen, tags...) and the line and paragraph separators. Borrows when nothing needs it.
pub fn printable(text: &str) -> Cow<'_, str> {
    if is_plain(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    push_escaped(&mut out, text);
    Cow::Owned(out)
}

/// Appends [`printable`]`(text)` to `out`.
pub fn push_printable(out: &mut String, text: &str) {
    if is_plain(text) {
        out.push_str(text);
    } else {
        push_escaped(out, text);
    }
}

/// True if `text` has nothing to escape (checked byte by byte for ASCII text).
fn is_plain(text: &str) -> bool {
    if text.is_ascii() {
        text.bytes().all(|b| (0x20..0x7f).contains(&b))
    } else {
        !text.chars().any(is_hidden)
    }
}

fn push_escaped(out: &mut String, text: &str) {
    use std::fmt::Write;
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
            continue;
        }
        let _ = match c {
            '\t' => out.write_str("\\t"),
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            c if c.is_ascii() => write!(out, "\\x{:02x}", u32::from(c)),
            c => write!(out, "\\u{{{:x}}}", u32::from(c)),
        };
    }
}

/// True for the characters [`printable`] escapes.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control() // C0, DEL and C1 (category Cc)
        || matches!(
            c,
            // Format characters (category Cf), Unicode 16.
            '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0001}'
                | '\u{e0020}'..='\u{e007f}'
                // Line and paragraph separators (categories Zl, Zp).
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Decodes `%XX` escapes (as the remote's memory and the hook's probe line write them): `None`
/// for a cut or non-hex escape, or bytes that are not UTF-8.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in [
            "",
            "alice@example.com",
            "fix the bug, é, 日本, 🦀",
            "a\\x1b b",
        ] {
            assert!(
                matches!(printable(text), Cow::Borrowed(t) if t == text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn controls_and_invisible_characters_are_escaped() {
        let cases = [
            ("\u{1b}[2J\u{1b}]0;pwned\u{7}", "\\x1b[2J\\x1b]0;pwned\\x07"),
            ("ok\rbad", "ok\\rbad"),
            ("a\tb\nc\0d\u{7f}", "a\\tb\\nc\\x00d\\x7f"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("alice\u{202e}moc.elpmaxe", "alice\\u{202e}moc.elpmaxe"),
            (
                "a\u{200b}b\u{200d}c\u{2066}d\u{feff}",
                "a\\u{200b}b\\u{200d}c\\u{2066}d\\u{feff}",
            ),
            ("x\u{2028}y\u{e0041}", "x\\u{2028}y\\u{e0041}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(printable(raw), shown, "{raw:?}");
            let mut out = String::from(">");
            push_printable(&mut out, raw);
            assert_eq!(out, format!(">{shown}"));
        }
    }
}
