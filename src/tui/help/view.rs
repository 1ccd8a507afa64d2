//! The `?` help overlay, generated from the keymap (and the palette's command list), so
//! it always shows the keys that really work.
//!
//! ```text
//! ┌ Help: keys and commands (esc closes) ─────────┐
//! │ Cockpit                                       │
//! │   ?, f1            show this help             │
//! │   :                open the command palette   │
//! │ ...                                           │
//! └───────────────────────────────────────────────┘
//! ```

use crate::tui::action::Context;
use crate::tui::keymap::Keymap;
use crate::tui::state::View;
use crate::tui::theme::Theme;
use crate::tui::update::PALETTE_COMMANDS;
use crate::tui::widgets::{centered, truncate};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelpLine {
    Section(String),
    Entry { keys: String, what: String },
    Blank,
}

/// The overlay's lines: one section per key context, then the palette commands.
pub fn lines(keymap: &Keymap) -> Vec<HelpLine> {
    let mut out = Vec::new();
    for ctx in Context::ALL {
        out.push(HelpLine::Section(ctx.title().to_string()));
        for b in keymap.bindings().iter().filter(|b| b.context == ctx) {
            let keys = if b.chords.is_empty() {
                "(unbound)".to_string()
            } else {
                b.chords
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(HelpLine::Entry {
                keys,
                what: format!("{} ({})", b.action.description(), b.action.name()),
            });
        }
        out.push(HelpLine::Blank);
    }
    out.push(HelpLine::Section("Palette commands".to_string()));
    let views: Vec<&str> = View::ALL.iter().map(|v| v.command()).collect();
    out.push(HelpLine::Entry {
        keys: ":VIEW".into(),
        what: format!("go to a view: {}", views.join(", ")),
    });
    for (name, arg, about) in PALETTE_COMMANDS {
        let keys = if arg.is_empty() {
            format!(":{name}")
        } else {
            format!(":{name} {arg}")
        };
        out.push(HelpLine::Entry {
            keys,
            what: about.to_string(),
        });
    }
    out
}

/// The widest the keys column gets; longer key lists are cut with '…'.
const KEYS_WIDTH: usize = 22;

pub struct HelpOverlay<'a> {
    pub keymap: &'a Keymap,
    pub scroll: usize,
    pub theme: &'a Theme,
}

/// The area of a full-height overlay over `body` (the help, the messages): centred, at
/// most `max_w` wide, cleared; `None` when nothing fits.
fn overlay_area(body: Rect, max_w: u16, buf: &mut Buffer) -> Option<Rect> {
    let h = if body.height >= 10 {
        body.height - 2
    } else {
        body.height
    };
    let area = centered(
        body,
        body.width.saturating_sub(4).max(body.width.min(20)).min(max_w),
        h,
    );
    if area.is_empty() {
        return None;
    }
    Clear.render(area, buf);
    Some(area)
}

impl Widget for HelpOverlay<'_> {
    fn render(self, body: Rect, buf: &mut Buffer) {
        let Some(area) = overlay_area(body, 96, buf) else {
            return;
        };
        let all = lines(self.keymap);
        let key_w = all
            .iter()
            .filter_map(|l| match l {
                HelpLine::Entry { keys, .. } => Some(keys.chars().count()),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            .min(KEYS_WIDTH);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(self.theme.border(true))
            .title(Span::styled(
                " Help: keys and commands (esc closes) ",
                self.theme.title(),
            ))
            .style(self.theme.base());
        let inner_h = usize::from(block.inner(area).height);
        let max_scroll = all.len().saturating_sub(inner_h);
        let scroll = self.scroll.min(max_scroll);
        let text: Vec<Line> = all
            .iter()
            .skip(scroll)
            .take(inner_h)
            .map(|l| match l {
                HelpLine::Section(s) => Line::styled(s.clone(), self.theme.title()),
                HelpLine::Entry { keys, what } => Line::from(vec![
                    Span::styled(
                        format!("  {:<key_w$}  ", truncate(keys, key_w)),
                        self.theme.key_hint(),
                    ),
                    Span::styled(what.clone(), self.theme.base()),
                ]),
                HelpLine::Blank => Line::raw(""),
            })
            .collect();
        Paragraph::new(text).block(block).render(area, buf);
    }
}

/// The message history (`M`, `:messages`): every status message of the session, whole and
/// wrapped, the newest last; `scroll` is the first message shown (clamped so that the
/// last page is full).
pub fn messages(
    all: &std::collections::VecDeque<crate::tui::state::StatusMessage>,
    scroll: usize,
    theme: &Theme,
    body: Rect,
    buf: &mut Buffer,
) {
    let Some(area) = overlay_area(body, 120, buf) else {
        return;
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(
            format!(" Messages ({}, newest last; esc closes) ", all.len()),
            theme.title(),
        ))
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    if all.is_empty() {
        Paragraph::new(Line::styled("No messages yet.", theme.muted())).render(inner, buf);
        return;
    }
    // Each message wrapped at the edge; the last page kept full.
    let w = usize::from(inner.width);
    // A message may carry what a node or an API said: shown, never acted on.
    let rows = |m: &crate::tui::state::StatusMessage| {
        crate::tui::widgets::hard_wrap(&crate::tui::widgets::shown(&m.text), w)
    };
    let mut first = all.len();
    let mut used = 0;
    while first > 0 && used + rows(&all[first - 1]).len() <= usize::from(inner.height) {
        used += rows(&all[first - 1]).len();
        first -= 1;
    }
    let start = scroll.min(first);
    let lines: Vec<Line> = all
        .iter()
        .skip(start)
        .flat_map(|m| {
            rows(m)
                .into_iter()
                .map(move |r| Line::styled(r, theme.tone(m.tone)))
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}
