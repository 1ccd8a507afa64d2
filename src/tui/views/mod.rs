//! Rendering: a pure function of the state and the theme.
//!
//! ```text
//!  flightdeck │ 1 Offers  2 Fleets  3 Nodes  4 Panes  5 NCCL  6 Jobs  7 NICs     <- tab bar
//! ┌ Offers ───────────────────────────────────────────────────────────────────┐
//! │                                                                           │
//! │                      the current view                                     │  <- body
//! │                                                                           │
//! └───────────────────────────────────────────────────────────────────────────┘
//!  Offers                          ? help  : command  / filter  tab next view   <- status bar
//! ```
//! Overlays (help, command palette) are drawn over the body; the filter entry takes the
//! status bar's row. Below [`MIN_WIDTH`] x [`MIN_HEIGHT`] only a "terminal too small"
//! line is drawn.

pub mod help;
pub mod planned;

use super::action::Context;
use super::state::{Overlay, State};
use super::theme::Theme;
use super::widgets::palette::{FilterWidget, PaletteWidget};
use super::widgets::status_bar::StatusBar;
use super::widgets::tabs::TabBar;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};
use ratatui::Frame;

pub const MIN_WIDTH: u16 = 20;
pub const MIN_HEIGHT: u16 = 5;

/// Draw the whole cockpit into the frame.
pub fn draw(state: &State, theme: &Theme, frame: &mut Frame) {
    let area = frame.area();
    render(state, theme, area, frame.buffer_mut());
}

/// Draw the whole cockpit into a buffer region.
pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut ratatui::buffer::Buffer) {
    if area.is_empty() {
        return;
    }
    buf.set_style(area, theme.base());
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal too small: {}x{}, need {MIN_WIDTH}x{MIN_HEIGHT}",
            area.width, area.height
        );
        Paragraph::new(Line::styled(msg, theme.tone(super::theme::Tone::Warn)))
            .wrap(Wrap { trim: true })
            .render(area, buf);
        return;
    }
    let [tabs, body, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
    TabBar {
        active: state.view,
        theme,
    }
    .render(tabs, buf);
    planned::render(state.view, state.filter(), theme, body, buf);

    let context = match state.overlay {
        Overlay::None => Context::Global,
        Overlay::Help { .. } => Context::Help,
        Overlay::Palette(_) | Overlay::Filter(_) => Context::Input,
    };
    match &state.overlay {
        Overlay::Filter(entry) => FilterWidget { entry, theme }.render(status, buf),
        _ => {
            let filter = state.filter();
            let left = if filter.is_empty() {
                state.view.title().to_string()
            } else {
                format!("{}  filter: {filter}", state.view.title())
            };
            StatusBar {
                theme,
                keymap: &state.keymap,
                context,
                filterable: state.view.has_table(),
                message: state.status.as_ref(),
                left,
            }
            .render(status, buf)
        }
    }
    match &state.overlay {
        Overlay::Help { scroll } => help::HelpOverlay {
            keymap: &state.keymap,
            scroll: *scroll,
            theme,
        }
        .render(body, buf),
        Overlay::Palette(palette) => PaletteWidget { palette, theme }.render(body, buf),
        Overlay::None | Overlay::Filter(_) => {}
    }
}
