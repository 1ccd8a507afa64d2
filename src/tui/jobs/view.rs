//! The Jobs view: the jobs of the state store; Enter opens one, followed live on every
//! node: a header with its state and metrics, the shown node's log (tail, scroll, the
//! view's filter as search), and charts of loss and throughput over the steps.
//!
//! ```text
//! ┌ tiny-gpt · tiny-gpt-17953…-af0b · local · running 0:01:28 · node 1/1 local-0 following ┐
//! │ steps 300 · loss 9.1748 → 1.6170 · 0.178 s/step · 91722 tok/s/GPU · 538 TFLOPs/GPU · MFU 54.4% │
//! ├ log local-0 ────────────────────────────┐┌ loss ──────────────────────────────────────┐
//! │Step: 298 | Time: 0.176s | ...           ││⠑⠢⢄⣀                                       │
//! │Step: 299 | Time: 0.176s | ...           │└────────────────────────────────────────────┘
//! │Step: 300 | Time: 0.176s | ...           │┌ tokens/s/GPU ──────────────────────────────┐
//! └─────────────────────────────────────────┘└────────────────────────────────────────────┘
//! ```

use crate::jobs::metrics::{JobMetrics, Sample};
use crate::store;
use crate::tui::jobs::{log_lines, visible, NodeFollow, ShownJob};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::table::{self, Col};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Row, Table, Widget, Wrap,
};

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    match &state.jobs.shown {
        Some(shown) => render_job(state, shown, theme, area, buf),
        None => render_list(state, theme, area, buf),
    }
}

fn hms(s: u64) -> String {
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// How long the job ran ([`crate::jobs::duration`], `job list`'s too).
fn duration(j: &store::JobRecord, now: u64) -> u64 {
    crate::jobs::duration(j, now)
}

fn state_tone(word: &str) -> Tone {
    match word {
        "succeeded" => Tone::Pass,
        "failed" => Tone::Fail,
        "stopped" | "partial" => Tone::Warn,
        _ => Tone::Info,
    }
}

fn render_list(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let jobs = visible(state);
    let selected = jobs
        .iter()
        .find(|j| state.jobs.selected.as_deref() == Some(j.id.as_str()));
    let area = match (selected, state.jobs.detail) {
        (Some(j), true) => {
            crate::tui::widgets::detail::render_below(area, &j.name, &job_detail(state, j), theme, buf)
        }
        _ => area,
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(format!(" Jobs ({}) ", jobs.len()), theme.title()))
        .style(theme.base());
    if jobs.is_empty() {
        Paragraph::new(vec![
            Line::raw("No jobs yet. Start one from a job file (dstack's task format):"),
            Line::styled(":run examples/train/job.yaml", theme.accent()),
            Line::raw("or from a shell: flightdeck job run FILE. Jobs run detached on the nodes:"),
            Line::raw("they go on when flightdeck quits; Enter here follows one again."),
        ])
        .wrap(Wrap { trim: false })
        .block(block)
        .render(area, buf);
        return;
    }
    // Names and ids grow first and keep their end; state, nodes, duration and the exit
    // codes are never cut.
    let cols = [
        Col::name("NAME"),
        Col::name("ID"),
        Col::name("FLEET").grow(1),
        Col::whole("STATE"),
        Col::whole("NODES"),
        Col::whole("DURATION"),
        Col::whole("EXIT"),
    ];
    let header = Row::new(cols.map(|c| c.header)).style(theme.title());
    let texts: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let codes = j
                .nodes
                .iter()
                .map(|n| n.exit_code.map_or("-".into(), |c| c.to_string()))
                .collect::<Vec<_>>()
                .join(",");
            let id = j.id.strip_prefix(&format!("{}-", j.name)).unwrap_or(&j.id);
            vec![
                j.name.clone(),
                id.to_string(),
                j.fleet.clone(),
                crate::jobs::state_word(j).to_string(),
                j.nodes.len().to_string(),
                hms(duration(j, state.jobs.now)),
                codes,
            ]
        })
        .collect();
    let widths = table::widths(&cols, &texts, area.width.saturating_sub(2));
    let fit = |i: usize, t: &str| table::fit(t, usize::from(widths[i]), cols[i].cut);
    let rows: Vec<Row> = jobs
        .iter()
        .zip(&texts)
        .map(|(j, t)| {
            let word = crate::jobs::state_word(j);
            let sel = state.jobs.selected.as_deref() == Some(j.id.as_str());
            Row::new(vec![
                Line::raw(fit(0, &t[0])),
                // The id's own part (its start is the name, in the first column).
                Line::raw(fit(1, &t[1])),
                Line::raw(fit(2, &t[2])),
                Line::styled(word, theme.tone(state_tone(word))),
                Line::raw(t[4].clone()),
                Line::raw(t[5].clone()),
                Line::raw(t[6].clone()),
            ])
            .style(if sel { theme.selection() } else { theme.base() })
        })
        .collect();
    Table::new(
        rows,
        widths.iter().map(|w| Constraint::Length(*w)).collect::<Vec<_>>(),
    )
    .header(header)
    .block(block)
    .render(area, buf);
}

/// A GKE job: what Kueue says of its workload (held, admitted), from the fleet's last
/// snapshot.
fn kueue_of<'a>(
    state: &'a State,
    record: Option<&store::JobRecord>,
) -> Option<&'a crate::cloud::gke::view::WorkloadRow> {
    let r = record?;
    let snap = state.nodes.gke.get(&r.fleet)?.as_ref().ok()?;
    let owner = format!("JobSet/{}", crate::cloud::gke::jobs::jobset_name(&r.id));
    snap.workloads
        .iter()
        .find(|w| w.owner.as_deref() == Some(owner.as_str()))
}

/// A GKE job's ranks that wait, with why and the latest events (at most 3 lines).
fn waits_of(state: &State, record: Option<&store::JobRecord>) -> Vec<String> {
    record
        .and_then(|r| {
            let snap = state.nodes.gke.get(&r.fleet)?.as_ref().ok()?;
            let job = crate::cloud::gke::object_name(&r.id, 63);
            Some(
                snap.waiting
                    .iter()
                    .filter(|w| w.job == job)
                    .map(|w| w.line())
                    .take(3)
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// The opened job's parts inside its frame: the summary line, Kueue's line, the waits,
/// the log and the charts (beside the log from 100 columns, above it below that).
fn job_areas(inner: Rect, kueue: bool, waits: usize) -> [Rect; 5] {
    let [head, kq, wq, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(kueue)),
        Constraint::Length(u16::try_from(waits).unwrap_or(3)),
        Constraint::Min(0),
    ])
    .areas(inner);
    let (log, charts) = if body.width >= 100 {
        let [l, c] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
        (l, c)
    } else {
        let [c, l] = Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(body);
        (l, c)
    };
    [head, kq, wq, log, charts]
}

/// Where the wheel scrolls in the Jobs view (`area`: the view's): the opened job's log,
/// else the list (not its `d` panel).
pub fn wheel_area(state: &State, area: Rect) -> Rect {
    if let Some(shown) = &state.jobs.shown {
        let record = state.jobs.record(&shown.id);
        let inner = Block::default().borders(Borders::ALL).inner(area);
        let [.., log, _] = job_areas(
            inner,
            kueue_of(state, record).is_some(),
            waits_of(state, record).len(),
        );
        return log;
    }
    let jobs = visible(state);
    match jobs
        .iter()
        .find(|j| state.jobs.selected.as_deref() == Some(j.id.as_str()))
    {
        Some(j) if state.jobs.detail => crate::tui::widgets::detail::split(area, &job_detail(state, j)).0,
        _ => area,
    }
}

/// The `d` panel's fields of job `j`: its whole id, file, and per node its state, exit
/// code and times (the list cuts the id and sums the nodes up).
fn job_detail(state: &State, j: &store::JobRecord) -> Vec<(&'static str, String)> {
    let fleet = state.fleets.iter().find(|f| f.name == j.fleet);
    let time = |t: Option<u64>| t.map_or("-".to_string(), store::format_utc);
    let mut fields = vec![
        ("id", j.id.clone()),
        ("name", j.name.clone()),
        (
            "file",
            j.file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("fleet", j.fleet.clone()),
        (
            "state",
            format!(
                "{}, {} since {} (UTC)",
                crate::jobs::state_word(j),
                hms(duration(j, state.jobs.now)),
                store::format_utc(j.started_at)
            ),
        ),
        ("ended (UTC)", time(j.ended_at)),
        (
            "exit codes",
            j.nodes
                .iter()
                .map(|n| n.exit_code.map_or("-".into(), |c| c.to_string()))
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    for n in &j.nodes {
        let name = fleet
            .and_then(|f| f.nodes.get(n.node))
            .map_or_else(|| format!("node {}", n.node), |t| t.name.clone());
        let word = match n.exit_code {
            // With what flightdeck's own codes mean ("exited 125: the command never
            // started ...").
            Some(c) => crate::detach::exit_words(c),
            None if j.finished() => "unknown".to_string(),
            None => "running".to_string(),
        };
        let pod = n.pod.as_ref().map_or(String::new(), |p| format!(" · pod {p}"));
        fields.push((
            "node",
            format!(
                "{name}: {word} · {} → {}{pod}",
                time(n.started_at),
                time(n.ended_at)
            ),
        ));
    }
    fields
}

fn render_job(state: &State, shown: &ShownJob, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let record = state.jobs.record(&shown.id);
    let word = record.map_or("?", crate::jobs::state_word);
    let nodes = shown.logs.len();
    let node_name = |rank: usize| {
        record
            .and_then(|r| r.nodes.get(rank))
            .and_then(|rn| {
                state
                    .fleets
                    .iter()
                    .find(|f| Some(&f.name) == record.map(|r| &r.fleet))
                    .and_then(|f| f.nodes.iter().find(|n| n.index == rn.node))
            })
            .map_or_else(|| format!("node {rank}"), |n| n.name.clone())
    };
    let follow = match shown.follow.get(shown.node) {
        Some(NodeFollow::Following) => Span::styled("following", theme.tone(Tone::Info)),
        Some(NodeFollow::Exited(Some(0))) => Span::styled("exited 0", theme.tone(Tone::Pass)),
        Some(NodeFollow::Exited(Some(c))) => Span::styled(format!("exited {c}"), theme.tone(Tone::Fail)),
        Some(NodeFollow::Exited(None)) => Span::styled("ended (code unknown)", theme.tone(Tone::Warn)),
        Some(NodeFollow::Lost(e)) => Span::styled(format!("lost: {e}; reconnecting"), theme.tone(Tone::Warn)),
        None => Span::raw(""),
    };
    let title = Line::from(vec![
        Span::styled(
            format!(" {} ", record.map_or(shown.id.as_str(), |r| r.name.as_str())),
            theme.title(),
        ),
        Span::styled(format!("· {} · ", shown.id), theme.muted()),
        Span::styled(word, theme.tone(state_tone(word))),
        Span::styled(
            format!(
                " {} · ",
                record.map_or_else(String::new, |r| hms(duration(r, state.jobs.now)))
            ),
            theme.muted(),
        ),
        Span::styled(
            format!("node {}/{} {} ", shown.node + 1, nodes, node_name(shown.node)),
            theme.base(),
        ),
        follow,
        Span::raw(" "),
    ]);
    let outer = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(title)
        .style(theme.base());
    let inner = outer.inner(area);
    outer.render(area, buf);
    if inner.is_empty() {
        return;
    }
    let kueue = kueue_of(state, record);
    let waits = waits_of(state, record);
    let [head, kq, wq, log_area, charts] = job_areas(inner, kueue.is_some(), waits.len());
    ratatui::widgets::Paragraph::new(
        waits
            .iter()
            .map(|w| Line::styled(crate::tui::widgets::shown(w).into_owned(), theme.tone(Tone::Warn)))
            .collect::<Vec<_>>(),
    )
    .render(wq, buf);
    summary_line(&shown.metrics, record, theme, &node_name).render(head, buf);
    if let Some(w) = kueue {
        let tone = match w.state.as_str() {
            "pending" => Tone::Warn,
            "evicted" => Tone::Fail,
            _ => Tone::Info,
        };
        Line::from(vec![
            Span::styled("Kueue ", theme.muted()),
            Span::styled(format!("{} ", w.state), theme.tone(tone)),
            Span::styled(
                w.age_s
                    .map(|a| format!("{} · ", crate::cloud::gke::view::age(a)))
                    .unwrap_or_default(),
                theme.muted(),
            ),
            Span::raw(
                crate::tui::widgets::shown(&format!("{} ({}, queue {})", w.detail, w.name, w.queue))
                    .into_owned(),
            ),
        ])
        .render(kq, buf);
    }
    let wide = log_area.y == charts.y;
    render_log(state, shown, &node_name(shown.node), theme, log_area, buf);
    let [loss, rate] = if wide {
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts)
    } else {
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(charts)
    };
    chart(
        &shown.metrics,
        "loss",
        |s| s.loss,
        shown.node,
        &node_name,
        theme,
        loss,
        buf,
    );
    chart(
        &shown.metrics,
        "tokens/s/GPU",
        |s| s.tokens_per_s,
        shown.node,
        &node_name,
        theme,
        rate,
        buf,
    );
}

fn summary_line<'a>(
    m: &JobMetrics,
    record: Option<&store::JobRecord>,
    theme: &Theme,
    node_name: &dyn Fn(usize) -> String,
) -> Line<'a> {
    let s = m.summary();
    // Flags first, so they stay in sight on a narrow terminal.
    let mut spans = vec![];
    for d in m.drift() {
        spans.push(Span::styled(
            format!(
                "SLOW {} {:.3} s/step vs {:.3} · ",
                node_name(d.node),
                d.median_step_time,
                d.fleet_median
            ),
            theme.tone(Tone::Fail),
        ));
    }
    if let Some(r) = record {
        let failed: Vec<String> = r
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.exit_code.is_some_and(|c| c != 0))
            .map(|(i, n)| format!("{} exit {}", node_name(i), n.exit_code.unwrap_or(0)))
            .collect();
        if !failed.is_empty() {
            spans.push(Span::styled(
                format!("{} · ", failed.join(", ")),
                theme.tone(Tone::Fail),
            ));
        }
    }
    match s.parts() {
        None => spans.push(Span::styled(
            "no metric lines yet (Step/loss lines in a known format, or the job's own patterns)",
            theme.muted(),
        )),
        Some(mut parts) => {
            if s.mfu.is_none() && record.is_some_and(|r| r.peak_tflops.is_none()) {
                if let Some(last) = parts.last_mut() {
                    last.push_str(" (GPU peak unknown)");
                }
            }
            spans.push(Span::styled(parts.join(" · "), theme.base()));
        }
    }
    Line::from(spans)
}

fn render_log(state: &State, shown: &ShownJob, name: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // What the job printed: colour dropped, every other control shown.
    let lines: Vec<std::borrow::Cow<str>> = log_lines(state)
        .into_iter()
        .map(crate::tui::widgets::shown)
        .collect();
    let filter = state.filters[crate::tui::state::View::Jobs.index()].as_str();
    let mut title = vec![Span::styled(format!(" log {name} "), theme.title())];
    if !filter.is_empty() {
        title.push(Span::styled(
            format!("/{filter}: {} lines ", lines.len()),
            theme.accent(),
        ));
    }
    match shown.top {
        Some(t) => title.push(Span::styled(
            format!(
                "from line {} of {} (G: the end) ",
                (t + 1).min(lines.len()),
                lines.len()
            ),
            theme.muted(),
        )),
        None if shown.scroll > 0 => title.push(Span::styled(format!("↑{} ", shown.scroll), theme.muted())),
        None => {}
    }
    if !shown.wrap {
        title.push(Span::styled("cut at the edge (v wraps) ", theme.muted()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(false))
        .title(Line::from(title))
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    let h = usize::from(inner.height);
    let w = usize::from(inner.width);
    // Read from the top (`g`): a screenful from line `top` on, unless what is left from
    // there fills less than the screen (then the last screenful, as less shows the end).
    if let Some(top) = shown.top {
        let mut rows: Vec<String> = vec![];
        for l in lines.iter().skip(top) {
            if rows.len() >= h {
                break;
            }
            if shown.wrap {
                rows.extend(crate::tui::widgets::hard_wrap(l, w));
            } else {
                rows.push(l.to_string());
            }
        }
        if rows.len() >= h || top == 0 {
            rows.truncate(h);
            Paragraph::new(rows.into_iter().map(Line::raw).collect::<Vec<_>>()).render(inner, buf);
            return;
        }
    }
    let end = if shown.top.is_some() {
        lines.len()
    } else {
        lines.len().saturating_sub(shown.scroll)
    };
    if !shown.wrap {
        let start = end.saturating_sub(h);
        let text: Vec<Line> = lines[start..end]
            .iter()
            .map(|l| Line::raw(l.to_string()))
            .collect();
        Paragraph::new(text).render(inner, buf);
        return;
    }
    // Wrapped at the edge (as a terminal or less does): the rows of the lines up to
    // `end`, the newest at the bottom; the oldest of them may show only its end.
    let mut rows: Vec<String> = vec![];
    for l in lines[..end].iter().rev() {
        if rows.len() >= h {
            break;
        }
        let mut pieces = crate::tui::widgets::hard_wrap(l, w);
        pieces.reverse();
        rows.extend(pieces);
    }
    rows.truncate(h);
    rows.reverse();
    Paragraph::new(rows.into_iter().map(Line::raw).collect::<Vec<_>>()).render(inner, buf);
}

/// Points of one metric of one node, thinned to about `width * 2` (braille dots).
fn points(m: &JobMetrics, rank: usize, f: fn(&Sample) -> Option<f64>, width: u16) -> Vec<(f64, f64)> {
    let Some(series) = m.nodes.get(&rank) else {
        return vec![];
    };
    let all: Vec<(f64, f64)> = series
        .samples
        .iter()
        .filter_map(|s| Some((s.step? as f64, f(s)?)))
        .collect();
    let room = usize::from(width.max(1)) * 2;
    if all.len() <= room {
        return all;
    }
    let stride = all.len().div_ceil(room);
    all.chunks(stride)
        .map(|c| {
            let y = c.iter().map(|p| p.1).sum::<f64>() / c.len() as f64;
            (c[c.len() - 1].0, y)
        })
        .collect()
}

fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if v <= m * p {
            return m * p;
        }
    }
    10.0 * p
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A chart of one metric over the steps: the shown node bold, every other node that
/// reports it beside (up to 8), so a drifting node shows.
#[allow(clippy::too_many_arguments)]
fn chart(
    m: &JobMetrics,
    label: &str,
    f: fn(&Sample) -> Option<f64>,
    focus: usize,
    node_name: &dyn Fn(usize) -> String,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(false))
        .title(Span::styled(format!(" {label} "), theme.title()))
        .style(theme.base());
    let width = area.width.saturating_sub(8);
    let mut ranks: Vec<usize> = m.nodes.keys().copied().filter(|r| *r != focus).take(7).collect();
    ranks.insert(0, focus);
    let series: Vec<(usize, Vec<(f64, f64)>)> = ranks
        .into_iter()
        .map(|r| (r, points(m, r, f, width)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        Paragraph::new(Line::styled(format!("no {label} yet"), theme.muted()))
            .block(block)
            .render(area, buf);
        return;
    }
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for (_, p) in &series {
        for (x, y) in p {
            x0 = x0.min(*x);
            x1 = x1.max(*x);
            y1 = y1.max(*y);
        }
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let ymax = nice_max(y1);
    let palette = [Tone::Info, Tone::Pass, Tone::Warn, Tone::Fail];
    let names: Vec<String> = series.iter().map(|(r, _)| node_name(*r)).collect();
    let datasets: Vec<Dataset> = series
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(i, ((_, p), name))| {
            let style: Style = if i == 0 {
                theme.accent()
            } else {
                theme.tone(palette[i % palette.len()])
            };
            Dataset::default()
                .name(theme.series_name(i, name))
                .marker(theme.series_mark(i).0)
                .graph_type(GraphType::Line)
                .style(style)
                .data(p)
        })
        .collect();
    Chart::new(datasets)
        .block(block)
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .labels(vec![
                    Span::raw(format!("{x0:.0}")),
                    Span::raw(format!("step {x1:.0}")),
                ])
                .style(theme.muted()),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, ymax])
                .labels(vec![Span::raw("0"), Span::raw(short(ymax))])
                .style(theme.muted()),
        )
        .hidden_legend_constraints((Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)))
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_rounded_up() {
        assert_eq!(nice_max(9.17), 10.0);
        assert_eq!(nice_max(93276.0), 100000.0);
        assert_eq!(nice_max(1.2), 2.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(short(100000.0), "100k");
        assert_eq!(short(10.0), "10.00");
    }

    #[test]
    fn points_are_thinned_to_the_width() {
        let mut m = JobMetrics::default();
        for i in 1..=1000 {
            m.push_line(0, &format!("Step: {i} | Loss: {}", 1.0 / i as f64));
        }
        let p = points(&m, 0, |s| s.loss, 50);
        assert!(p.len() <= 100, "{}", p.len());
        assert_eq!(p.last().unwrap().0, 1000.0);
        assert!(points(&m, 3, |s| s.loss, 50).is_empty());
    }
}
