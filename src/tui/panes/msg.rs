//! The Panes view's messages from its sessions.

use super::PaneTile;
use crate::term::session::PaneEvent;

/// What the pane sessions report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A fleet's panes are starting (`Command::OpenPanes`).
    Opened { fleet: String, tiles: Vec<PaneTile> },
    /// A fleet whose panes are open already (shown or in the background) is to be shown:
    /// the same shells, as they were (`Command::OpenPanes`).
    Shown { fleet: String },
    /// Panes could not be opened.
    Failed(String),
    /// Output or a state change of a pane's session.
    Event(PaneEvent),
    /// The lines of a pane, for copy mode (`Command::SnapshotPane`).
    Snapshot { id: usize, lines: Vec<String> },
}
