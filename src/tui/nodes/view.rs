//! The Nodes view: the nodes of the fleet with open panes, or of the selected fleet.
//!
//! ```text
//! ┌ Nodes of mega (gcp backend) ─────────────────────────────────────────────────┐
//! │NODE      ADDRESS   INTERNAL  ZONE       MODEL  NICS      $/H     STATE       │
//! │mega-1    34.1.2.4  10.10.0.3 us-east4-b SPOT   1+8 GVNIC $16.60  preempted   │
//! └──────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! A GKE fleet's Nodes view has three parts: its node pools (machine, provisioning,
//! ready nodes, GPUs in use), its nodes (conditions, GPUs and pods), and Kueue's
//! workloads with why each waits and for how long ("waiting for DWS capacity", 14m).

use crate::cloud::inventory;
use crate::store::FleetRecord;
use crate::tui::state::{State, View};
use crate::tui::theme::{Theme, Tone};
use crate::tui::widgets::table::{self, block, message, page_of, Col};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Row, Table, Widget};

pub fn render_nodes(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let filter = state.filters[crate::tui::state::View::Nodes.index()].to_lowercase();
    let Some(fleet) = crate::tui::shell::fleet::current(state) else {
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
    let selected = shown_node(state);
    let area = match (&selected, state.nodes.detail) {
        (Some(name), true) => crate::tui::widgets::detail::render_below(
            area,
            name,
            &node_detail(state, fleet, name),
            theme,
            buf,
        ),
        _ => area,
    };
    let view = crate::cloud::inventory_for(fleet.backend).nodes(fleet, state.nodes.gke.get(&fleet.name));
    let mut parts = vec![];
    if let Some(t) = &view.above {
        parts.push(Constraint::Length(t.height));
    }
    parts.push(Constraint::Min(4));
    if let Some(t) = &view.below {
        parts.push(Constraint::Length(t.height.min(area.height / 3)));
    }
    let areas = if parts.len() == 1 {
        vec![area]
    } else {
        Layout::vertical(parts).split(area).to_vec()
    };
    let mut at = areas.into_iter();
    let side = |t: &inventory::Table, area: Option<Rect>, buf: &mut Buffer| {
        if let Some(area) = area {
            draw_table(state, t, None, theme, area, buf);
        }
    };
    if let Some(t) = &view.above {
        side(t, at.next(), buf);
    }
    if let Some(area) = at.next() {
        draw_table(
            state,
            &view.nodes,
            Some((&filter, selected.as_deref())),
            theme,
            area,
            buf,
        );
    }
    if let Some(t) = &view.below {
        side(t, at.next(), buf);
    }
}

/// Where the wheel moves the selection (`area`: the view's): the tables, not the `d`
/// panel.
pub fn wheel_area(state: &State, area: Rect) -> Rect {
    let Some(fleet) = crate::tui::shell::fleet::current(state) else {
        return area;
    };
    match (shown_node(state), state.nodes.detail) {
        (Some(name), true) => crate::tui::widgets::detail::split(area, &node_detail(state, fleet, &name)).0,
        _ => area,
    }
}

/// One table of the Nodes view. `nodes`: the nodes' table, with the filter and the
/// selected node (paged, filtered, the selection shown); without it a table above or
/// below the nodes.
fn draw_table(
    state: &State,
    t: &inventory::Table,
    nodes: Option<(&str, Option<&str>)>,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let (filter, selected) = nodes.unwrap_or(("", None));
    let rows = match &t.body {
        inventory::Body::Note(note) => {
            let lines = note
                .iter()
                .map(|c| Line::from(cell(state, c, None, theme)))
                .collect();
            return message(lines, block(t.title.clone(), filter, theme), area, buf);
        }
        inventory::Body::Rows(rows) => rows,
    };
    let listed: Vec<&inventory::Row> = rows
        .iter()
        .filter(|r| nodes.is_none() || r.matches(filter))
        .collect();
    let (page, where_) = match nodes {
        Some(_) => {
            let at = listed
                .iter()
                .position(|r| r.node.is_some() && selected == r.node.as_deref())
                .unwrap_or(0);
            page_of(area, listed.len(), at)
        }
        None => (0..listed.len(), String::new()),
    };
    // Only the rows on screen are drawn (a fleet has up to 1024 nodes).
    let spans: Vec<Vec<Span>> = listed[page.clone()]
        .iter()
        .map(|r| {
            r.cells
                .iter()
                .map(|c| cell(state, c, r.node.as_deref(), theme))
                .collect()
        })
        .collect();
    // The node's name grows first and keeps its end (`…fleet1-0`); the rest at least
    // their usual width, then what is left.
    let cols: Vec<Col> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, (name, w))| match i {
            0 => Col {
                min: *w,
                ..Col::name(name)
            },
            _ => Col::text(name, *w),
        })
        .collect();
    let texts: Vec<Vec<String>> = spans
        .iter()
        .map(|r| r.iter().map(|s| s.content.to_string()).collect())
        .collect();
    let widths = table::widths(&cols, &texts, area.width.saturating_sub(2));
    let drawn: Vec<Row> = listed[page]
        .iter()
        .zip(spans)
        .map(|(r, cells)| {
            let row = Row::new(
                cells
                    .into_iter()
                    .zip(cols.iter().zip(&widths))
                    .map(|(s, (c, w))| Span::styled(table::fit(&s.content, usize::from(*w), c.cut), s.style))
                    .collect::<Vec<_>>(),
            );
            match (&r.node, nodes) {
                (Some(n), Some(_)) if selected == Some(n.as_str()) => row.style(theme.selection()),
                (Some(_), Some(_)) => row.style(theme.base()),
                _ => row,
            }
        })
        .collect();
    let widths: Vec<Constraint> = widths.iter().map(|w| Constraint::Length(*w)).collect();
    let header: Vec<&str> = t.columns.iter().map(|(name, _)| *name).collect();
    Table::new(drawn, widths)
        .header(Row::new(header).style(theme.muted()))
        .block(block(format!("{}{where_}", t.title), filter, theme))
        .render(area, buf);
}

/// A cell as drawn: a pane's state is the pane of the row's node.
fn cell(state: &State, c: &inventory::Cell, node: Option<&str>, theme: &Theme) -> Span<'static> {
    use inventory::Cell;
    let tone = |t: inventory::Tone| match t {
        inventory::Tone::Info => Tone::Info,
        inventory::Tone::Pass => Tone::Pass,
        inventory::Tone::Warn => Tone::Warn,
        inventory::Tone::Fail => Tone::Fail,
    };
    match c {
        Cell::Text(s) => Span::raw(s.clone()),
        Cell::Toned(s, t) => Span::styled(s.clone(), theme.tone(tone(*t))),
        Cell::Muted(s) => Span::styled(s.clone(), theme.muted()),
        Cell::Pane { toned } => {
            let pane = node.and_then(|n| state.panes.tiles.iter().find(|t| t.node == n));
            match (pane.map(|t| &t.state), toned) {
                (None, true) => Span::styled("-", theme.tone(Tone::Info)),
                (None, false) => Span::raw("-"),
                (Some(s), true) => Span::styled(s.label(), theme.tone(crate::tui::widgets::pane_tone(s))),
                (Some(s), false) => Span::raw(s.label()),
            }
        }
    }
}

/// The Nodes view's details of one node (`d`): how flightdeck reaches it, its pane, and
/// for a GCP instance where it runs and at what price.
fn node_detail(state: &State, fleet: &FleetRecord, name: &str) -> Vec<(&'static str, String)> {
    let node = fleet.nodes.iter().find(|n| n.name == name);
    let res = fleet
        .resources
        .iter()
        .find(|r| r.kind == "instance" && r.name == name);
    let pane = state.panes.tiles.iter().find(|t| t.node == name);
    let mut fields = vec![];
    if let Some(n) = node {
        let port = n.port().map_or(String::new(), |p| format!(":{p}"));
        fields.push((
            "ssh",
            format!("{}@{}{port}", n.user().unwrap_or_default(), n.host()),
        ));
        let ssh = n.ssh();
        fields.push((
            "via",
            ssh.and_then(|s| s.proxy_jump.as_ref())
                .map(|j| j.host.clone())
                .unwrap_or_default(),
        ));
        fields.push((
            "key",
            ssh.and_then(|s| s.identity_file.clone()).unwrap_or_default(),
        ));
        fields.push(("internal ip", n.internal_ip.clone().unwrap_or_default()));
    }
    if let Some(r) = res {
        fields.push((
            "instance",
            format!(
                "{} · {} · {}",
                r.zone.clone().unwrap_or_default(),
                r.provisioning_model.clone().unwrap_or_default(),
                r.hourly_micro_usd
                    .map_or("$?/h".into(), |m| format!("${:.2}/h", m as f64 / 1e6))
            ),
        ));
        fields.push(("nics", r.nics.clone().unwrap_or_default()));
    }
    fields.push((
        "pane",
        pane.map_or(
            "none open (Enter opens the fleet's, this one zoomed)".into(),
            |t| t.state.label(),
        ),
    ));
    fields
}

/// The Nodes view of the current fleet, as its family's inventory lays it out (with the
/// last snapshot of a GKE cluster).
pub fn node_view(state: &State) -> Option<crate::cloud::inventory::NodeView> {
    let fleet = crate::tui::shell::fleet::current(state)?;
    Some(crate::cloud::inventory_for(fleet.backend).nodes(fleet, state.nodes.gke.get(&fleet.name)))
}

/// The names of the current fleet's nodes the Nodes view lists (its filter applied), in
/// its order: the instances of a GCP fleet, else the fleet's nodes.
pub fn listed_nodes(state: &State) -> Vec<String> {
    let filter = state.filters[View::Nodes.index()].to_lowercase();
    node_view(state).map(|v| v.listed(&filter)).unwrap_or_default()
}

/// The node the view shows as selected: the one picked while it is listed, else the
/// first listed (the list read once).
fn shown_node(state: &State) -> Option<String> {
    let listed = listed_nodes(state);
    state
        .nodes
        .selected
        .clone()
        .filter(|s| listed.contains(s))
        .or_else(|| listed.into_iter().next())
}
