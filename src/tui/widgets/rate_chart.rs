//! A time chart of rates in braille, and the sparklines of the GPU strip.
//!
//! ```text
//! ─ eth1 data · rx 9.41 Gbit/s · tx 9.40 Gbit/s ────────   <- title on a top rule
//!   10G│    ⢀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀        ⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀⣀
//!    5G│    ⡸                      (a gap: nothing drawn)
//!     0│⣀⣀⣀⠇
//!      └──────────────────────────────────────────────
//!      -5m                 -2.5m                   now
//! ```
//! Series come in already downsampled, one value per braille column (max per bucket,
//! NaN where nothing is known). A run of known values is one line; a NaN ends it, so
//! a missed sample is a hole in the line, never a drop to zero. The y-axis reaches the
//! visible maximum rounded up to 1, 2 or 5 times a power of ten.

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Widget};

/// Width of the y labels ("2.5G", "500M") and the axis line.
const Y_LABEL_W: u16 = 5;

/// The smallest top of a rate axis, bits per second (an idle NIC gets 0 .. 1k).
pub const MIN_TOP_BPS: f64 = 1e3;

/// `v` rounded up to 1, 2 or 5 times a power of ten (0 for 0 or less).
pub fn nice_ceiling(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 0.0;
    }
    let e = 10f64.powf(v.log10().floor());
    let m = v / e;
    let n = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|&n| n >= m * (1.0 - 1e-9))
        .unwrap_or(10.0);
    n * e
}

/// A tick value of an axis whose top is [`nice_ceiling`]'s: as few digits as tell the
/// ticks apart (`0`, `0.25`, `0.5`, `2.5`, `10`, `350`).
pub fn tick(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A rate in few characters: `0`, `500`, `25k`, `2.5G`, `10G`, `1.2T`.
pub fn short_bps(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let (x, unit) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(d, _)| v >= *d)
        .map(|(d, u)| (v / d, u))
        .unwrap_or((v, ""));
    let digits = if x >= 10.0 || x.fract().abs() < 1e-6 { 0 } else { 1 };
    let s = format!("{x:.digits$}");
    format!("{s}{unit}")
}

/// The largest finite value of all `series` (0 when none).
pub fn visible_max<'a>(series: impl IntoIterator<Item = &'a [f32]>) -> f64 {
    series
        .into_iter()
        .flat_map(|s| s.iter())
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, &v| m.max(f64::from(v)))
}

/// The braille columns a chart in `area` plots (each of its cells holds two).
pub fn plot_columns(area: Rect) -> usize {
    // The y labels and the axis line take `Y_LABEL_W` columns.
    usize::from(area.width.saturating_sub(Y_LABEL_W)) * 2
}

/// A span's label: `-1m`, `-30s`, `-2.5m`, `-1h`.
pub fn span_label(ms: u32) -> String {
    let s = f64::from(ms) / 1000.0;
    let (v, unit) = if s >= 3600.0 {
        (s / 3600.0, "h")
    } else if s >= 60.0 {
        (s / 60.0, "m")
    } else {
        (s, "s")
    };
    if v.fract().abs() < 1e-6 {
        format!("-{v:.0}{unit}")
    } else {
        format!("-{v:.1}{unit}")
    }
}

/// One series of a chart: values per braille column, and how it is drawn.
pub struct Trace<'a> {
    pub values: &'a [f32],
    pub style: Style,
}

pub struct RateChart<'a> {
    /// Drawn on the top rule.
    pub title: Line<'a>,
    /// Drawn in order: the last one on top.
    pub series: Vec<Trace<'a>>,
    pub span_ms: u32,
    pub theme: &'a Theme,
    pub rule: Style,
    /// The top of the y-axis; `None`: from the visible maximum.
    pub top: Option<f64>,
}

impl RateChart<'_> {
    /// The y-axis top of this chart.
    pub fn top(&self) -> f64 {
        self.top.unwrap_or_else(|| {
            nice_ceiling(visible_max(self.series.iter().map(|s| s.values))).max(MIN_TOP_BPS)
        })
    }
}

impl Widget for RateChart<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        let block = Block::default()
            .borders(Borders::TOP)
            .border_style(self.rule)
            .title(self.title.clone());
        let inner = block.inner(area);
        block.render(area, buf);
        // Too small for axes: the title is all there is.
        if inner.height < 3 || inner.width < Y_LABEL_W + 4 {
            return;
        }
        let top = self.top();
        let span_s = f64::from(self.span_ms) / 1000.0;
        // Points: x in seconds before the window's end, at the middle of each column.
        // Each series its own mark under NO_COLOR (tx and rx told apart without colour).
        // A run of finite points, with its series' style and mark.
        type Run = (Vec<(f64, f64)>, Style, Marker);
        let mut runs: Vec<Run> = Vec::new();
        for (k, s) in self.series.iter().enumerate() {
            let mark = self.theme.series_mark(k).0;
            let n = s.values.len();
            if n == 0 {
                continue;
            }
            let w = span_s / n as f64;
            let mut run: Vec<(f64, f64)> = Vec::new();
            for (i, v) in s.values.iter().enumerate() {
                if v.is_finite() {
                    run.push((-span_s + (i as f64 + 0.5) * w, f64::from(*v).min(top)));
                } else if !run.is_empty() {
                    runs.push((std::mem::take(&mut run), s.style, mark));
                }
            }
            if !run.is_empty() {
                runs.push((run, s.style, mark));
            }
        }
        let datasets: Vec<Dataset> = runs
            .iter()
            .map(|(points, style, mark)| {
                Dataset::default()
                    .marker(*mark)
                    .graph_type(if points.len() > 1 {
                        GraphType::Line
                    } else {
                        GraphType::Scatter
                    })
                    .style(*style)
                    .data(points)
            })
            .collect();
        let muted = self.theme.muted();
        let pad = |s: String| format!("{s:>w$}", w = usize::from(Y_LABEL_W) - 1);
        let y_labels: Vec<Span> = if inner.height >= 5 {
            vec![
                Span::styled(pad("0".into()), muted),
                Span::styled(pad(short_bps(top / 2.0)), muted),
                Span::styled(pad(short_bps(top)), muted),
            ]
        } else {
            vec![
                Span::styled(pad("0".into()), muted),
                Span::styled(pad(short_bps(top)), muted),
            ]
        };
        let x_labels: Vec<Span> = if inner.width >= 40 {
            vec![
                Span::styled(span_label(self.span_ms), muted),
                Span::styled(span_label(self.span_ms / 2), muted),
                Span::styled("now", muted),
            ]
        } else {
            vec![
                Span::styled(span_label(self.span_ms), muted),
                Span::styled("now", muted),
            ]
        };
        Chart::new(datasets)
            .x_axis(
                Axis::default()
                    .bounds([-span_s, 0.0])
                    .style(muted)
                    .labels(x_labels),
            )
            .y_axis(Axis::default().bounds([0.0, top]).style(muted).labels(y_labels))
            .hidden_legend_constraints((
                ratatui::layout::Constraint::Length(0),
                ratatui::layout::Constraint::Length(0),
            ))
            .render(inner, buf);
    }
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of `values` on `0 ..= top` (`top` 0 or less: from the largest value);
/// an unknown value is a blank, a known zero the lowest bar.
pub fn spark(values: &[f32], top: f64) -> String {
    let top = if top > 0.0 { top } else { visible_max([values]) };
    values
        .iter()
        .map(|v| match (v.is_finite(), top > 0.0) {
            (false, _) => ' ',
            (true, false) => BARS[0],
            (true, true) => BARS[((f64::from(*v) / top) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks of a nice top tell themselves apart: no `1 / 1 / 0` for a top of 1.1.
    #[test]
    fn ticks_are_distinct_and_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.5), "0.5");
        assert_eq!(tick(1.0), "1");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(350.0), "350");
        assert_eq!(tick(nice_ceiling(1.1) / 2.0), "1");
        assert_eq!(tick(nice_ceiling(1.1)), "2");
    }

    #[test]
    fn nice_ceilings_and_short_labels() {
        for (v, want) in [
            (0.0, 0.0),
            (-3.0, 0.0),
            (f64::NAN, 0.0),
            (1.0, 1.0),
            (1.2, 2.0),
            (9.41e9, 10e9),
            (10e9, 10e9),
            (2.1e8, 5e8),
            (4.9e3, 5e3),
            (101.0, 200.0),
        ] {
            let got = nice_ceiling(v);
            assert!(
                (got - want).abs() <= want * 1e-12,
                "nice_ceiling({v}) = {got}, want {want}"
            );
        }
        for (v, want) in [
            (0.0, "0"),
            (500.0, "500"),
            (25e3, "25k"),
            (2.5e9, "2.5G"),
            (10e9, "10G"),
            (5e8, "500M"),
            (1.25e12, "1.2T"),
        ] {
            assert_eq!(short_bps(v), want, "{v}");
        }
        assert_eq!(span_label(60_000), "-1m");
        assert_eq!(span_label(150_000), "-2.5m");
        assert_eq!(span_label(30_000), "-30s");
        assert_eq!(span_label(3_600_000), "-1h");
    }

    #[test]
    fn sparklines_leave_gaps_blank() {
        assert_eq!(spark(&[0.0, f32::NAN, 50.0, 100.0], 100.0), "▁ ▅█");
        assert_eq!(spark(&[0.0, 0.0], 0.0), "▁▁");
        assert_eq!(spark(&[], 10.0), "");
    }

    #[test]
    fn a_gap_is_drawn_as_nothing_not_as_zero() {
        let theme = Theme::default_theme();
        let area = Rect::new(0, 0, 30, 8);
        let draw = |values: &[f32]| {
            let mut buf = Buffer::empty(area);
            RateChart {
                title: Line::raw("t"),
                series: vec![Trace {
                    values,
                    style: Style::default(),
                }],
                span_ms: 60_000,
                theme: &theme,
                rule: Style::default(),
                top: None,
            }
            .render(area, &mut buf);
            buf
        };
        let n = plot_columns(area);
        let mut v = vec![8e9f32; n];
        // Unknown: dots (n/4-2)*2 .. (n/4+2)*2, i.e. cells n/4-2 .. n/4+2.
        for x in &mut v[(n / 4 - 2) * 2..(n / 4 + 2) * 2] {
            *x = f32::NAN;
        }
        let buf = draw(&v);
        let text = |b: &Buffer| -> Vec<String> {
            (0..area.height)
                .map(|y| (0..area.width).map(|x| b[(x, y)].symbol().to_string()).collect())
                .collect()
        };
        let rows = text(&buf);
        let braille = |c: char| ('\u{2801}'..='\u{28ff}').contains(&c);
        // The line at 8G of a 10G axis: on the top plot row, except in the gap.
        let plot_x0 = usize::from(Y_LABEL_W);
        let line_row: Vec<char> = rows[1].chars().skip(plot_x0).collect();
        assert_eq!(line_row.len() * 2, n, "{rows:#?}");
        // (The canvas may place a dot one cell off at the edges: those are not checked.)
        let gap = n / 4 - 1..n / 4 + 1;
        assert!(line_row[..gap.start - 2].iter().all(|&c| braille(c)), "{rows:#?}");
        assert!(line_row[gap.clone()].iter().all(|&c| c == ' '), "{rows:#?}");
        assert!(line_row[gap.end + 2..].iter().all(|&c| braille(c)), "{rows:#?}");
        // Nothing at all is drawn in the gap's columns (no drop to zero).
        for r in &rows[1..area.height as usize - 2] {
            let cells: Vec<char> = r.chars().skip(plot_x0).collect();
            assert!(cells[gap.clone()].iter().all(|&c| c == ' '), "{rows:#?}");
        }
        // The same values with zeros in place of the gap draw something there.
        let zero: Vec<f32> = v.iter().map(|x| if x.is_nan() { 0.0 } else { *x }).collect();
        let rows0 = text(&draw(&zero));
        let bottom: Vec<char> = rows0[area.height as usize - 3].chars().skip(plot_x0).collect();
        assert!(bottom[gap].iter().all(|&c| braille(c)), "{rows0:#?}");
    }
}
