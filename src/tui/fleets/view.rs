//! The Fleets view: the fleets of the state store, the provisioning log of an apply or
//! delete, and over both the fleet-file editor when it is open.
//!
//! ```text
//! ┌ Fleets (2) ──────────────────────────────────────────────────┐
//! │ NAME      BACKEND  NODES  CREATED     FILE                   │
//! │▌lab       ssh      8      2h ago      /home/op/fleets/lab.yaml│
//! │ local     local    1      3d ago      …/fleets/local.yaml    │
//! └──────────────────────────────────────────────────────────────┘
//! ```

use crate::store::FleetRecord;
use crate::tui::fleets;
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::table::{block, message, table, Col, Cut};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget};

/// The fleets table; below it the provisioning log of the last apply or delete; over
/// both the fleet-file editor when it is open.
pub fn render_fleets(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let ops = &state.fleet_ops;
    let area = match (selected(state), ops.detail) {
        (Some(f), true) => {
            crate::tui::widgets::detail::render_below(area, &f.name, &fleet_detail(state, f), theme, buf)
        }
        _ => area,
    };
    let (top, log) = table_and_log(ops, area);
    render_table(state, theme, top, buf);
    if let Some(bottom) = log {
        render_log(ops, theme, bottom, buf);
    }
    if let Some(e) = &state.editor {
        crate::tui::widgets::editor::render(e, theme, area, buf);
    }
}

/// The selected fleet among those the filter lets through.
fn selected(state: &State) -> Option<&FleetRecord> {
    fleets::visible(state)
        .into_iter()
        .find(|f| state.fleet_selected.as_deref() == Some(f.name.as_str()))
}

/// The table's area and, while there is a provisioning log to show, the log's below it.
fn table_and_log(ops: &fleets::FleetOps, area: Rect) -> (Rect, Option<Rect>) {
    if ops.log.is_empty() && ops.running.is_none() {
        return (area, None);
    }
    let log_h = (area.height / 2).max(area.height.min(5));
    let [top, bottom] =
        ratatui::layout::Layout::vertical([Constraint::Min(3), Constraint::Length(log_h)]).areas(area);
    (top, Some(bottom))
}

/// Where the wheel moves the selection (`area`: the view's): the fleets table, not its
/// `d` panel nor the provisioning log.
pub fn wheel_area(state: &State, area: Rect) -> Rect {
    let area = match (selected(state), state.fleet_ops.detail) {
        (Some(f), true) => crate::tui::widgets::detail::split(area, &fleet_detail(state, f)).0,
        _ => area,
    };
    table_and_log(&state.fleet_ops, area).0
}

/// The live provisioning log: its last lines, as many as fit.
pub fn render_log(ops: &fleets::FleetOps, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let (title, tone) = match (&ops.running, &ops.outcome) {
        (Some(what), _) => (format!("{what} · running"), Tone::Info),
        (None, Some(Ok(_))) => ("last apply/delete · done".to_string(), Tone::Pass),
        (None, Some(Err(_))) => ("last apply/delete · failed".to_string(), Tone::Fail),
        (None, None) => ("provisioning log".to_string(), Tone::Info),
    };
    let b = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(false))
        .title(Span::styled(format!(" {title} "), theme.tone(tone)))
        .style(theme.base());
    let inner = b.inner(area);
    b.render(area, buf);
    // While it runs: a gauge of how far it has got, with the elapsed time.
    let inner = match (&ops.running, &ops.tally, inner.height >= 3) {
        (Some(_), Some((done, total, what)), true) => {
            let [g, rest] =
                ratatui::layout::Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
            let ratio = if *total == 0 {
                0.0
            } else {
                (*done as f64 / *total as f64).clamp(0.0, 1.0)
            };
            let since = ops.started.map_or(String::new(), |t| {
                format!(" · {}", crate::progress::elapsed(t.elapsed()))
            });
            ratatui::widgets::Gauge::default()
                .gauge_style(theme.accent())
                .ratio(ratio)
                .label(format!("{done}/{total} {what}{since}"))
                .render(g, buf);
            rest
        }
        _ => inner,
    };
    // Wrapped, not cut at the edge: why an apply failed (quota, stockout, credentials)
    // and its fix are read whole at 80 columns. The newest rows that fit are shown.
    let rows = usize::from(inner.height);
    let width = usize::from(inner.width).max(1);
    let mut lines: Vec<Line> = vec![];
    for l in ops.log.iter().rev() {
        if lines.len() >= rows {
            break;
        }
        let t = l.trim_start();
        let style = if t.starts_with("try ") {
            theme.accent()
        } else if l.contains("EXHAUSTED")
            || l.contains("failed")
            || l.contains("rolling back")
            || l.contains("QUOTA")
        {
            theme.tone(Tone::Fail)
        } else if l.contains("ready") || l.contains("deleted") || l.contains("SSH") {
            theme.tone(Tone::Pass)
        } else {
            theme.base()
        };
        let shown = crate::tui::widgets::shown(l);
        // An indented line's continuation rows keep its indent.
        let indent = (shown.chars().count() - shown.trim_start().chars().count()).min(width / 2);
        let wrapped = crate::words::wrap_words(shown.trim_start(), width - indent);
        for row in wrapped.into_iter().rev() {
            lines.push(Line::styled(format!("{}{row}", " ".repeat(indent)), style));
        }
    }
    lines.truncate(rows);
    lines.reverse();
    Paragraph::new(lines).render(inner, buf);
}

fn render_table(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let filter = &state.filters[crate::tui::state::View::Fleets.index()];
    let shown = fleets::visible(state);
    // `◆` marks a fleet whose panes are open (shown or in the background): the title says so.
    let legend = if shown.iter().any(|f| state.panes.is_open(&f.name)) {
        " · ◆ panes open"
    } else {
        ""
    };
    let b = block(format!("Fleets ({}){legend}", shown.len()), filter, theme);
    if let Some(e) = &state.fleets_error {
        return message(
            vec![Line::styled(
                format!("cannot read the state: {e}"),
                theme.tone(Tone::Fail),
            )],
            b,
            area,
            buf,
        );
    }
    if state.fleets.is_empty() {
        return message(
            vec![
                Line::styled("No fleets yet.", theme.title()),
                Line::raw(""),
                Line::raw("Apply one here with :apply FILE, or from a shell and press r:"),
                Line::styled("  flightdeck fleet apply fleets/local.yaml", theme.accent()),
                Line::styled("  flightdeck fleet apply fleets/ssh-hosts.yaml", theme.accent()),
                Line::raw("Without the repository's fleets/, write one from the built-in examples:"),
                Line::styled("  flightdeck fleet example local > local.yaml", theme.accent()),
            ],
            b,
            area,
            buf,
        );
    }
    let rows: Vec<(Vec<String>, ratatui::style::Style)> = shown
        .iter()
        .map(|f: &&FleetRecord| {
            let selected = state.fleet_selected.as_deref() == Some(f.name.as_str());
            let open = state.panes.is_open(&f.name);
            let style = if selected { theme.selection() } else { theme.base() };
            let cells = vec![
                format!("{}{}", f.name, if open { " ◆" } else { "" }),
                f.backend.to_string(),
                node_count(f),
                crate::store::format_utc(f.created_at),
                f.file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ];
            (cells, style)
        })
        .collect();
    // Names grow first and keep their end; the file takes what is left, cut at its start
    // (its name is at the end of the path).
    let cols = [
        Col::name("NAME"),
        Col::whole("BACKEND"),
        Col::whole("NODES"),
        Col::whole("CREATED (UTC)"),
        Col {
            cut: Cut::Start,
            ..Col::text("FILE", 10)
        },
    ];
    table(&cols, rows, b.inner(area).width, theme.muted())
        .block(b)
        .render(area, buf);
}

/// The `d` panel's fields of fleet `f`: all of it, nothing cut (the table cuts the
/// name and the file to fit).
fn fleet_detail(state: &State, f: &FleetRecord) -> Vec<(&'static str, String)> {
    let mut machines: Vec<&str> = f
        .resources
        .iter()
        .filter_map(|r| r.machine_type.as_deref())
        .collect();
    machines.sort_unstable();
    machines.dedup();
    let nodes = f
        .nodes
        .iter()
        .map(|n| {
            let port = n.port().map_or(String::new(), |p| format!(":{p}"));
            match n.user() {
                Some(u) => format!("{} {u}@{}{port}", n.name, n.host()),
                None => format!("{} {}{port}", n.name, n.host()),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        ("name", f.name.clone()),
        ("kind", f.backend.to_string()),
        ("machine", machines.join(", ")),
        ("nodes", format!("{}: {nodes}", node_count(f))),
        (
            "file",
            f.file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
        ),
        ("created (UTC)", crate::store::format_utc(f.created_at)),
        (
            "panes",
            if state.panes.is_open(&f.name) {
                "open (Enter shows them)".into()
            } else {
                "none open (Enter opens one per node)".into()
            },
        ),
    ]
}

/// `2`, or for cloud fleets with lost nodes `2 ✗1` (the Nodes view says why).
fn node_count(f: &FleetRecord) -> String {
    let lost = f
        .resources
        .iter()
        .filter(|r| r.kind == "instance" && r.lost.is_some())
        .count();
    if lost == 0 {
        f.nodes.len().to_string()
    } else {
        format!("{} ✗{lost}", f.nodes.len())
    }
}
