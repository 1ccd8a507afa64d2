//! The `:` command palette (a popup with the entry and its completions) and the `/`
//! filter entry (in place of the status bar). Both edit with tui-textarea.
//!
//! ```text
//! ┌ command ─────────────────────────────────┐
//! │:ni█                                      │
//! │ nics      go to the NICs view            │
//! │ nodes     go to the Nodes view           │
//! └──────────────────────────────────────────┘
//! ```

use crate::tui::state::{FilterEntry, Palette};
use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};
use tui_textarea::TextArea;

/// Most completions shown at once.
pub const MAX_SHOWN: usize = 8;

fn styled_input(input: &TextArea<'static>, theme: &Theme) -> TextArea<'static> {
    let mut ta = input.clone();
    ta.set_style(theme.base());
    ta.set_cursor_line_style(Style::new());
    ta.set_cursor_style(theme.base().add_modifier(Modifier::REVERSED));
    ta
}

/// Render a prompt character followed by the text entry into one row.
fn entry_row(prompt: &str, input: &TextArea<'static>, theme: &Theme, row: Rect, buf: &mut Buffer) {
    if row.is_empty() {
        return;
    }
    buf.set_style(row, theme.base());
    Span::styled(prompt, theme.accent()).render(row, buf);
    let pw = prompt.chars().count() as u16;
    if row.width > pw {
        let text = Rect {
            x: row.x + pw,
            width: row.width - pw,
            ..row
        };
        Widget::render(&styled_input(input, theme), text, buf);
    }
}

pub struct PaletteWidget<'a> {
    pub palette: &'a Palette,
    pub theme: &'a Theme,
}

impl PaletteWidget<'_> {
    /// Where the popup goes in `screen`: centred horizontally, near the top.
    pub fn area(&self, screen: Rect) -> Rect {
        let shown = self.palette.candidates.len().min(MAX_SHOWN) as u16;
        let w = screen.width.saturating_sub(4).clamp(screen.width.min(20), 72);
        let h = (3 + shown).min(screen.height);
        let x = screen.x + (screen.width - w) / 2;
        let y = screen.y + (screen.height.saturating_sub(h)).min(2);
        Rect {
            x,
            y,
            width: w,
            height: h,
        }
    }
}

impl Widget for PaletteWidget<'_> {
    fn render(self, screen: Rect, buf: &mut Buffer) {
        let area = self.area(screen);
        if area.is_empty() {
            return;
        }
        Clear.render(area, buf);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(self.theme.border(true))
            .title(Span::styled(" command ", self.theme.title()))
            .style(self.theme.base());
        let inner = block.inner(area);
        block.render(area, buf);
        if inner.is_empty() {
            return;
        }
        entry_row(
            ":",
            &self.palette.input,
            self.theme,
            Rect { height: 1, ..inner },
            buf,
        );
        let list = Rect {
            y: inner.y + 1,
            height: inner.height - 1,
            ..inner
        };
        let n = usize::from(list.height);
        // Keep the selection in sight.
        let first = match self.palette.selected {
            Some(s) if s >= n => s + 1 - n,
            _ => 0,
        };
        let key_w = self
            .palette
            .candidates
            .iter()
            .map(|c| c.line.chars().count())
            .max()
            .unwrap_or(0)
            .min(24);
        for (row, (i, c)) in self
            .palette
            .candidates
            .iter()
            .enumerate()
            .skip(first)
            .take(n)
            .enumerate()
        {
            let style = if Some(i) == self.palette.selected {
                self.theme.selection()
            } else {
                self.theme.base()
            };
            let line = Line::from(vec![
                Span::styled(
                    format!(" {:<key_w$}  ", c.line),
                    style.add_modifier(Modifier::BOLD),
                ),
                Span::styled(
                    c.about.clone(),
                    if Some(i) == self.palette.selected {
                        style
                    } else {
                        self.theme.muted()
                    },
                ),
            ]);
            let r = Rect {
                y: list.y + row as u16,
                height: 1,
                ..list
            };
            buf.set_style(r, style);
            line.render(r, buf);
        }
    }
}

pub struct FilterWidget<'a> {
    pub entry: &'a FilterEntry,
    pub theme: &'a Theme,
}

impl Widget for FilterWidget<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        entry_row(
            "/",
            &self.entry.input,
            self.theme,
            Rect {
                height: area.height.min(1),
                ..area
            },
            buf,
        );
    }
}
