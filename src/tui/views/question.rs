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
use crate::tui::widgets::centered;
use crate::words::wrap_words;
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

/// Apply or delete a fleet? What costs money first: the resources with a machine type
/// (instances) with their zone, NICs, provisioning model and price, then the total, where
/// apply tries next and the notes; then the other resources, one line each when the
/// dialog has the rows, else counted per kind (`create 9 networks, 10 firewalls`), then
/// with the fallbacks shortened and the same instances counted; then the keys of the
/// confirmation context (y / n, or the user's). Whatever still does not
/// fit is said to be cut, on the line above the keys, so `y` is never pressed over lines
/// the operator could not see without knowing it.
pub fn fleet_confirm(
    c: &crate::tui::fleets::Confirm,
    keymap: &Keymap,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    use crate::tui::theme::Tone;
    let price = |p: Option<f64>| p.map_or_else(|| "$?/h".to_string(), |v| format!("${v:.2}/h"));
    use crate::tui::fleets::Op;
    let (title, question) = match &c.op {
        Op::Apply { file, .. } => (format!("Apply {}", c.plan.fleet), format!("from {file}")),
        Op::Delete { name } if c.plan.changes.iter().all(|ch| ch.action == "forget") => (
            format!("Forget {name}"),
            "the hosts below stay as they are".to_string(),
        ),
        Op::Delete { name } => (format!("Delete {name}"), "everything below goes".to_string()),
    };
    let w = area.width.saturating_sub(2).clamp(area.width.min(20), 130);
    let inner_w = usize::from(w.saturating_sub(2)).max(20);
    let tone = |action: &str| {
        if action == "delete" {
            theme.tone(Tone::Fail)
        } else if action == "forget" {
            theme.tone(Tone::Warn)
        } else {
            theme.tone(Tone::Pass)
        }
    };
    let mut top = vec![Line::styled(
        format!("{} backend · {question}", c.plan.backend),
        theme.muted(),
    )];
    let shown: Vec<&crate::cloud::Change> = c.plan.changes.iter().filter(|ch| ch.action != "keep").collect();
    if shown.is_empty() {
        top.push(Line::raw("nothing to change: the fleet is as the file says"));
    }
    let (priced, others): (Vec<&crate::cloud::Change>, Vec<&crate::cloud::Change>) = shown
        .iter()
        .partition(|ch| ch.cloud.as_ref().is_some_and(|d| d.machine_type.is_some()));
    // Narrow screens put each resource's machine, NICs, model and price on a second line.
    let wide = area.width >= 110;
    let item = |ch: &crate::cloud::Change| -> Vec<Line<'static>> {
        let d = ch.cloud.clone().unwrap_or_default();
        let mut cols = vec![
            Span::styled(format!("{:<7}", ch.action), tone(ch.action)),
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
                vec![Line::from(cols)]
            }
            Some(text) => vec![
                Line::from(cols),
                Line::styled(format!("         {text}"), theme.muted()),
            ],
            None => vec![Line::from(cols)],
        }
    };
    let instances: Vec<Line> = priced.iter().flat_map(|ch| item(ch)).collect();
    // The same machine in the same place at the same price, counted: `create 64
    // instances us-east4-a` over `a3-megagpu-8g 1+8 GVNIC SPOT $16.60/h each`.
    let mut same: Vec<(&crate::cloud::Change, usize)> = vec![];
    for ch in &priced {
        let key = |c: &crate::cloud::Change| (c.action, c.kind, c.place.clone(), c.cloud.clone());
        match same.iter_mut().find(|(c, _)| key(c) == key(ch)) {
            Some((_, n)) => *n += 1,
            None => same.push((ch, 1)),
        }
    }
    let grouped: Vec<Line> = same
        .iter()
        .flat_map(|(ch, n)| {
            let d = ch.cloud.clone().unwrap_or_default();
            vec![
                Line::from(vec![
                    Span::styled(format!("{:<7} ", ch.action), tone(ch.action)),
                    Span::raw(format!("{} in {}", kind_count(*n, ch.kind), ch.place)),
                ]),
                Line::styled(
                    format!(
                        "         {} {} {} {} each",
                        d.machine_type.as_deref().unwrap_or(""),
                        d.nics.as_ref().map(|n| n.layout.as_str()).unwrap_or(""),
                        d.provisioning_model.as_deref().unwrap_or(""),
                        price(d.hourly_usd)
                    ),
                    theme.muted(),
                ),
            ]
        })
        .collect();
    let total: Vec<Line> = c
        .plan
        .hourly_usd
        .map(|t| Line::styled(format!("total {}", price(t)), theme.accent()))
        .into_iter()
        .collect();
    // Fallbacks and notes are sentences: wrapped to the overlay's inner width, never cut.
    let muted = |text: &str| -> Vec<Line> {
        wrap_words(text, inner_w)
            .into_iter()
            .map(|l| Line::styled(l, theme.muted()))
            .collect()
    };
    let fb = &c.plan.fallbacks;
    let (fallbacks, fallbacks_short) = match fb.len() {
        0 => (vec![], vec![]),
        n => (
            muted(&format!("if out of capacity, then: {}", fb.join(", "))),
            muted(&format!(
                "if out of capacity: {}, first {}",
                crate::words::plural(n, "more place"),
                fb[0]
            )),
        ),
    };
    let notes: Vec<Line> = c
        .plan
        .notes
        .iter()
        .flat_map(|n| muted(&format!("note: {n}")))
        .collect();
    let kept = c.plan.changes.len() - shown.len();
    let kept_line = (kept > 0).then(|| Line::styled(format!("{kept} kept as they are"), theme.muted()));
    let full: Vec<Line> = others
        .iter()
        .flat_map(|ch| item(ch))
        .chain(kept_line.clone())
        .collect();
    let collapsed: Vec<Line> = counted(&others, inner_w)
        .into_iter()
        .map(|(action, text)| match action {
            Some(a) => Line::from(vec![Span::styled(format!("{a:<7} "), tone(a)), Span::raw(text)]),
            None => Line::raw(format!("        {text}")),
        })
        .chain(kept_line)
        .collect();
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
    // The rows inside the frame; the blank line and the keys always have theirs.
    let room = usize::from(area.height.saturating_sub(2));
    let body_room = room.saturating_sub(2);
    // Whole when it fits; else the other resources counted per kind, then the
    // fallbacks shortened, then the same instances counted.
    let mut body: Vec<Line> = vec![];
    for (count_rest, short_fallbacks, count_instances) in [
        (false, false, false),
        (true, false, false),
        (true, true, false),
        (true, true, true),
    ] {
        body = top
            .iter()
            .chain(if count_instances { &grouped } else { &instances })
            .chain(&total)
            .chain(if short_fallbacks {
                &fallbacks_short
            } else {
                &fallbacks
            })
            .chain(&notes)
            .chain(if count_rest { &collapsed } else { &full })
            .cloned()
            .collect();
        if body.len() <= body_room {
            break;
        }
    }
    if body.len() > body_room {
        // Even so it does not fit: the end goes, and the cut is said where the eye is
        // before `y`.
        let cut = body.len() + 1 - body_room;
        body.truncate(body.len().saturating_sub(cut));
        body.push(Line::styled(
            format!(
                "↓ {} of the plan not shown: a taller terminal shows them",
                crate::words::plural(cut, "line")
            ),
            theme.tone(Tone::Warn),
        ));
    }
    let mut lines = body;
    lines.push(Line::raw(""));
    lines.push(Line::from(keys));
    let h = (lines.len() as u16 + 2).min(area.height);
    let inner = frame_sized(&title, theme, area, buf, w, h);
    Paragraph::new(lines).render(inner, buf);
}

/// Resources counted per action and kind, in the plan's order: `(Some("create"), "9
/// networks, 10 firewalls, 9 subnetworks")`, wrapped to `width` (continuations with
/// `None`).
fn counted(changes: &[&crate::cloud::Change], width: usize) -> Vec<(Option<&'static str>, String)> {
    let mut groups: Vec<(&'static str, Vec<(&'static str, usize)>)> = vec![];
    for ch in changes {
        let at = match groups.iter().position(|(a, _)| *a == ch.action) {
            Some(i) => i,
            None => {
                groups.push((ch.action, vec![]));
                groups.len() - 1
            }
        };
        let kinds = &mut groups[at].1;
        match kinds.iter_mut().find(|(k, _)| *k == ch.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((ch.kind, 1)),
        }
    }
    let mut out = vec![];
    for (action, kinds) in groups {
        let text = kinds
            .iter()
            .map(|(kind, n)| kind_count(*n, kind))
            .collect::<Vec<_>>()
            .join(", ");
        for (i, l) in wrap_words(&text, width.saturating_sub(8).max(10))
            .into_iter()
            .enumerate()
        {
            out.push(((i == 0).then_some(action), l));
        }
    }
    out
}

/// `9 networks`, `1 placement policy`, `2 placement policies`.
fn kind_count(n: usize, kind: &str) -> String {
    let word = kind.replace('_', " ");
    match (n, word.strip_suffix('y')) {
        (1, _) => format!("1 {word}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {word}s"),
    }
}

#[cfg(test)]
mod wrap_tests {
    #[test]
    fn resources_are_counted_per_action_and_kind() {
        use crate::cloud::Change;
        let change = |action, kind, name: &str| Change {
            action,
            kind,
            name: name.into(),
            place: "global".into(),
            cloud: None,
        };
        let plan = [
            change("create", "network", "a"),
            change("create", "firewall", "a-ssh"),
            change("create", "network", "b"),
            change("create", "placement_policy", "p"),
            change("delete", "subnetwork", "old"),
        ];
        let refs: Vec<&Change> = plan.iter().collect();
        assert_eq!(
            super::counted(&refs, 80),
            vec![
                (
                    Some("create"),
                    "2 networks, 1 firewall, 1 placement policy".to_string()
                ),
                (Some("delete"), "1 subnetwork".to_string()),
            ]
        );
        assert_eq!(super::kind_count(2, "placement_policy"), "2 placement policies");
    }

    #[test]
    fn words_wrap_within_the_width() {
        assert_eq!(
            crate::words::wrap_words("note: a bb ccc", 6),
            vec!["note:", "a bb", "ccc"]
        );
        assert_eq!(crate::words::wrap_words("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert!(crate::words::wrap_words("", 5).is_empty());
    }
}
