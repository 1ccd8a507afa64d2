//! Pieces the table views share (Fleets, Nodes): a titled block that names the filter,
//! whole-page paging, and a message in place of a table.

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

pub fn block<'a>(title: String, filter: &str, theme: &Theme) -> Block<'a> {
    let mut t = vec![Span::styled(format!(" {title} "), theme.title())];
    if !filter.is_empty() {
        t.push(Span::styled(format!("filter: {filter} "), theme.accent()));
    }
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(t))
        .style(theme.base())
}

/// The rows of a table in `area` (borders and header off) that show `total` rows with
/// row `selected` on screen: whole pages, so paging moves by a screenful; and how the
/// title says where it is (`rows 41–80 of 1024`) when there is more than one page.
pub fn page_of(area: Rect, total: usize, selected: usize) -> (std::ops::Range<usize>, String) {
    let per = usize::from(area.height.saturating_sub(3)).max(1);
    let first = (selected.min(total.saturating_sub(1)) / per) * per;
    let range = first..(first + per).min(total);
    let label = if total > per {
        format!(" · rows {}–{} of {total}", range.start + 1, range.end)
    } else {
        String::new()
    };
    (range, label)
}

pub fn message(lines: Vec<Line<'static>>, block: Block<'_>, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}

/// How a column's text is cut when the column is narrower than the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Keep the start, `…` at the end (descriptions, paths read from the left).
    End,
    /// Keep the end, `…` at the start: names and ids whose distinguishing part is last
    /// (`…fleet1-0`, `…-17956123-3`), with their common start cut first.
    Start,
    /// Never cut: the column gets its whole width before any other grows (exit codes,
    /// counts, states).
    Never,
}

/// One column of a table: its header, the least it gets, when it grows into free space
/// and how its text is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    pub header: &'static str,
    /// The least width (cells) while there is room for it.
    pub min: u16,
    /// Which columns grow first into free space: lower first (names 0, the rest 1); a
    /// column never grows past its widest text.
    pub grow: u8,
    pub cut: Cut,
}

impl Col {
    /// A name or id column: grows first, keeps its end.
    pub const fn name(header: &'static str) -> Col {
        Col {
            header,
            min: 8,
            grow: 0,
            cut: Cut::Start,
        }
    }

    /// A short column that is never cut (counts, states, exit codes).
    pub const fn whole(header: &'static str) -> Col {
        Col {
            header,
            min: 0,
            grow: 0,
            cut: Cut::Never,
        }
    }

    /// A text column that takes what the names leave, cut at its end.
    pub const fn text(header: &'static str, min: u16) -> Col {
        Col {
            header,
            min,
            grow: 1,
            cut: Cut::End,
        }
    }

    /// The same column growing later (`grow` higher) or earlier.
    pub const fn grow(mut self, grow: u8) -> Col {
        self.grow = grow;
        self
    }
}

/// The columns' widths in `width` cells (one cell between columns), given every row's
/// cell texts: whole columns ([`Cut::Never`]) first, then every column its `min`, then
/// the free space to the columns in `grow` order, each up to its widest text (shared
/// evenly within a rank). Where even the minimums do not fit, the last columns shrink.
pub fn widths(cols: &[Col], rows: &[Vec<String>], width: u16) -> Vec<u16> {
    let n = cols.len();
    if n == 0 {
        return vec![];
    }
    let want: Vec<u16> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let cells = rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|t| t.chars().count())
                .max()
                .unwrap_or(0);
            u16::try_from(cells.max(c.header.chars().count())).unwrap_or(u16::MAX)
        })
        .collect();
    let mut room = width.saturating_sub(u16::try_from(n - 1).unwrap_or(u16::MAX));
    let mut w = vec![0u16; n];
    // Whole columns first, then the minimums, left to right.
    for pass in 0..2 {
        for (i, c) in cols.iter().enumerate() {
            let need = match (pass, c.cut) {
                (0, Cut::Never) => want[i],
                (0, _) => continue,
                (_, Cut::Never) => continue,
                _ => c.min.min(want[i]),
            };
            let give = need.min(room);
            w[i] = give;
            room -= give;
        }
    }
    // Free space by rank, evenly within a rank, up to each column's text.
    let mut ranks: Vec<u8> = cols.iter().map(|c| c.grow).collect();
    ranks.sort_unstable();
    ranks.dedup();
    for rank in ranks {
        loop {
            let open: Vec<usize> = (0..n)
                .filter(|&i| cols[i].grow == rank && w[i] < want[i])
                .collect();
            if open.is_empty() || room == 0 {
                break;
            }
            let share = (room / u16::try_from(open.len()).unwrap_or(1)).max(1);
            for i in open {
                let give = share.min(want[i] - w[i]).min(room);
                w[i] += give;
                room -= give;
            }
        }
    }
    w
}

/// `text` in `width` cells, cut as `cut` says (with `…`).
pub fn fit(text: &str, width: usize, cut: Cut) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    match cut {
        Cut::End | Cut::Never => {
            let head: String = text.chars().take(width - 1).collect();
            format!("{head}…")
        }
        Cut::Start => {
            let tail: String = text.chars().skip(n - (width - 1)).collect();
            format!("…{tail}")
        }
    }
}

/// A table of `rows` (cell texts and the row's style) laid out by [`widths`] in `width`
/// cells, every cell cut as its column says, with the header styled `header`.
pub fn table<'a>(
    cols: &[Col],
    rows: Vec<(Vec<String>, ratatui::style::Style)>,
    width: u16,
    header: ratatui::style::Style,
) -> ratatui::widgets::Table<'a> {
    use ratatui::layout::Constraint;
    use ratatui::widgets::{Row, Table};
    let texts: Vec<Vec<String>> = rows.iter().map(|(c, _)| c.clone()).collect();
    let w = widths(cols, &texts, width);
    let body: Vec<Row> = rows
        .into_iter()
        .map(|(cells, style)| {
            let cut: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, t)| match (cols.get(i), w.get(i)) {
                    (Some(c), Some(&cw)) => fit(t, usize::from(cw), c.cut),
                    _ => t.clone(),
                })
                .collect();
            Row::new(cut).style(style)
        })
        .collect();
    let head = Row::new(
        cols.iter()
            .zip(&w)
            .map(|(c, &cw)| fit(c.header, usize::from(cw), Cut::End))
            .collect::<Vec<_>>(),
    )
    .style(header);
    Table::new(body, w.iter().map(|&x| Constraint::Length(x)).collect::<Vec<_>>()).header(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
        cells
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn names_grow_first_and_whole_columns_are_never_cut() {
        let cols = [Col::name("NAME"), Col::whole("NODES"), Col::text("FILE", 6)];
        let r = rows(&[&[
            "research-h200-us-central1-a-spot-fleet1",
            "2",
            "/tmp/x/fleets/longnames.yaml",
        ]]);
        // Wide: every column whole.
        assert_eq!(widths(&cols, &r, 160), vec![39, 5, 28]);
        // 60 cells: the name whole first, the file gets what is left.
        assert_eq!(widths(&cols, &r, 60), vec![39, 5, 14]);
        // 40 cells: the file keeps its minimum, the name takes the rest.
        assert_eq!(widths(&cols, &r, 40), vec![27, 5, 6]);
    }

    #[test]
    fn an_id_column_does_not_take_an_exit_columns_room() {
        let cols = [Col::name("ID"), Col::whole("EXIT")];
        let r = rows(&[&["job-1", "255,143,255,143"]]);
        let w = widths(&cols, &r, 100);
        assert_eq!(w, vec![5, 15]);
        assert_eq!(
            fit("255,143,255,143", usize::from(w[1]), Cut::Never),
            "255,143,255,143"
        );
    }

    #[test]
    fn cuts_keep_the_distinguishing_part() {
        assert_eq!(fit("all_reduce-17956123-1", 10, Cut::Start), "…7956123-1");
        assert_ne!(
            fit("all_reduce-17956123-1", 10, Cut::Start),
            fit("all_reduce-17956123-2", 10, Cut::Start)
        );
        assert_eq!(
            fit("research-h200-us-central1-a-spot-fleet1-0", 12, Cut::Start),
            "…ot-fleet1-0"
        );
        assert_eq!(fit("fleets/local.yaml", 8, Cut::End), "fleets/…");
        assert_eq!(fit("short", 8, Cut::Start), "short");
    }
}
