//! Colour in human output, decided as git decides it: `--color=auto|always|never`, then the
//! `NO_COLOR` convention, then `color.ui`; `auto` colours only a terminal.
//!
//! The choice is made once per command, before anything is printed, and read wherever a line
//! is painted; JSON is never coloured.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// `--color`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour when stdout is a terminal.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Decides, once, whether this command paints its output; `color_ui` is `color.ui`.
pub(crate) fn decide(
    flag: Option<ColorChoice>,
    color_ui: Option<git_lease::config::Color>,
    json: bool,
) {
    use git_lease::config::Color;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let from_config = color_ui.map(|c| match c {
        Color::Always => ColorChoice::Always,
        Color::Never => ColorChoice::Never,
        Color::Auto => ColorChoice::Auto,
    });
    let choice = flag
        .or(if no_color {
            Some(ColorChoice::Never)
        } else {
            None
        })
        .or(from_config)
        .unwrap_or(ColorChoice::Auto);
    let enabled = !json
        && match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => std::io::stdout().is_terminal(),
        };
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// What a painted piece of text means.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tone {
    /// Done: acquired, renewed, released, ok.
    Good,
    /// Refused or failed.
    Bad,
    /// Worth a look: a lease expired, or its holder's process gone.
    Notice,
}

/// Returns `text` in the colour of `tone` when this command paints, else as is.
pub(crate) fn paint(text: &str, tone: Tone) -> String {
    if !ENABLED.load(Ordering::Relaxed) {
        return text.to_owned();
    }
    let code = match tone {
        Tone::Good => "32",
        Tone::Bad => "31",
        Tone::Notice => "33",
    };
    format!("\x1b[{code}m{text}\x1b[m")
}

/// Paints the head of a report line, the words before its first `:` or, without one (or when
/// ` for ` comes first, as before a time), its first word: `held:`, `not holder:`, `acquired`.
pub(crate) fn paint_head(line: &str, tone: Tone) -> String {
    let end = match line.find(':') {
        Some(colon) if !line[..colon].contains(" for ") => colon + 1,
        _ => line.find(' ').unwrap_or(line.len()),
    };
    format!("{}{}", paint(&line[..end], tone), &line[end..])
}
