//! The tab bar: `flightdeck │ 1 Offers  2 Fleets ...`, the active view highlighted.
//! When the full labels do not fit, only the active view keeps its name.

use crate::tui::state::View;
use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

pub struct TabBar<'a> {
    pub active: View,
    pub theme: &'a Theme,
}

impl Widget for TabBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        buf.set_style(area, self.theme.status_bar());
        let full: Vec<String> = View::ALL
            .iter()
            .enumerate()
            .map(|(i, v)| format!(" {} {} ", i + 1, v.title()))
            .collect();
        let brand = " flightdeck ";
        let full_width: usize = brand.len() + 1 + full.iter().map(|l| l.chars().count()).sum::<usize>();
        let compact = full_width > usize::from(area.width);
        let mut spans = Vec::new();
        if !compact {
            spans.push(Span::styled(brand, self.theme.accent()));
            spans.push(Span::styled("│", self.theme.muted()));
        }
        for (i, v) in View::ALL.iter().enumerate() {
            let active = *v == self.active;
            let label = if compact && !active {
                format!(" {} ", i + 1)
            } else {
                full[i].clone()
            };
            spans.push(Span::styled(label, self.theme.tab(active)));
        }
        Line::from(spans).render(area, buf);
    }
}
