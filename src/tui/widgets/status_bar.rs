//! The status bar: on the left a message (or the view and its filter), on the right key
//! hints generated from the keymap for the context that has the keys.

use crate::tui::action::Context;
use crate::tui::keymap::Keymap;
use crate::tui::state::{StatusMessage, View};
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

pub struct StatusBar<'a> {
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub context: Context,
    /// Whether the current view has a table (else the filter hint is left out).
    pub filterable: bool,
    /// The view shown (its own keys are hinted only there).
    pub view: View,
    pub message: Option<&'a StatusMessage>,
    /// Shown when there is no message.
    pub left: String,
}

impl Widget for StatusBar<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        buf.set_style(area, self.theme.status_bar());
        let width = usize::from(area.width);
        // Hints, dropped from the right until they leave room for some message text.
        let mut hints: Vec<(String, &str)> = self
            .keymap
            .hints_in(self.context, self.view)
            .into_iter()
            .filter(|(_, label)| self.filterable || *label != "filter")
            .collect();
        let hint_width = |h: &[(String, &str)]| {
            h.iter()
                .map(|(k, l)| k.chars().count() + l.len() + 3)
                .sum::<usize>()
        };
        // A warning or failure gets the whole bar.
        if self
            .message
            .is_some_and(|m| matches!(m.tone, Tone::Warn | Tone::Fail))
        {
            hints.clear();
        }
        let left_min = 12.min(width / 2);
        while !hints.is_empty() && hint_width(&hints) + left_min > width {
            hints.pop();
        }
        let hints_w = hint_width(&hints);
        let (text, style) = match self.message {
            Some(m) => (m.text.as_str(), self.theme.tone(m.tone)),
            None => (self.left.as_str(), self.theme.status_bar()),
        };
        let left_w = width.saturating_sub(hints_w + 1);
        let left = super::truncate(&format!(" {text}"), left_w);
        let pad = width.saturating_sub(left.chars().count() + hints_w);
        let mut spans = vec![Span::styled(left, style), Span::raw(" ".repeat(pad))];
        for (key, label) in hints {
            spans.push(Span::styled(key, self.theme.key_hint()));
            spans.push(Span::styled(format!(" {label}  "), self.theme.status_bar()));
        }
        Line::from(spans).render(area, buf);
    }
}
