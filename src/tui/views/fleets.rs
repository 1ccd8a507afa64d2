//! The Fleets view (fleets of the state store) and the Nodes view (the nodes of the
//! fleet with open panes, or of the selected fleet).
//!
//! ```text
//! ┌ Fleets (2) ──────────────────────────────────────────────────┐
//! │ NAME      BACKEND  NODES  CREATED     FILE                   │
//! │▌lab       ssh      8      2h ago      /home/op/fleets/lab.yaml│
//! │ local     local    1      3d ago      …/fleets/local.yaml    │
//! └──────────────────────────────────────────────────────────────┘
//! ┌ Nodes of mega (gcp backend) ─────────────────────────────────────────────────┐
//! │NODE      ADDRESS   INTERNAL  ZONE       MODEL  NICS      $/H     STATE       │
//! │mega-1    34.1.2.4  10.10.0.3 us-east4-b SPOT   1+8 GVNIC $16.60  preempted   │
//! └──────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! A GKE fleet's Nodes view has three parts: its node pools (machine, provisioning,
//! ready nodes, GPUs in use), its nodes (conditions, GPUs and pods), and Kueue's
//! workloads with why each waits and for how long ("waiting for DWS capacity", 14m).

use crate::store::{self, FleetRecord};
use crate::tui::fleets;
use crate::tui::state::State;
use crate::tui::theme::{Theme, Tone};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Widget, Wrap};

fn block<'a>(title: String, filter: &str, theme: &Theme) -> Block<'a> {
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
fn page_of(area: Rect, total: usize, selected: usize) -> (std::ops::Range<usize>, String) {
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

fn message(lines: Vec<Line<'static>>, block: Block<'_>, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}

/// The fleets table; below it the provisioning log of the last apply or delete; over
/// both the fleet-file editor when it is open.
pub fn render_fleets(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let ops = &state.fleet_ops;
    if ops.log.is_empty() && ops.running.is_none() {
        render_table(state, theme, area, buf);
    } else {
        let log_h = (area.height / 2).max(area.height.min(5));
        let [top, bottom] =
            ratatui::layout::Layout::vertical([Constraint::Min(3), Constraint::Length(log_h)]).areas(area);
        render_table(state, theme, top, buf);
        render_log(ops, theme, bottom, buf);
    }
    if let Some(e) = &state.offers.editor {
        super::offers::render_editor(e, theme, area, buf);
    }
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
    let rows = usize::from(inner.height);
    let skip = ops.log.len().saturating_sub(rows);
    let lines: Vec<Line> = ops
        .log
        .iter()
        .skip(skip)
        .map(|l| {
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
            Line::styled(crate::tui::widgets::shown(l).into_owned(), style)
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

fn render_table(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let filter = &state.filters[crate::tui::state::View::Fleets.index()];
    let shown = fleets::visible(state);
    let b = block(format!("Fleets ({})", shown.len()), filter, theme);
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
            ],
            b,
            area,
            buf,
        );
    }
    let rows: Vec<Row> = shown
        .iter()
        .map(|f: &&FleetRecord| {
            let selected = state.fleet_selected.as_deref() == Some(f.name.as_str());
            let open = state.panes.fleet.as_deref() == Some(f.name.as_str());
            let style = if selected { theme.selection() } else { theme.base() };
            Row::new(vec![
                format!("{}{}", f.name, if open { " ◆" } else { "" }),
                f.backend.clone(),
                node_count(f),
                store::format_utc(f.created_at),
                f.file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            ])
            .style(style)
        })
        .collect();
    let header = Row::new(vec!["NAME", "BACKEND", "NODES", "CREATED (UTC)", "FILE"]).style(theme.muted());
    Table::new(
        rows,
        [
            Constraint::Length(22),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(16),
            Constraint::Min(10),
        ],
    )
    .header(header)
    .block(b)
    .render(area, buf);
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

/// The Nodes view of a GCP fleet: each node with its zone, provisioning model, NIC
/// layout, price and, when `fleet status` found it so, why it is lost.
fn render_gcp_nodes(
    state: &State,
    fleet: &FleetRecord,
    filter: &str,
    selected: Option<&str>,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let listed: Vec<&store::ResourceRecord> = fleet
        .resources
        .iter()
        .filter(|r| r.kind == "instance")
        .filter(|r| {
            filter.is_empty()
                || r.name.to_lowercase().contains(filter)
                || r.zone.as_deref().unwrap_or("").contains(filter)
        })
        .collect();
    let at = listed
        .iter()
        .position(|r| selected == Some(r.name.as_str()))
        .unwrap_or(0);
    let (page, where_) = page_of(area, listed.len(), at);
    // Only the rows on screen are built (a fleet has up to 1024 nodes).
    let rows: Vec<Row> = listed[page]
        .iter()
        .map(|r| {
            let node = fleet.nodes.iter().find(|n| n.name == r.name);
            let pane = state.panes.tiles.iter().find(|t| t.node == r.name);
            let (status, tone) = match (&r.lost, pane.map(|t| &t.state), r.state.as_str()) {
                (Some(l), _, _) => (l.clone(), Tone::Fail),
                (None, _, s) if s != "created" => (s.to_string(), Tone::Warn),
                (None, Some(p), _) => (p.label(), super::panes::tone(p)),
                (None, None, _) => ("-".to_string(), Tone::Info),
            };
            let price = r
                .hourly_micro_usd
                .map_or("?".to_string(), |m| format!("${:.2}", m as f64 / 1e6));
            Row::new(vec![
                Span::raw(r.name.clone()),
                Span::raw(
                    node.map(|n| n.host().to_string())
                        .or(r.external_ip.clone())
                        .unwrap_or_default(),
                ),
                Span::raw(r.internal_ip.clone().unwrap_or_default()),
                Span::raw(r.zone.clone().unwrap_or_default()),
                Span::raw(r.provisioning_model.clone().unwrap_or_default()),
                Span::raw(r.nics.clone().unwrap_or_default()),
                Span::raw(price),
                Span::styled(status, theme.tone(tone)),
            ])
            .style(if selected == Some(r.name.as_str()) {
                theme.selection()
            } else {
                theme.base()
            })
        })
        .collect();
    let header = Row::new(vec![
        "NODE", "ADDRESS", "INTERNAL", "ZONE", "MODEL", "NICS", "$/H", "STATE",
    ])
    .style(theme.muted());
    Table::new(
        rows,
        [
            Constraint::Length(18),
            Constraint::Length(16),
            Constraint::Length(14),
            Constraint::Length(16),
            Constraint::Length(10),
            Constraint::Length(11),
            Constraint::Length(8),
            Constraint::Min(10),
        ],
    )
    .header(header)
    .block(block(
        format!("Nodes of {} (gcp backend){where_}", fleet.name),
        filter,
        theme,
    ))
    .render(area, buf);
}

pub fn render_nodes(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let filter = state.filters[crate::tui::state::View::Nodes.index()].to_lowercase();
    let Some(fleet) = fleets::current(state) else {
        let b = block("Nodes".into(), &filter, theme);
        return message(
            vec![Line::raw(
                "Select a fleet in the Fleets view (2), or open one with :open NAME.",
            )],
            b,
            area,
            buf,
        );
    };
    // The selected node (the first listed until one is picked), and its details below.
    let selected = state
        .node_selected
        .clone()
        .filter(|s| fleets::listed_nodes(state).contains(s))
        .or_else(|| fleets::listed_nodes(state).into_iter().next());
    let area = match (&selected, state.node_detail && area.height >= 12) {
        (Some(name), true) => {
            let [table, detail] = Layout::vertical([Constraint::Min(5), Constraint::Length(9)]).areas(area);
            render_node_detail(state, fleet, name, theme, detail, buf);
            table
        }
        _ => area,
    };
    if fleet.backend == "gcp" {
        return render_gcp_nodes(state, fleet, &filter, selected.as_deref(), theme, area, buf);
    }
    if fleet.backend == "gke" {
        return render_gke_nodes(state, fleet, &filter, selected.as_deref(), theme, area, buf);
    }
    let listed: Vec<&crate::fleet::NodeTarget> = fleet
        .nodes
        .iter()
        .filter(|n| {
            filter.is_empty()
                || n.name.to_lowercase().contains(&filter)
                || n.host().to_lowercase().contains(&filter)
        })
        .collect();
    let at = listed
        .iter()
        .position(|n| selected.as_deref() == Some(n.name.as_str()))
        .unwrap_or(0);
    let (page, where_) = page_of(area, listed.len(), at);
    // Only the rows on screen are built (a fleet has up to 1024 nodes).
    let rows: Vec<Row> = listed[page]
        .iter()
        .map(|n| {
            let pane = state.panes.tiles.iter().find(|t| t.node == n.name);
            let (status, tone) = match pane.map(|t| &t.state) {
                None => ("-".to_string(), Tone::Info),
                Some(s) => (s.label(), super::panes::tone(s)),
            };
            let sel = selected.as_deref() == Some(n.name.as_str());
            Row::new(vec![
                Span::raw(n.name.clone()),
                Span::raw(match n.port() {
                    Some(p) if p != 22 => format!("{}:{p}", n.host()),
                    _ => n.host().to_string(),
                }),
                Span::raw(n.user().unwrap_or_default().to_string()),
                Span::raw(
                    n.ssh()
                        .and_then(|s| s.proxy_jump.as_ref())
                        .map(|j| j.host.clone())
                        .unwrap_or_default(),
                ),
                Span::styled(status, theme.tone(tone)),
            ])
            .style(if sel { theme.selection() } else { theme.base() })
        })
        .collect();
    let header = Row::new(vec!["NODE", "ADDRESS", "USER", "VIA", "PANE"]).style(theme.muted());
    Table::new(
        rows,
        [
            Constraint::Length(22),
            Constraint::Length(22),
            Constraint::Length(10),
            Constraint::Length(18),
            Constraint::Min(10),
        ],
    )
    .header(header)
    .block(block(
        format!("Nodes of {} ({} backend){where_}", fleet.name, fleet.backend),
        &filter,
        theme,
    ))
    .render(area, buf);
}

/// The Nodes view of a GKE fleet: node pools, nodes and Kueue's workloads, from the
/// last snapshot of the cluster (every 10 s).
fn render_gke_nodes(
    state: &State,
    fleet: &FleetRecord,
    filter: &str,
    selected: Option<&str>,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    use crate::cloud::gke::view;
    let snap = match state.gke.get(&fleet.name) {
        Some(Ok(s)) => Some(s.as_ref()),
        Some(Err(e)) => {
            let b = block(format!("Nodes of {} (gke backend)", fleet.name), filter, theme);
            return message(
                vec![Line::styled(
                    format!("cannot read the cluster: {e}"),
                    theme.tone(Tone::Fail),
                )],
                b,
                area,
                buf,
            );
        }
        None => None,
    };
    let pools = snap.map_or(0, |s| s.pools.len());
    let loads = snap.map_or(0, |s| s.workloads.len().max(1));
    let [top, mid, bottom] = Layout::vertical([
        Constraint::Length(pools as u16 + 3),
        Constraint::Min(4),
        Constraint::Length((loads as u16 + 3).min(area.height / 3)),
    ])
    .areas(area);
    // Pools.
    let rows: Vec<Row> = snap
        .map(|s| s.pools.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let tone = if p.ready < p.nodes { Tone::Warn } else { Tone::Info };
            Row::new(p.cells().into_iter().enumerate().map(|(i, c)| {
                if i == 4 {
                    Span::styled(c, theme.tone(tone))
                } else {
                    Span::raw(c)
                }
            }))
        })
        .collect();
    let title = match snap {
        Some(s) => format!("Node pools of {} ({})", fleet.name, s.cluster),
        None => format!("Node pools of {} (asking the cluster…)", fleet.name),
    };
    Table::new(
        rows,
        [
            Constraint::Length(18),
            Constraint::Length(16),
            Constraint::Length(20),
            Constraint::Length(24),
            Constraint::Length(7),
            Constraint::Min(8),
        ],
    )
    .header(Row::new(view::POOL_HEADER).style(theme.muted()))
    .block(block(title, "", theme))
    .render(top, buf);
    // Nodes.
    let listed: Vec<&crate::fleet::NodeTarget> = fleet
        .nodes
        .iter()
        .filter(|n| filter.is_empty() || n.name.to_lowercase().contains(filter) || n.host().contains(filter))
        .collect();
    let at = listed
        .iter()
        .position(|n| selected == Some(n.name.as_str()))
        .unwrap_or(0);
    let (page, where_) = page_of(mid, listed.len(), at);
    let rows: Vec<Row> = listed[page]
        .iter()
        .map(|n| {
            let r = snap.and_then(|s| s.nodes.iter().find(|r| r.name == n.name));
            let pane = state.panes.tiles.iter().find(|t| t.node == n.name);
            let (status, tone) = match r {
                None if snap.is_some() => ("gone from the cluster".to_string(), Tone::Fail),
                None => ("-".to_string(), Tone::Info),
                Some(r) if !r.ready || !r.conditions.is_empty() => (r.conditions.join(", "), Tone::Fail),
                Some(_) => ("Ready".to_string(), Tone::Pass),
            };
            Row::new(vec![
                Span::raw(n.name.clone()),
                Span::raw(r.map(|r| r.pool.clone()).unwrap_or_default()),
                Span::raw(n.host().to_string()),
                Span::styled(status, theme.tone(tone)),
                Span::raw(
                    r.map(|r| format!("{}/{}", r.gpus_used, r.gpus))
                        .unwrap_or_default(),
                ),
                Span::raw(r.map(|r| r.pods.to_string()).unwrap_or_default()),
                Span::raw(pane.map(|t| t.state.label()).unwrap_or_else(|| "-".into())),
            ])
            .style(if selected == Some(n.name.as_str()) {
                theme.selection()
            } else {
                theme.base()
            })
        })
        .collect();
    Table::new(
        rows,
        [
            Constraint::Length(24),
            Constraint::Length(14),
            Constraint::Length(15),
            Constraint::Length(22),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(vec!["NODE", "POOL", "ADDRESS", "STATUS", "GPUS", "PODS", "PANE"]).style(theme.muted()))
    .block(block(
        format!("Nodes of {} (gke backend){where_}", fleet.name),
        filter,
        theme,
    ))
    .render(mid, buf);
    // Kueue.
    let queues: Vec<String> = snap
        .map(|s| s.queues.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|q| {
            format!(
                "{} → {}: {} pending, {} admitted",
                q.name, q.cluster_queue, q.pending, q.admitted
            )
        })
        .collect();
    let title = if queues.is_empty() {
        "Kueue workloads".to_string()
    } else {
        format!("Kueue workloads · {}", queues.join(" · "))
    };
    let b = block(title, "", theme);
    match snap {
        Some(s) if s.kueue.is_some() => message(
            vec![Line::styled(s.kueue.clone().unwrap_or_default(), theme.muted())],
            b,
            bottom,
            buf,
        ),
        Some(s) if s.workloads.is_empty() => {
            message(vec![Line::styled("no workloads", theme.muted())], b, bottom, buf)
        }
        Some(s) => {
            let mut w: Vec<&view::WorkloadRow> = s.workloads.iter().collect();
            w.sort_by_key(|w| (w.state != "pending", w.state != "admitted", w.name.clone()));
            let rows: Vec<Row> = w
                .iter()
                .map(|w| {
                    let tone = match w.state.as_str() {
                        "pending" => Tone::Warn,
                        "evicted" => Tone::Fail,
                        "finished" => Tone::Info,
                        _ => Tone::Pass,
                    };
                    Row::new(vec![
                        Span::raw(w.owner.clone().unwrap_or_else(|| w.name.clone())),
                        Span::raw(w.queue.clone()),
                        Span::styled(w.state.clone(), theme.tone(tone)),
                        Span::raw(w.age_s.map(view::age).unwrap_or_default()),
                        Span::raw(w.detail.clone()),
                    ])
                })
                .collect();
            Table::new(
                rows,
                [
                    Constraint::Length(28),
                    Constraint::Length(14),
                    Constraint::Length(9),
                    Constraint::Length(7),
                    Constraint::Min(10),
                ],
            )
            .header(Row::new(vec!["JOB", "QUEUE", "STATE", "FOR", "WHY"]).style(theme.muted()))
            .block(b)
            .render(bottom, buf);
        }
        None => message(vec![], b, bottom, buf),
    }
}

/// The Nodes view's details of one node (`d`): how flightdeck reaches it, its pane, and
/// for a GCP instance where it runs and at what price.
fn render_node_detail(
    state: &State,
    fleet: &FleetRecord,
    name: &str,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let node = fleet.nodes.iter().find(|n| n.name == name);
    let res = fleet
        .resources
        .iter()
        .find(|r| r.kind == "instance" && r.name == name);
    let pane = state.panes.tiles.iter().find(|t| t.node == name);
    let field = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<14}"), theme.muted()),
            Span::raw(if v.is_empty() { "-".to_string() } else { v }),
        ])
    };
    let mut lines = vec![];
    if let Some(n) = node {
        let port = n.port().map_or(String::new(), |p| format!(":{p}"));
        lines.push(field(
            "ssh",
            format!("{}@{}{port}", n.user().unwrap_or_default(), n.host()),
        ));
        let ssh = n.ssh();
        lines.push(field(
            "via",
            ssh.and_then(|s| s.proxy_jump.as_ref())
                .map(|j| j.host.clone())
                .unwrap_or_default(),
        ));
        lines.push(field(
            "key",
            ssh.and_then(|s| s.identity_file.clone()).unwrap_or_default(),
        ));
        lines.push(field("internal ip", n.internal_ip.clone().unwrap_or_default()));
    }
    if let Some(r) = res {
        lines.push(field(
            "instance",
            format!(
                "{} · {} · {}",
                r.zone.clone().unwrap_or_default(),
                r.provisioning_model.clone().unwrap_or_default(),
                r.hourly_micro_usd
                    .map_or("$?/h".into(), |m| format!("${:.2}/h", m as f64 / 1e6))
            ),
        ));
        lines.push(field("nics", r.nics.clone().unwrap_or_default()));
    }
    lines.push(field(
        "pane",
        pane.map_or(
            "none open (Enter opens the fleet's, this one zoomed)".into(),
            |t| t.state.label(),
        ),
    ));
    Paragraph::new(lines)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.border(false))
                .title(Span::styled(format!(" {name} "), theme.title()))
                .style(theme.base()),
        )
        .render(area, buf);
}
