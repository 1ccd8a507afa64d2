//! Pieces the table views share (Fleets, Nodes): a titled block that names the filter,
//! whole-page paging, and a message in place of a table.

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

pub fn block<'a>(title: String, filter: &str, theme: &Theme) -> Block<'a> {
    let mut t = vec![Span::styled(format!(" {title} "), theme.title())];
    if !filter.is_empty() {
        t.push(Span::styled(format!("filter: {filter} "), theme.accent()));
    }
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(t))
        .style(theme.base())
}

/// The rows of a table in `area` (borders and header off) that show `total` rows with
/// row `selected` on screen: whole pages, so paging moves by a screenful; and how the
/// title says where it is (`rows 41–80 of 1024`) when there is more than one page.
pub fn page_of(area: Rect, total: usize, selected: usize) -> (std::ops::Range<usize>, String) {
    let per = usize::from(area.height.saturating_sub(3)).max(1);
    let first = (selected.min(total.saturating_sub(1)) / per) * per;
    let range = first..(first + per).min(total);
    let label = if total > per {
        format!(" · rows {}–{} of {total}", range.start + 1, range.end)
    } else {
        String::new()
    };
    (range, label)
}

pub fn message(lines: Vec<Line<'static>>, block: Block<'_>, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
