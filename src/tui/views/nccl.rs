//! The NCCL view: the runs of the state store, and the chosen run's busbw curve drawn as
//! its rows arrive, with its rows and summary.
//!
//! ```text
//! ┌ NCCL runs (2) ──────────┐┌ nccl-all_reduce-… · all_reduce · 2 ranks · NCCL 2.28.9 · ended 0 ┐
//! │▌nccl-all_reduce-… local ││ busbw GB/s                                      ⣀⣠⠤⠒⠉ 347.7     │
//! │ nccl-all_gather-… lab   ││                                     ⣀⠤⠔⠒⠉                         │
//! │                         ││ 8B ─────────────── message size (log) ────────────────── 8G    │
//! │                         ││ peak 347.71 GB/s at 8G · avg 112.161 · transport NVLink P2P    │
//! └─────────────────────────┘└────────────────────────────────────────────────────────────────┘
//! ```

use crate::nccl::human_size;
use crate::store;
use crate::tui::nccl::{visible, RunStatus};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Row, Table, Widget, Wrap,
};

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let [list, main] = Layout::horizontal([
        Constraint::Length((area.width / 3).clamp(20, 44)),
        Constraint::Min(10),
    ])
    .areas(area);
    let runs = visible(state);
    let rows: Vec<Row> = runs
        .iter()
        .map(|r| {
            let sel = state.nccl.selected.as_deref() == Some(r.id.as_str());
            let code = r.nodes.iter().filter_map(|n| n.exit_code).max();
            let status = match code {
                Some(0) => Span::styled("ok", theme.tone(Tone::Pass)),
                Some(c) => Span::styled(format!("exit {c}"), theme.tone(Tone::Fail)),
                None => Span::styled("running?", theme.tone(Tone::Info)),
            };
            Row::new(vec![
                Line::raw(r.id.trim_start_matches("nccl-").to_string()),
                Line::raw(r.fleet.clone()),
                Line::from(status),
            ])
            .style(if sel { theme.selection() } else { theme.base() })
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(
            format!(" NCCL runs ({}) ", runs.len()),
            theme.title(),
        ))
        .style(theme.base());
    if runs.is_empty() {
        Paragraph::new(vec![
            Line::raw("No NCCL runs yet. Start one from a shell:"),
            Line::styled("flightdeck nccl run FLEET -b 8 -e 8G -g 8", theme.accent()),
            Line::raw("then r here; Enter follows the selected run."),
        ])
        .wrap(Wrap { trim: false })
        .block(block)
        .render(list, buf);
    } else {
        Table::new(
            rows,
            [Constraint::Min(12), Constraint::Length(8), Constraint::Length(8)],
        )
        .block(block)
        .render(list, buf);
    }
    render_run(state, theme, main, buf);
}

fn render_run(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some((id, report, status)) = &state.nccl.shown else {
        Paragraph::new("Select a run and press Enter to follow it: rows are drawn as they arrive.")
            .wrap(Wrap { trim: false })
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.border(false))
                    .style(theme.base()),
            )
            .render(area, buf);
        return;
    };
    let (st, tone) = match status {
        RunStatus::Following => ("following".to_string(), Tone::Info),
        RunStatus::Ended(Some(0)) => ("ended 0".to_string(), Tone::Pass),
        RunStatus::Ended(Some(c)) => (format!("ended {c}"), Tone::Fail),
        RunStatus::Ended(None) => ("ended".to_string(), Tone::Warn),
        RunStatus::Failed(e) => (format!("cannot follow: {e}"), Tone::Fail),
    };
    let title = vec![
        Span::styled(format!(" {id} "), theme.title()),
        Span::styled(
            format!(
                "· {} · {} ranks · NCCL {} ",
                report.collective.as_deref().unwrap_or("?"),
                report.ranks().map_or("?".into(), |r| r.to_string()),
                report.nccl_version.as_deref().unwrap_or("?")
            ),
            theme.muted(),
        ),
        Span::styled(format!("· {st} "), theme.tone(tone)),
    ];
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Line::from(title))
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 3 {
        return;
    }
    let [chart_area, summary] = Layout::vertical([Constraint::Min(3), Constraint::Length(2)]).areas(inner);
    let points: Vec<(f64, f64)> = report
        .rows
        .iter()
        .filter_map(|r| {
            r.out_of_place
                .as_ref()
                .map(|m| ((r.size.max(1) as f64).log2(), m.busbw))
        })
        .collect();
    if points.is_empty() {
        Paragraph::new("waiting for the first row…").render(chart_area, buf);
    } else {
        let (x0, x1) = (
            points.first().map_or(0.0, |p| p.0),
            points.last().map_or(1.0, |p| p.0).max(points[0].0 + 1.0),
        );
        let ymax = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1.0) * 1.1;
        let ds = Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.rx())
            .data(&points);
        let size_label = |x: f64| human_size(2f64.powf(x).round() as u64);
        Chart::new(vec![ds])
            .x_axis(Axis::default().bounds([x0, x1]).style(theme.muted()).labels(vec![
                Line::raw(size_label(x0)),
                Line::raw("message size (log)"),
                Line::raw(size_label(x1)),
            ]))
            .y_axis(
                Axis::default()
                    .bounds([0.0, ymax])
                    .style(theme.muted())
                    .labels(vec![
                        Line::raw("0"),
                        Line::raw(format!("{:.0}", ymax / 2.0)),
                        Line::raw(format!("{:.0} GB/s", ymax)),
                    ]),
            )
            .render(chart_area, buf);
    }
    let peak = report.peak_row().map(|r| {
        format!(
            "peak {:.2} GB/s at {}",
            r.out_of_place.as_ref().map_or(0.0, |m| m.busbw),
            human_size(r.size)
        )
    });
    let line = format!(
        "{} · avg {} · {} rows · transport {}",
        peak.unwrap_or_else(|| "no rows yet".into()),
        report.avg_busbw.map_or("?".into(), |a| format!("{a}")),
        report.rows.len(),
        report
            .transport_summary()
            .unwrap_or_else(|| "unknown (no NCCL_DEBUG=INFO)".into())
    );
    let started = state
        .nccl
        .runs
        .iter()
        .find(|r| &r.id == id)
        .map(|r| format!("started {} UTC on {}", store::format_utc(r.started_at), r.fleet))
        .unwrap_or_default();
    Paragraph::new(vec![
        Line::styled(line, theme.base()),
        Line::styled(started, theme.muted()),
    ])
    .render(summary, buf);
}
