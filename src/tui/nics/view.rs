//! The NICs view, in three modes (`v` cycles): one node's NICs, one rail across the
//! nodes, the fleet's totals. Every chart is rx and tx (or one line per node) in braille
//! over the chosen span (`z`), its y-axis from the visible maximum; a missed sample is a
//! hole in a line. The rate tables give now / average / peak over the same window as the
//! charts. The imbalance flags are on the bottom rule in every mode, and the flagged NIC
//! or node is drawn in the failure colour wherever it appears.
//!
//! ```text
//! ┌ NICs of lab · per node: lab-1 (2/8) · 5 min · paused ─────────────────────────┐
//! │─ eth0 ctl · rx 1.2M tx 900k ─────────││─ eth1 data · rx 9.41G tx 9.40G ─────────│
//! │  2M│⣀⡀  ⣀⣀⣀                          ││ 10G│⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉⠉                 │
//! │   0│                                 ││   0│                                    │
//! │    └──────────────────── -5m  now    ││    └─────────────────────── -5m  now    │
//! │NIC     RX now    TX now    RX avg    TX avg    RX peak   TX peak                │
//! │eth1    9.41 G    9.40 G    …                                                    │
//! │GPU0 util ▁▂▅▇████ 97%  power ▁▂▅▇████ 650 W    (the GPU strip)                 │
//! └ ! lab-1 eth2 tx: 5.00 Mbit/s under half its peers (+1 more) ───────────────────┘
//!
//!  per rail: an rx and a tx chart of rail i, one line per node, and a node table;
//!  fleet:    the fleet's total rx and tx, and a table of each node's totals.
//! ```

use crate::telemetry::imbalance::Flag;
use crate::telemetry::layout::{Classifier, Role};
use crate::telemetry::report::format_bps;
use crate::telemetry::series::{Metric, NodeSeries, SeriesKey, WindowStats};
use crate::telemetry::Device;
use crate::tui::nics::{FleetFigures, FleetKey, Mode, NicsView, NodeTotals};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::rate_chart::{plot_columns, spark, RateChart, Trace};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget, Wrap};

/// A chart is not made smaller than this (rows: title rule, 3 plot rows, axis, labels).
const MIN_CHART_H: u16 = 6;
/// Nor narrower than this.
const MIN_CHART_W: u16 = 36;
/// Tables with full units and a role column from this width on.
const WIDE: u16 = 120;

/// What every part of the view draws from: the state, the theme and the window.
struct Ctx<'a> {
    v: &'a NicsView,
    /// The nodes the filter lets through.
    shown: Vec<usize>,
    theme: &'a Theme,
    from: u32,
    to: u32,
    span: u32,
}

impl Ctx<'_> {
    /// A NIC's values per braille column and its figures over the window, in one pass.
    fn summary(&self, node: &NodeSeries, dev: &Device, m: Metric, cols: usize) -> (Vec<f32>, WindowStats) {
        node.series(&SeriesKey::net(dev.clone(), m))
            .map(|s| s.summary(self.from, self.to, cols))
            .unwrap_or_else(|| (vec![f32::NAN; cols], WindowStats::EMPTY))
    }

    fn stats(&self, node: &NodeSeries, dev: &Device, m: Metric) -> WindowStats {
        node.series(&SeriesKey::net(dev.clone(), m))
            .map(|s| s.stats(self.from, self.to))
            .unwrap_or(WindowStats::EMPTY)
    }

    fn flagged(&self, node: usize, dev: Option<&Device>) -> Option<&Flag> {
        self.v
            .flags
            .iter()
            .find(|f| f.node == node && f.device.as_ref() == dev)
    }

    fn node_name(&self, i: usize) -> &str {
        self.v.nodes.get(i).map(String::as_str).unwrap_or("?")
    }
}

fn span_name(ms: u32) -> &'static str {
    match ms {
        60_000 => "1 min",
        300_000 => "5 min",
        900_000 => "15 min",
        _ => "1 h",
    }
}

/// A rate for a table cell: full units when wide, `9.41 G` when not.
fn rate(bps: f64, wide: bool) -> String {
    if bps == 0.0 {
        return if wide { "0 bit/s" } else { "0" }.into();
    }
    let s = format_bps(Some(bps).filter(|b| b.is_finite()));
    if wide {
        s
    } else {
        s.replace("bit/s", "").trim_end().to_string()
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Data => "data",
        Role::Control => "ctl",
        Role::Other => "other",
    }
}

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let v = &state.nics;
    let span = v.span_ms();
    let Some(fleet) = &v.fleet else {
        intro(theme, area, buf);
        return;
    };
    let (from, to) = v.window();
    let c = Ctx {
        v,
        shown: v.shown(state.filter()),
        theme,
        from,
        to,
        span,
    };
    let n = v.nodes.len();
    let what = match v.mode {
        Mode::Node if n > 0 => {
            let i = v.node.min(n - 1);
            format!("per node: {} ({}/{n})", c.node_name(i), i + 1)
        }
        Mode::Rail => {
            let rails = v.rails();
            match rails.get(v.rail.min(rails.len().saturating_sub(1))) {
                Some(r) => format!(
                    "per rail: {} ({}/{})",
                    r.label(),
                    v.rail.min(rails.len() - 1) + 1,
                    rails.len()
                ),
                None => "per rail".into(),
            }
        }
        m => m.label().to_string(),
    };
    let count = if c.shown.len() == n {
        crate::words::plural(n, "node")
    } else {
        format!("{} of {n} nodes match", c.shown.len())
    };
    let mut title = vec![Span::styled(
        format!(" NICs of {fleet} · {what} · {} · {count} ", span_name(span)),
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
    // A cause first; what follows from it is said with it.
    if let Some(f) = v.flags.iter().find(|f| f.follows.is_none()).or(v.flags.first()) {
        let label = |d: Option<&Device>| d.map(|d| d.label()).unwrap_or_else(|| "(node total)".into());
        let dev = label(f.device.as_ref());
        let after: Vec<String> = v
            .flags
            .iter()
            .filter(|x| {
                x.follows
                    .as_ref()
                    .is_some_and(|c| c.node == f.node && c.device == f.device && c.direction == f.direction)
            })
            .map(|x| {
                format!(
                    "{} {} {}",
                    c.node_name(x.node),
                    label(x.device.as_ref()),
                    x.direction.as_str()
                )
            })
            .collect();
        let rest = v.flags.len() - 1 - after.len();
        let then = if after.is_empty() {
            String::new()
        } else {
            format!(", starving {}", after.join(", "))
        };
        let more = if rest > 0 {
            format!(" (+{rest} more)")
        } else {
            String::new()
        };
        block = block.title_bottom(Line::styled(
            format!(
                " ! {} {dev} {}: {} under half its peers{then}{more} ",
                c.node_name(f.node),
                f.direction.as_str(),
                format_bps(Some(f.bps))
            ),
            theme.tone(Tone::Fail),
        ));
    }
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.is_empty() {
        return;
    }
    match v.mode {
        Mode::Node => render_node(&c, inner, buf),
        Mode::Rail => render_rail(&c, inner, buf),
        Mode::Fleet => render_fleet(&c, inner, buf),
    }
}

fn intro(theme: &Theme, area: Rect, buf: &mut Buffer) {
    Paragraph::new(vec![
        Line::styled("No samplers running.", theme.title()),
        Line::raw(""),
        Line::raw(
            "Select a fleet in Fleets (2), come back here and press Enter: every node runs a small \
             sh loop over its SSH connection (nothing to install) sampling /proc/net/dev, the RDMA \
             counters and nvidia-smi.",
        ),
        Line::raw(""),
        Line::raw("v: per node, per rail, fleet; n/N: next/previous node or rail; z: span (1 min .. 1 h); m: pause."),
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
}

fn message(c: &Ctx, area: Rect, buf: &mut Buffer, text: String, style: Style) {
    let _ = c;
    Paragraph::new(Line::styled(text, style))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// A node's state when it has nothing to chart: down, or no samples yet.
fn node_unavailable(c: &Ctx, i: usize) -> Option<(String, Style)> {
    if let Some(Some(why)) = c.v.down.get(i) {
        return Some((
            format!("{}: sampler down: {why}", c.node_name(i)),
            c.theme.tone(Tone::Fail),
        ));
    }
    if c.v.store.node(i).is_none_or(|n| n.records == 0) {
        return Some((
            format!("{}: waiting for samples…", c.node_name(i)),
            c.theme.muted(),
        ));
    }
    None
}

/// The title of a rx/tx chart: `eth1 data · rx 9.41G tx 9.40G`, flagged in red with `!`.
fn chart_title<'a>(
    c: &Ctx,
    label: String,
    rx: &WindowStats,
    tx: &WindowStats,
    flag: Option<&Flag>,
    wide: bool,
) -> Line<'a> {
    let t = c.theme;
    let mut spans = vec![];
    if flag.is_some() {
        spans.push(Span::styled(" ! ", t.tone(Tone::Fail)));
        spans.push(Span::styled(format!("{label} "), t.tone(Tone::Fail)));
    } else {
        spans.push(Span::styled(format!(" {label} "), t.title()));
    }
    // The chart draws tx first, rx second: under NO_COLOR their marks name them.
    spans.push(Span::styled(t.series_name(1, "rx"), t.rx()));
    spans.push(Span::raw(format!(" {} ", rate(rx.current, wide))));
    spans.push(Span::styled(t.series_name(0, "tx"), t.tx()));
    spans.push(Span::raw(format!(" {} ", rate(tx.current, wide))));
    Line::from(spans)
}

/// Per node: a chart per NIC, the rate table of the same NICs, the GPU strip.
fn render_node(c: &Ctx, area: Rect, buf: &mut Buffer) {
    let v = c.v;
    if v.nodes.is_empty() {
        return message(c, area, buf, "the fleet has no nodes".into(), c.theme.muted());
    }
    if c.shown.is_empty() {
        return message(
            c,
            area,
            buf,
            "no node matches the filter (ctrl-l clears it)".into(),
            c.theme.muted(),
        );
    }
    let i = v.node.min(v.nodes.len() - 1);
    if let Some((text, style)) = node_unavailable(c, i) {
        return message(c, area, buf, text, style);
    }
    let Some(node) = v.store.node(i) else { return };
    let nics = Classifier::auto().charted(&v.store, i);
    if nics.is_empty() {
        return message(
            c,
            area,
            buf,
            "no NICs seen (only loopback and virtual interfaces)".into(),
            c.theme.muted(),
        );
    }
    let n = nics.len();
    let first = v.scroll.min(n - 1);
    let h = area.height;
    let gpus: Vec<u32> = node.gpus.keys().copied().collect();
    let roomy = h >= 36;
    let per_row = usize::from(area.width / 30).max(1);
    let (table_h, gpu_h) = if h < 10 {
        (0, 0)
    } else {
        let table_h = (1 + (n - first) as u16).min((h / 4).max(3));
        let gpu_h = match gpus.len() {
            0 => 0,
            g if roomy => g as u16,
            g => g.div_ceil(per_row) as u16,
        }
        .min(h / 4);
        (table_h, gpu_h)
    };
    let [charts, table, strip] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(table_h),
        Constraint::Length(gpu_h),
    ])
    .areas(area);
    let cols = usize::from(charts.width / MIN_CHART_W).clamp(1, 3).min(n - first);
    let rows_fit = usize::from((charts.height / MIN_CHART_H).max(1));
    let rows = (n - first).div_ceil(cols).min(rows_fit);
    let wide = charts.width / cols as u16 >= 50;
    let grid_rows = Layout::vertical(vec![Constraint::Ratio(1, rows as u32); rows]).split(charts);
    // The figures of the charted NICs, for the table (the same window, computed once).
    let mut charted: std::collections::HashMap<Device, (WindowStats, WindowStats)> = Default::default();
    for (r, row_area) in grid_rows.iter().enumerate() {
        let cells = Layout::horizontal(vec![Constraint::Ratio(1, cols as u32); cols]).split(*row_area);
        for (k, cell) in cells.iter().enumerate() {
            let Some((dev, role)) = nics.get(first + r * cols + k) else {
                continue;
            };
            // A column between neighbours.
            let cell = if k + 1 < cols {
                Rect {
                    width: cell.width.saturating_sub(1),
                    ..*cell
                }
            } else {
                *cell
            };
            let pc = plot_columns(cell);
            let (rx, srx) = c.summary(node, dev, Metric::Rx, pc);
            let (tx, stx) = c.summary(node, dev, Metric::Tx, pc);
            let flag = c.flagged(i, Some(dev));
            let title = chart_title(
                c,
                format!("{} {}", dev.label(), role_name(*role)),
                &srx,
                &stx,
                flag,
                wide,
            );
            charted.insert(dev.clone(), (srx, stx));
            RateChart {
                title,
                series: vec![
                    Trace {
                        values: &tx,
                        style: c.theme.tx(),
                    },
                    Trace {
                        values: &rx,
                        style: c.theme.rx(),
                    },
                ],
                span_ms: c.span,
                theme: c.theme,
                rule: if flag.is_some() {
                    c.theme.tone(Tone::Fail)
                } else {
                    c.theme.muted()
                },
                top: None,
            }
            .render(cell, buf);
        }
    }
    if table_h > 0 {
        let wide = table.width >= WIDE;
        let rows: Vec<Row> = nics[first..]
            .iter()
            .map(|(dev, role)| {
                let flagged = c.flagged(i, Some(dev)).is_some();
                let mut cells = vec![Cell::from(format!(
                    "{}{}",
                    if flagged { "! " } else { "" },
                    dev.label()
                ))];
                if wide {
                    cells.push(Cell::from(role_name(*role)));
                }
                let (rx, tx) = charted
                    .get(dev)
                    .copied()
                    .unwrap_or_else(|| (c.stats(node, dev, Metric::Rx), c.stats(node, dev, Metric::Tx)));
                cells.extend(rate_cells(&rx, &tx, wide));
                let style = if flagged {
                    c.theme.tone(Tone::Fail)
                } else {
                    c.theme.base()
                };
                Row::new(cells).style(style)
            })
            .collect();
        // Narrow tables drop "bit/s" from each figure: the first heading says it once (b/s).
        let mut header = vec![if wide { "NIC" } else { "NIC b/s" }];
        if wide {
            header.push("ROLE");
        }
        header.extend(RATE_HEADER);
        let mut widths = vec![Constraint::Length(if wide { 16 } else { 10 })];
        if wide {
            widths.push(Constraint::Length(5));
        }
        widths.extend([Constraint::Length(if wide { 12 } else { 10 }); 6]);
        Table::new(rows, widths)
            .header(Row::new(header).style(c.theme.muted()))
            .render(table, buf);
    }
    if gpu_h > 0 {
        crate::tui::widgets::gpu_strip::GpuStrip {
            node,
            gpus: &gpus,
            from: c.from,
            to: c.to,
            roomy,
            per_row,
            theme: c.theme,
        }
        .render(strip, buf);
    }
}

const RATE_HEADER: [&str; 6] = ["RX now", "TX now", "RX avg", "TX avg", "RX peak", "TX peak"];

fn rate_cells<'a>(rx: &WindowStats, tx: &WindowStats, wide: bool) -> Vec<Cell<'a>> {
    [rx.current, tx.current, rx.avg, tx.avg, rx.peak, tx.peak]
        .into_iter()
        .map(|b| Cell::from(rate(b, wide)))
        .collect()
}

/// Per rail: rail i of every node in one chart (rx, and tx), a line per node, and the
/// nodes' rates on that rail.
fn render_rail(c: &Ctx, area: Rect, buf: &mut Buffer) {
    let v = c.v;
    let rails = v.rails();
    if rails.is_empty() {
        return message(
            c,
            area,
            buf,
            "no data NICs seen yet (rails are the data NICs: not the control NIC, loopback or virtual interfaces)"
                .into(),
            c.theme.muted(),
        );
    }
    let ri = v.rail.min(rails.len() - 1);
    let rail = &rails[ri];
    let shown = &c.shown;
    let n = shown.len();
    let h = area.height;
    let table_h = if h < 10 {
        0
    } else {
        (1 + n as u16).min((h / 3).max(3))
    };
    let [charts, table] = Layout::vertical([Constraint::Min(1), Constraint::Length(table_h)]).areas(area);
    let side = charts.width >= 2 * MIN_CHART_W + 40 || charts.height < 2 * MIN_CHART_H;
    let halves = if side {
        Layout::horizontal([Constraint::Ratio(1, 2); 2]).split(charts)
    } else {
        Layout::vertical([Constraint::Ratio(1, 2); 2]).split(charts)
    };
    let dirs = [
        (Metric::Rx, crate::telemetry::Direction::Rx),
        (Metric::Tx, crate::telemetry::Direction::Tx),
    ];
    // Each node's figures on the rail, per direction, for the table.
    let mut figures: std::collections::HashMap<usize, [WindowStats; 2]> = Default::default();
    for (k, (metric, dir)) in dirs.into_iter().enumerate() {
        let mut cell = halves[k];
        if side && k == 0 {
            cell.width = cell.width.saturating_sub(1);
        }
        let pc = plot_columns(cell);
        let mut lines: Vec<(Vec<f32>, Style, bool)> = shown
            .iter()
            .map(|&i| {
                let flagged = v
                    .flags
                    .iter()
                    .any(|f| f.node == i && f.device.as_ref() == Some(rail) && f.direction == dir);
                let values = match v.store.node(i) {
                    Some(node) => {
                        let (values, stats) = c.summary(node, rail, metric, pc);
                        figures.entry(i).or_insert([WindowStats::EMPTY; 2])[k] = stats;
                        values
                    }
                    None => vec![f32::NAN; pc],
                };
                let style = if flagged {
                    c.theme.tone(Tone::Fail)
                } else {
                    c.theme.nic(i)
                };
                (values, style, flagged)
            })
            .collect();
        // Flagged nodes on top.
        lines.sort_by_key(|l| l.2);
        let any_flag = lines.iter().any(|l| l.2);
        let word = match metric {
            Metric::Rx => Span::styled("rx", c.theme.rx()),
            _ => Span::styled("tx", c.theme.tx()),
        };
        let title = Line::from(vec![
            Span::styled(
                format!(" {}rail {} ", if any_flag { "! " } else { "" }, rail.label()),
                if any_flag {
                    c.theme.tone(Tone::Fail)
                } else {
                    c.theme.title()
                },
            ),
            word,
            Span::raw(format!(" · {} ", crate::words::plural(n, "node"))),
        ]);
        RateChart {
            title,
            series: lines
                .iter()
                .map(|(values, style, _)| Trace {
                    values,
                    style: *style,
                })
                .collect(),
            span_ms: c.span,
            theme: c.theme,
            rule: c.theme.muted(),
            top: None,
        }
        .render(cell, buf);
    }
    if table_h == 0 {
        return;
    }
    let wide = table.width >= WIDE;
    let visible = usize::from(table_h.saturating_sub(1)).max(1);
    let first = v.scroll.min(n.saturating_sub(visible));
    let rows: Vec<Row> = shown[first..]
        .iter()
        .take(visible)
        .map(|&i| {
            let flagged = v
                .flags
                .iter()
                .any(|f| f.node == i && f.device.as_ref() == Some(rail));
            let name = Cell::from(Line::from(vec![
                Span::styled("■ ", c.theme.nic(i)),
                Span::raw(format!("{}{}", if flagged { "! " } else { "" }, c.node_name(i))),
            ]));
            if let Some((text, style)) = node_unavailable(c, i) {
                return Row::new(vec![name, Cell::from(Span::styled(text, style))]);
            }
            let Some([rx, tx]) = figures.get(&i).copied() else {
                return Row::new(vec![name]);
            };
            let mut cells = vec![name];
            cells.extend(rate_cells(&rx, &tx, wide));
            Row::new(cells).style(if flagged {
                c.theme.tone(Tone::Fail)
            } else {
                c.theme.base()
            })
        })
        .collect();
    let mut header = vec![if wide { "NODE" } else { "NODE b/s" }];
    header.extend(RATE_HEADER);
    let mut widths = vec![Constraint::Length(if wide { 20 } else { 14 })];
    widths.extend([Constraint::Length(if wide { 12 } else { 9 }); 6]);
    Table::new(rows, widths)
        .header(Row::new(header).style(c.theme.muted()))
        .render(table, buf);
}

/// A node's totals over its charted NICs ([`NodeSeries::sum_in`]) in `(from, to]`, rx
/// and tx: per braille column (max per column), and their now / average / peak. The NICs
/// are classified once for both.
fn node_totals(
    v: &NicsView,
    classifier: &Classifier,
    i: usize,
    from: u32,
    to: u32,
    cols: usize,
) -> Option<NodeTotals> {
    let node = v.store.node(i)?;
    let charted = classifier.charted(&v.store, i);
    let sum = |metric: Metric| {
        let keys: Vec<SeriesKey> = charted
            .iter()
            .map(|(d, _)| SeriesKey::net(d.clone(), metric))
            .collect();
        let sum = node.sum_in(&keys, from, to)?;
        Some(node.series_of(&sum).summary(from, to, cols))
    };
    let (rx, srx) = sum(Metric::Rx)?;
    let (tx, stx) = sum(Metric::Tx)?;
    Some(NodeTotals { rx, tx, srx, stx })
}

/// The fleet mode's figures over `shown` nodes for the window and `columns`: the kept
/// ones when they are for this second of store time, else worked out and kept.
pub fn fleet_figures(v: &NicsView, shown: &[usize], columns: usize) -> std::rc::Rc<FleetFigures> {
    let (from, to) = v.window();
    let is_up = |i: usize| !matches!(v.down.get(i), Some(Some(_)));
    let key = FleetKey {
        second: to / 1000,
        span: v.span_ms(),
        columns,
        shown: shown.to_vec(),
        down: v.down.iter().filter(|d| d.is_some()).count(),
    };
    v.fleet_memo.get(key, |key| {
        let classifier = Classifier::auto();
        let per_node: Vec<Option<NodeTotals>> = shown
            .iter()
            .map(|&i| {
                if is_up(i) {
                    node_totals(v, &classifier, i, from, to, columns)
                } else {
                    None
                }
            })
            .collect();
        let known = per_node.iter().flatten();
        FleetFigures {
            rx: strict_sum(known.clone().map(|t| t.rx.as_slice()), columns),
            tx: strict_sum(known.map(|t| t.tx.as_slice()), columns),
            up: shown.iter().filter(|&&i| is_up(i)).count(),
            per_node,
            key,
        }
    })
}

/// The column-by-column sum of `curves`, NaN wherever one of them is (curves with
/// nothing known take no part), as [`crate::telemetry::Telemetry::total`].
fn strict_sum<'a>(curves: impl Iterator<Item = &'a [f32]>, cols: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; cols];
    let mut first = true;
    for curve in curves.filter(|c| c.iter().any(|v| v.is_finite())) {
        for (o, v) in out.iter_mut().zip(curve) {
            *o = if first { *v } else { *o + v };
        }
        first = false;
    }
    out
}

/// `v` in `n` buckets, each the largest known value of its share of `v` (NaN: none).
fn rebin(v: &[f32], n: usize) -> Vec<f32> {
    (0..n)
        .map(|b| {
            let (a, z) = (
                b * v.len() / n.max(1),
                ((b + 1) * v.len() / n.max(1)).max(b * v.len() / n.max(1) + 1),
            );
            v[a.min(v.len())..z.min(v.len())]
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .fold(f32::NAN, |m, x| if m.is_nan() || x > m { x } else { m })
        })
        .collect()
}

/// The fleet: its total rx and tx over time, and every node's totals (the selected node
/// highlighted; `v` takes it to the per-node mode).
fn render_fleet(c: &Ctx, area: Rect, buf: &mut Buffer) {
    let v = c.v;
    let all = &c.shown;
    let n = all.len();
    let h = area.height;
    let table_h = if h < 10 { 0 } else { (1 + n as u16).min(h / 2) };
    let [chart, table] = Layout::vertical([Constraint::Min(1), Constraint::Length(table_h)]).areas(area);
    let pc = plot_columns(chart);
    // Each node's totals once: the fleet's is their sum, the table shows them.
    v.fleet_memo.1.set(pc);
    let figures = fleet_figures(v, all, pc);
    let (per_node, rx, tx) = (&figures.per_node, &figures.rx, &figures.tx);
    let up = figures.up;
    let known = per_node.iter().flatten();
    let fleet_flags = v.flags.iter().filter(|f| f.device.is_none()).count();
    // Now: the sum of the nodes' latest rates (as the table's rows add up).
    let now = |pick: fn(&NodeTotals) -> f64| {
        known
            .clone()
            .map(pick)
            .filter(|x| x.is_finite())
            .fold(f64::NAN, |a, x| if a.is_nan() { x } else { a + x })
    };
    let title = Line::from(vec![
        Span::styled(
            if up == n {
                format!(" fleet total of {} ", crate::words::plural(n, "node"))
            } else {
                format!(" fleet total of {up}/{n} nodes (down: {}) ", n - up)
            },
            c.theme.title(),
        ),
        Span::styled(c.theme.series_name(1, "rx"), c.theme.rx()),
        Span::raw(format!(" {} ", rate(now(|t| t.srx.current), true))),
        Span::styled(c.theme.series_name(0, "tx"), c.theme.tx()),
        Span::raw(format!(" {} ", rate(now(|t| t.stx.current), true))),
        if fleet_flags > 0 {
            Span::styled(
                format!("· ! {fleet_flags} node totals under half "),
                c.theme.tone(Tone::Fail),
            )
        } else {
            Span::raw("")
        },
    ]);
    RateChart {
        title,
        series: vec![
            Trace {
                values: tx,
                style: c.theme.tx(),
            },
            Trace {
                values: rx,
                style: c.theme.rx(),
            },
        ],
        span_ms: c.span,
        theme: c.theme,
        rule: c.theme.muted(),
        top: None,
    }
    .render(chart, buf);
    if table_h == 0 || n == 0 {
        return;
    }
    let wide = table.width >= WIDE;
    let visible = usize::from(table_h.saturating_sub(1)).max(1);
    // The selected node's row, kept on the page.
    let sel = all.iter().position(|&i| i == v.node).unwrap_or(0);
    let first = sel.saturating_sub(visible - 1);
    let name_w: u16 = if wide { 18 } else { 12 };
    let rate_w: u16 = if wide { 12 } else { 9 };
    let spark_w = usize::from(table.width.saturating_sub(name_w + 9 + 7 * (rate_w + 1))).max(4);
    let rows: Vec<Row> = (first..n)
        .take(visible)
        .map(|row| {
            let i = all[row];
            let name = Cell::from(c.node_name(i).to_string());
            let row_style = if row == sel {
                c.theme.selection()
            } else {
                c.theme.base()
            };
            if let Some((text, style)) = node_unavailable(c, i) {
                return Row::new(vec![name, Cell::from(Span::styled(text, style))]).style(row_style);
            }
            let Some(t) = &per_node[row] else {
                return Row::new(vec![name]).style(row_style);
            };
            let (srx, stx) = (t.srx, t.stx);
            let nic_flags = v
                .flags
                .iter()
                .filter(|f| f.node == i && f.device.is_some())
                .count();
            let node_flag = c.flagged(i, None).is_some();
            let mut cells = vec![name];
            cells.extend(rate_cells(&srx, &stx, wide));
            let mark = match (node_flag, nic_flags) {
                (true, _) => "! node".to_string(),
                (false, 0) => String::new(),
                (false, k) => format!("! {k} NIC{}", if k > 1 { "s" } else { "" }),
            };
            cells.push(Cell::from(mark));
            cells.push(Cell::from(Span::styled(
                spark(&rebin(&t.rx, spark_w), 0.0),
                c.theme.rx(),
            )));
            let style = if node_flag || nic_flags > 0 {
                row_style.patch(c.theme.tone(Tone::Fail))
            } else {
                row_style
            };
            Row::new(cells).style(style)
        })
        .collect();
    let mut header = vec![if wide { "NODE" } else { "NODE b/s" }];
    header.extend(RATE_HEADER);
    header.extend(["FLAG", "rx"]);
    let mut widths = vec![Constraint::Length(name_w)];
    widths.extend([Constraint::Length(rate_w); 6]);
    widths.push(Constraint::Length(8));
    widths.push(Constraint::Min(4));
    Table::new(rows, widths)
        .header(Row::new(header).style(c.theme.muted()))
        .render(table, buf);
}
