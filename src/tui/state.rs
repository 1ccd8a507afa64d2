//! The cockpit's state: plain data, changed only by `update` (see `update.rs`) and read
//! by the views.

use super::keymap::Keymap;
use super::panes::Panes;
use super::theme::Tone;
use crate::store::FleetRecord;
use crossterm::event::KeyEvent;
use tui_textarea::TextArea;

pub use super::shell::view::View;

/// A one-line message in the status bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusMessage {
    pub text: String,
    pub tone: Tone,
}

/// The `:` command palette.
#[derive(Debug, Clone)]
pub struct Palette {
    pub input: TextArea<'static>,
    /// Completions of the text as last typed (kept while Tab cycles through them).
    pub candidates: Vec<Candidate>,
    pub selected: Option<usize>,
}

/// A completion: the full command line it stands for and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub line: String,
    pub about: String,
}

/// The `/` filter entry of a table view.
#[derive(Debug, Clone)]
pub struct FilterEntry {
    pub input: TextArea<'static>,
    /// The filter before editing began, restored by Esc.
    pub previous: String,
    /// The view's selection before editing began (an offer's id, a fleet's name),
    /// restored by Esc: the live preview moves it.
    pub selected: Option<String>,
}

/// What is open above the current view; the innermost layer gets the keys.
#[derive(Debug, Clone, Default)]
pub enum Overlay {
    #[default]
    None,
    Help {
        scroll: usize,
    },
    /// The session's status messages, whole (scrolls like help).
    Messages {
        scroll: usize,
    },
    Palette(Palette),
    Filter(FilterEntry),
    /// An SSH host offered a key known_hosts does not have.
    HostKey {
        id: u64,
        host: String,
        fingerprint: String,
    },
    /// An encrypted key file needs its passphrase (typed masked).
    Passphrase {
        id: u64,
        key: String,
        input: TextArea<'static>,
    },
    /// Apply or delete a fleet? The plan with its cost per hour (y / n).
    FleetConfirm(Box<super::fleets::Confirm>),
    /// Something that cannot be taken back, asked first (y / n).
    Ask(Ask),
}

/// What a yes to an [`Overlay::Ask`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskFor {
    /// Start typing into broadcast panes some of which are not on screen.
    TypeIntoHidden,
    /// Quit although shells are open in panes.
    Quit,
    /// Close the fleet editor, its changes thrown away.
    DiscardEdits,
}

/// A yes/no question: its title, what it says, and what yes does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub what: AskFor,
    pub title: String,
    pub lines: Vec<String>,
}

/// Everything the cockpit shows.
#[derive(Debug, Clone)]
pub struct State {
    pub view: View,
    pub overlay: Overlay,
    /// The filter text of each view, by `View::index`.
    pub filters: [String; 8],
    pub status: Option<StatusMessage>,
    pub keymap: Keymap,
    /// Names of the themes `:theme` can switch to.
    pub themes: Vec<String>,
    pub theme: String,
    /// The terminal size as last reported (columns, rows).
    pub size: (u16, u16),
    /// Set by `update` when what is on screen must change; cleared by the drawer.
    pub dirty: bool,
    /// Fleets in the state store, as last loaded.
    pub fleets: Vec<FleetRecord>,
    /// Why the fleets could not be loaded, if they could not.
    pub fleets_error: Option<String>,
    /// The selected fleet in the Fleets view (kept by name across reloads).
    pub fleet_selected: Option<String>,
    /// A node whose pane should get the focus (zoomed) once the panes open.
    pub focus_node: Option<String>,
    /// Whether ctrl-z can hand the terminal back to a shell (job control): false when
    /// flightdeck leads its session or stop signals are ignored.
    pub job_control: bool,
    pub panes: Panes,
    /// Apply and delete from the Fleets view: the provisioning log.
    pub fleet_ops: super::fleets::FleetOps,
    /// The fleet-file editor, open over the Offers or Fleets view.
    pub editor: Option<super::widgets::editor::FleetEditor>,
    pub offers: super::offers::OffersView,
    pub nodes: super::nodes::NodesView,
    pub nccl: super::nccl::NcclView,
    pub nics: super::nics::NicsView,
    pub doctor: super::doctor::DoctorView,
    pub jobs: super::jobs::JobsView,
    /// Questions waiting for the overlay (host keys, passphrases), oldest first.
    pub questions: std::collections::VecDeque<Overlay>,
    /// The operator answered `a` (accept all new host keys): later questions, already on
    /// their way when the answer was given, are answered without asking.
    pub accept_all_host_keys: bool,
    /// Every status message of the session, oldest first (the last [`MESSAGES_KEPT`]).
    pub messages: std::collections::VecDeque<StatusMessage>,
}

/// How many status messages the message history keeps.
pub const MESSAGES_KEPT: usize = 200;

impl State {
    /// Whether the screen shows a clock that moves by itself (a fleet operation's
    /// elapsed time), so the loop redraws each [`super::app::TICK`] while it does.
    pub fn ticking(&self) -> bool {
        self.fleet_ops.running.is_some() && self.view == View::Fleets
    }

    pub fn new(keymap: Keymap, themes: Vec<String>, theme: String) -> Self {
        State {
            view: View::Offers,
            overlay: Overlay::None,
            filters: Default::default(),
            status: None,
            keymap,
            themes,
            theme,
            size: (80, 24),
            dirty: true,
            fleets: vec![],
            fleets_error: None,
            fleet_selected: None,
            panes: Panes::default(),
            fleet_ops: Default::default(),
            nccl: Default::default(),
            nics: Default::default(),
            doctor: Default::default(),
            jobs: Default::default(),
            nodes: Default::default(),
            editor: None,
            offers: super::offers::OffersView::new(std::sync::Arc::new(
                crate::catalog::Catalog::embedded().clone(),
            )),
            questions: Default::default(),
            accept_all_host_keys: false,
            messages: Default::default(),
            focus_node: None,
            job_control: true,
        }
    }

    pub fn filter(&self) -> &str {
        &self.filters[self.view.index()]
    }
}

/// Input to `update`: user input and facts reported by services.
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    /// A click or the wheel (tabs, tiles, rows; the wheel scrolls like j / k).
    Mouse(crossterm::event::MouseEvent),
    Resize(u16, u16),
    /// The terminal came back from suspension: everything must be redrawn.
    Resumed,
    /// A `Command::LoadTheme` finished.
    ThemeLoaded(Result<String, String>),
    /// The Fleets view's services: the fleets of the state store, plans, applies and
    /// deletes, files opened for the editor.
    Fleets(super::fleets::Msg),
    /// The Offers view's services (a live refresh of the catalog).
    Offers(super::offers::Msg),
    /// The Nodes view's services (GKE snapshots).
    Nodes(super::nodes::Msg),
    /// The Panes view's sessions (`Command::OpenPanes`, `Command::SnapshotPane`).
    Panes(super::panes::Msg),
    HostKeyQuestion {
        id: u64,
        host: String,
        fingerprint: String,
    },
    PassphraseQuestion {
        id: u64,
        key: String,
    },
    /// The state file changed on disk (a job or run started from the command line).
    StateChanged,
    /// The doctor's service (`Command::RunDoctor`).
    Doctor(super::doctor::Msg),
    /// The NICs view's samplers.
    Nics(super::nics::Msg),
    /// The NCCL view's runs, history, dialog and followed run.
    Nccl(super::nccl::Msg),
    /// The Jobs view's services: the job list, a followed job's lines, runs and stops.
    Jobs(super::jobs::Msg),
}

/// A string that is never printed by Debug (passphrases).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Output of `update`: work for the event loop and services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    Suspend,
    LoadTheme(String),
    LoadFleets,
    /// Read the state store again (another flightdeck changed it), asking nodes nothing.
    ReloadState,
    OpenPanes(String),
    ClosePanes,
    /// Close one fleet's panes (shown or in the background): the fleet was deleted.
    ClosePanesOf(String),
    PaneInput {
        ids: Vec<usize>,
        bytes: Vec<u8>,
    },
    PaneResize {
        id: usize,
        cols: u16,
        rows: u16,
    },
    PaneRestart(usize),
    SnapshotPane(usize),
    /// Put text on the operator's clipboard (OSC 52).
    Yank(String),
    AnswerHostKey {
        id: u64,
        accept: bool,
        all: bool,
    },
    AnswerPassphrase {
        id: u64,
        passphrase: Option<Secret>,
    },
    /// Write a new file (never over an existing one).
    WriteFile {
        path: String,
        text: String,
    },
    /// Follow an NCCL run of the state store from its first line.
    /// Fetch prices and machine types from Google's APIs (the Offers view's `r`).
    RefreshOffers,
    FollowRun(String),
    /// Run the doctor on every node of a fleet (stopping a run in progress).
    RunDoctor(String),
    /// Start samplers on every node of a fleet (stopping any running).
    StartTelemetry(String),
    /// Follow a job of the state store on every node, from the first line.
    FollowJob(String),
    /// Stop following (the job goes on).
    UnfollowJob,
    /// Stop a job on every node.
    StopJob(String),
    /// In a few seconds, ask the nodes of the running jobs how they are (one round per
    /// fleet) and report the jobs again (`jobs::Msg::Polled`).
    PollJobs,
    /// Cancel the running fleet apply (its provisioner rolls back what it made).
    CancelFleetOp,
    /// Start the job of a job file.
    RunJob(String),
    /// Plan the apply of a fleet file (answered by `fleets::Msg::Planned`).
    PlanFleet(String),
    /// Apply a fleet file, streaming its progress (`fleets::Msg::Log`, `fleets::Msg::Done`),
    /// if it is still what the plan showed (`reviewed`).
    ApplyFleet {
        file: String,
        reviewed: String,
    },
    /// Delete a recorded fleet, streaming its progress.
    DeleteFleet(String),
    /// Read a fleet file into the editor.
    EditFile(String),
    /// Write an edited file over itself, refused if it changed on disk since `original`
    /// was read.
    SaveFile {
        path: String,
        text: String,
        original: String,
    },
    /// Read the fleets of the state store with what `auto` picks for each (the NCCL
    /// run dialog opens on them).
    NcclRunChoices,
    /// Start an NCCL run as `flightdeck nccl run` does, and record it.
    StartNcclRun(Box<super::nccl::RunRequest>),
}
