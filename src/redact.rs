//! Credentials removed from remote URLs before they are shown, written or logged.
//!
//! A remote given as `https://alice:S3cret@host/r` is used as given, but every message, page,
//! log line and JSON document shows it as `https://host/r`. The whole userinfo goes, the user
//! too, as git's own `transport_anonymize_url` does: a token is often given as the user
//! (`https://<token>@host/r`, `oauth2:<token>@`), so keeping the user could keep the secret.
//! Each output edge applies it (the error and diagnostic lines of the command line, the
//! timeline page, MCP's answers and log), so a URL that reaches one by a path nobody thought
//! of is still redacted: `credentials::*` checks every output.

/// Returns `url` without credentials: `https://alice:secret@host/r` becomes `https://host/r`.
/// Anything that is not a URL with credentials is returned as is.
pub fn url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Removes the credentials of every URL in `text` ([`url`] applied word by word, words ending
/// at white space and quotes).
pub fn urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(&url(word));
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '\'' | '"' | '<' | '>' | '`' | '(' | ')') {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_userinfo_goes_and_everything_else_stays() {
        for (given, shown) in [
            ("http://alice:S3cret@host/r.git", "http://host/r.git"),
            ("https://tok3n@host:8443/r", "https://host:8443/r"),
            ("https://a:b@c@host/r", "https://host/r"),
            ("https://alice:S3cret@host?x", "https://host?x"),
            ("https://host/user@org/r", "https://host/user@org/r"),
            ("origin", "origin"),
            ("git@host:r.git", "git@host:r.git"),
            ("/srv/r.git", "/srv/r.git"),
        ] {
            assert_eq!(url(given), shown, "{given}");
        }
    }

    #[test]
    fn every_url_of_a_text_is_redacted() {
        let text = "fatal: unable to access 'http://alice:S3cret@127.0.0.1:9/r/': refused \
                    (\"https://u:p@h/x\") `ssh://me:pw@h/y`";
        let shown = urls(text);
        assert!(!shown.contains("S3cret") && !shown.contains("u:p") && !shown.contains("pw"));
        assert!(shown.contains("'http://127.0.0.1:9/r/'"), "{shown}");
    }
}
