//! The NICs view: every NIC of every node of the sampled fleet, its rx/tx now, on average
//! and at peak over the chosen span, with a sparkline of rx (max per column, so spikes
//! show) and the imbalance flags.
//!
//! ```text
//! ┌ NICs of lab · 1 min · 3 nodes ────────────────────────────────────────────────┐
//! │NODE   NIC   RX now    TX now    RX avg    TX avg    RX peak   rx (1 min)       │
//! │lab-0  eth1  400 Mb/s  401 Mb/s  350 Mb/s  351 Mb/s  402 Mb/s  ▁▁▃▇████████     │
//! │lab-1  eth1  5.0 Mb/s  5.0 Mb/s  …                             ▁▁▁▁▁▁▁▁  FLAG   │
//! └ ! lab-1 eth1 tx: 5.00 Mbit/s, under half the median of its rail ──────────────┘
//! ```

use crate::telemetry::report::format_bps;
use crate::telemetry::series::{Metric, SeriesKey};
use crate::tui::nics::SPANS_MS;
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget, Wrap};

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn spark(values: &[f32]) -> String {
    let max = values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f32, f32::max);
    values
        .iter()
        .map(|v| match (v.is_finite(), max > 0.0) {
            (false, _) => ' ',
            (true, false) => BARS[0],
            (true, true) => BARS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let v = &state.nics;
    let span = SPANS_MS[v.span % SPANS_MS.len()];
    let span_label = match span {
        60_000 => "1 min",
        300_000 => "5 min",
        900_000 => "15 min",
        _ => "1 h",
    };
    let Some(fleet) = &v.fleet else {
        Paragraph::new(vec![
            Line::styled("No samplers running.", theme.title()),
            Line::raw(""),
            Line::raw(
                "Select a fleet in Fleets (2), come back here and press Enter: every node runs a small",
            ),
            Line::raw(
                "sh loop over its SSH connection (nothing to install) sampling /proc/net/dev, the RDMA",
            ),
            Line::raw("counters and nvidia-smi. z changes the span (1 min .. 1 h), m pauses the view."),
        ])
        .wrap(Wrap { trim: false })
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.border(true))
                .title(" NICs ")
                .style(theme.base()),
        )
        .render(area, buf);
        return;
    };
    let mut title = vec![Span::styled(
        format!(" NICs of {fleet} · {span_label} · {} nodes ", v.nodes.len()),
        theme.title(),
    )];
    if v.paused {
        title.push(Span::styled("· paused ", theme.tone(Tone::Warn)));
    }
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(title))
        .style(theme.base());
    if let Some(f) = v.flags.first() {
        let node = v.nodes.get(f.node).map(String::as_str).unwrap_or("?");
        let dev = f
            .device
            .as_ref()
            .map(|d| d.label())
            .unwrap_or_else(|| "(node total)".into());
        let more = if v.flags.len() > 1 {
            format!(" (+{} more)", v.flags.len() - 1)
        } else {
            String::new()
        };
        block = block.title_bottom(Line::styled(
            format!(
                " ! {node} {dev} {}: {} under half its peers{more} ",
                f.direction.as_str(),
                format_bps(Some(f.bps))
            ),
            theme.tone(Tone::Fail),
        ));
    }
    let now = v.store.now_ms().unwrap_or(0);
    let from = now.saturating_sub(span);
    let spark_w = usize::from(area.width.saturating_sub(2 + 12 + 10 + 6 * 11)).clamp(8, 60);
    let mut rows: Vec<Row> = vec![];
    for (i, name) in v.nodes.iter().enumerate() {
        if let Some(Some(why)) = v.down.get(i) {
            rows.push(Row::new(vec![
                Cell::from(name.clone()),
                Cell::from(Span::styled(format!("down: {why}"), theme.tone(Tone::Fail))),
            ]));
            continue;
        }
        let Some(node) = v.store.node(i) else {
            rows.push(Row::new(vec![
                Cell::from(name.clone()),
                Cell::from(Span::styled("waiting for samples…", theme.muted())),
            ]));
            continue;
        };
        for dev in node.devices() {
            let stats = |m: Metric| {
                node.series(&SeriesKey::net(dev.clone(), m))
                    .map(|s| s.stats(from, now))
            };
            let (rx, tx) = (stats(Metric::Rx), stats(Metric::Tx));
            let fmt = |s: Option<f64>| format_bps(s.filter(|x| x.is_finite()));
            let line = node
                .series(&SeriesKey::net(dev.clone(), Metric::Rx))
                .map(|s| spark(&s.downsample(from, now, spark_w)))
                .unwrap_or_default();
            let flagged = v
                .flags
                .iter()
                .any(|f| f.node == i && f.device.as_ref() == Some(dev));
            let style = if flagged {
                theme.tone(Tone::Fail)
            } else {
                theme.base()
            };
            rows.push(
                Row::new(vec![
                    Cell::from(name.clone()),
                    Cell::from(dev.label()),
                    Cell::from(fmt(rx.map(|s| s.current))),
                    Cell::from(fmt(tx.map(|s| s.current))),
                    Cell::from(fmt(rx.map(|s| s.avg))),
                    Cell::from(fmt(tx.map(|s| s.avg))),
                    Cell::from(fmt(rx.map(|s| s.peak))),
                    Cell::from(fmt(tx.map(|s| s.peak))),
                    Cell::from(Span::styled(
                        line,
                        if flagged {
                            theme.tone(Tone::Fail)
                        } else {
                            theme.rx()
                        },
                    )),
                ])
                .style(style),
            );
        }
    }
    let visible = usize::from(area.height.saturating_sub(3));
    let first = v.scroll.min(rows.len().saturating_sub(visible.max(1)));
    let rows: Vec<Row> = rows.into_iter().skip(first).collect();
    let header = Row::new(vec![
        "NODE", "NIC", "RX now", "TX now", "RX avg", "TX avg", "RX peak", "TX peak", "rx",
    ])
    .style(theme.muted());
    let mut widths = vec![Constraint::Length(12), Constraint::Length(10)];
    widths.extend([Constraint::Length(10); 6]);
    widths.push(Constraint::Min(8));
    Table::new(rows, widths)
        .header(header)
        .block(block)
        .render(area, buf);
}
