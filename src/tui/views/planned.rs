//! Views whose features have not landed yet: each says what it will show, so the
//! navigation and layout are real and honest about what is missing.

use crate::tui::state::View;
use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

/// What each view will show, one line per feature.
pub fn plan(view: View) -> &'static [&'static str] {
    match view {
        View::Jobs => &[
            "Training jobs launched with torchrun on every node, detached so they survive you",
            "Live logs per node; loss, step time, tokens/s and MFU charted from the logs",
        ],
        // These views are built; nothing is planned for them here.
        View::Offers | View::Fleets | View::Nodes | View::Panes | View::Nccl | View::Nics => &[],
    }
}

pub fn render(view: View, filter: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let mut title = vec![Span::styled(format!(" {} ", view.title()), theme.title())];
    if !filter.is_empty() {
        title.push(Span::styled(format!("filter: {filter} "), theme.accent()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(title))
        .style(theme.base());
    let mut lines = vec![Line::styled("This view will show:", theme.title()), Line::raw("")];
    for item in plan(view) {
        lines.push(Line::from(vec![
            Span::styled(" • ", theme.accent()),
            Span::styled(*item, theme.base()),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Not built yet: nothing here is live.",
        theme.muted(),
    ));
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
