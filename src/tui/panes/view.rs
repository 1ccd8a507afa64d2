//! The Panes view: a tile per node in a grid that adapts to the node count, each a live
//! terminal. The focused tile's border is highlighted; marked tiles show `+`; in insert
//! mode the cursor sits in the focused pane. Copy mode replaces the focused tile's
//! content with its scrollback snapshot, a cursor line and the selection.
//!
//! ```text
//! ┌ lab-0 ● connected ─────────────┐┌ lab-1 ● connected ──────────────┐
//! │root@node0:~# nvidia-smi -L      ││root@node1:~#                    │
//! │GPU 0: NVIDIA H200 (UUID: …)     ││                                 │
//! └─────────────────────────────────┘└─────────────────────────────────┘
//! ┌+lab-2 ▲ reconnecting in 4s ─────┐┌ lab-3 ● connected ──────────────┐
//! ```

use crate::term::session::PaneState;
use crate::tui::panes::{self, CopyMode};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

pub use crate::tui::widgets::pane_tone as tone;

fn marker(s: &PaneState) -> &'static str {
    match s {
        PaneState::Connected => "●",
        PaneState::Connecting => "○",
        PaneState::Lost(_) | PaneState::Reconnecting { .. } => "▲",
        PaneState::Exited(_) | PaneState::Failed(_) => "✖",
    }
}

/// A pane title's node name in `room` cells less `rest` (the marks and the state beside
/// it): whole when it fits, else its end (`…fleet1-0`: the index and the state stay, the
/// common start of the fleet's node names goes).
fn title_name(node: &str, room: usize, rest: usize) -> String {
    crate::tui::widgets::table::fit(
        node,
        room.saturating_sub(rest).max(8),
        crate::tui::widgets::table::Cut::Start,
    )
}

/// Draw the panes into `area` (the body); returns the cursor position for insert mode.
pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) -> Option<(u16, u16)> {
    let p = &state.panes;
    if p.tiles.is_empty() {
        let text = vec![
            Line::styled("No panes open.", theme.title()),
            Line::raw(""),
            Line::raw("Open a shell on every node of a fleet: select it in Fleets (2) and press Enter,"),
            Line::raw("or type :open NAME. Then i types into the focused pane, b broadcasts to all,"),
            Line::raw("z zooms, m marks, [ enters copy mode, ctrl-] stops typing."),
        ];
        Paragraph::new(text)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.border(true))
                    .title(" Panes ")
                    .style(theme.base()),
            )
            .wrap(Wrap { trim: false })
            .render(area, buf);
        return None;
    }
    // The grid is laid out for the body area `update` assumes.
    let g = panes::grid(area, p.tiles.len(), p.zoom.then_some(p.focus), p.page);
    let mut cursor = None;
    let targets = p.targets();
    let hidden = p.hidden_targets(&g);
    let broadcasting = p.broadcast != panes::Broadcast::Off;
    for &(idx, rect) in &g.cells {
        let tile = &p.tiles[idx];
        let focused = idx == p.focus;
        let targeted = (p.insert || broadcasting) && targets.contains(&tile.id);
        let state_text = format!(
            "{} {} ",
            marker(&tile.state),
            crate::tui::widgets::shown(&tile.state.label())
        );
        let focus = if focused { theme.focus_marker() } else { "" };
        let node = title_name(
            &crate::tui::widgets::shown(&tile.node),
            usize::from(rect.width.saturating_sub(2)),
            1 + focus.chars().count() + 1 + state_text.chars().count(),
        );
        let mut title = vec![
            Span::styled(if tile.marked { "+" } else { " " }, theme.accent()),
            Span::styled(
                format!("{focus}{node} "),
                if focused { theme.title() } else { theme.base() },
            ),
            Span::styled(state_text, theme.tone(tone(&tile.state))),
        ];
        // Every pane keys go to says so while broadcasting, and how many others get them
        // unseen.
        if targeted {
            let mark = match (broadcasting, p.insert) {
                (true, true) => "⌨ broadcast ",
                (true, false) => "⇶ broadcast ",
                _ => "⌨ ",
            };
            title.push(Span::styled(mark, theme.accent()));
            if focused && !hidden.is_empty() {
                title.push(Span::styled(
                    format!("+{} not shown ", hidden.len()),
                    theme.tone(crate::tui::theme::Tone::Warn),
                ));
            }
        }
        let border = if targeted && broadcasting {
            theme.accent()
        } else {
            theme.border(focused)
        };
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(border)
            .title(Line::from(title))
            .style(theme.base());
        let inner = block.inner(rect);
        Clear.render(rect, buf);
        block.render(rect, buf);
        if let (true, Some(copy)) = (focused, p.copy.as_ref()) {
            render_copy(copy, theme, inner, buf);
            continue;
        }
        let term = tile.screen.read().unwrap_or_else(|e| e.into_inner());
        if let Some(&offset) = p.scrolled.get(&tile.id) {
            render_scrolled(&term, offset, theme, inner, buf);
            continue;
        }
        let at = crate::term::render_screen(term.screen(), inner, buf, theme.screen_colors());
        if focused && p.insert {
            cursor = at;
        }
    }
    if g.pages > 1 {
        let label = format!(" page {}/{} (pgup/pgdn) ", p.page.min(g.pages - 1) + 1, g.pages);
        let w = label.chars().count() as u16;
        if area.width > w + 2 {
            buf.set_string(
                area.right() - w - 1,
                area.bottom().saturating_sub(1),
                label,
                theme.accent(),
            );
        }
    }
    cursor
}

/// A pane the wheel scrolled: its lines wrapped to the pane, `offset` rows above the
/// bottom, and where it is at the top right, as tmux's `[12/340]`.
fn render_scrolled(term: &crate::term::PaneTerm, offset: usize, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let (rows, total) = term.scrolled_rows(area.width, area.height, offset);
    // Fewer rows than the pane: they sit at the top, as the screen's do.
    for (i, r) in rows.iter().enumerate() {
        buf.set_string(area.x, area.y + i as u16, r, theme.base());
    }
    let at = format!("[{offset}/{}]", total.saturating_sub(usize::from(area.height)));
    let w = at.chars().count() as u16;
    if area.width > w {
        buf.set_string(area.right() - w, area.y, at, theme.selection());
    }
}

fn render_copy(c: &CopyMode, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    let h = usize::from(area.height.saturating_sub(1)).max(1);
    let width = usize::from(area.width);
    // Long lines wrap over several rows (never cut); the cursor's line stays in view,
    // near the bottom like a terminal.
    let wrapped = |i: usize| crate::term::wrap_chars(&c.lines[i], width);
    let mut first = c.cursor.min(c.lines.len().saturating_sub(1));
    let mut used = if c.lines.is_empty() {
        0
    } else {
        wrapped(first).len()
    };
    while first > 0 {
        let more = wrapped(first - 1).len();
        if used + more > h {
            break;
        }
        used += more;
        first -= 1;
    }
    let sel = c.selection();
    let needle = c
        .search
        .as_ref()
        .map(|s| s.to_lowercase())
        .filter(|s| !s.is_empty());
    let mut row = 0usize;
    // The cursor's line alone may be taller than the pane: its end is what shows.
    let skip = if c.lines.is_empty() {
        0
    } else {
        wrapped(first).len().saturating_sub(h)
    };
    for i in first..c.lines.len() {
        if row >= h {
            break;
        }
        let line = &c.lines[i];
        let style = if i == c.cursor {
            theme.selection()
        } else if c.anchor.is_some() && sel.contains(&i) {
            theme.accent()
        } else if needle.as_ref().is_some_and(|n| line.to_lowercase().contains(n)) {
            theme.tone(Tone::Warn)
        } else {
            theme.base()
        };
        let parts = wrapped(i);
        let from = if i == first { skip } else { 0 };
        for part in &parts[from..] {
            if row >= h {
                break;
            }
            let r = Rect::new(area.x, area.y + row as u16, area.width, 1);
            buf.set_style(r, style);
            buf.set_string(r.x, r.y, part, style);
            row += 1;
        }
    }
    let status = match &c.typing {
        Some(t) => format!("/{t}"),
        None => format!(
            "COPY {}/{}{}  v select  y yank  / search  esc",
            c.cursor + 1,
            c.lines.len(),
            if c.anchor.is_some() {
                format!("  {} selected", sel.count())
            } else {
                String::new()
            }
        ),
    };
    let r = Rect::new(area.x, area.bottom() - 1, area.width, 1);
    buf.set_style(r, theme.status_bar());
    buf.set_string(
        r.x,
        r.y,
        crate::words::truncate(&status, usize::from(area.width)),
        theme.status_bar(),
    );
}
