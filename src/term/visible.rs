//! The one sanitiser of text that came from outside (a node, a cloud or Kubernetes API,
//! a file another user could write) on its way to the operator's terminal, for the CLI
//! and the cockpit alike. Control sequences and control characters are made visible
//! instead of acting, so nothing from outside can set the operator's clipboard (OSC 52),
//! title or palette, move the cursor, clear the screen or switch character sets:
//!
//! - [`visible`]: a node's output streamed as it is (`exec`, `job run` following, `job
//!   logs`): colour (SGR, `ESC [ … m`), tabs and newlines pass; the rest is shown.
//!   [`for_stdout`] and [`for_stderr`] apply it on a terminal unless `--raw` was given
//!   (a pipe or a file gets every byte).
//! - [`text`]: outside text inside flightdeck's own messages (errors, doctor evidence,
//!   bootstrap tails, API error bodies, names, tables): only tabs and newlines pass, on a
//!   terminal or not, `--raw` or not. The CLI prints every line through it (`cli::outln!`,
//!   `cli::errln!`).
//! - [`cell`]: the same for one line of the cockpit; tabs and newlines become spaces,
//!   colour is dropped.
//!   The cockpit also clears every control character from the frame's cells once drawn
//!   ([`clean_symbol`], `tui::widgets::scrub`), since ratatui hands ESC and BEL in a
//!   `Span` to the terminal as they are.
//!
//! Panes keep every sequence: they are a terminal emulator of their own.
//!
//! Pure.

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// `--raw`: nodes' bytes go to this terminal as they are.
static RAW: AtomicBool = AtomicBool::new(false);

/// Set by the CLI from `--raw`.
pub fn set_raw(raw: bool) {
    RAW.store(raw, Ordering::Relaxed);
}

/// A node's output for this process's stdout: [`visible`] when stdout is a terminal and
/// `--raw` was not given, else as it is (a pipe or a file gets every byte).
pub fn for_stdout(text: &str) -> Cow<'_, str> {
    if RAW.load(Ordering::Relaxed) || !std::io::stdout().is_terminal() {
        Cow::Borrowed(text)
    } else {
        visible(text)
    }
}

/// The same for stderr.
pub fn for_stderr(text: &str) -> Cow<'_, str> {
    if RAW.load(Ordering::Relaxed) || !std::io::stderr().is_terminal() {
        Cow::Borrowed(text)
    } else {
        visible(text)
    }
}

/// What [`shown`] lets through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// SGR colour, tabs and newlines.
    Colour,
    /// Tabs and newlines.
    Lines,
    /// Nothing: tabs and newlines become spaces, colour is dropped.
    Nothing,
}

/// A character a terminal acts on rather than prints: C0 (tab and newline included),
/// DEL and C1.
pub fn is_control(c: char) -> bool {
    c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)
}

/// A bidirectional formatting character (embeddings, overrides, isolates, marks): it
/// reorders what follows it on the line (the "Trojan Source" trick), so outside text
/// shows it as `<U+202E>` instead.
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Whether an SGR's parameters conceal text (`8`: the text is there but not drawn, so a
/// line can hide what it says). Colour parameters' own numbers (`38;5;8`) are not it.
fn sgr_conceals(params: &str) -> bool {
    let groups: Vec<&str> = params.split(';').collect();
    let mut k = 0;
    while k < groups.len() {
        let g = groups[k];
        if g.contains(':') {
            k += 1;
            continue;
        }
        match g.trim_start_matches('0') {
            "8" if !g.is_empty() => return true,
            "38" | "48" | "58" => {
                k += match groups.get(k + 1).copied() {
                    Some("5") => 3,
                    Some("2") => 5,
                    _ => 1,
                };
                continue;
            }
            _ => {}
        }
        k += 1;
    }
    false
}

/// A node's streamed output as it may reach the operator's terminal: SGR kept, the rest
/// shown (`␛]52;c;…`, `^G`, `␛[2J`).
pub fn visible(text: &str) -> Cow<'_, str> {
    shown(text, Keep::Colour)
}

/// Outside text for a message of flightdeck's: every control sequence and character
/// shown (colour too), tabs and newlines kept.
pub fn text(text: &str) -> Cow<'_, str> {
    shown(text, Keep::Lines)
}

/// Outside text for one line of the cockpit: as [`text`], with tabs and newlines as
/// spaces and colour (SGR) dropped (a job's log is often coloured).
pub fn cell(text: &str) -> Cow<'_, str> {
    shown(text, Keep::Nothing)
}

/// A drawn cell's symbol without control characters, or `None` when it has none; a
/// symbol that was nothing else becomes a space. The cockpit's last guard.
pub fn clean_symbol(symbol: &str) -> Option<String> {
    let bad = |c: char| is_control(c) || is_bidi(c);
    if !symbol.chars().any(bad) {
        return None;
    }
    let s: String = symbol.chars().filter(|c| !bad(*c)).collect();
    Some(if s.is_empty() { " ".into() } else { s })
}

fn shown(text: &str, keep: Keep) -> Cow<'_, str> {
    let passes = |c: char| keep != Keep::Nothing && (c == '\t' || c == '\n');
    if !text.chars().any(|c| (is_control(c) && !passes(c)) || is_bidi(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\u{1b}' {
            // CSI: ESC [ params intermediates final.
            if chars.get(i + 1) == Some(&'[') {
                let mut j = i + 2;
                while j < chars.len() && ('\u{30}'..='\u{3f}').contains(&chars[j]) {
                    j += 1;
                }
                while j < chars.len() && ('\u{20}'..='\u{2f}').contains(&chars[j]) {
                    j += 1;
                }
                if j < chars.len() && ('\u{40}'..='\u{7e}').contains(&chars[j]) {
                    let seq: String = chars[i..=j].iter().collect();
                    let params_ok = chars[i + 2..j]
                        .iter()
                        .all(|c| c.is_ascii_digit() || *c == ';' || *c == ':');
                    let params: String = chars[i + 2..j].iter().collect();
                    let sgr = chars[j] == 'm' && params_ok && !sgr_conceals(&params);
                    if keep == Keep::Colour && sgr {
                        out.push_str(&seq);
                    } else if keep == Keep::Nothing && sgr {
                        // A cell has no use for a node's colour: dropped.
                    } else {
                        out.push('␛');
                        out.push_str(&seq[1..]);
                    }
                    i = j + 1;
                    continue;
                }
            }
            out.push('␛');
            i += 1;
            continue;
        }
        if c == '\t' || c == '\n' {
            out.push(if keep == Keep::Nothing { ' ' } else { c });
        } else if (c as u32) < 0x20 {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        } else if c == '\u{7f}' {
            out.push_str("^?");
        } else if ('\u{80}'..='\u{9f}').contains(&c) || is_bidi(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
        i += 1;
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {

    /// Hostile review 3: SGR conceal (`ESC[8m`) hides text and bidi controls reorder it;
    /// neither passes, while colour (`38;5;8` included) still does in a node's output.
    #[test]
    fn conceal_and_bidi_controls_are_shown() {
        assert_eq!(visible("a\u{1b}[8mhidden\u{1b}[0m"), "a␛[8mhidden\u{1b}[0m");
        assert_eq!(visible("\u{1b}[1;08mx"), "␛[1;08mx");
        assert_eq!(
            visible("\u{1b}[38;5;8mgrey\u{1b}[0m"),
            "\u{1b}[38;5;8mgrey\u{1b}[0m"
        );
        assert_eq!(visible("\u{1b}[38;2;8;8;8mx"), "\u{1b}[38;2;8;8;8mx");
        assert_eq!(text("rm -rf /\u{202e}txt.exe"), "rm -rf /<U+202E>txt.exe");
        assert_eq!(cell("a\u{2066}b\u{2069}"), "a<U+2066>b<U+2069>");
        assert_eq!(clean_symbol("\u{202e}").as_deref(), Some(" "));
        assert_eq!(text("plain ünïcode"), "plain ünïcode");
    }
    use super::{cell, clean_symbol, text, visible};

    #[test]
    fn colour_passes_everything_else_is_shown() {
        assert_eq!(visible("plain\ttext"), "plain\ttext");
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(visible("\u{1b}[1;31mred\u{1b}[0m"), "\u{1b}[1;31mred\u{1b}[0m");
        // OSC 52 (clipboard) and a title, ended by BEL and by ST.
        assert_eq!(visible("\u{1b}]52;c;ZXZpbA==\u{7}"), "␛]52;c;ZXZpbA==^G");
        assert_eq!(visible("\u{1b}]0;owned\u{1b}\\"), "␛]0;owned␛\\");
        // Clear screen, cursor moves, a private mode, a bare carriage return.
        assert_eq!(visible("\u{1b}[2J\u{1b}[H"), "␛[2J␛[H");
        assert_eq!(visible("\u{1b}[?1049h"), "␛[?1049h");
        assert_eq!(visible("progress\r100%"), "progress^M100%");
        // C1 CSI and DEL.
        assert_eq!(visible("\u{9b}2J\u{7f}"), "<U+009B>2J^?");
        // A truncated sequence at the end.
        assert_eq!(visible("x\u{1b}["), "x␛[");
    }

    #[test]
    fn messages_keep_no_sequence_and_cells_no_control() {
        // Colour is shown too: outside text has no say in how flightdeck's lines look.
        assert_eq!(text("\u{1b}[8mhidden\u{1b}[0m"), "␛[8mhidden␛[0m");
        assert_eq!(
            text("a\tb\n\u{1b}]52;c;eA==\u{7}\u{9b}2J\r"),
            "a\tb\n␛]52;c;eA==^G<U+009B>2J^M"
        );
        assert!(matches!(text("plain\tline\n"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(cell("a\tb\nc\u{1b}[31mred\u{1b}[0m\u{1b}[2J"), "a b cred␛[2J");
        assert!(matches!(cell("plain"), std::borrow::Cow::Borrowed(_)));
        assert!(!text("\u{1b}\u{7}\u{0}\u{85}\u{9b}\u{7f}")
            .chars()
            .any(super::is_control));
        assert!(!cell("\u{1b}\t\n\u{9b}\u{7}").chars().any(super::is_control));
        // The cockpit's last guard.
        assert_eq!(clean_symbol("a"), None);
        assert_eq!(clean_symbol("a\u{1b}").as_deref(), Some("a"));
        assert_eq!(clean_symbol("\u{7}").as_deref(), Some(" "));
        assert_eq!(clean_symbol("\u{9b}").as_deref(), Some(" "));
    }
}
