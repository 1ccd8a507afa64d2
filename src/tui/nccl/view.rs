//! The NCCL view: the runs of the state store with their verdicts, the chosen run's busbw
//! curves (out-of-place, in-place) drawn as its rows arrive against the expected curve of
//! its machine type, its verdict, profile and summary; or two marked runs side by side.
//!
//! ```text
//! ┌ NCCL runs (2) ──────────────┐┌ nccl-all_reduce-… · all_reduce · 2 ranks · NCCL 2.28.9 · ended 0 ┐
//! │▌A all_reduce-… local ok pass││ 347 GB/s                                 ⣀⣠⠤⠒⠉ ── out-of-place   │
//! │ B all_gather-… lab   ok warn││                                 ⣀⠤⠔⠒⠉      ·· expected         │
//! │                             ││ 8B ─────────────── message size (log2) ─────────────── 8G       │
//! │                             ││ peak 347.71 GB/s at 8G · avg 112.161 · 31 rows · transport …    │
//! │                             ││ PASS 100% of 347.71 GB/s (measured at 8G) · 2xH200 · profile none│
//! └─────────────────────────────┘└──────────────────────────────────────────────────────────────────┘
//! ```
//! With two runs marked (`c`), the right side shows both curves and a table per size:
//! busbw of A and B and B/A. A run a node ended with a non-zero exit code is `fail` in
//! the list and `FAIL cause: <line>` where its verdict is (the line of its output that
//! says why: NCCL's WARN first); one that failed before its first row also shows the
//! cause above its last output.

use crate::nccl::expect::{self, Grade};
use crate::nccl::history::{Comparison, SavedRun, StragglerReport};
use crate::nccl::human_size;
use crate::store;
use crate::tui::nccl::{visible, Field, RunDialog, RunStatus};
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::dialog_area;
use crate::tui::widgets::rate_chart::tick;
use crate::tui::widgets::table::{self, Col, Cut};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, GraphType, LegendPosition, Paragraph, Row, Table, Widget, Wrap,
};

fn grade_tone(g: Grade) -> Tone {
    match g {
        Grade::Pass => Tone::Pass,
        Grade::Warn => Tone::Warn,
        Grade::Fail => Tone::Fail,
        Grade::Unknown => Tone::Info,
    }
}

pub fn render(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let full = area;
    let area = match (selected(state), state.nccl.detail) {
        (Some(r), true) => crate::tui::widgets::detail::render_below(
            area,
            r.id.trim_start_matches("nccl-"),
            &run_detail(state, r),
            theme,
            buf,
        ),
        _ => area,
    };
    let [_, main, list, st] = areas(state, area);
    if let Some(r) = &state.nccl.stragglers {
        render_stragglers(r, theme, st, buf);
    }
    let runs = visible(state);
    // Below 40 columns the list keeps the run, its state and verdict; the fleet goes.
    let narrow = list.width < 40;
    let cells: Vec<(&'static str, String, String, Span, Span, bool)> = runs
        .iter()
        .map(|r| {
            let sel = state.nccl.selected.as_deref() == Some(r.id.as_str());
            let code = r.nodes.iter().filter_map(|n| n.exit_code).max();
            let shown_end = match &state.nccl.shown {
                Some((id, _, RunStatus::Ended(end))) if *id == r.id => end.worst(),
                _ => None,
            };
            let exit = code.or(shown_end);
            let status = match exit {
                Some(0) => Span::styled("ok", theme.tone(Tone::Pass)),
                Some(c) => Span::styled(format!("exit {c}"), theme.tone(Tone::Fail)),
                None => Span::styled("running", theme.tone(Tone::Info)),
            };
            let mark = match state.nccl.compare.iter().position(|c| *c == r.id) {
                Some(0) => "A ",
                Some(_) => "B ",
                None => "",
            };
            // A run a node ended with a non-zero exit code failed, whatever its rows.
            let grade = match (exit, state.nccl.saved(&r.id).and_then(|s| s.verdict.as_ref())) {
                (Some(c), _) if c != 0 => Some(Grade::Fail),
                (_, v) => v.map(|v| v.grade),
            };
            let verdict = match grade {
                Some(g) => Span::styled(g.as_str(), theme.tone(grade_tone(g))),
                None => Span::styled("-", theme.muted()),
            };
            let name = if narrow {
                narrow_name(r, &runs)
            } else {
                r.id.trim_start_matches("nccl-").to_string()
            };
            (mark, name, r.fleet.clone(), status, verdict, sel)
        })
        .collect();
    // Run ids grow first and keep their end (ids differ in their last characters); the
    // fleet takes what is left; state and verdict are never cut. (The list has no header.)
    let cols: Vec<Col> = if narrow {
        vec![Col::name(""), Col::whole(""), Col::whole("")]
    } else {
        vec![
            Col::name(""),
            Col::name("").grow(1),
            Col::whole(""),
            Col::whole(""),
        ]
    };
    let texts: Vec<Vec<String>> = cells
        .iter()
        .map(|(mark, name, fleet, status, verdict, _)| {
            let mut t = vec![format!("{mark}{name}")];
            if !narrow {
                t.push(fleet.clone());
            }
            t.extend([status.content.to_string(), verdict.content.to_string()]);
            t
        })
        .collect();
    let widths = table::widths(&cols, &texts, list.width.saturating_sub(2));
    let rows: Vec<Row> = cells
        .into_iter()
        .map(|(mark, name, fleet, status, verdict, sel)| {
            let name_w = usize::from(widths[0]).saturating_sub(mark.chars().count());
            let mut cells = vec![Line::from(vec![
                Span::styled(mark, theme.accent()),
                Span::raw(table::fit(&name, name_w, Cut::Start)),
            ])];
            if !narrow {
                cells.push(Line::raw(table::fit(&fleet, usize::from(widths[1]), Cut::Start)));
            }
            cells.push(Line::from(status));
            cells.push(Line::from(verdict));
            Row::new(cells).style(if sel { theme.selection() } else { theme.base() })
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
        let key = state
            .keymap
            .chords(
                crate::tui::action::Context::Global,
                crate::tui::action::Action::NcclRun,
            )
            .first()
            .map_or_else(|| ":".to_string(), |c| c.to_string());
        Paragraph::new(vec![
            Line::raw(format!(
                "No NCCL runs yet. {key} starts one here, or from a shell:"
            )),
            Line::styled("flightdeck nccl run FLEET -b 8 -e 8G -g 8", theme.accent()),
            Line::raw("then r here; Enter follows the selected run, c marks two to compare."),
        ])
        .wrap(Wrap { trim: false })
        .block(block)
        .render(list, buf);
    } else {
        let widths: Vec<Constraint> = widths.iter().map(|w| Constraint::Length(*w)).collect();
        Table::new(rows, widths).block(block).render(list, buf);
    }
    match state.nccl.comparison() {
        Some((cmp, a, b)) => render_compare(theme, main, buf, &cmp, a, b),
        None => render_run(state, theme, main, buf),
    }
    if let Some(d) = &state.nccl.dialog {
        render_dialog(d, theme, full, buf);
    }
}

/// The selected run among those the filter lets through.
fn selected(state: &State) -> Option<&store::RunRecord> {
    visible(state)
        .into_iter()
        .find(|r| state.nccl.selected.as_deref() == Some(r.id.as_str()))
}

/// The view's parts: the left column, the run (or comparison) beside it, and in the left
/// column the runs list and under it the straggler result (empty without one).
fn areas(state: &State, area: Rect) -> [Rect; 4] {
    let [left, main] = Layout::horizontal([
        Constraint::Length((area.width * 2 / 5).clamp(20, 44)),
        Constraint::Min(10),
    ])
    .areas(area);
    let (list, st) = match &state.nccl.stragglers {
        Some(r) => {
            let want = 4 + r.node_ranking.len() + r.link_ranking.len();
            let h = (want as u16).min(left.height / 2);
            let [list, st] = Layout::vertical([Constraint::Min(3), Constraint::Length(h)]).areas(left);
            (list, st)
        }
        None => (left, Rect::default()),
    };
    [left, main, list, st]
}

/// Where the wheel moves the selection (`area`: the view's): the runs list, not the
/// run's chart, the straggler result or the `d` panel.
pub fn wheel_area(state: &State, area: Rect) -> Rect {
    let area = match (selected(state), state.nccl.detail) {
        (Some(r), true) => crate::tui::widgets::detail::split(area, &run_detail(state, r)).0,
        _ => area,
    };
    areas(state, area)[2]
}

/// A run's collective and its id's salt (`nccl-all_reduce-1795474251-594d`).
fn id_parts(id: &str) -> (&str, &str) {
    let rest = id.trim_start_matches("nccl-");
    let mut parts = rest.rsplitn(3, '-');
    let salt = parts.next().unwrap_or(rest);
    (parts.last().unwrap_or(rest), salt)
}

/// A run in a list narrower than 40 columns, where its whole id does not fit: the
/// collective and when (`all_reduce 22:50`), to the second where another listed run of
/// the collective started in the same minute (`all_reduce 22:50:07`), and with the id's
/// salt where one started in the same second (`all_reduce 22:50:07 594d`): what tells
/// the run apart from the others is kept.
fn narrow_name(r: &store::RunRecord, runs: &[&store::RunRecord]) -> String {
    let (collective, salt) = id_parts(&r.id);
    let alike = |same: fn(u64, u64) -> bool| {
        runs.iter()
            .any(|o| o.id != r.id && id_parts(&o.id).0 == collective && same(o.started_at, r.started_at))
    };
    let t = r.started_at;
    let minute = format!("{:02}:{:02}", t / 3600 % 24, t / 60 % 60);
    if alike(|a, b| a == b) {
        format!("{collective} {minute}:{:02} {salt}", t % 60)
    } else if alike(|a, b| a / 60 == b / 60) {
        format!("{collective} {minute}:{:02}", t % 60)
    } else {
        format!("{collective} {minute}")
    }
}

/// The `d` panel's fields of run `r`: its whole id, what it measured and how it went
/// (from its history entry where there is one).
fn run_detail(state: &State, r: &store::RunRecord) -> Vec<(&'static str, String)> {
    let saved = state.nccl.saved(&r.id);
    let gbs = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2} GB/s"));
    let sizes = saved
        .map(|s| {
            let range = match (s.rows.first(), s.rows.last()) {
                (Some(a), Some(b)) => format!("{} to {}, ", human_size(a.size), human_size(b.size)),
                _ => String::new(),
            };
            format!("{range}{} {}", s.spec.engine, s.spec.args)
        })
        .unwrap_or_default();
    let nodes = match saved {
        Some(s) if !s.nodes.is_empty() => s.nodes.join(", "),
        _ => r
            .nodes
            .iter()
            .map(|n| format!("node {}", n.node))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let count = saved.map_or(r.nodes.len(), |s| s.nodes.len().max(r.nodes.len()));
    let ranks = saved
        .and_then(|s| s.ranks)
        .map_or(String::new(), |n| format!(", {n} ranks"));
    let verdict = saved
        .and_then(|s| s.verdict.as_ref())
        .map_or(String::new(), |v| format!("{}: {}", v.grade.as_str(), v.reason));
    let codes = r
        .nodes
        .iter()
        .map(|n| n.exit_code.map_or("-".into(), |c| c.to_string()))
        .collect::<Vec<_>>()
        .join(",");
    let ended = saved.and_then(|s| s.ended_at).or_else(|| {
        r.nodes
            .iter()
            .map(|n| n.ended_at)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
    });
    vec![
        ("run id", r.id.clone()),
        ("fleet", r.fleet.clone()),
        (
            "collective",
            saved.map_or_else(|| r.kind.clone(), |s| s.spec.collective.clone()),
        ),
        ("sizes", sizes),
        ("nodes", format!("{count}{ranks}: {nodes}")),
        ("verdict", verdict),
        ("exit codes", codes),
        ("started (UTC)", store::format_utc(r.started_at)),
        ("ended (UTC)", ended.map_or("-".into(), store::format_utc)),
        ("peak busbw", gbs(saved.and_then(|s| s.peak_busbw))),
        ("avg busbw", gbs(saved.and_then(|s| s.avg_busbw))),
    ]
}

/// The last straggler finder result: what is slow, then nodes and pairs, slowest first.
fn render_stragglers(r: &StragglerReport, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let bw = |b: Option<f64>| b.map_or("failed".to_string(), |x| format!("{x:.1}"));
    let mut lines = vec![];
    for (n, why) in &r.slow_nodes {
        lines.push(Line::styled(
            format!("SLOW NODE {n}: {why}"),
            theme.tone(Tone::Fail),
        ));
    }
    for (a, b, why) in &r.slow_links {
        lines.push(Line::styled(
            format!("SLOW LINK {a}-{b}: {why}"),
            theme.tone(Tone::Fail),
        ));
    }
    if !r.unresolved.is_empty() {
        lines.push(Line::styled(
            format!("unresolved: {}", r.unresolved.join(", ")),
            theme.tone(Tone::Warn),
        ));
    }
    if lines.is_empty() {
        lines.push(Line::styled("no slow node or link", theme.tone(Tone::Pass)));
    }
    lines.push(Line::styled("alone, slowest first (GB/s)", theme.muted()));
    for (n, b) in &r.node_ranking {
        let slow = r.slow_nodes.iter().any(|(s, _)| s == n) || r.named.as_deref() == Some(n.as_str());
        let style = if slow {
            theme.tone(Tone::Fail)
        } else {
            theme.base()
        };
        lines.push(Line::styled(format!(" {n:<16} {:>8}", bw(*b)), style));
    }
    if !r.link_ranking.is_empty() {
        lines.push(Line::styled("pairs, slowest first", theme.muted()));
        for (a, b, x) in &r.link_ranking {
            let slow = r.slow_links.iter().any(|(s, t, _)| (s, t) == (a, b));
            let style = if slow {
                theme.tone(Tone::Fail)
            } else {
                theme.base()
            };
            lines.push(Line::styled(
                format!(" {:<16} {:>8}", format!("{a}+{b}"), bw(*x)),
                style,
            ));
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(false))
        .title(Span::styled(
            format!(" stragglers · {} · {} UTC ", r.fleet, store::format_utc(r.at)),
            theme.title(),
        ))
        .style(theme.base());
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(block)
        .render(area, buf);
}

/// The run dialog over the view: a line per field, then the profile's environment.
fn render_dialog(d: &RunDialog, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(r) = dialog_area(area, buf) else {
        return;
    };
    let footer = match &d.problem {
        Some(p) => Line::styled(format!(" {p} "), theme.tone(Tone::Fail)),
        None => Line::styled(
            " tab next field · ←/→ choose · ctrl-s starts · esc cancels ",
            theme.muted(),
        ),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(Span::styled(" new NCCL run ", theme.title()))
        .title_bottom(footer)
        .style(theme.base());
    let inner = block.inner(r);
    block.render(r, buf);
    let fields = Field::ALL.len() as u16 - 1;
    let [top, env_label, env_area] = Layout::vertical([
        Constraint::Length(fields),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(inner);
    let text = |t: &tui_textarea::TextArea| t.lines().join(" ");
    let fleet = d.fleet();
    for (i, f) in Field::ALL.iter().take(fields as usize).enumerate() {
        let focused = d.focus == *f;
        let value: Vec<Span> = match f {
            Field::Fleet => vec![
                Span::raw(fleet.map_or("-".into(), |f| f.name.clone())),
                Span::styled(
                    fleet.map_or(String::new(), |f| {
                        format!(
                            "  {} · {}",
                            crate::words::plural(f.nodes, "node"),
                            f.machine_type.as_deref().unwrap_or("machine type unknown")
                        )
                    }),
                    theme.muted(),
                ),
            ],
            Field::Collective => vec![Span::raw(crate::nccl::runner::COLLECTIVES[d.collective])],
            Field::MinBytes => vec![Span::raw(text(&d.min_bytes))],
            Field::MaxBytes => vec![Span::raw(text(&d.max_bytes))],
            Field::Factor => vec![Span::raw(text(&d.factor))],
            Field::Gpus => {
                let g = text(&d.gpus);
                if g.trim().is_empty() {
                    vec![Span::styled("all of the node's", theme.muted())]
                } else {
                    vec![Span::raw(g)]
                }
            }
            Field::Iters => vec![Span::raw(text(&d.iters))],
            Field::Warmup => vec![Span::raw(text(&d.warmup))],
            Field::Dtype if d.engine.dtypes().contains(&d.dtype) => vec![Span::raw(d.dtype)],
            Field::Dtype => vec![
                Span::raw(d.dtype),
                Span::styled(
                    format!("  (not one of {}'s)", d.engine.name()),
                    theme.tone(Tone::Fail),
                ),
            ],
            Field::Engine => vec![Span::raw(match d.engine {
                crate::nccl::runner::Engine::NcclTests => "nccl-tests (several nodes: mpirun)",
                crate::nccl::runner::Engine::Torch => "torch (torchrun on every node)",
            })],
            Field::Profile => {
                let name = d.resolved_profile().name();
                match d.profile {
                    None => vec![
                        Span::raw(format!("auto → {name}")),
                        Span::styled(
                            fleet.map_or(String::new(), |f| format!("  ({})", f.auto_from)),
                            theme.muted(),
                        ),
                    ],
                    Some(_) => vec![Span::raw(name.to_string())],
                }
            }
            Field::Env => vec![],
        };
        let mut spans = vec![Span::styled(
            format!("{}{:<15} ", if focused { "▶ " } else { "  " }, f.label()),
            if focused { theme.accent() } else { theme.muted() },
        )];
        let choice = f.is_choice();
        if focused && choice {
            spans.push(Span::styled("‹ ", theme.accent()));
        }
        spans.extend(value.into_iter().map(|s| {
            if focused {
                s.patch_style(Style::new().add_modifier(Modifier::BOLD))
            } else {
                s
            }
        }));
        if focused && choice {
            spans.push(Span::styled(" ›", theme.accent()));
        }
        let row = Rect {
            y: top.y + i as u16,
            height: 1,
            ..top
        };
        if row.y < top.bottom() {
            Paragraph::new(Line::from(spans)).render(row, buf);
        }
    }
    let edited = if d.env_edited() { " (edited)" } else { "" };
    let lines = d.env_lines().len();
    Paragraph::new(Line::from(vec![
        Span::styled(
            format!(
                "{}{:<15} ",
                if d.focus == Field::Env { "▶ " } else { "  " },
                Field::Env.label()
            ),
            if d.focus == Field::Env {
                theme.accent()
            } else {
                theme.muted()
            },
        ),
        Span::styled(
            format!(
                "{} set on every node, saved with the run{edited}",
                crate::words::plural(lines, "line")
            ),
            theme.muted(),
        ),
    ]))
    .render(env_label, buf);
    let env_block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(d.focus == Field::Env))
        .style(theme.base());
    let env_inner = env_block.inner(env_area);
    env_block.render(env_area, buf);
    let mut ta = d.env.clone();
    ta.set_style(theme.base());
    ta.set_cursor_line_style(Style::new());
    if d.focus == Field::Env {
        ta.set_cursor_style(theme.base().add_modifier(Modifier::REVERSED));
    } else {
        ta.set_cursor_style(theme.base());
    }
    if d.env.is_empty() {
        Paragraph::new(Span::styled("(no variables: NCCL's defaults)", theme.muted())).render(env_inner, buf);
    } else {
        Widget::render(&ta, env_inner, buf);
    }
}

/// `(log2 size, busbw)` points of the rows.
fn curve(rows: impl Iterator<Item = (u64, Option<f64>)>) -> Vec<(f64, f64)> {
    rows.filter_map(|(size, bw)| bw.map(|b| ((size.max(1) as f64).log2(), b)))
        .collect()
}

/// One curve of a chart: its legend name, style and `(log2 size, busbw)` points.
type Series = (String, Style, Vec<(f64, f64)>);

/// The top of a busbw axis: a round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a
/// power of ten) some room above `peak`, 1 GB/s at least; its half is round too.
fn busbw_top(peak: f64) -> f64 {
    let want = (peak * 1.05).max(1.0);
    let e = 10f64.powf(want.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * e)
        .find(|t| *t >= want * (1.0 - 1e-9))
        .unwrap_or(10.0 * e)
}

/// A busbw chart over message size (log2 x axis).
fn busbw_chart(theme: &Theme, series: &[Series], area: Rect, buf: &mut Buffer) {
    let all = || series.iter().flat_map(|s| s.2.iter());
    let x0 = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x1 = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    if !x0.is_finite() {
        return;
    }
    let x1 = x1.max(x0 + 1.0);
    // Ticks at 0, half and a round top above the highest point, each with its unit.
    let ymax = busbw_top(all().map(|p| p.1).fold(0.0f64, f64::max));
    let datasets: Vec<Dataset> = series
        .iter()
        .enumerate()
        .map(|(i, (name, style, points))| {
            Dataset::default()
                .name(theme.series_name(i, name))
                .marker(theme.series_mark(i).0)
                .graph_type(GraphType::Line)
                .style(*style)
                .data(points)
        })
        .collect();
    let size_label = |x: f64| human_size(2f64.powf(x).round() as u64);
    Chart::new(datasets)
        .legend_position(Some(LegendPosition::TopLeft))
        .hidden_legend_constraints((Constraint::Percentage(60), Constraint::Percentage(60)))
        .x_axis(Axis::default().bounds([x0, x1]).style(theme.muted()).labels(vec![
            Line::raw(size_label(x0)),
            Line::raw("size (log2)"),
            Line::raw(size_label(x1)),
        ]))
        .y_axis(
            Axis::default().bounds([0.0, ymax]).style(theme.muted()).labels(
                [0.0, ymax / 2.0, ymax]
                    .map(|v| Line::raw(format!("{} GB/s", tick(v))))
                    .to_vec(),
            ),
        )
        .render(area, buf);
}

/// A run that ended without rows, or failed after some: how each node ended, why (its
/// cause) and what it printed last. `rows`: the result rows it printed.
fn render_end(
    end: &crate::tui::nccl::RunEnd,
    rows: usize,
    cause: Option<&str>,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let worst = end.worst();
    let head = match worst {
        Some(0) => Line::styled(
            "The run ended without a result row (exit 0).",
            theme.tone(Tone::Warn),
        ),
        Some(c) if rows == 0 => Line::styled(
            format!("The run failed before its first result row: exit {c}."),
            theme.tone(Tone::Fail),
        ),
        Some(c) => Line::styled(
            format!(
                "The run failed after {}: exit {c}.",
                crate::words::plural(rows, "result row")
            ),
            theme.tone(Tone::Fail),
        ),
        None => Line::styled("The run ended; no node reported.", theme.tone(Tone::Warn)),
    };
    let mut lines = vec![
        head,
        Line::from(vec![
            Span::styled("exit codes  ", theme.muted()),
            Span::raw(end.codes_text()),
        ]),
    ];
    if let Some(c) = cause.filter(|_| worst != Some(0)) {
        lines.push(Line::from(vec![
            Span::styled("cause       ", theme.muted()),
            Span::styled(crate::tui::widgets::shown(c).into_owned(), theme.tone(Tone::Fail)),
        ]));
    }
    lines.push(Line::raw(""));
    if end.tail.is_empty() {
        lines.push(Line::styled("It printed nothing.", theme.muted()));
    } else {
        lines.push(Line::styled("Its last output:", theme.muted()));
        // The newest lines that fit, a wrapped line taking a row per width of text (word
        // wrapping may take one more: a row is kept spare).
        let width = usize::from(area.width.max(1));
        let rows = |l: &Line| l.width().max(1).div_ceil(width);
        let used: usize = lines.iter().map(rows).sum();
        let mut room = usize::from(area.height).saturating_sub(used + 1);
        let mut newest: Vec<Line> = vec![];
        for l in end.tail.iter().rev() {
            let line = Line::raw(crate::tui::widgets::shown(l).into_owned());
            let r = rows(&line);
            if r > room && !newest.is_empty() {
                break;
            }
            room = room.saturating_sub(r);
            newest.push(line);
        }
        lines.extend(newest.into_iter().rev());
    }
    Paragraph::new(lines).wrap(Wrap { trim: false }).render(area, buf);
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
        RunStatus::Ended(end) => match end.worst() {
            Some(0) => ("ended 0".to_string(), Tone::Pass),
            Some(c) => (format!("failed: exit {c}"), Tone::Fail),
            None => ("ended".to_string(), Tone::Warn),
        },
        RunStatus::Failed(e) => (format!("cannot follow: {e}"), Tone::Fail),
    };
    // What matters first: at 80 columns the end of the title is cut.
    let title = vec![
        Span::styled(format!(" {} ", id.trim_start_matches("nccl-")), theme.title()),
        Span::styled(format!("· {st} "), theme.tone(tone)),
        Span::styled(
            format!(
                "· {} · NCCL {} ",
                report
                    .ranks()
                    .map_or("? ranks".into(), |r| crate::words::plural(r as usize, "rank")),
                report.nccl_version.as_deref().unwrap_or("?")
            ),
            theme.muted(),
        ),
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
    let [chart_area, summary] = Layout::vertical([Constraint::Min(3), Constraint::Length(3)]).areas(inner);
    let oop = curve(
        report
            .rows
            .iter()
            .map(|r| (r.size, r.out_of_place.as_ref().map(|m| m.busbw))),
    );
    let ip = curve(
        report
            .rows
            .iter()
            .map(|r| (r.size, r.in_place.as_ref().map(|m| m.busbw))),
    );
    let machine = state.nccl.machine(id, report);
    let reference = match (&machine, report.collective.as_deref()) {
        (Some((m, nodes)), Some(c)) => {
            let nodes = nodes.or_else(|| {
                let g = expect::gpus_per_node(m)?;
                report.ranks().filter(|r| g > 0 && r % g == 0).map(|r| r / g)
            });
            nodes.and_then(|n| expect::reference(m, c, n))
        }
        _ => None,
    };
    // The expected curve over the run's sizes (its whole range before the first row).
    let (lo, hi) = match (report.rows.first(), report.rows.last()) {
        (Some(a), Some(b)) => (a.size.min(b.size), a.size.max(b.size)),
        _ => (0, u64::MAX),
    };
    let expected = reference.as_ref().map_or(vec![], |r| {
        curve(
            r.points
                .iter()
                .filter(|p| (lo..=hi).contains(&p.0))
                .map(|p| (p.0, Some(p.1))),
        )
    });
    let ended = match status {
        RunStatus::Ended(end) => Some(end),
        _ => None,
    };
    // A run that failed after some rows: its chart, and under it the same block as a run
    // without rows (how it ended, its cause, its last output).
    let failed_after_rows = ended.filter(|e| e.worst() != Some(0) && !oop.is_empty());
    let chart_area = match failed_after_rows {
        Some(end) if chart_area.height >= 8 => {
            let [chart, below] =
                Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(chart_area);
            render_end(
                end,
                report.rows.len(),
                state.nccl.cause(id).as_deref(),
                theme,
                below,
                buf,
            );
            chart
        }
        _ => chart_area,
    };
    if let Some(end) = ended
        .filter(|e| report.rows.is_empty() || e.worst() != Some(0))
        .filter(|_| oop.is_empty())
    {
        render_end(
            end,
            report.rows.len(),
            state.nccl.cause(id).as_deref(),
            theme,
            chart_area,
            buf,
        );
    } else if oop.is_empty() && expected.is_empty() {
        Paragraph::new("waiting for the first row…").render(chart_area, buf);
    } else {
        let mut series = vec![(String::from("out-of-place"), theme.rx(), oop)];
        if !ip.is_empty() {
            series.push(("in-place".into(), theme.tx(), ip));
        }
        if !expected.is_empty() {
            let name = match reference.as_ref().map(|r| r.kind) {
                Some("published") => "expected (published)",
                _ => "expected (measured)",
            };
            series.push((name.into(), theme.expected(), expected));
        }
        busbw_chart(theme, &series, chart_area, buf);
    }
    let peak = report.peak_row().map(|r| {
        format!(
            "peak {:.2} GB/s at {}",
            r.out_of_place.as_ref().map_or(0.0, |m| m.busbw),
            human_size(r.size)
        )
    });
    // No row: one phrase (`no rows · avg ? · 0 rows` said it three times).
    let transport = report
        .transport_summary()
        .unwrap_or_else(|| "unknown (no NCCL_DEBUG=INFO)".into());
    let line = match peak {
        Some(peak) => format!(
            "{peak} · avg {} · {} · transport {transport}",
            report.avg_busbw.map_or("?".into(), |a| format!("{a}")),
            crate::words::plural(report.rows.len(), "row"),
        ),
        None if ended.is_some() => format!("no result rows · transport {transport}"),
        None => format!("no result rows yet · transport {transport}"),
    };
    let started = state
        .nccl
        .runs
        .iter()
        .find(|r| &r.id == id)
        .map(|r| format!("started {} UTC on {}", store::format_utc(r.started_at), r.fleet))
        .unwrap_or_default();
    let saved = state.nccl.saved(id);
    let profile = saved.map_or("profile ?".to_string(), |s| {
        format!(
            "profile {} ({})",
            s.spec.profile,
            crate::words::plural(s.spec.env.len(), "variable")
        )
    });
    let machine_text = match (&machine, saved.and_then(|s| s.machine_type_from.as_deref())) {
        (Some((m, _)), Some(from)) => format!("{m} ({from})"),
        (Some((m, _)), None) => format!("{m} (nccl-tests rank list)"),
        (None, _) => "machine unknown".to_string(),
    };
    let verdict = match state.nccl.verdict(id, report) {
        Some(v) => Span::styled(verdict_text(&v), theme.tone(grade_tone(v.grade))),
        // Only while it runs without a row (an ended run always has one).
        None if matches!(status, RunStatus::Following) => {
            Span::styled("verdict after the first row", theme.muted())
        }
        None => Span::styled("no verdict: no rows", theme.muted()),
    };
    Paragraph::new(vec![
        Line::styled(line, theme.base()),
        Line::from(vec![
            verdict,
            Span::styled(format!(" · {machine_text} · {profile}"), theme.muted()),
        ]),
        Line::styled(started, theme.muted()),
    ])
    .render(summary, buf);
}

/// The verdict in a line: `PASS 100% of 347.71 GB/s at 8G` when the busbw decided it;
/// else the grade and why, as `nccl run` prints it (`FAIL: the run did not finish: a node
/// ended with exit 3 after 4 rows; cause: ...`; the cause is whole in the block above),
/// or the reason (a transport that is not the profile's, an unknown reference).
fn verdict_text(v: &expect::Verdict) -> String {
    let grade = v.grade.as_str().to_uppercase();
    if v.cause.is_some() {
        return format!("{grade}: {}", crate::tui::widgets::shown(&v.reason));
    }
    match (v.ratio, v.expected_peak_busbw, v.expected_at) {
        (Some(r), Some(e), Some(at)) if Grade::of_ratio(r) == v.grade => {
            format!("{grade} {:.0}% of {e} GB/s at {}", r * 100.0, human_size(at))
        }
        _ => format!("{grade}: {}", crate::tui::widgets::shown(&v.reason)),
    }
}

/// Two runs side by side: both curves, then busbw per size and B/A.
fn render_compare(theme: &Theme, area: Rect, buf: &mut Buffer, cmp: &Comparison, a: &SavedRun, b: &SavedRun) {
    let title = Line::from(vec![
        Span::styled(" compare ", theme.title()),
        Span::styled(
            format!(
                "A {} · B {} ",
                a.id.trim_start_matches("nccl-"),
                b.id.trim_start_matches("nccl-")
            ),
            theme.muted(),
        ),
    ]);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(true))
        .title(title)
        .style(theme.base());
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 4 {
        return;
    }
    let [chart_area, table_area] =
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(inner);
    let series = vec![
        (
            format!("A {}", a.spec.collective),
            theme.rx(),
            curve(a.rows.iter().map(|r| (r.size, r.busbw))),
        ),
        (
            format!("B {}", b.spec.collective),
            theme.tx(),
            curve(b.rows.iter().map(|r| (r.size, r.busbw))),
        ),
    ];
    busbw_chart(theme, &series, chart_area, buf);
    let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
    let peak = format!(
        "peak A {} · B {} · B/A {}",
        f(cmp.peak_a),
        f(cmp.peak_b),
        cmp.peak_ratio.map_or("-".into(), |x| format!("{x:.3}"))
    );
    let mut notes: Vec<Line> = vec![Line::styled(peak, theme.base())];
    notes.extend(
        cmp.notes
            .iter()
            .map(|n| Line::styled(format!("note: {n}"), theme.tone(Tone::Warn))),
    );
    let rows_room = (table_area.height as usize).saturating_sub(1 + notes.len());
    // The largest sizes matter most: show the last rows that fit.
    let skip = cmp.rows.len().saturating_sub(rows_room);
    let rows: Vec<Row> = cmp.rows[skip..]
        .iter()
        .map(|r| {
            let ratio = r.ratio.map_or("-".into(), |x| format!("{x:.3}"));
            let tone = match r.ratio {
                Some(x) if x < expect::WARN => theme.tone(Tone::Fail),
                Some(x) if x < expect::PASS => theme.tone(Tone::Warn),
                _ => theme.base(),
            };
            Row::new(vec![
                Line::raw(human_size(r.size)),
                Line::raw(f(r.a)),
                Line::raw(f(r.b)),
                Line::styled(ratio, tone),
            ])
        })
        .collect();
    let [t, n] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(notes.len() as u16)]).areas(table_area);
    Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(7),
        ],
    )
    .header(Row::new(vec!["size", "A GB/s", "B GB/s", "B/A"]).style(theme.title()))
    .render(t, buf);
    Paragraph::new(notes).wrap(Wrap { trim: true }).render(n, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::nccl::RunEnd;
    use crate::tui::state::Msg;
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn screen(state: &State, w: u16, h: u16) -> String {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        render(state, &Theme::default_theme(), area, &mut buf);
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn run(id: &str, at: u64) -> crate::store::RunRecord {
        crate::store::RunRecord {
            id: id.into(),
            kind: "nccl".into(),
            fleet: "lab".into(),
            started_at: at,
            nodes: vec![],
        }
    }

    /// Below 40 columns the list shows `collective HH:MM`: runs of a collective started
    /// in the same minute show their seconds, in the same second their id's salt.
    #[test]
    fn a_narrow_list_tells_runs_of_the_same_minute_apart() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        let runs = vec![
            run("nccl-all_reduce-1795474251-594d", 1_795_474_251),
            run("nccl-all_reduce-1795474207-0a1b", 1_795_474_207),
            run("nccl-all_gather-1795474251-77aa", 1_795_474_251),
            run("nccl-all_gather-1795474251-88bb", 1_795_474_251),
            run("nccl-broadcast-1795400000-1234", 1_795_400_000),
        ];
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::Runs(runs)));
        // At 80 columns the list is 32 wide: the name keeps its end, what tells it apart.
        let t = screen(&s, 80, 24);
        for want in ["22:50:51 77aa", "22:50:51 88bb", "22:50:07"] {
            assert!(t.contains(want), "{want}:\n{t}");
        }
        let t = screen(&s, 95, 24);
        for want in [
            "all_reduce 22:50:51",
            "all_reduce 22:50:07",
            "all_gather 22:50:51 77aa",
            "all_gather 22:50:51 88bb",
            "broadcast 02:13 ",
        ] {
            assert!(t.contains(want), "{want}:\n{t}");
        }
    }

    /// The wheel moves the runs list only with the pointer over it: over the run's chart
    /// beside it and over the `d` panel under it, nothing moves.
    #[test]
    fn the_wheel_moves_the_runs_only_over_the_list() {
        use crossterm::event::{MouseEvent, MouseEventKind};
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        let runs = (0..6)
            .map(|i| {
                run(
                    &format!("nccl-all_reduce-{}-000{i}", 1_795_474_000 + i * 100),
                    1_795_474_000 + i * 100,
                )
            })
            .collect();
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::Runs(runs)));
        update(&mut s, Msg::Resize(80, 24));
        s.view = crate::tui::state::View::Nccl;
        let first = s.nccl.selected.clone();
        assert!(first.is_some());
        let wheel = |s: &mut State, column, row| {
            update(
                s,
                Msg::Mouse(MouseEvent {
                    kind: MouseEventKind::ScrollDown,
                    column,
                    row,
                    modifiers: KeyModifiers::NONE,
                }),
            )
        };
        // The list is the left 32 columns; the chart is right of it.
        wheel(&mut s, 60, 5);
        assert_eq!(s.nccl.selected, first, "over the chart");
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::NONE)),
        );
        wheel(&mut s, 10, 20);
        assert_eq!(s.nccl.selected, first, "over the d panel");
        wheel(&mut s, 10, 3);
        assert_ne!(s.nccl.selected, first, "over the list");
    }

    /// `d`: the selected run's every field whole under the list, its long id and node
    /// list wrapped at 80 columns.
    #[test]
    fn the_detail_panel_shows_the_whole_run() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        let id = "nccl-all_reduce_with_a_very_long_collective_name_for_the_walk-1795474251-594d";
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![run(id, 1_795_474_251)])),
        );
        s.view = crate::tui::state::View::Nccl;
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('d'), KeyModifiers::NONE)),
        );
        assert!(s.nccl.detail);
        let t = screen(&s, 80, 22);
        let rows: Vec<&str> = t.lines().collect();
        let at = rows.iter().position(|r| r.contains("run id")).expect(&t);
        let whole: String = rows[at..at + 2]
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
        assert!(whole.starts_with(id), "{whole}\n{t}");
        assert!(t.contains("started (UTC) 2026-11-23 22:50"), "{t}");
        assert!(t.contains("collective    nccl"), "{t}");
    }

    /// `nccl run` with the RDMA profile on a node without gIB (the composed 2.27.7
    /// output): the cockpit shows NCCL's own error as the cause, the run as FAIL in the
    /// list and in its verdict; a control sequence in it is shown, not obeyed.
    #[test]
    fn a_failed_run_shows_its_cause() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![crate::store::RunRecord {
                id: "nccl-all_reduce-1795474251-594d".into(),
                kind: "nccl".into(),
                fleet: "lab".into(),
                started_at: 1_795_474_251,
                nodes: vec![],
            }])),
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE)),
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        let text =
            include_str!("../../../tests/fixtures/nccl/composed/nccl2.27.7-rdma-no-gib-all_reduce.txt");
        let mut tail: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("lab-0: {l}"))
            .collect();
        tail.push("lab-0: \u{1b}]52;c;Zm9v\u{7}".into());
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Ended {
                id: "nccl-all_reduce-1795474251-594d".into(),
                end: Box::new(RunEnd {
                    codes: vec![("lab-0".into(), Some(3))],
                    tail,
                }),
            }),
        );
        let t = screen(&s, 160, 48);
        assert!(
            t.contains("cause       NCCL WARN Failed to initialize any NET plugin"),
            "{t}"
        );
        assert!(
            t.contains("FAIL: the run failed before its first row: a node ended with exit 3"),
            "{t}"
        );
        assert!(
            t.lines().any(|l| l.contains("lab exit 3") && l.contains(" fail")),
            "the list: {t}"
        );
        assert!(!t.contains("UNKNOWN") && !t.contains("no verdict yet"), "{t}");
        assert!(!t.contains('\u{1b}') && t.contains("␛]52"), "{t}");
    }

    /// The walk's run (ranked defect 2): nccl-tests' header without its collective, four
    /// rows, then NCCL's error and exit 3. At 80x24 the chart stays, the error line and
    /// the last output show under it, and the verdict is the CLI's (FAIL: the run did not
    /// finish), judged as the all_reduce flightdeck launched; the y axis has round ticks
    /// with units.
    #[test]
    fn a_run_that_fails_after_rows_shows_its_cause_under_the_chart() {
        let id = "nccl-all_reduce-1795620659-43ad";
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.size = (80, 24);
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![crate::store::RunRecord {
                id: id.into(),
                kind: "nccl".into(),
                fleet: "local".into(),
                started_at: 1_795_620_659,
                nodes: vec![],
            }])),
        );
        // Its history entry while it runs: what flightdeck launched.
        let saved = crate::nccl::history::SavedRun {
            id: id.into(),
            fleet: "local".into(),
            started_at: 1_795_620_659,
            spec: crate::nccl::history::SavedSpec {
                collective: "all_reduce".into(),
                profile: "none".into(),
                ..Default::default()
            },
            nodes: vec!["local-0".into()],
            ..Default::default()
        };
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::History(vec![saved])));
        for k in [KeyCode::Char('5'), KeyCode::Enter] {
            update(&mut s, Msg::Key(KeyEvent::new(k, KeyModifiers::NONE)));
        }
        let out = "# nThread 1 nGpus 2 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 1 iters: 20\n\
            #  Rank  0 Group  0 Pid   1374 on         vm device  0 [0000:00:06] NVIDIA H200\n\
            #  Rank  1 Group  0 Pid   1374 on         vm device  1 [0000:00:07] NVIDIA H200\n\
            #       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n\
            #        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n\
                       8             2     float     sum      -1    13.34    0.00    0.00       0    13.87    0.00    0.00       0\n\
                      16             4     float     sum      -1    12.90    0.00    0.00       0    13.04    0.00    0.00       0\n\
                      32             8     float     sum      -1    13.21    0.00    0.00       0    13.27    0.00    0.00       0\n\
                      64            16     float     sum      -1    13.76    0.00    0.00       0    13.68    0.00    0.00       0\n";
        let report = crate::nccl::parse::parse_text(out).remove(0);
        assert_eq!(report.rows.len(), 4);
        assert_eq!(
            report.collective_from,
            Some("the table"),
            "the output names no collective"
        );
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Report {
                id: id.into(),
                report: Box::new(report),
            }),
        );
        let error = "vm: Test NCCL failure common.cu:1005 'unhandled system error / ibv_reg_mr_iova2 failed'";
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Ended {
                id: id.into(),
                end: Box::new(RunEnd {
                    codes: vec![("local-0".into(), Some(3))],
                    tail: vec![format!("local-0: {error}")],
                }),
            }),
        );
        let t = screen(&s, 80, 22);
        assert!(t.contains("The run failed after 4 result rows: exit 3."), "{t}");
        assert!(t.contains("Test NCCL failure"), "the error line: {t}");
        assert!(
            t.contains("FAIL: the run did not finish"),
            "the CLI's verdict: {t}"
        );
        assert!(!t.contains("UNKNOWN") && !t.contains("no verdict"), "{t}");
        assert!(
            t.contains("1 GB/s") && t.contains("0.5 GB/s") && t.contains("0 GB/s"),
            "{t}"
        );
        assert!(t.contains("· 4 rows ·"), "{t}");
    }

    #[test]
    fn busbw_axes_end_at_round_numbers() {
        assert_eq!(busbw_top(0.0), 1.0);
        assert_eq!(busbw_top(0.9), 1.0);
        assert_eq!(busbw_top(1.0), 1.2);
        assert_eq!(busbw_top(347.71), 400.0);
        assert_eq!(busbw_top(170.0), 200.0);
        assert_eq!(tick(busbw_top(1.0) / 2.0), "0.6");
    }
}
