//! The Fleets view's state: the provisioning log of the running or last apply or delete,
//! and the confirmation that comes first. The fleets of the state store are the root
//! state's (every feature reads them); update.rs keeps the selection on them by name so a
//! reload does not move it, and holds the view's actions; editor.rs is the fleet-file
//! editor.

pub mod msg;
pub mod service;
pub mod update;
pub mod view;

pub use msg::Msg;
pub use update::{
    act, answer, editor_key, editor_paste, fix_selection, open_editor, start_apply, update, visible,
};

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
    /// The view's `d` panel: the selected fleet's every field, under the table.
    pub detail: bool,
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
    /// `reviewed`: the fleet as the plan showed it ([`crate::fleet::Fleet::applied`]);
    /// apply refuses a file that changed since.
    Apply {
        file: String,
        reviewed: String,
    },
    Delete {
        name: String,
    },
}

/// The confirmation overlay: the plan of an apply or delete, answered y or n.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    pub op: Op,
    pub plan: crate::cloud::Plan,
}

#[cfg(test)]
mod tests {
    use super::Msg as FleetsMsg;
    use super::*;
    use crate::store::{FleetRecord, ResourceRecord};
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::state::{Command, Overlay, State, View};
    use crate::tui::theme::Tone;
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
        update(
            &mut s,
            Msg::Fleets(FleetsMsg::Log("  instance mega-0: created".into())),
        );
        update(
            &mut s,
            Msg::Fleets(FleetsMsg::Log(crate::progress::tally(1, 2, "nodes up"))),
        );
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
            applied: None,
        }
    }

    fn state() -> State {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        s.view = View::Fleets;
        update(&mut s, Msg::Fleets(FleetsMsg::Loaded(Ok(vec![gcp_record()]))));
        s
    }

    #[test]
    fn a_node_found_lost_is_announced_once() {
        let mut s = state();
        assert!(s.status.is_none());
        let mut lost = gcp_record();
        lost.resources[0].lost = Some("preempted".into());
        update(&mut s, Msg::Fleets(FleetsMsg::Loaded(Ok(vec![lost.clone()]))));
        let status = s.status.clone().expect("a status message");
        assert_eq!(status.text, "lost: mega-0 (preempted)");
        assert_eq!(status.tone, crate::tui::theme::Tone::Fail);
        s.status = None;
        update(&mut s, Msg::Fleets(FleetsMsg::Loaded(Ok(vec![lost]))));
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
                reviewed: "name: mega\n".into(),
            },
            plan,
        };
        update(
            &mut s,
            Msg::Fleets(FleetsMsg::Planned(Ok(Box::new(confirm.clone())))),
        );
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
        update(&mut s, Msg::Fleets(FleetsMsg::Planned(Ok(Box::new(confirm)))));
        assert_eq!(
            key(&mut s, KeyCode::Char('y')),
            vec![Command::ApplyFleet {
                file: "/work/fleets/mega.yaml".into(),
                reviewed: "name: mega\n".into()
            }]
        );
        assert_eq!(
            s.fleet_ops.running.as_deref(),
            Some("apply /work/fleets/mega.yaml")
        );
        // While it runs, another apply is refused.
        assert_eq!(key(&mut s, KeyCode::Char('a')), vec![]);
        update(
            &mut s,
            Msg::Fleets(FleetsMsg::Log("try 1: a3-megagpu-8g SPOT in us-east4-a".into())),
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
            Msg::Fleets(FleetsMsg::Done {
                name: "mega".into(),
                result: Ok("fleet `mega`: 2 nodes ready".into()),
            }),
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
            Msg::Fleets(FleetsMsg::Done {
                name: "mega".into(),
                result: Err("quota".into()),
            }),
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
            Msg::Fleets(FleetsMsg::Planned(Err("fleets/x.yaml:3:1: unknown field".into()))),
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
            Msg::Fleets(FleetsMsg::FileOpened(Ok((
                "/work/fleets/mega.yaml".into(),
                text.clone(),
            )))),
        );
        assert_eq!(
            crate::tui::update::context(&s),
            crate::tui::action::Context::Editor
        );
        assert_eq!(s.editor.as_ref().unwrap().problem, None);
        // A typo shows where it is, and ctrl-s refuses it.
        key(&mut s, KeyCode::Char('x'));
        let p = s.editor.as_ref().unwrap().problem.clone().expect("invalid");
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
        assert!(s.editor.is_none());
    }
}
