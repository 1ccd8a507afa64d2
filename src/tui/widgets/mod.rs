//! Widgets shared by the views: the tab bar, the status bar, the palette and filter entry.

pub mod gpu_strip;
pub mod palette;
pub mod rate_chart;
pub mod status_bar;
pub mod tabs;

use ratatui::layout::Rect;

/// A rectangle of at most `w` x `h` centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Cut `s` to at most `width` characters, marking the cut with '…'.
pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// `text` cut into rows of `width` characters (at least one row), as a terminal wraps.
pub fn hard_wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

/// `text` in lines of at most `width` characters, broken between words (a word longer
/// than a line is broken inside it).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out = vec![];
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                out.push(std::mem::take(&mut line));
            }
            out.push(word.drain(..width).collect());
        }
        let w: String = word.into_iter().collect();
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

#[cfg(test)]
mod wrap_tests {
    #[test]
    fn hard_wrap_cuts_at_the_width() {
        assert_eq!(super::hard_wrap("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(super::hard_wrap("", 3), [""]);
        assert_eq!(super::hard_wrap("ab", 0), ["a", "b"]);
    }
}
