//! Questions only the operator can answer, over everything else: an SSH host's unknown
//! key (y / n / a), an encrypted key's passphrase (typed masked).
//!
//! ```text
//! ┌ Unknown host key ────────────────────────────────────┐
//! │ root@10.88.0.3 offers a key known_hosts does not have │
//! │ SHA256:Ehb0…                                          │
//! │ y accept and remember   n refuse   a accept all new   │
//! └──────────────────────────────────────────────────────┘
//! ```

use crate::tui::theme::Theme;
use crate::tui::widgets::centered;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};
use tui_textarea::TextArea;

fn frame(title: &str, theme: &Theme, area: Rect, buf: &mut Buffer, h: u16) -> Rect {
    let r = centered(
        area,
        area.width.saturating_sub(4).clamp(area.width.min(20), 78),
        h,
    );
    Clear.render(r, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(format!(" {title} "), theme.title()))
        .style(theme.base());
    let inner = block.inner(r);
    block.render(r, buf);
    inner
}

pub fn host_key(host: &str, fingerprint: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let inner = frame("Unknown host key", theme, area, buf, 7);
    let lines = vec![
        Line::raw(format!("{host} offers a key that known_hosts does not have:")),
        Line::styled(fingerprint.to_string(), theme.accent()),
        Line::raw(""),
        Line::from(vec![
            Span::styled("y", theme.key_hint()),
            Span::raw(" accept and remember   "),
            Span::styled("n", theme.key_hint()),
            Span::raw(" refuse   "),
            Span::styled("a", theme.key_hint()),
            Span::raw(" accept all new keys"),
        ]),
    ];
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

pub fn passphrase(key: &str, input: &TextArea<'static>, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let inner = frame("Key passphrase", theme, area, buf, 5);
    if inner.height == 0 {
        return;
    }
    Line::raw(format!(
        "Passphrase for {key} (enter to use, esc to skip the key):"
    ))
    .render(Rect { height: 1, ..inner }, buf);
    if inner.height > 1 {
        let mut ta = input.clone();
        ta.set_style(theme.base());
        ta.set_cursor_line_style(Style::new());
        ta.set_cursor_style(theme.base().add_modifier(Modifier::REVERSED));
        Widget::render(
            &ta,
            Rect {
                y: inner.y + 2.min(inner.height - 1),
                height: 1,
                ..inner
            },
            buf,
        );
    }
}
