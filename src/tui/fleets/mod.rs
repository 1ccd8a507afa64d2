//! The Fleets and Nodes views' share of `update`: the fleets of the state store, filtered,
//! with the selection kept by name so a reload does not move it.

pub mod service;
pub mod view;

use super::action::Action;
use super::state::{Command, Overlay, State, StatusMessage, View};
use super::theme::Tone;
use crate::store::FleetRecord;

/// The fleets the Fleets view shows: those matching its filter (any column, any case).
pub fn visible(state: &State) -> Vec<&FleetRecord> {
    let f = state.filters[View::Fleets.index()].to_lowercase();
    state
        .fleets
        .iter()
        .filter(|r| {
            f.is_empty()
                || [r.name.as_str(), r.backend.as_str()]
                    .iter()
                    .any(|c| c.to_lowercase().contains(&f))
                || r.nodes.iter().any(|n| n.host().to_lowercase().contains(&f))
        })
        .collect()
}

/// The fleet the Nodes view describes: the one with open panes, else the selected one.
pub fn current(state: &State) -> Option<&FleetRecord> {
    let name = state.panes.fleet.as_ref().or(state.fleet_selected.as_ref())?;
    state.fleets.iter().find(|f| &f.name == name)
}

/// Keep the selection on a visible fleet after a reload or a filter change.
pub fn fix_selection(state: &mut State) {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    if !state.fleet_selected.as_ref().is_some_and(|s| names.contains(s)) {
        state.fleet_selected = names.first().cloned();
    }
}

/// The Nodes view of the current fleet, as its family's inventory lays it out (with the
/// last snapshot of a GKE cluster).
pub fn node_view(state: &State) -> Option<crate::cloud::inventory::NodeView> {
    let fleet = current(state)?;
    Some(crate::cloud::inventory_for(fleet.backend).nodes(fleet, state.gke.get(&fleet.name)))
}

/// The names of the current fleet's nodes the Nodes view lists (its filter applied), in
/// its order: the instances of a GCP fleet, else the fleet's nodes.
pub fn listed_nodes(state: &State) -> Vec<String> {
    let filter = state.filters[super::state::View::Nodes.index()].to_lowercase();
    node_view(state).map(|v| v.listed(&filter)).unwrap_or_default()
}

/// Actions in the Nodes view: move the selection, Enter opens the fleet's panes with the
/// selected node's zoomed, `d` shows its details. `None`: not a Nodes action.
pub fn nodes_act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let names = listed_nodes(state);
    // Nothing picked yet: the first node is the one shown selected.
    let at = state
        .node_selected
        .as_ref()
        .and_then(|s| names.iter().position(|n| n == s))
        .or((!names.is_empty()).then_some(0));
    let last = names.len().saturating_sub(1);
    let pick = |i: usize| names.get(i).cloned();
    match action {
        Action::Up => state.node_selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => state.node_selected = pick(at.map_or(0, |i| (i + 1).min(last))),
        Action::Top => state.node_selected = pick(0),
        Action::Bottom => state.node_selected = pick(last),
        Action::PageUp | Action::PageDown => {
            // A screenful of the table: the body less borders, header (and details).
            let body = super::panes::body(state.size).height;
            let per = usize::from(body.saturating_sub(if state.node_detail { 12 } else { 3 })).max(1);
            let at = at.unwrap_or(0);
            state.node_selected = pick(if action == Action::PageDown {
                (at + per).min(last)
            } else {
                at.saturating_sub(per)
            });
        }
        Action::Detail => state.node_detail = !state.node_detail,
        Action::Select => {
            let node = at.and_then(pick).or_else(|| pick(0));
            let fleet = current(state).map(|f| f.name.clone());
            let (Some(node), Some(fleet)) = (node, fleet) else {
                return Some(vec![]);
            };
            // Panes already open on this fleet: focus the node's, zoomed.
            if state.panes.fleet.as_deref() == Some(fleet.as_str()) {
                if let Some(i) = state.panes.tiles.iter().position(|t| t.node == node) {
                    state.panes.focus = i;
                    state.panes.zoom = true;
                    state.view = super::state::View::Panes;
                    return Some(super::panes::sync_sizes(state));
                }
            }
            state.focus_node = Some(node);
            return Some(vec![Command::OpenPanes(fleet)]);
        }
        _ => return None,
    }
    Some(vec![])
}

pub fn act(state: &mut State, action: Action) -> Option<Vec<Command>> {
    let names: Vec<String> = visible(state).iter().map(|f| f.name.clone()).collect();
    let at = state
        .fleet_selected
        .as_ref()
        .and_then(|s| names.iter().position(|n| n == s));
    let pick = |i: usize| names.get(i).cloned();
    match action {
        Action::Up => state.fleet_selected = pick(at.map_or(0, |i| i.saturating_sub(1))),
        Action::Down => {
            state.fleet_selected = pick(at.map_or(0, |i| (i + 1).min(names.len().saturating_sub(1))))
        }
        Action::Top => state.fleet_selected = pick(0),
        Action::Bottom => state.fleet_selected = pick(names.len().saturating_sub(1)),
        Action::Reload => return Some(vec![Command::LoadFleets]),
        Action::FleetApply | Action::FleetDelete | Action::FleetEdit => return Some(fleet_op(state, action)),
        Action::JobStop => return Some(cancel_op(state)),
        Action::Select => {
            return Some(
                state
                    .fleet_selected
                    .clone()
                    .map(Command::OpenPanes)
                    .into_iter()
                    .collect(),
            )
        }
        _ => return None,
    }
    Some(vec![])
}

/// The most lines the provisioning log keeps (the oldest go first).
pub const LOG_LINES: usize = 500;

/// Apply and delete from the cockpit: the provisioning log of the last one and whether one
/// is running (one at a time).
#[derive(Debug, Clone, Default)]
pub struct FleetOps {
    pub log: std::collections::VecDeque<String>,
    /// What is running now (`apply fleets/a.yaml`), if anything.
    pub running: Option<String>,
    /// How the last one ended: its summary, or why it failed.
    pub outcome: Option<Result<String, String>>,
    /// How far the running one has got: done, total, of what ([`crate::progress`]).
    pub tally: Option<(usize, usize, String)>,
    /// When it started (for the elapsed time shown with the gauge).
    pub started: Option<std::time::Instant>,
}

impl FleetOps {
    pub fn push(&mut self, line: String) {
        // A tally moves the gauge; it is not a line of the log.
        if let Some((done, total, what)) = crate::progress::parse_tally(&line) {
            self.tally = Some((done, total, what.to_string()));
            return;
        }
        for l in line.lines() {
            if self.log.len() == LOG_LINES {
                self.log.pop_front();
            }
            self.log.push_back(l.to_string());
        }
    }
}

/// What a confirmation is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Apply { file: String },
    Delete { name: String },
}

/// The confirmation overlay: the plan of an apply or delete, answered y or n.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    pub op: Op,
    pub plan: crate::cloud::Plan,
}

/// `x` in the Fleets view: cancel the running apply (a flex-start request queued for
/// capacity, say); its provisioner deletes what it made. Deletes run to the end.
fn cancel_op(state: &mut State) -> Vec<Command> {
    match state.fleet_ops.running.clone() {
        Some(what) if what.starts_with("apply ") => {
            state
                .fleet_ops
                .push(format!("cancelling {what}: what it made is deleted"));
            state.status = Some(StatusMessage {
                text: format!("cancelling {what}"),
                tone: Tone::Warn,
            });
            vec![Command::CancelFleetOp]
        }
        Some(what) => {
            state.status = Some(StatusMessage {
                text: format!("{what} runs to the end (a delete is not cancelled)"),
                tone: Tone::Warn,
            });
            vec![]
        }
        None => {
            state.status = Some(StatusMessage {
                text: "nothing to stop: x cancels a running apply here".into(),
                tone: Tone::Info,
            });
            vec![]
        }
    }
}

fn busy(state: &mut State) -> bool {
    if let Some(what) = &state.fleet_ops.running {
        state.status = Some(StatusMessage {
            text: format!("{what} is still running; its log is below"),
            tone: Tone::Warn,
        });
        return true;
    }
    false
}

/// Plan an apply of `file` (the confirmation opens when the plan is back).
pub fn start_apply(state: &mut State, file: String) -> Vec<Command> {
    if busy(state) {
        return vec![];
    }
    state.status = Some(StatusMessage {
        text: format!("planning {file}…"),
        tone: Tone::Info,
    });
    vec![Command::PlanFleet(file)]
}

/// The apply, delete and edit keys of the Fleets view.
fn fleet_op(state: &mut State, action: Action) -> Vec<Command> {
    let Some(record) = current_selected(state).cloned() else {
        state.status = Some(StatusMessage {
            text: "no fleet selected; :apply FILE applies a fleet file".into(),
            tone: Tone::Warn,
        });
        return vec![];
    };
    let file = record.file.as_ref().map(|p| p.display().to_string());
    match (action, file) {
        (Action::FleetDelete, _) => {
            if busy(state) {
                return vec![];
            }
            state.overlay = Overlay::FleetConfirm(Box::new(Confirm {
                op: Op::Delete {
                    name: record.name.clone(),
                },
                plan: crate::cloud::inventory_for(record.backend).delete_plan(&record),
            }));
            vec![]
        }
        (Action::FleetApply, Some(f)) => start_apply(state, f),
        (Action::FleetEdit, Some(f)) => vec![Command::EditFile(f)],
        (_, None) => {
            state.status = Some(StatusMessage {
                text: format!(
                    "fleet `{}` has no recorded file; :apply FILE applies one",
                    record.name
                ),
                tone: Tone::Warn,
            });
            vec![]
        }
        _ => vec![],
    }
}

fn current_selected(state: &State) -> Option<&FleetRecord> {
    let name = state.fleet_selected.as_ref()?;
    state.fleets.iter().find(|f| &f.name == name)
}

/// y or n on the confirmation overlay.
pub fn answer(state: &mut State, action: Action) -> Vec<Command> {
    let Overlay::FleetConfirm(c) = std::mem::take(&mut state.overlay) else {
        return vec![];
    };
    state.dirty = true;
    if action != Action::Confirm {
        state.status = Some(StatusMessage {
            text: "nothing changed".into(),
            tone: Tone::Info,
        });
        return vec![];
    }
    let ops = &mut state.fleet_ops;
    ops.log.clear();
    ops.outcome = None;
    state.view = View::Fleets;
    let (what, command) = match c.op {
        Op::Apply { file } => (format!("apply {file}"), Command::ApplyFleet(file)),
        Op::Delete { name } => (format!("delete {name}"), Command::DeleteFleet(name)),
    };
    ops.push(format!("{what}: started"));
    ops.tally = None;
    ops.started = Some(std::time::Instant::now());
    ops.running = Some(what);
    vec![command]
}

/// A line of the running apply or delete.
pub fn log(state: &mut State, line: String) {
    state.fleet_ops.push(line);
    state.dirty = true;
}

/// The apply or delete ended: the fleets reload; a new fleet is selected (Enter opens
/// its panes).
pub fn done(state: &mut State, name: String, result: Result<String, String>) -> Vec<Command> {
    let what = state.fleet_ops.running.take().unwrap_or_default();
    match &result {
        Ok(summary) => {
            // The log's last line already says how it ended (the shared lifecycle's).
            state.status = Some(StatusMessage {
                text: summary.clone(),
                tone: Tone::Pass,
            });
            if what.starts_with("apply") {
                state.fleet_selected = Some(name);
            }
        }
        Err(e) => {
            state.fleet_ops.push(format!("failed: {e}"));
            state.status = Some(StatusMessage {
                text: format!("{what} failed: {}", e.lines().next().unwrap_or("")),
                tone: Tone::Fail,
            });
        }
    }
    state.fleet_ops.outcome = Some(result);
    state.dirty = true;
    vec![Command::LoadFleets]
}

/// The plan for an apply came back: ask.
pub fn planned(state: &mut State, plan: Result<Box<Confirm>, String>) {
    state.dirty = true;
    match plan {
        Ok(c) if matches!(state.overlay, Overlay::None) => {
            state.status = None;
            state.overlay = Overlay::FleetConfirm(c);
        }
        Ok(c) => state.questions.push_back(Overlay::FleetConfirm(c)),
        Err(e) => {
            state.status = Some(StatusMessage {
                text: format!("cannot plan: {}", e.lines().next().unwrap_or("")),
                tone: Tone::Fail,
            });
            state.fleet_ops.outcome = Some(Err(e.clone()));
            state.fleet_ops.log.clear();
            state.fleet_ops.push(format!("plan failed: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ResourceRecord;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn key(s: &mut State, c: KeyCode) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
    }

    /// Tallies in an operation's progress move the gauge and stay out of the log.
    #[test]
    fn tallies_move_the_gauge_not_the_log() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.fleet_ops.running = Some("apply fleets/mega.yaml".into());
        update(&mut s, Msg::FleetLog("  instance mega-0: created".into()));
        update(&mut s, Msg::FleetLog(crate::progress::tally(1, 2, "nodes up")));
        assert_eq!(s.fleet_ops.tally, Some((1, 2, "nodes up".to_string())));
        assert_eq!(s.fleet_ops.log, ["  instance mega-0: created"]);
    }

    fn gcp_record() -> FleetRecord {
        let mut inst = ResourceRecord::new("instance", "mega-0", "created");
        inst.zone = Some("us-east4-b".into());
        inst.machine_type = Some("a3-megagpu-8g".into());
        inst.provisioning_model = Some("SPOT".into());
        inst.nics = Some("1+8 GVNIC".into());
        inst.hourly_micro_usd = Some(25_500_000);
        let mut pol = ResourceRecord::new("placement_policy", "mega-pp", "created");
        pol.region = Some("us-east4".into());
        FleetRecord {
            name: "mega".into(),
            backend: crate::fleet::BackendKind::Gcp,
            file: Some("/work/fleets/mega.yaml".into()),
            nodes: vec![],
            resources: vec![inst, pol],
            created_at: 0,
        }
    }

    fn state() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Fleets;
        update(&mut s, Msg::Fleets(Ok(vec![gcp_record()])));
        s
    }

    #[test]
    fn a_node_found_lost_is_announced_once() {
        let mut s = state();
        assert!(s.status.is_none());
        let mut lost = gcp_record();
        lost.resources[0].lost = Some("preempted".into());
        update(&mut s, Msg::Fleets(Ok(vec![lost.clone()])));
        let status = s.status.clone().expect("a status message");
        assert_eq!(status.text, "lost: mega-0 (preempted)");
        assert_eq!(status.tone, crate::tui::theme::Tone::Fail);
        s.status = None;
        update(&mut s, Msg::Fleets(Ok(vec![lost])));
        assert!(
            s.status.is_none(),
            "a node already known lost is not announced again"
        );
    }

    #[test]
    fn apply_plans_then_confirm_runs_and_cancel_changes_nothing() {
        let mut s = state();
        assert_eq!(
            key(&mut s, KeyCode::Char('a')),
            vec![Command::PlanFleet("/work/fleets/mega.yaml".into())]
        );
        let plan = crate::cloud::Plan::new("mega", crate::fleet::BackendKind::Gcp);
        let confirm = Confirm {
            op: Op::Apply {
                file: "/work/fleets/mega.yaml".into(),
            },
            plan,
        };
        update(&mut s, Msg::FleetPlanned(Ok(Box::new(confirm.clone()))));
        assert!(matches!(&s.overlay, Overlay::FleetConfirm(c) if **c == confirm));
        // Its own keys and hints, not the host-key question's: `a` (accept every host
        // key) means nothing here.
        use crate::tui::action::Context;
        assert_eq!(crate::tui::update::context(&s), Context::Confirmation);
        assert_eq!(
            s.keymap.hints_in(Context::Confirmation, View::Fleets),
            vec![("y".to_string(), "confirm"), ("n".to_string(), "cancel")]
        );
        assert_eq!(key(&mut s, KeyCode::Char('a')), vec![]);
        assert!(matches!(&s.overlay, Overlay::FleetConfirm(c) if **c == confirm));
        // n cancels: nothing runs.
        assert_eq!(key(&mut s, KeyCode::Char('n')), vec![]);
        assert!(matches!(s.overlay, Overlay::None));
        assert_eq!(s.fleet_ops.running, None);
        // Again, and y.
        update(&mut s, Msg::FleetPlanned(Ok(Box::new(confirm))));
        assert_eq!(
            key(&mut s, KeyCode::Char('y')),
            vec![Command::ApplyFleet("/work/fleets/mega.yaml".into())]
        );
        assert_eq!(
            s.fleet_ops.running.as_deref(),
            Some("apply /work/fleets/mega.yaml")
        );
        // While it runs, another apply is refused.
        assert_eq!(key(&mut s, KeyCode::Char('a')), vec![]);
        update(
            &mut s,
            Msg::FleetLog("try 1: a3-megagpu-8g SPOT in us-east4-a".into()),
        );
        // x cancels the running apply (a flex-start request queued for capacity, say).
        assert_eq!(key(&mut s, KeyCode::Char('x')), vec![Command::CancelFleetOp]);
        assert!(s
            .fleet_ops
            .log
            .iter()
            .any(|l| l == "cancelling apply /work/fleets/mega.yaml: what it made is deleted"));
        let done = update(
            &mut s,
            Msg::FleetDone {
                name: "mega".into(),
                result: Ok("fleet `mega`: 2 nodes ready".into()),
            },
        );
        assert_eq!(done, vec![Command::LoadFleets]);
        assert_eq!(s.fleet_ops.running, None);
        assert!(s.fleet_ops.log.iter().any(|l| l.starts_with("try 1")));
        assert_eq!(s.fleet_selected.as_deref(), Some("mega"));
        // Enter opens its panes.
        assert_eq!(
            key(&mut s, KeyCode::Enter),
            vec![Command::OpenPanes("mega".into())]
        );
    }

    #[test]
    fn delete_asks_with_what_goes_and_its_price() {
        let mut s = state();
        assert_eq!(key(&mut s, KeyCode::Char('D')), vec![]);
        let Overlay::FleetConfirm(c) = &s.overlay else {
            panic!("no confirmation: {:?}", s.overlay)
        };
        assert_eq!(c.op, Op::Delete { name: "mega".into() });
        let kinds: Vec<(&str, &str, &str)> = c
            .plan
            .changes
            .iter()
            .map(|ch| (ch.action, ch.kind, ch.place.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("delete", "instance", "us-east4-b"),
                ("delete", "placement_policy", "us-east4")
            ]
        );
        assert_eq!(c.plan.hourly_usd, Some(Some(25.5)));
        assert_eq!(key(&mut s, KeyCode::Esc), vec![]);
        assert!(matches!(s.overlay, Overlay::None));
        key(&mut s, KeyCode::Char('D'));
        assert_eq!(
            key(&mut s, KeyCode::Char('y')),
            vec![Command::DeleteFleet("mega".into())]
        );
        let failed = update(
            &mut s,
            Msg::FleetDone {
                name: "mega".into(),
                result: Err("quota".into()),
            },
        );
        assert_eq!(failed, vec![Command::LoadFleets]);
        assert_eq!(s.status.as_ref().map(|m| m.tone), Some(Tone::Fail));
    }

    #[test]
    fn palette_apply_and_a_failed_plan_and_the_log_is_bounded() {
        let mut s = state();
        assert_eq!(
            crate::tui::update::run_command(&mut s, "apply fleets/x.yaml"),
            vec![Command::PlanFleet("fleets/x.yaml".into())]
        );
        update(
            &mut s,
            Msg::FleetPlanned(Err("fleets/x.yaml:3:1: unknown field".into())),
        );
        assert!(matches!(s.overlay, Overlay::None));
        assert!(s.fleet_ops.log[0].contains("3:1"));
        for i in 0..LOG_LINES + 10 {
            s.fleet_ops.push(format!("line {i}"));
        }
        assert_eq!(s.fleet_ops.log.len(), LOG_LINES);
        assert_eq!(
            s.fleet_ops.log.back().unwrap(),
            &format!("line {}", LOG_LINES + 9)
        );
    }

    #[test]
    fn edit_opens_the_recorded_file_and_saves_it_over_itself() {
        let mut s = state();
        assert_eq!(
            key(&mut s, KeyCode::Char('e')),
            vec![Command::EditFile("/work/fleets/mega.yaml".into())]
        );
        let text = "type: fleet\nname: mega\nnodes: 2\nbackends: [gcp]\ninstance_types: [a3-megagpu-8g]\n"
            .to_string();
        update(
            &mut s,
            Msg::FileOpened(Ok(("/work/fleets/mega.yaml".into(), text.clone()))),
        );
        assert_eq!(
            crate::tui::update::context(&s),
            crate::tui::action::Context::Editor
        );
        assert_eq!(s.offers.editor.as_ref().unwrap().problem, None);
        // A typo shows where it is, and ctrl-s refuses it.
        key(&mut s, KeyCode::Char('x'));
        let p = s
            .offers
            .editor
            .as_ref()
            .unwrap()
            .problem
            .clone()
            .expect("invalid");
        assert!(p.contains("mega.yaml:1:"), "{p}");
        let save = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert_eq!(update(&mut s, Msg::Key(save)), vec![]);
        key(&mut s, KeyCode::Backspace);
        assert_eq!(
            update(&mut s, Msg::Key(save)),
            vec![Command::SaveFile {
                path: "/work/fleets/mega.yaml".into(),
                text: text.clone(),
                original: text,
            }]
        );
        assert!(s.offers.editor.is_none());
    }

    #[test]
    fn the_nodes_view_pages_through_1024_nodes_and_draws_only_the_page() {
        let nodes: Vec<crate::fleet::NodeTarget> = (0..1024)
            .map(|i| crate::fleet::NodeTarget {
                index: i,
                name: format!("big-{i}"),
                internal_ip: None,
                address: crate::fleet::Address::Ssh(crate::fleet::SshAddress {
                    host: format!("10.1.{}.{}", i / 256, i % 256),
                    port: None,
                    user: Some("root".into()),
                    identity_file: None,
                    proxy_jump: None,
                }),
            })
            .collect();
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Fleets;
        let record = FleetRecord {
            name: "big".into(),
            backend: crate::fleet::BackendKind::Ssh,
            file: None,
            nodes,
            resources: vec![],
            created_at: 0,
        };
        update(&mut s, Msg::Fleets(Ok(vec![record])));
        update(&mut s, Msg::Resize(100, 30));
        s.view = View::Nodes;
        let theme = crate::tui::theme::Theme::default_theme();
        let screen = |s: &State| {
            let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 30)).unwrap();
            t.draw(|f| crate::tui::views::draw(s, &theme, f)).unwrap();
            let b = t.backend().buffer().clone();
            (0..b.area.height)
                .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        };
        // 30 rows: tab bar and status bar, borders and header: 25 nodes a page.
        let first = screen(&s);
        assert!(first.contains("rows 1–25 of 1024"), "{first}");
        assert!(first.contains("big-24 ") && !first.contains("big-25 "), "{first}");
        key(&mut s, KeyCode::PageDown);
        assert_eq!(s.node_selected.as_deref(), Some("big-25"));
        let second = screen(&s);
        assert!(
            second.contains("rows 26–50 of 1024") && second.contains("big-25 "),
            "{second}"
        );
        key(&mut s, KeyCode::End);
        assert!(screen(&s).contains("rows 1001–1024 of 1024"));
        key(&mut s, KeyCode::PageUp);
        assert_eq!(s.node_selected.as_deref(), Some("big-998"));
        // The filter narrows to a page of its own.
        for c in "/big-51".chars() {
            key(&mut s, KeyCode::Char(c));
        }
        key(&mut s, KeyCode::Enter);
        let filtered = screen(&s);
        assert!(
            filtered.contains("big-511 ") && !filtered.contains("rows "),
            "{filtered}"
        );
    }
}
