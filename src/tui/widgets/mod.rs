//! Widgets shared by the views: the tab bar, the status bar, the palette and filter entry.

pub mod detail;
pub mod editor;
pub mod gpu_strip;
pub mod palette;
pub mod rate_chart;
pub mod status_bar;
pub mod table;
pub mod tabs;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::borrow::Cow;

/// Text from outside (a node, an API, a file another user could write) for a `Span` or
/// a `Line` of the cockpit: every control sequence and character shown, tabs and
/// newlines as spaces ([`crate::term::visible::cell`]).
pub fn shown(text: &str) -> Cow<'_, str> {
    crate::term::visible::cell(text)
}

/// Clear every control character from the cells of `area` (a cell that held nothing
/// else becomes a space). ratatui hands a `Span`'s ESC and BEL to the terminal as they
/// are (a zero-width grapheme joins the cell before it); whatever a view drew,
/// [`super::views::render`] ends with this, so no cell can make the operator's terminal
/// act.
pub fn scrub(buf: &mut Buffer, area: Rect) {
    let area = area.intersection(buf.area);
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            if let Some(clean) = crate::term::visible::clean_symbol(cell.symbol()) {
                cell.set_symbol(&clean);
            }
        }
    }
}

/// A rectangle of at most `w` x `h` centred in `area`.
/// The tone of a pane's state, wherever it is shown (the Panes view's titles, the Nodes
/// view's PANE column).
pub fn pane_tone(s: &crate::term::session::PaneState) -> crate::tui::theme::Tone {
    use crate::term::session::PaneState;
    use crate::tui::theme::Tone;
    match s {
        PaneState::Connected => Tone::Pass,
        PaneState::Connecting => Tone::Info,
        PaneState::Lost(_) | PaneState::Reconnecting { .. } => Tone::Warn,
        PaneState::Exited(_) | PaneState::Failed(_) => Tone::Fail,
    }
}

/// A dialog's box over `area` (centred, at most 100 columns, a margin around it), cleared
/// for drawing; `None` when there is no room at all.
pub fn dialog_area(area: Rect, buf: &mut ratatui::buffer::Buffer) -> Option<Rect> {
    let r = centered(
        area,
        area.width.saturating_sub(4).clamp(area.width.min(20), 100),
        area.height.saturating_sub(2).max(area.height.min(5)),
    );
    if r.is_empty() {
        return None;
    }
    ratatui::widgets::Widget::render(ratatui::widgets::Clear, r, buf);
    Some(r)
}

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

/// `text` cut into rows of `width` characters (at least one row), as a terminal wraps.
pub fn hard_wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod wrap_tests {
    #[test]
    fn scrub_clears_control_characters_from_cells() {
        use ratatui::text::Line;
        use ratatui::widgets::Widget;
        let area = Rect::new(0, 0, 30, 1);
        let mut buf = Buffer::empty(area);
        Line::raw("a\u{1b}]52;c;eA==\u{7}b\u{9b}2J").render(area, &mut buf);
        assert!(
            (0..30).any(|x| buf[(x, 0)].symbol().contains('\u{1b}')),
            "ratatui keeps ESC in a cell"
        );
        super::scrub(&mut buf, area);
        let row: String = (0..30).map(|x| buf[(x, 0)].symbol()).collect();
        assert!(!row.chars().any(char::is_control), "{row:?}");
        assert!(row.contains("]52;c;eA=="), "{row:?}");
        let mut shown = Buffer::empty(area);
        Line::raw(super::shown("a\u{1b}]52\u{7}\tb")).render(area, &mut shown);
        let row: String = (0..30).map(|x| shown[(x, 0)].symbol()).collect();
        assert!(row.starts_with("a␛]52^G b"), "{row:?}");
    }

    use super::*;

    #[test]
    fn hard_wrap_cuts_at_the_width() {
        assert_eq!(super::hard_wrap("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(super::hard_wrap("", 3), [""]);
        assert_eq!(super::hard_wrap("ab", 0), ["a", "b"]);
    }
}
