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

pub mod question;

use super::action::Context;
use super::state::{Overlay, State, View};
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
    if let Some((x, y)) = render(state, theme, area, frame.buffer_mut()) {
        frame.set_cursor_position((x, y));
    }
}

/// Draw the whole cockpit into a buffer region; returns where the terminal cursor
/// belongs (typing into a pane), if anywhere. Whatever a view drew, no cell holds a
/// control character when this returns ([`super::widgets::scrub`]).
pub fn render(
    state: &State,
    theme: &Theme,
    area: Rect,
    buf: &mut ratatui::buffer::Buffer,
) -> Option<(u16, u16)> {
    let cursor = render_views(state, theme, area, buf);
    super::widgets::scrub(buf, area);
    cursor
}

fn render_views(
    state: &State,
    theme: &Theme,
    area: Rect,
    buf: &mut ratatui::buffer::Buffer,
) -> Option<(u16, u16)> {
    if area.is_empty() {
        return None;
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
        return None;
    }
    let [tabs, body, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
    TabBar {
        active: state.view,
        theme,
    }
    .render(tabs, buf);
    let mut cursor = None;
    match state.view {
        View::Fleets => super::fleets::view::render_fleets(state, theme, body, buf),
        View::Nodes => super::nodes::view::render_nodes(state, theme, body, buf),
        View::Panes => cursor = super::panes::view::render(state, theme, body, buf),
        View::Offers => super::offers::view::render(state, theme, body, buf),
        View::Nccl => super::nccl::view::render(state, theme, body, buf),
        View::Nics => super::nics::view::render(state, theme, body, buf),
        View::Doctor => super::doctor::view::render(state, theme, body, buf),
        View::Jobs => super::jobs::view::render(state, theme, body, buf),
    }

    let context = crate::tui::update::context(state);
    match &state.overlay {
        Overlay::Filter(entry) => {
            FilterWidget { entry, theme }.render(status, buf);
            // A bad Offers query: its caret under the text being typed, and why.
            if let (View::Offers, Some(e)) = (state.view, &state.offers.error) {
                if status.y > body.y {
                    let row = Rect {
                        y: status.y - 1,
                        height: 1,
                        ..status
                    };
                    let line = format!(" {} {}", e.underline(), e.message);
                    ratatui::widgets::Clear.render(row, buf);
                    buf.set_style(row, theme.base());
                    Line::styled(line, theme.tone(super::theme::Tone::Fail)).render(row, buf);
                }
            }
        }
        _ => {
            let left = status_left(state);
            let bar = StatusBar {
                theme,
                keymap: &state.keymap,
                context,
                filterable: state.view.has_table(),
                view: state.view,
                message: state.status.as_ref(),
                left,
            };
            // A long warning or failure takes rows over the view's bottom.
            let extra = (bar.rows(status.width) - 1).min(body.height.saturating_sub(3));
            let area = Rect {
                y: status.y - extra,
                height: extra + 1,
                ..status
            };
            ratatui::widgets::Clear.render(area, buf);
            bar.render(area, buf)
        }
    }
    match &state.overlay {
        Overlay::Help { scroll } => super::help::view::HelpOverlay {
            keymap: &state.keymap,
            view: state.view,
            scroll: *scroll,
            theme,
        }
        .render(body, buf),
        Overlay::Messages { scroll } => {
            super::help::view::messages(&state.messages, *scroll, theme, body, buf)
        }
        Overlay::Palette(palette) => PaletteWidget { palette, theme }.render(body, buf),
        Overlay::HostKey {
            host, fingerprint, ..
        } => question::host_key(host, fingerprint, theme, body, buf),
        Overlay::Passphrase { key, input, .. } => question::passphrase(key, input, theme, body, buf),
        Overlay::FleetConfirm(c) => question::fleet_confirm(c, &state.keymap, theme, body, buf),
        Overlay::Ask(a) => question::ask(a, &state.keymap, theme, body, buf),
        Overlay::None | Overlay::Filter(_) => {}
    }
    // The cursor shows only while typing into a pane with nothing over it.
    cursor.filter(|_| matches!(state.overlay, Overlay::None))
}

/// The status bar's left side: the view, and what mode the Panes view is in.
fn status_left(state: &State) -> String {
    let filter = state.filter();
    let mut s = state.view.title().to_string();
    if state.view == View::Panes {
        let p = &state.panes;
        if let Some(f) = &p.fleet {
            s = format!("Panes {f} ({})", crate::words::plural(p.tiles.len(), "node"));
        }
        if p.copy.is_some() {
            s.push_str("  COPY");
        } else if p.insert {
            let leave = state
                .keymap
                .chords(Context::Pane, crate::tui::action::Action::Close);
            let leave = leave.first().map(|c| c.to_string()).unwrap_or_default();
            s.push_str(&format!("  TYPING ({leave} stops)"));
        }
        if p.broadcast != crate::tui::panes::Broadcast::Off {
            s.push_str(&format!("  broadcast: {}", p.broadcast.label()));
        }
    }
    if !filter.is_empty() {
        s.push_str(&format!("  filter: {filter}"));
    }
    s
}
