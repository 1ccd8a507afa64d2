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

use crate::tui::action::{Action, Context};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;
use crate::tui::widgets::{centered, wrap_words};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};
use tui_textarea::TextArea;

fn frame(title: &str, theme: &Theme, area: Rect, buf: &mut Buffer, h: u16) -> Rect {
    let w = area.width.saturating_sub(4).clamp(area.width.min(20), 78);
    frame_sized(title, theme, area, buf, w, h)
}

/// A bordered box of `w` x `h` centred in `area`, cleared, with `title`; its inside.
fn frame_sized(title: &str, theme: &Theme, area: Rect, buf: &mut Buffer, w: u16, h: u16) -> Rect {
    let r = centered(area, w, h);
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

/// A yes/no question ([`crate::tui::state::Ask`]), with the keys that answer it.
pub fn ask(a: &crate::tui::state::Ask, keymap: &Keymap, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let key = |action: Action| {
        keymap
            .chords(Context::Confirmation, action)
            .first()
            .map_or_else(|| "?".to_string(), |c| c.to_string())
    };
    let mut lines: Vec<Line> = a.lines.iter().map(|l| Line::raw(l.clone())).collect();
    lines.push(Line::raw(""));
    lines.push(Line::from(vec![
        Span::styled(key(Action::Confirm), theme.key_hint()),
        Span::raw(" yes   "),
        Span::styled(key(Action::Close), theme.key_hint()),
        Span::raw(" no"),
    ]));
    let w = area.width.saturating_sub(4).clamp(area.width.min(20), 78);
    // Wrapped lines take more rows: count them for the inner width.
    let inner_w = usize::from(w.saturating_sub(2)).max(1);
    let rows: usize = a
        .lines
        .iter()
        .map(|l| l.chars().count().div_ceil(inner_w).max(1))
        .sum::<usize>()
        + 2;
    let h = (rows as u16 + 2).min(area.height);
    let inner = frame_sized(&a.title, theme, area, buf, w, h);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
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

/// Apply or delete a fleet? Each resource of the plan with where it goes, its machine
/// type, NICs, provisioning model and price per hour, the total, and the keys of the
/// confirmation context (y / n, or the user's).
pub fn fleet_confirm(
    c: &crate::tui::fleets::Confirm,
    keymap: &Keymap,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let price = |p: Option<f64>| p.map_or_else(|| "$?/h".to_string(), |v| format!("${v:.2}/h"));
    use crate::tui::fleets::Op;
    let (title, question) = match &c.op {
        Op::Apply { file } => (format!("Apply {}", c.plan.fleet), format!("from {file}")),
        Op::Delete { name } => (format!("Delete {name}"), "everything below goes".to_string()),
    };
    let mut lines = vec![Line::styled(
        format!("{} backend · {question}", c.plan.backend),
        theme.muted(),
    )];
    let shown: Vec<&crate::cloud::Change> = c.plan.changes.iter().filter(|ch| ch.action != "keep").collect();
    if shown.is_empty() {
        lines.push(Line::raw("nothing to change: the fleet is as the file says"));
    }
    // Narrow screens put each resource's machine, NICs, model and price on a second line.
    let wide = area.width >= 110;
    for ch in &shown {
        let d = ch.cloud.clone().unwrap_or_default();
        let tone = if ch.action == "delete" {
            theme.tone(crate::tui::theme::Tone::Fail)
        } else {
            theme.tone(crate::tui::theme::Tone::Pass)
        };
        let mut cols = vec![
            Span::styled(format!("{:<7}", ch.action), tone),
            Span::raw(format!("{:<17}{:<22} {:<14}", ch.kind, ch.name, ch.place)),
        ];
        let detail = d.machine_type.as_ref().map(|m| {
            format!(
                "{:<15} {:<10} {:<10} {:>9}",
                m,
                d.nics.as_ref().map(|n| n.layout.as_str()).unwrap_or(""),
                d.provisioning_model.as_deref().unwrap_or(""),
                price(d.hourly_usd)
            )
        });
        match detail {
            Some(text) if wide => {
                cols.push(Span::raw(format!(" {text}")));
                lines.push(Line::from(cols));
            }
            Some(text) => {
                lines.push(Line::from(cols));
                lines.push(Line::styled(format!("         {text}"), theme.muted()));
            }
            None => lines.push(Line::from(cols)),
        }
    }
    let kept = c.plan.changes.len() - shown.len();
    if kept > 0 {
        lines.push(Line::styled(format!("{kept} kept as they are"), theme.muted()));
    }
    if let Some(total) = c.plan.hourly_usd {
        lines.push(Line::styled(format!("total {}", price(total)), theme.accent()));
    }
    if !c.plan.fallbacks.is_empty() {
        lines.push(Line::styled(
            format!("if out of capacity, then: {}", c.plan.fallbacks.join(", ")),
            theme.muted(),
        ));
    }
    // Notes are sentences: wrapped to the overlay's inner width, never cut.
    let inner_w = usize::from(
        area.width
            .saturating_sub(2)
            .clamp(area.width.min(20), 130)
            .saturating_sub(2),
    )
    .max(20);
    for n in &c.plan.notes {
        for l in wrap_words(&format!("note: {n}"), inner_w) {
            lines.push(Line::styled(l, theme.muted()));
        }
    }
    lines.push(Line::raw(""));
    let mut keys = vec![];
    for (action, what) in [(Action::Confirm, " go ahead   "), (Action::Close, " cancel")] {
        for (i, chord) in keymap.chords(Context::Confirmation, action).iter().enumerate() {
            if i > 0 {
                keys.push(Span::raw(" / "));
            }
            keys.push(Span::styled(chord.to_string(), theme.key_hint()));
        }
        keys.push(Span::raw(what));
    }
    lines.push(Line::from(keys));
    let h = (lines.len() as u16 + 2).min(area.height);
    let w = area.width.saturating_sub(2).clamp(area.width.min(20), 130);
    let inner = frame_sized(&title, theme, area, buf, w, h);
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
mod wrap_tests {
    #[test]
    fn words_wrap_within_the_width() {
        assert_eq!(
            crate::tui::widgets::wrap_words("note: a bb ccc", 6),
            vec!["note:", "a bb", "ccc"]
        );
        assert_eq!(
            crate::tui::widgets::wrap_words("abcdefgh", 3),
            vec!["abc", "def", "gh"]
        );
        assert!(crate::tui::widgets::wrap_words("", 5).is_empty());
    }
}
