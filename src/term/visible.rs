//! Bytes from a node on their way to the operator's own terminal (`exec`, `job run`
//! following, `job logs`): colour (SGR, `ESC [ … m`) passes, every other control
//! sequence and control character is made visible instead of acting, so a node cannot
//! set the operator's clipboard (OSC 52), title or palette, move the cursor, clear the
//! screen or switch character sets. Tabs pass. `--raw` skips this; panes keep every
//! sequence (they are a terminal emulator of their own).
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

/// A node's text for this process's stdout: [`visible`] when stdout is a terminal and
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

/// `text` as it may reach the operator's terminal: SGR kept, the rest shown (`␛]52;c;…`,
/// `^G`, `␛[2J`).
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| (c.is_control() && c != '\t' && c != '\n') || ('\u{80}'..='\u{9f}').contains(&c))
    {
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
                    if chars[j] == 'm' && params_ok {
                        out.push_str(&seq);
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
            out.push(c);
        } else if (c as u32) < 0x20 {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        } else if c == '\u{7f}' {
            out.push_str("^?");
        } else if ('\u{80}'..='\u{9f}').contains(&c) {
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
    use super::visible;

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
}
