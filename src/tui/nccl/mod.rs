//! The NCCL view's state (its actions are act.rs, its messages update.rs): the runs of the state store, and the
//! followed run's report as its rows arrive (parsed by the service that follows it).

pub mod act;
pub mod msg;
pub mod service;
pub mod update;
pub mod view;

pub use act::{act, dialog_key, open_dialog, started, visible};
pub use msg::Msg;
pub use update::update;

use crate::nccl::expect::{self, Verdict};
use crate::nccl::history::{self, Comparison, SavedRun, StragglerReport};
use crate::nccl::runner::{self, Engine, RunSpec};
use crate::nccl::{GpuDirect, Report};
use crate::store::RunRecord;
use tui_textarea::TextArea;

#[derive(Debug, Clone, PartialEq)]
pub enum RunStatus {
    Following,
    Ended(RunEnd),
    Failed(String),
}

/// How a followed run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnd {
    /// Per node (name): its exit code, `None` when none came back (the node or its
    /// connection was lost).
    pub codes: Vec<(String, Option<i32>)>,
    /// The last lines the run printed that are not result rows (the error, when it
    /// failed), head node first, others prefixed by their names.
    pub tail: Vec<String>,
}

impl RunEnd {
    /// The worst exit code (a lost node counts as [`crate::exec::UNREACHABLE`]).
    pub fn worst(&self) -> Option<i32> {
        self.codes
            .iter()
            .map(|(_, c)| c.unwrap_or(crate::exec::UNREACHABLE))
            .max()
    }

    /// "local-0 127" or "tb-0 0 · tb-1 lost", for titles and summaries.
    pub fn codes_text(&self) -> String {
        self.codes
            .iter()
            .map(|(n, c)| match c {
                Some(c) => format!("{n} {c}"),
                None => format!("{n} lost"),
            })
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

#[derive(Debug, Clone, Default)]
pub struct NcclView {
    /// NCCL runs of the state store, newest first.
    pub runs: Vec<RunRecord>,
    /// The selected run, by id.
    pub selected: Option<String>,
    /// The run being shown, its report so far and its state.
    pub shown: Option<(String, Report, RunStatus)>,
    /// The history of the state dir (profile, machine type, rows, verdict per run).
    pub history: Vec<SavedRun>,
    /// Runs marked for comparison, in marking order (A, then B); two at most.
    pub compare: Vec<String>,
    /// The run dialog, while open.
    pub dialog: Option<RunDialog>,
    /// The dialog as it was last closed (started or cancelled): the next `t` opens it
    /// again as it was, environment included.
    pub last_dialog: Option<RunDialog>,
    /// `R` asked to run this run (by id) again: the dialog opens with its settings.
    pub again: Option<String>,
    /// The last straggler finder result of the state dir.
    pub stragglers: Option<StragglerReport>,
    /// The `d` panel: the selected run's every field, under the list and the run.
    pub detail: bool,
}

/// A fleet the run dialog offers, with what `auto` picks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetChoice {
    pub name: String,
    /// Its backend family: whose NCCL environment the dialog starts from (a VM's or a
    /// GKE pod's, [`crate::nccl::profile::env_lines`]).
    pub family: crate::fleet::BackendKind,
    pub nodes: usize,
    /// The fleet file's first instance type.
    pub machine_type: Option<String>,
    /// The profile `auto` picks, and why (fleet network.gpudirect, machine type).
    pub auto: GpuDirect,
    pub auto_from: String,
}

/// What the run dialog asks to start: the same spec `flightdeck nccl run` builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub fleet: String,
    pub spec: RunSpec,
    /// The machine type the verdict is judged for (the fleet file's).
    pub machine_type: Option<String>,
}

/// The run dialog's fields, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Fleet,
    Collective,
    MinBytes,
    MaxBytes,
    Factor,
    Gpus,
    Iters,
    Warmup,
    Dtype,
    Engine,
    Profile,
    Env,
}

impl Field {
    pub const ALL: [Field; 12] = [
        Field::Fleet,
        Field::Collective,
        Field::MinBytes,
        Field::MaxBytes,
        Field::Factor,
        Field::Gpus,
        Field::Iters,
        Field::Warmup,
        Field::Dtype,
        Field::Engine,
        Field::Profile,
        Field::Env,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Field::Fleet => "fleet",
            Field::Collective => "collective",
            Field::MinBytes => "-b min size",
            Field::MaxBytes => "-e max size",
            Field::Factor => "-f step factor",
            Field::Gpus => "-g GPUs/node",
            Field::Iters => "-n iterations",
            Field::Warmup => "-w warm-up",
            Field::Dtype => "-d data type",
            Field::Engine => "engine",
            Field::Profile => "profile",
            Field::Env => "environment",
        }
    }

    /// Fields picked from a list with left/right rather than typed.
    pub fn is_choice(self) -> bool {
        matches!(
            self,
            Field::Fleet | Field::Collective | Field::Dtype | Field::Engine | Field::Profile
        )
    }
}

/// The profiles the dialog offers: `None` is auto.
pub const PROFILES: [Option<GpuDirect>; 5] = [
    None,
    Some(GpuDirect::None),
    Some(GpuDirect::Tcpx),
    Some(GpuDirect::Tcpxo),
    Some(GpuDirect::Rdma),
];

/// Starting an NCCL run from the cockpit: fleet, collective, sizes, GPUs, iterations,
/// warm-up, data type, engine and the GPUDirect profile with its environment lines shown
/// and editable.
#[derive(Debug, Clone)]
pub struct RunDialog {
    pub fleets: Vec<FleetChoice>,
    pub fleet: usize,
    pub collective: usize,
    pub min_bytes: TextArea<'static>,
    pub max_bytes: TextArea<'static>,
    pub factor: TextArea<'static>,
    /// Empty: all of the node's GPUs.
    pub gpus: TextArea<'static>,
    /// Timed iterations per size (at least 1).
    pub iters: TextArea<'static>,
    /// Warm-up iterations per size (0: none).
    pub warmup: TextArea<'static>,
    /// One of the engine's data types ([`Engine::dtypes`]); a type the other engine
    /// has is kept when the engine changes, and refused with the reason on ctrl-s.
    pub dtype: &'static str,
    pub engine: Engine,
    /// `None`: auto (the fleet's).
    pub profile: Option<GpuDirect>,
    pub env: TextArea<'static>,
    pub focus: Field,
    /// Why the last ctrl-s did not start the run.
    pub problem: Option<String>,
    /// The focused one-line field shows its value as it was when the focus came: the
    /// first character typed replaces it (as a spreadsheet cell does); any other key
    /// edits it in place.
    pub fresh: bool,
}

fn line_input(text: &str) -> TextArea<'static> {
    let mut t = TextArea::new(vec![text.to_string()]);
    t.move_cursor(tui_textarea::CursorMove::End);
    t
}

fn text_of(t: &TextArea) -> String {
    t.lines().join("\n").trim().to_string()
}

fn cycle(i: usize, len: usize, forward: bool) -> usize {
    if len == 0 {
        0
    } else if forward {
        (i + 1) % len
    } else {
        (i + len - 1) % len
    }
}

impl RunDialog {
    /// The dialog with `nccl run`'s defaults, on `preferred` when it is one of `fleets`.
    pub fn new(fleets: Vec<FleetChoice>, preferred: Option<&str>) -> RunDialog {
        let fleet = preferred
            .and_then(|p| fleets.iter().position(|f| f.name == p))
            .unwrap_or(0);
        let mut d = RunDialog {
            fleets,
            fleet,
            collective: 0,
            min_bytes: line_input("8"),
            max_bytes: line_input("8G"),
            factor: line_input("2"),
            gpus: line_input(""),
            iters: line_input(&runner::DEFAULT_ITERS.to_string()),
            warmup: line_input(&runner::DEFAULT_WARMUP.to_string()),
            dtype: runner::DEFAULT_DTYPE,
            engine: Engine::NcclTests,
            profile: None,
            env: TextArea::default(),
            focus: Field::Fleet,
            problem: None,
            fresh: true,
        };
        d.reset_env();
        d
    }

    /// The dialog as it was last closed, over the fleets as they are now (its fleet
    /// kept when it is still there, else `preferred`'s).
    pub fn reopened(mut self, fleets: Vec<FleetChoice>, preferred: Option<&str>) -> RunDialog {
        let was = self.fleet().map(|f| f.name.clone());
        self.fleet = was
            .as_deref()
            .and_then(|w| fleets.iter().position(|f| f.name == w))
            .or_else(|| preferred.and_then(|p| fleets.iter().position(|f| f.name == p)))
            .unwrap_or(0);
        self.fleets = fleets;
        self.focus = Field::Fleet;
        self.problem = None;
        self.fresh = true;
        self
    }

    /// The dialog for running `run` again: its fleet, collective, sizes, iterations,
    /// data type, engine, profile and environment as the history saved them.
    pub fn from_saved(fleets: Vec<FleetChoice>, run: &SavedRun) -> RunDialog {
        let mut d = RunDialog::new(fleets, Some(&run.fleet));
        let spec = &run.spec;
        if let Some(i) = runner::COLLECTIVES.iter().position(|c| *c == spec.collective) {
            d.collective = i;
        }
        if let Some(e) = Engine::from_name(&spec.engine) {
            d.engine = e;
        }
        // `-b 8 -e 8G -f 2 -g all -n 20 -w 5 -d float`, as `remote::saved_run` wrote it.
        let words: Vec<&str> = spec.args.split_whitespace().collect();
        for pair in words.chunks(2) {
            let [flag, value] = pair else { continue };
            match *flag {
                "-b" => d.min_bytes = line_input(value),
                "-e" => d.max_bytes = line_input(value),
                "-f" => d.factor = line_input(value),
                "-g" => d.gpus = line_input(if *value == "all" { "" } else { value }),
                "-n" => d.iters = line_input(value),
                "-w" => d.warmup = line_input(value),
                "-d" => {
                    if let Some(t) = d.engine.dtypes().iter().find(|t| **t == *value) {
                        d.dtype = t;
                    }
                }
                _ => {}
            }
        }
        d.profile = GpuDirect::parse(&spec.profile);
        let mut env = TextArea::new(spec.env.clone());
        env.move_cursor(tui_textarea::CursorMove::Bottom);
        env.move_cursor(tui_textarea::CursorMove::End);
        d.env = env;
        d
    }

    pub fn fleet(&self) -> Option<&FleetChoice> {
        self.fleets.get(self.fleet)
    }

    /// The profile the run gets: the one picked, or the fleet's for auto.
    pub fn resolved_profile(&self) -> GpuDirect {
        self.profile
            .unwrap_or_else(|| self.fleet().map_or(GpuDirect::None, |f| f.auto))
    }

    /// The resolved profile's lines for the fleet's family (a VM's or a GKE pod's): what
    /// the environment editor starts from. No fleet, no lines.
    pub fn profile_env(&self) -> Vec<String> {
        self.fleet().map_or_else(Vec::new, |f| {
            crate::nccl::profile::env_lines(f.family, self.resolved_profile())
        })
    }

    /// Put the resolved profile's lines in the environment editor, the cursor at the end
    /// (where a line is most often added).
    fn reset_env(&mut self) {
        let mut t = TextArea::new(self.profile_env());
        t.move_cursor(tui_textarea::CursorMove::Bottom);
        t.move_cursor(tui_textarea::CursorMove::End);
        self.env = t;
    }

    /// The environment lines as edited (blank lines dropped).
    pub fn env_lines(&self) -> Vec<String> {
        self.env
            .lines()
            .iter()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// Whether the environment differs from the profile's own lines
    /// ([`RunDialog::profile_env`]).
    pub fn env_edited(&self) -> bool {
        self.env_lines() != self.profile_env()
    }

    fn input_mut(&mut self, f: Field) -> Option<&mut TextArea<'static>> {
        match f {
            Field::MinBytes => Some(&mut self.min_bytes),
            Field::MaxBytes => Some(&mut self.max_bytes),
            Field::Factor => Some(&mut self.factor),
            Field::Gpus => Some(&mut self.gpus),
            Field::Iters => Some(&mut self.iters),
            Field::Warmup => Some(&mut self.warmup),
            Field::Env => Some(&mut self.env),
            _ => None,
        }
    }

    /// Pick the next (or previous) choice of a choice field.
    fn choose(&mut self, forward: bool) {
        match self.focus {
            Field::Fleet => {
                self.fleet = cycle(self.fleet, self.fleets.len(), forward);
                self.reset_env();
            }
            Field::Collective => self.collective = cycle(self.collective, runner::COLLECTIVES.len(), forward),
            Field::Dtype => {
                let types = self.engine.dtypes();
                self.dtype = match types.iter().position(|t| *t == self.dtype) {
                    Some(i) => types[cycle(i, types.len(), forward)],
                    // A type of the other engine: this engine's first, or last.
                    None if forward => types[0],
                    None => types[types.len() - 1],
                };
            }
            Field::Engine => {
                self.engine = match self.engine {
                    Engine::NcclTests => Engine::Torch,
                    Engine::Torch => Engine::NcclTests,
                }
            }
            Field::Profile => {
                let i = PROFILES.iter().position(|p| *p == self.profile).unwrap_or(0);
                self.profile = PROFILES[cycle(i, PROFILES.len(), forward)];
                self.reset_env();
            }
            _ => {}
        }
    }

    /// Pasted text goes into the focused text field (one line but in the environment).
    pub fn paste(&mut self, text: &str) {
        let env = self.focus == Field::Env;
        if let Some(t) = self.input_mut(self.focus) {
            if env {
                t.insert_str(text);
            } else {
                t.insert_str(text.replace(['\r', '\n'], " "));
            }
        }
    }

    /// The run the dialog describes, as `flightdeck nccl run` would start it, with the
    /// environment when the operator edited it (else the run gets its family's profile,
    /// as `nccl run` without `--env` does: a GKE pod only what its image sets); or why not.
    pub fn request(&self) -> Result<RunRequest, String> {
        let fleet = self
            .fleet()
            .ok_or("no fleet in the state: apply one first (flightdeck fleet apply FILE)")?;
        let size = |f: Field, t: &TextArea| {
            runner::parse_size(&text_of(t)).map_err(|e| format!("{}: {e}", f.label()))
        };
        let factor = text_of(&self.factor);
        let step_factor = factor
            .parse::<u32>()
            .map_err(|_| format!("{}: `{factor}` is not a whole number", Field::Factor.label()))?;
        let gpus = text_of(&self.gpus);
        let gpus =
            match gpus.as_str() {
                "" | "all" => None,
                g => Some(g.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("{}: `{g}` is not a GPU count (empty: all)", Field::Gpus.label())
                })?),
            };
        let count = |f: Field, t: &TextArea, least: u32| {
            let text = text_of(t);
            text.parse::<u32>().ok().filter(|n| *n >= least).ok_or_else(|| {
                format!(
                    "{}: `{text}` is not a whole number of at least {least}",
                    f.label()
                )
            })
        };
        let spec = RunSpec {
            collective: runner::COLLECTIVES[self.collective].to_string(),
            min_bytes: size(Field::MinBytes, &self.min_bytes)?,
            max_bytes: size(Field::MaxBytes, &self.max_bytes)?,
            step_factor,
            gpus,
            iters: count(Field::Iters, &self.iters, 1)?,
            warmup: count(Field::Warmup, &self.warmup, 0)?,
            dtype: self.dtype.to_string(),
            engine: self.engine,
            profile: self.resolved_profile(),
            nccl_tests_dir: None,
            env: self.env_edited().then(|| self.env_lines()),
        };
        spec.check().map_err(|e| e.to_string())?;
        Ok(RunRequest {
            fleet: fleet.name.clone(),
            spec,
            machine_type: fleet.machine_type.clone(),
        })
    }
}

impl NcclView {
    pub fn set_runs(&mut self, mut runs: Vec<RunRecord>) {
        runs.retain(|r| r.kind == "nccl");
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
        self.runs = runs;
        if !self
            .selected
            .as_ref()
            .is_some_and(|s| self.runs.iter().any(|r| &r.id == s))
        {
            self.selected = self.runs.first().map(|r| r.id.clone());
        }
    }

    pub fn set_history(&mut self, history: Vec<SavedRun>) {
        self.history = history;
    }

    /// The history entry of a run.
    pub fn saved(&self, id: &str) -> Option<&SavedRun> {
        self.history.iter().find(|r| r.id == id)
    }

    /// The machine type and node count to judge run `id` by: what its history entry
    /// says, else the GPUs of nccl-tests' rank list.
    pub fn machine(&self, id: &str, report: &Report) -> Option<(String, Option<u32>)> {
        let saved = self.saved(id);
        let nodes = saved.map(|s| s.nodes.len() as u32).filter(|n| *n > 0);
        match saved.and_then(|s| s.machine_type.clone()) {
            Some(m) => Some((m, nodes)),
            None => expect::machine_from_devices(report).map(|(m, n)| (m, nodes.or(Some(n)))),
        }
    }

    /// How run `id` ended, when it is the one shown and it has.
    pub fn end(&self, id: &str) -> Option<&RunEnd> {
        match &self.shown {
            Some((shown, _, RunStatus::Ended(end))) if shown == id => Some(end),
            _ => None,
        }
    }

    /// The line that says why run `id` failed: its history entry's (read from all of its
    /// output), else the one picked from the last lines the follower kept. As the node
    /// printed it: [`crate::term::visible`] before drawing.
    pub fn cause(&self, id: &str) -> Option<String> {
        self.saved(id)
            .and_then(|s| s.verdict.as_ref())
            .and_then(|v| v.cause.clone())
            .or_else(|| {
                let end = self.end(id)?;
                crate::nccl::remote::failure_cause(end.tail.iter().map(String::as_str))
            })
    }

    /// The verdict of run `id` on its report so far, by the one rule of the CLI and the
    /// history ([`expect::verdict_of`]: the run's profile and the collective it was
    /// launched as; once it ended, a node that did not finish fails it with its cause).
    /// A run the history has concluded shows the history's verdict, the one `nccl run`
    /// and `nccl attach` print. `None` while it runs without a row.
    pub fn verdict(&self, id: &str, report: &Report) -> Option<Verdict> {
        let saved = self.saved(id);
        if let Some(v) = saved
            .filter(|s| s.ended_at.is_some())
            .and_then(|s| s.verdict.clone())
        {
            return Some(v);
        }
        let end = self.end(id);
        if report.rows.is_empty() && end.is_none() {
            return None;
        }
        let m = self.machine(id, report);
        let launched = expect::Launched {
            machine_type: m.as_ref().map(|(m, _)| m.as_str()),
            nodes: m.as_ref().and_then(|(_, n)| *n),
            profile: saved.map_or(GpuDirect::None, SavedRun::profile),
            collective: saved
                .map(|s| s.spec.collective.as_str())
                .filter(|c| !c.is_empty()),
        };
        let codes: Vec<Option<i32>> = end.map_or(vec![], |e| e.codes.iter().map(|(_, c)| *c).collect());
        let cause = self.cause(id);
        let ended = end.map(|_| expect::Ended {
            codes: &codes,
            cause: cause.as_deref(),
        });
        Some(expect::verdict_of(report, &launched, ended))
    }

    /// The two marked runs side by side, when both are in the history.
    pub fn comparison(&self) -> Option<(Comparison, &SavedRun, &SavedRun)> {
        let [a, b] = self.compare.as_slice() else {
            return None;
        };
        let (a, b) = (self.saved(a)?, self.saved(b)?);
        Some((history::compare(a, b), a, b))
    }

    fn at(&self) -> Option<usize> {
        self.selected
            .as_ref()
            .and_then(|s| self.runs.iter().position(|r| &r.id == s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::action::Context;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::Msg;
    use crate::tui::state::{Command, State};
    use crate::tui::update::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn run(id: &str, at: u64) -> RunRecord {
        RunRecord {
            id: id.into(),
            kind: "nccl".into(),
            fleet: "lab".into(),
            started_at: at,
            nodes: vec![],
        }
    }

    #[test]
    fn runs_newest_first_follow_and_rows_arrive() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![
                run("old", 1),
                run("new", 2),
                RunRecord {
                    kind: "job".into(),
                    ..run("job", 3)
                },
            ])),
        );
        assert_eq!(
            s.nccl.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            vec!["new", "old"]
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE)),
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE)),
        );
        let cmds = update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        assert_eq!(cmds, vec![Command::FollowRun("old".into())]);
        let report = crate::nccl::parse_text(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/nccl/h200x2-all_reduce.txt"
            ))
            .unwrap(),
        )
        .remove(0);
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Report {
                id: "old".into(),
                report: Box::new(report.clone()),
            }),
        );
        let end = RunEnd {
            codes: vec![("lab-0".into(), Some(0))],
            tail: vec![],
        };
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Ended {
                id: "old".into(),
                end: Box::new(end.clone()),
            }),
        );
        let (id, r, st) = s.nccl.shown.clone().unwrap();
        assert_eq!(
            (id.as_str(), r.rows.len(), st),
            ("old", 31, RunStatus::Ended(end))
        );
        // A report for a run no longer shown is dropped.
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Report {
                id: "other".into(),
                report: Box::new(report),
            }),
        );
        assert_eq!(s.nccl.shown.as_ref().unwrap().0, "old");
    }

    /// A run a node ended with a non-zero exit code is a failure with its cause, after
    /// some rows or before the first, never `unknown`: the same verdict the history
    /// keeps.
    #[test]
    fn a_failed_run_is_a_failure_with_its_cause() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![run("r", 1)])));
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE)),
        );
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
        );
        // Five rows, then a node dies with NCCL's error (no machine known: `unknown` by busbw).
        let mut report =
            crate::nccl::parse_text(include_str!("../../../tests/fixtures/nccl/h200x2-all_reduce.txt"))
                .remove(0);
        report.rows.truncate(5);
        report.avg_busbw = None;
        report.concluded = false;
        report.devices.clear();
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Report {
                id: "r".into(),
                report: Box::new(report.clone()),
            }),
        );
        let v = s.nccl.verdict("r", &report).unwrap();
        assert_eq!(v.grade, expect::Grade::Unknown, "while it runs: {}", v.reason);
        let cuda = "vm:1486:1497 [0] enqueue.cc:1556 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'";
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Ended {
                id: "r".into(),
                end: Box::new(RunEnd {
                    codes: vec![("lab-0".into(), Some(3))],
                    tail: vec![
                        format!("lab-0: {cuda}"),
                        "lab-0: vm: Test NCCL failure common.cu:1160 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / Cuda failure 700'".into(),
                        "lab-0:  .. vm pid 1486: Test failure common.cu:936".into(),
                    ],
                }),
            }),
        );
        let v = s.nccl.verdict("r", &report).unwrap();
        assert_eq!(v.grade, expect::Grade::Fail, "{}", v.reason);
        let want = "NCCL WARN Cuda failure 700 'an illegal memory access was encountered'";
        assert_eq!(v.cause.as_deref(), Some(want));
        assert!(
            v.reason
                .contains("exit 3 after 5 rows; cause: NCCL WARN Cuda failure 700"),
            "{}",
            v.reason
        );
        // The history's cause (read from every line) wins over the kept tail's.
        let mut entry = SavedRun {
            id: "r".into(),
            nodes: vec!["lab-0".into()],
            ..Default::default()
        };
        entry.conclude(&report, &[Some(3)], Some("NCCL WARN the first one"), 9);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::History(vec![entry])));
        assert_eq!(s.nccl.cause("r").as_deref(), Some("NCCL WARN the first one"));
        assert_eq!(s.nccl.verdict("r", &report).unwrap().grade, expect::Grade::Fail);
        // Before its first row: a verdict too, not `no verdict yet`.
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::History(vec![])));
        let empty = Report::default();
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Report {
                id: "r".into(),
                report: Box::new(empty.clone()),
            }),
        );
        let v = s.nccl.verdict("r", &empty).unwrap();
        assert_eq!((v.grade, v.cause.as_deref()), (expect::Grade::Fail, Some(want)));
    }

    #[test]
    fn compare_marks_two_runs_and_the_verdict_falls_back_to_the_rank_list() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![
                run("a", 1),
                run("b", 2),
                run("c", 3),
            ])),
        );
        let key = |s: &mut State, c: char| {
            update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
        };
        key(&mut s, '5');
        for c in ['c', 'j', 'c', 'j', 'c'] {
            key(&mut s, c);
        }
        assert_eq!(
            s.nccl.compare,
            vec!["b".to_string(), "a".into()],
            "the first mark drops out"
        );
        assert!(s.nccl.comparison().is_none(), "not in the history yet");
        let report =
            crate::nccl::parse_text(include_str!("../../../tests/fixtures/nccl/h200x2-all_reduce.txt"))
                .remove(0);
        let entry = |id: &str| {
            let mut e = SavedRun {
                id: id.into(),
                nodes: vec!["lab-0".into()],
                ..Default::default()
            };
            e.conclude(&report, &[Some(0)], None, 9);
            e
        };
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::History(vec![entry("a"), entry("b")])),
        );
        let (cmp, a, b) = s.nccl.comparison().unwrap();
        assert_eq!(
            (a.id.as_str(), b.id.as_str(), cmp.peak_ratio),
            ("b", "a", Some(1.0))
        );
        // A run with no history entry is judged by the GPUs of its rank list.
        let v = s.nccl.verdict("c", &report).unwrap();
        assert_eq!(
            (v.machine_type.as_deref(), v.grade),
            (Some("2xH200"), crate::nccl::expect::Grade::Pass)
        );
        assert!(
            s.nccl.verdict("c", &Report::default()).is_none(),
            "no verdict before the first row"
        );
        key(&mut s, 'c');
        assert_eq!(
            s.nccl.compare,
            vec!["b".to_string()],
            "c on a marked run unmarks it"
        );
    }

    fn choices() -> Vec<FleetChoice> {
        vec![
            FleetChoice {
                name: "lab".into(),
                family: crate::fleet::BackendKind::Ssh,
                nodes: 2,
                machine_type: None,
                auto: GpuDirect::None,
                auto_from: "machine type unknown".into(),
            },
            FleetChoice {
                name: "mega".into(),
                family: crate::fleet::BackendKind::Gcp,
                nodes: 4,
                machine_type: Some("a3-megagpu-8g".into()),
                auto: GpuDirect::Tcpxo,
                auto_from: "machine type".into(),
            },
        ]
    }

    fn press(s: &mut State, code: KeyCode, mods: KeyModifiers) -> Vec<Command> {
        update(s, Msg::Key(KeyEvent::new(code, mods)))
    }

    #[test]
    fn run_dialog_opens_edits_cancels_and_confirms() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        assert_eq!(
            press(&mut s, KeyCode::Char('t'), KeyModifiers::NONE),
            vec![Command::NcclRunChoices]
        );
        assert!(s.nccl.dialog.is_none(), "opens when the fleets are read");
        // No fleets: a word, no dialog.
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(vec![]))));
        assert!(s.nccl.dialog.is_none());
        assert!(s.status.as_ref().unwrap().text.contains("no fleets"));
        // On the fleet selected in the Fleets view.
        s.fleet_selected = Some("mega".into());
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        assert_eq!(crate::tui::update::context(&s), Context::Editor);
        let d = s.nccl.dialog.as_ref().unwrap();
        assert_eq!(d.fleet().unwrap().name, "mega");
        assert_eq!(d.resolved_profile(), GpuDirect::Tcpxo);
        assert_eq!(
            d.env_lines(),
            runner::profile_env(GpuDirect::Tcpxo),
            "auto shows the fleet's profile"
        );
        assert!(!d.env_edited());
        // Left on the fleet field: lab, whose auto profile is none.
        press(&mut s, KeyCode::Left, KeyModifiers::NONE);
        let d = s.nccl.dialog.as_ref().unwrap();
        assert_eq!(
            (d.fleet().unwrap().name.as_str(), d.env_lines().len()),
            ("lab", 0)
        );
        // Collective: right twice from all_reduce.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        // -b: replace 8 with 1M; Enter moves on in a one-line field.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        for c in "1M".chars() {
            press(&mut s, KeyCode::Char(c), KeyModifiers::NONE);
        }
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::MaxBytes);
        // Shift-tab back and forth; then the profile: right from auto is none, then tcpx.
        press(&mut s, KeyCode::BackTab, KeyModifiers::NONE);
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::MinBytes);
        for _ in 0..8 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::Profile);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        let d = s.nccl.dialog.as_ref().unwrap();
        assert_eq!(d.profile, Some(GpuDirect::Tcpx));
        assert_eq!(d.env_lines(), runner::profile_env(GpuDirect::Tcpx));
        // The environment: one more line at the end.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        update(&mut s, Msg::Paste("export NCCL_DEBUG='INFO'".into()));
        let d = s.nccl.dialog.as_ref().unwrap();
        assert!(d.env_edited());
        let mut want_env = runner::profile_env(GpuDirect::Tcpx);
        want_env.push("export NCCL_DEBUG='INFO'".into());
        assert_eq!(d.env_lines(), want_env);
        // Confirm: the request is what `nccl run` would start, with the edit.
        let cmds = press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        let [Command::StartNcclRun(req)] = cmds.as_slice() else {
            panic!("{cmds:?}");
        };
        assert_eq!(req.fleet, "lab");
        assert_eq!(req.spec.collective, "reduce_scatter");
        assert_eq!((req.spec.min_bytes, req.spec.max_bytes), (1 << 20, 8 << 30));
        assert_eq!((req.spec.step_factor, req.spec.gpus), (2, None));
        assert_eq!(
            (req.spec.iters, req.spec.warmup, req.spec.dtype.as_str()),
            (20, 5, "float"),
            "nccl run's defaults"
        );
        assert_eq!(req.spec.profile, GpuDirect::Tcpx);
        assert_eq!(req.spec.env.as_ref(), Some(&want_env));
        assert!(s.nccl.dialog.is_none());
        // Started: the view follows the run.
        let cmds = update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Started(Ok("nccl-x-1-0001".into()))),
        );
        assert_eq!(
            cmds,
            vec![Command::LoadFleets, Command::FollowRun("nccl-x-1-0001".into())]
        );
        assert_eq!(s.nccl.shown.as_ref().unwrap().2, RunStatus::Following);
        // A failed start says why.
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Started(Err("no route".into()))),
        );
        assert!(s
            .status
            .as_ref()
            .unwrap()
            .text
            .contains("did not start: no route"));
    }

    /// ux-walk-2 item 8: the dialog opens again as it was last closed (its environment
    /// too), and `R` on a run opens it with that run's settings and environment.
    #[test]
    fn the_dialog_remembers_and_r_runs_a_run_again() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('t'), KeyModifiers::NONE);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        for _ in 0..11 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        update(&mut s, Msg::Paste("NCCL_TESTS_DIR=/opt/nccl-tests/build".into()));
        let first = press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        let [Command::StartNcclRun(first)] = first.as_slice() else {
            panic!("{first:?}");
        };
        press(&mut s, KeyCode::Char('t'), KeyModifiers::NONE);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        let d = s.nccl.dialog.as_ref().unwrap();
        assert_eq!(d.focus, Field::Fleet);
        assert!(d
            .env_lines()
            .contains(&"NCCL_TESTS_DIR=/opt/nccl-tests/build".to_string()));
        assert_eq!(d.request().unwrap(), **first, "the same run again");
        // Esc keeps what was typed too.
        press(&mut s, KeyCode::Esc, KeyModifiers::NONE);
        assert!(s.nccl.last_dialog.is_some());

        // R on a run of the history: its settings, as saved.
        let saved = SavedRun {
            id: "nccl-all_gather-1-0001".into(),
            fleet: "mega".into(),
            spec: history::SavedSpec {
                collective: "all_gather".into(),
                engine: "nccl-tests".into(),
                args: "-b 1M -e 2G -f 4 -g 2 -n 7 -w 1 -d half".into(),
                profile: "tcpxo".into(),
                env: vec!["export NCCL_DEBUG='INFO'".into()],
            },
            ..Default::default()
        };
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::History(vec![saved.clone()])),
        );
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Runs(vec![run(&saved.id, 1)])),
        );
        s.nccl.selected = Some(saved.id.clone());
        assert_eq!(
            press(&mut s, KeyCode::Char('R'), KeyModifiers::NONE),
            vec![Command::NcclRunChoices]
        );
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        let req = s.nccl.dialog.as_ref().unwrap().request().unwrap();
        assert_eq!(req.fleet, "mega");
        let spec = &req.spec;
        assert_eq!(spec.collective, "all_gather");
        assert_eq!(
            (spec.min_bytes, spec.max_bytes, spec.step_factor),
            (1 << 20, 2 << 30, 4)
        );
        assert_eq!(
            (spec.gpus, spec.iters, spec.warmup, spec.dtype.as_str()),
            (Some(2), 7, 1, "half")
        );
        assert_eq!(spec.profile, GpuDirect::Tcpxo);
        assert_eq!(spec.env.as_deref(), Some(&saved.spec.env[..]));
    }

    /// A GKE fleet's dialog starts from the GKE pod profile, never the VM one (Ubuntu NIC
    /// names, `/var/lib/tcpxo`), and an unedited run sends the pod no lines of its own:
    /// the image's script sets the flavour's environment, as `nccl run` without `--env`.
    #[test]
    fn a_gke_fleet_gets_the_pod_environment_not_the_vm_one() {
        use crate::fleet::BackendKind;
        use crate::nccl::{pods, profile};
        let vm_only = ["enp", "/var/lib/tcpxo", "gIB'"];
        let no_vm_lines = |lines: &[String], what: &str| {
            let text = lines.join("\n");
            for v in vm_only {
                assert!(!text.contains(v), "{what} names {v}: {text}");
            }
        };
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('t'), KeyModifiers::NONE);
        let gke = |name: &str, machine: &str, auto| FleetChoice {
            name: name.into(),
            family: BackendKind::Gke,
            nodes: 2,
            machine_type: Some(machine.into()),
            auto,
            auto_from: "machine type".into(),
        };
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(vec![
                gke("mega", "a3-megagpu-8g", GpuDirect::Tcpxo),
                gke("a3u", "a3-ultragpu-8g", GpuDirect::Rdma),
            ]))),
        );
        for flavour in [GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let d = s.nccl.dialog.as_ref().unwrap();
            assert_eq!(d.resolved_profile(), flavour);
            assert_eq!(d.env_lines(), profile::pod_env(flavour), "{flavour:?}");
            assert_ne!(d.env_lines(), runner::profile_env(flavour), "{flavour:?}");
            no_vm_lines(&d.env_lines(), "the dialog");
            assert!(!d.env_edited(), "the pod profile is the unedited state");
            // Unedited: the head pod's script gets no lines from flightdeck.
            let req = d.request().unwrap();
            assert_eq!(req.spec.env, None, "{flavour:?}");
            let script = pods::head_script(&req.spec, flavour, &["10.0.0.1".into()], 8);
            no_vm_lines(
                &script.lines().map(String::from).collect::<Vec<_>>(),
                "the head script",
            );
            press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        }
        // Edited: the pod profile and the edit, still no VM line.
        for _ in 0..11 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::Env);
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        update(&mut s, Msg::Paste("export NCCL_DEBUG='INFO'".into()));
        let cmds = press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        let [Command::StartNcclRun(req)] = cmds.as_slice() else {
            panic!("{cmds:?}");
        };
        assert_eq!(req.fleet, "mega");
        let mut want = profile::pod_env(GpuDirect::Tcpxo);
        want.push("export NCCL_DEBUG='INFO'".into());
        assert_eq!(req.spec.env.as_ref(), Some(&want));
        let script = pods::head_script(&req.spec, GpuDirect::Tcpxo, &["10.0.0.1".into()], 8);
        assert!(script.contains("export NCCL_DEBUG='INFO'"), "{script}");
        no_vm_lines(
            &script.lines().map(String::from).collect::<Vec<_>>(),
            "the head script",
        );
    }

    #[test]
    fn run_dialog_refuses_bad_input_and_esc_cancels() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        // -f 1 is refused with the reason, the dialog stays.
        for _ in 0..4 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('1'), KeyModifiers::NONE);
        assert!(press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty());
        let d = s.nccl.dialog.as_ref().unwrap();
        assert_eq!(
            d.problem.as_deref(),
            Some("the step factor must be at least 2, got 1")
        );
        // -g x is refused too.
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('2'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('x'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert!(s
            .nccl
            .dialog
            .as_ref()
            .unwrap()
            .problem
            .as_deref()
            .unwrap()
            .contains("`x` is not a GPU count"));
        // A line with flightdeck's reserved heredoc prefix `__FD_` is refused.
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        for _ in 0..6 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        update(&mut s, Msg::Paste("__FD_SCRIPT__\n".into()));
        press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert!(s
            .nccl
            .dialog
            .as_ref()
            .unwrap()
            .problem
            .as_deref()
            .unwrap()
            .contains("environment line 1"));
        // q types into the dialog rather than quitting; esc cancels without a command.
        assert!(press(&mut s, KeyCode::Char('q'), KeyModifiers::NONE).is_empty());
        assert!(press(&mut s, KeyCode::Esc, KeyModifiers::NONE).is_empty());
        assert!(s.nccl.dialog.is_none());
        assert_eq!(crate::tui::update::context(&s), Context::Global);
    }

    fn problem(s: &State) -> String {
        s.nccl
            .dialog
            .as_ref()
            .unwrap()
            .problem
            .clone()
            .unwrap_or_default()
    }

    /// Typing into a field the focus just came to replaces its value ("8" then "16" in
    /// the iterations gives 16, not 2016); a key that is not a character edits in place.
    #[test]
    fn the_first_character_typed_replaces_a_fields_value() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        for _ in 0..6 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        let d = |s: &State| s.nccl.dialog.as_ref().unwrap().iters.lines()[0].clone();
        assert_eq!(d(&s), runner::DEFAULT_ITERS.to_string());
        press(&mut s, KeyCode::Char('1'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('6'), KeyModifiers::NONE);
        assert_eq!(d(&s), "16");
        // Away and back: Backspace edits the value in place.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::BackTab, KeyModifiers::NONE);
        press(&mut s, KeyCode::End, KeyModifiers::NONE);
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        assert_eq!(d(&s), "15");
    }

    #[test]
    fn run_dialog_takes_iterations_warm_up_and_a_data_type_of_the_engine() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::RunFleets(Ok(choices()))));
        // -n: 0 is refused; 50 goes. Enter moves on to -w.
        for _ in 0..6 {
            press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        }
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::Iters);
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('0'), KeyModifiers::NONE);
        assert!(press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty());
        assert_eq!(
            problem(&s),
            "-n iterations: `0` is not a whole number of at least 1"
        );
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('5'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('0'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Enter, KeyModifiers::NONE);
        // -w: no warm-up is a choice; a word is not.
        assert_eq!(s.nccl.dialog.as_ref().unwrap().focus, Field::Warmup);
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('x'), KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        assert_eq!(problem(&s), "-w warm-up: `x` is not a whole number of at least 0");
        press(&mut s, KeyCode::Backspace, KeyModifiers::NONE);
        press(&mut s, KeyCode::Char('0'), KeyModifiers::NONE);
        // -d: picked from nccl-tests' types; left from float wraps to the last.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        for _ in 0..3 {
            press(&mut s, KeyCode::Left, KeyModifiers::NONE);
        }
        assert_eq!(s.nccl.dialog.as_ref().unwrap().dtype, "uint32");
        // The torch engine has no uint32: kept, and refused with the reason.
        press(&mut s, KeyCode::Tab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        assert_eq!(s.nccl.dialog.as_ref().unwrap().engine, Engine::Torch);
        assert!(press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty());
        assert!(
            problem(&s).starts_with("torch has no data type `uint32`; expected one of float, half"),
            "{}",
            problem(&s)
        );
        // Back on -d, right picks torch's first type, then its next.
        press(&mut s, KeyCode::BackTab, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        press(&mut s, KeyCode::Right, KeyModifiers::NONE);
        let cmds = press(&mut s, KeyCode::Char('s'), KeyModifiers::CONTROL);
        let [Command::StartNcclRun(req)] = cmds.as_slice() else {
            panic!("{cmds:?} {}", problem(&s));
        };
        assert_eq!(
            (req.spec.iters, req.spec.warmup, req.spec.dtype.as_str()),
            (50, 0, "bfloat16")
        );
        assert_eq!(req.spec.engine, Engine::Torch);
    }

    #[test]
    fn straggler_results_reach_the_view() {
        let mut s = State::new(Keymap::defaults(), vec![], "dark".into());
        let r = StragglerReport {
            fleet: "lab".into(),
            named: Some("lab-1".into()),
            ..Default::default()
        };
        update(
            &mut s,
            Msg::Nccl(crate::tui::nccl::Msg::Stragglers(Some(Box::new(r.clone())))),
        );
        assert_eq!(s.nccl.stragglers, Some(r));
        update(&mut s, Msg::Nccl(crate::tui::nccl::Msg::Stragglers(None)));
        assert!(s.nccl.stragglers.is_none());
    }
}
