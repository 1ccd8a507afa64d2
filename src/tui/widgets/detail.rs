//! The `d` detail panel the list views share (Nodes, Fleets, NCCL, Jobs): under the
//! list, the selected row's every field whole, its value wrapped at the panel's width
//! (between words, a long id inside itself), never cut at the edge.
//!
//! ```text
//! ┌ lab ─────────────────────────────────────────────────────────────────────────┐
//! │name          an-operators-fleet-with-a-long-name-for-the-test-0001           │
//! │nodes         lab-0 10.0.0.1, lab-1 10.0.0.2, lab-2 10.0.0.3, lab-3 10.0.0.4, │
//! │              lab-4 10.0.0.5                                                  │
//! └──────────────────────────────────────────────────────────────────────────────┘
//! ```

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The width of the field names' column.
const KEY_W: usize = 14;

/// The least height of the list left above the panel (borders, header, two rows).
const LIST_MIN: u16 = 5;

/// The panel's rows in `width` columns: each field's name (on its first row), then its
/// value wrapped under itself (an empty value reads `-`).
fn rows(fields: &[(&str, String)], width: u16) -> Vec<(String, String)> {
    let width = usize::from(width);
    let key_w = KEY_W.min(width / 3);
    let value_w = width.saturating_sub(key_w).max(1);
    let mut out = vec![];
    for (key, value) in fields {
        let value = crate::tui::widgets::shown(value);
        let mut rows = crate::words::wrap_words(&value, value_w);
        if rows.is_empty() {
            rows.push("-".into());
        }
        for (i, row) in rows.into_iter().enumerate() {
            let k = if i == 0 {
                crate::words::truncate(key, key_w.saturating_sub(1))
            } else {
                String::new()
            };
            out.push((format!("{k:<key_w$}"), row));
        }
    }
    out
}

/// Where the panel goes in `area`: the list's area and the panel's (as tall as its
/// wrapped fields, the list above keeping at least [`LIST_MIN`] rows). Below 12 rows
/// there is no room for both: no panel, the whole area for the list.
pub fn split(area: Rect, fields: &[(&str, String)]) -> (Rect, Option<Rect>) {
    if area.height < 12 || area.width < 4 {
        return (area, None);
    }
    let room = area.height - LIST_MIN - 2;
    let lines = u16::try_from(rows(fields, area.width - 2).len()).unwrap_or(u16::MAX);
    let h = lines.min(room) + 2;
    let list = Rect {
        height: area.height - h,
        ..area
    };
    let panel = Rect {
        y: area.y + area.height - h,
        height: h,
        ..area
    };
    (list, Some(panel))
}

/// Draw the panel titled `title` at the bottom of `area` ([`split`]); return the area
/// left for the list.
pub fn render_below(
    area: Rect,
    title: &str,
    fields: &[(&str, String)],
    theme: &Theme,
    buf: &mut Buffer,
) -> Rect {
    let (list, Some(panel)) = split(area, fields) else {
        return area;
    };
    let room = usize::from(panel.height - 2);
    let mut lines: Vec<Line> = rows(fields, area.width - 2)
        .into_iter()
        .map(|(k, v)| Line::from(vec![Span::styled(k, theme.muted()), Span::raw(v)]))
        .collect();
    if lines.len() > room {
        // More than fits even so: say how much more, where the last line would be.
        let more = lines.len() - room + 1;
        lines.truncate(room - 1);
        lines.push(Line::styled(
            format!("… {more} more lines: a taller terminal shows them"),
            theme.muted(),
        ));
    }
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.border(false))
                .title(Span::styled(
                    format!(" {} ", crate::words::truncate(title, usize::from(area.width) - 4)),
                    theme.title(),
                ))
                .style(theme.base()),
        )
        .render(panel, buf);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    #[test]
    fn every_field_shows_whole_wrapped_under_its_name() {
        let theme = Theme::default_theme();
        let id = "nccl-all_reduce_perf-20261125-221502-7f3a9c2e1b4d5a6f7e8d9c0b1a2f3e4d5c6b7a8f";
        let fields = vec![
            ("run id", id.to_string()),
            (
                "nodes",
                (0..12)
                    .map(|i| format!("lab-{i} 10.0.0.{i}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ("ended", String::new()),
        ];
        let area = Rect::new(0, 0, 80, 22);
        let mut buf = Buffer::empty(area);
        let left = render_below(area, "a run", &fields, &theme, &mut buf);
        let rows = text(&buf);
        let panel: String = rows[usize::from(left.height)..]
            .iter()
            .map(|r| r.trim_matches(|c| c == '│' || c == ' ').to_string())
            .collect::<Vec<_>>()
            .join(" ");
        // The id across its rows, nothing cut; every node; an empty value as `-`.
        let joined: String = rows[usize::from(left.height)..]
            .iter()
            .map(|r| {
                r.chars()
                    .skip(15)
                    .take(64)
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect();
        assert!(joined.contains(id), "{rows:#?}");
        assert!(!panel.contains('…'), "{rows:#?}");
        for i in 0..12 {
            assert!(panel.contains(&format!("lab-{i} 10.0.0.{i}")), "{rows:#?}");
        }
        assert!(panel.contains("ended         -"), "{rows:#?}");
        assert!(left.height >= LIST_MIN && left.height < 22, "{left:?}");
        // Too short for a list and a panel: the list keeps the area.
        let small = Rect::new(0, 0, 80, 11);
        assert_eq!(
            render_below(small, "a run", &fields, &theme, &mut Buffer::empty(small)),
            small
        );
    }
}
