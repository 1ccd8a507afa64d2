//! The tab bar: `flightdeck │ 1 Offers  2 Fleets ...`, the active view highlighted.
//! When they do not fit, the brand goes first; when the labels alone do not fit, only
//! the active view keeps its name.

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

const BRAND: &str = " flightdeck ";

/// The tab bar's layout in `width` columns with `active` shown: whether the brand shows,
/// and each view's label with the column it starts at. Drawing and mouse clicks both
/// use it.
pub fn layout(width: u16, active: View) -> (bool, Vec<(View, String, u16)>) {
    let full: Vec<String> = View::ALL
        .iter()
        .enumerate()
        .map(|(i, v)| format!(" {} {} ", i + 1, v.title()))
        .collect();
    let tabs_width: usize = full.iter().map(|l| l.chars().count()).sum::<usize>();
    // The brand goes first, then the labels of the tabs not shown.
    let brand = BRAND.len() + 1 + tabs_width <= usize::from(width);
    let compact = tabs_width > usize::from(width);
    let mut x: u16 = if brand { BRAND.len() as u16 + 1 } else { 0 };
    let mut tabs = vec![];
    for (i, v) in View::ALL.iter().enumerate() {
        let label = if compact && *v != active {
            format!(" {} ", i + 1)
        } else {
            full[i].clone()
        };
        let w = label.chars().count() as u16;
        tabs.push((*v, label, x));
        x = x.saturating_add(w);
    }
    (brand, tabs)
}

/// The view whose tab is at column `x` of the tab bar.
pub fn tab_at(x: u16, width: u16, active: View) -> Option<View> {
    let (_, tabs) = layout(width, active);
    tabs.into_iter()
        .find(|(_, label, at)| x >= *at && x < at + label.chars().count() as u16)
        .map(|(v, _, _)| v)
}

impl Widget for TabBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        buf.set_style(area, self.theme.status_bar());
        let (brand, tabs) = layout(area.width, self.active);
        let mut spans = Vec::new();
        if brand {
            spans.push(Span::styled(BRAND, self.theme.accent()));
            spans.push(Span::styled("│", self.theme.muted()));
        }
        for (v, label, _) in tabs {
            spans.push(Span::styled(label, self.theme.tab(v == self.active)));
        }
        Line::from(spans).render(area, buf);
    }
}
