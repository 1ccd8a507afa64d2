//! Every user intent is an [`Action`]. Key chords map to actions per [`Context`]
//! (see `keymap.rs`); the help overlay and the status-bar hints are generated from the
//! same table, so they never disagree with what the keys do.

use serde::Deserialize;

/// Where a key press is interpreted. The innermost open layer decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Context {
    /// The cockpit with no overlay open.
    Global,
    /// The help overlay.
    Help,
    /// A text entry: the `:` command palette or the `/` filter.
    Input,
    /// Typing into panes (insert mode of the Panes view): keys go to the shells.
    Pane,
    /// Copy mode of a pane: scroll, search and yank its scrollback.
    Copy,
    /// A question only the operator can answer (an unknown host key).
    Question,
    /// A yes-or-no confirmation of what an action will do (the Fleets view's apply and
    /// delete, with their plan and price).
    Confirmation,
    /// The fleet-file editor (Offers view `w`, Fleets view `e`) and the NCCL view's run
    /// dialog.
    Editor,
}

impl Context {
    pub const ALL: [Context; 8] = [
        Context::Global,
        Context::Help,
        Context::Input,
        Context::Pane,
        Context::Copy,
        Context::Question,
        Context::Confirmation,
        Context::Editor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Context::Global => "global",
            Context::Help => "help",
            Context::Input => "input",
            Context::Pane => "pane",
            Context::Copy => "copy",
            Context::Question => "question",
            Context::Confirmation => "confirmation",
            Context::Editor => "editor",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Cockpit",
            Context::Help => "Help overlay",
            Context::Input => "Command palette and filter entry",
            Context::Pane => "Typing into panes",
            Context::Copy => "Copy mode",
            Context::Question => "Questions (host keys)",
            Context::Confirmation => "Confirmations (fleet apply, delete)",
            Context::Editor => "Editors (fleet file, NCCL run dialog)",
        }
    }
}

/// A user intent. Names are the snake_case identifiers used in the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Quit,
    Suspend,
    Help,
    Palette,
    Filter,
    ClearFilter,
    NextView,
    PrevView,
    ViewOffers,
    ViewFleets,
    ViewNodes,
    ViewPanes,
    ViewNccl,
    ViewJobs,
    ViewNics,
    ViewDoctor,
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Close,
    Confirm,
    Complete,
    CompletePrev,
    Left,
    Right,
    Select,
    Reload,
    PaneInsert,
    PaneZoom,
    PaneMark,
    PaneBroadcast,
    PaneCopy,
    SearchNext,
    SearchPrev,
    SelectStart,
    Yank,
    AcceptAll,
    Detail,
    Sort,
    SortReverse,
    Pricing,
    WriteFleet,
    JobStop,
    Compare,
    NicsMode,
    Messages,
    NextItem,
    PrevItem,
    FleetApply,
    FleetDelete,
    FleetEdit,
    NcclRun,
    NcclRunAgain,
    NextField,
    PrevField,
}

impl Action {
    pub const ALL: [Action; 58] = [
        Action::Quit,
        Action::Suspend,
        Action::Help,
        Action::Palette,
        Action::Filter,
        Action::ClearFilter,
        Action::NextView,
        Action::PrevView,
        Action::ViewOffers,
        Action::ViewFleets,
        Action::ViewNodes,
        Action::ViewPanes,
        Action::ViewNccl,
        Action::ViewJobs,
        Action::ViewNics,
        Action::ViewDoctor,
        Action::Up,
        Action::Down,
        Action::Top,
        Action::Bottom,
        Action::PageUp,
        Action::PageDown,
        Action::Close,
        Action::Confirm,
        Action::Complete,
        Action::CompletePrev,
        Action::Left,
        Action::Right,
        Action::Select,
        Action::Reload,
        Action::PaneInsert,
        Action::PaneZoom,
        Action::PaneMark,
        Action::PaneBroadcast,
        Action::PaneCopy,
        Action::SearchNext,
        Action::SearchPrev,
        Action::SelectStart,
        Action::Yank,
        Action::AcceptAll,
        Action::Detail,
        Action::Sort,
        Action::SortReverse,
        Action::Pricing,
        Action::WriteFleet,
        Action::JobStop,
        Action::Compare,
        Action::NicsMode,
        Action::Messages,
        Action::NextItem,
        Action::PrevItem,
        Action::FleetApply,
        Action::FleetDelete,
        Action::FleetEdit,
        Action::NcclRun,
        Action::NcclRunAgain,
        Action::NextField,
        Action::PrevField,
    ];

    /// Parse a config-file name.
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether this action means anything in `context`.
    pub fn allowed_in(self, context: Context) -> bool {
        use Action::*;
        match context {
            Context::Global => !matches!(
                self,
                Confirm
                    | Complete
                    | CompletePrev
                    | SearchNext
                    | SearchPrev
                    | SelectStart
                    | Yank
                    | AcceptAll
                    | NextField
                    | PrevField
            ),
            Context::Help => matches!(self, Close | Quit | Up | Down | Top | Bottom | PageUp | PageDown),
            Context::Input => matches!(self, Close | Confirm | Complete | CompletePrev | Up | Down),
            Context::Pane => matches!(self, Close),
            Context::Copy => matches!(
                self,
                Close
                    | Up
                    | Down
                    | Top
                    | Bottom
                    | PageUp
                    | PageDown
                    | Filter
                    | SearchNext
                    | SearchPrev
                    | SelectStart
                    | Yank
            ),
            Context::Question => matches!(self, Confirm | Close | AcceptAll),
            Context::Confirmation => matches!(self, Confirm | Close),
            Context::Editor => matches!(self, Confirm | Close | NextField | PrevField | Left | Right),
        }
    }

    /// One line for the help overlay.
    pub fn description(self) -> &'static str {
        match self {
            Action::Quit => "quit flightdeck",
            Action::Suspend => "suspend to the shell (resume with fg)",
            Action::Help => "show this help",
            Action::Palette => "open the command palette",
            Action::Filter => "filter the current table",
            Action::ClearFilter => "clear the current table's filter",
            Action::NextView => "next view",
            Action::PrevView => "previous view",
            Action::ViewOffers => "Offers view",
            Action::ViewFleets => "Fleets view",
            Action::ViewNodes => "Nodes view",
            Action::ViewPanes => "Panes view",
            Action::ViewNccl => "NCCL view",
            Action::ViewJobs => "Jobs view",
            Action::ViewNics => "NICs view",
            Action::ViewDoctor => "Doctor view: every check on every node of the fleet",
            Action::Up => "move up",
            Action::Down => "move down",
            Action::Top => "go to the top",
            Action::Bottom => "go to the bottom",
            Action::PageUp => "page up",
            Action::PageDown => "page down",
            Action::Close => "close / cancel",
            Action::Confirm => "run / apply",
            Action::Complete => "complete (next candidate)",
            Action::CompletePrev => "previous candidate",
            Action::Left => "move left",
            Action::Right => "move right",
            Action::Select => "open the selected item (a fleet's panes; type into a pane; a doctor finding's evidence)",
            Action::Reload => "reload the view (restart an exited pane; Doctor: examine the fleet again)",
            Action::PaneInsert => "type into the focused pane (or all, when broadcasting)",
            Action::PaneZoom => "zoom the focused pane / back to the grid; NICs: time span 1 min .. 1 h",
            Action::PaneMark => "mark the focused pane for broadcast; NICs: pause / resume the charts",
            Action::PaneBroadcast => "broadcast typing: off, all panes, marked panes (typing into panes not on screen asks first)",
            Action::PaneCopy => "copy mode: scroll, search and yank the pane's scrollback",
            Action::SearchNext => "next match",
            Action::SearchPrev => "previous match",
            Action::SelectStart => "start or clear a selection",
            Action::Yank => "copy the selection (or line) to your clipboard (OSC 52)",
            Action::AcceptAll => "accept this and every new host key of this session",
            Action::Detail => "show or hide the detail panel",
            Action::Sort => "sort by the next column",
            Action::SortReverse => "reverse the sort order",
            Action::Pricing => "price by on-demand, spot or flex-start",
            Action::WriteFleet => "write a fleet file for the selected offer",
            Action::JobStop => "stop the selected job on every node (press twice), or an apply",
            Action::Compare => "mark the selected NCCL run for a side-by-side comparison (two at a time)",
            Action::NicsMode => "NICs: per node, per rail, fleet total (cycles); Jobs: wrap long log lines or not; Doctor: every finding or the problems",
            Action::Messages => "every status message of this session, whole (the newest last)",
            Action::NextItem => "NICs: next node (per node, fleet) or next rail (per rail)",
            Action::PrevItem => "NICs: previous node or rail",
            Action::FleetApply => "apply the selected fleet's file: its plan and $/h, then confirm",
            Action::FleetDelete => "delete the selected fleet: what goes, then confirm",
            Action::FleetEdit => "edit the selected fleet's file (validated as you type)",
            Action::NcclRun => {
                "start an NCCL run: a dialog for the fleet, sizes, iterations, data type, engine and GPUDirect profile"
            }
            Action::NcclRunAgain => {
                "run the selected NCCL run again: the dialog with its fleet, sizes, engine, profile and environment"
            }
            Action::NextField => "next field (NCCL run dialog)",
            Action::PrevField => "previous field (NCCL run dialog)",
        }
    }

    /// A short label for the status bar, for actions worth a hint there.
    pub fn hint(self) -> Option<&'static str> {
        Some(match self {
            Action::Help => "help",
            Action::Palette => "command",
            Action::Filter => "filter",
            Action::NextView => "next view",
            Action::Quit => "quit",
            Action::Close => "close",
            Action::Confirm => "run",
            Action::Complete => "complete",
            Action::PaneInsert => "type",
            Action::PaneBroadcast => "broadcast",
            Action::Yank => "yank",
            Action::AcceptAll => "all",
            _ => return None,
        })
    }

    /// The status-bar label of this action in `context` and `view`: a confirmation
    /// confirms or cancels; view-specific keys are hinted only in their view, and a key
    /// shared by views gets each view's word for it.
    pub fn hint_in(self, context: Context, view: crate::tui::state::View) -> Option<&'static str> {
        use crate::tui::state::View;
        match (context, self) {
            (Context::Confirmation, Action::Confirm) => return Some("confirm"),
            (Context::Confirmation, Action::Close) => return Some("cancel"),
            // The host-key question's own words (`y run n close a all` read as a command).
            (Context::Question, Action::Confirm) => return Some("accept"),
            (Context::Question, Action::Close) => return Some("refuse"),
            (Context::Question, Action::AcceptAll) => return Some("accept all new"),
            _ => {}
        }
        match (self, view) {
            (Action::PaneInsert | Action::PaneBroadcast, View::Panes) => self.hint(),
            (Action::PaneInsert | Action::PaneBroadcast, _) => None,
            (Action::PaneZoom, View::Nics) => Some("span"),
            (Action::PaneMark, View::Nics) => Some("pause"),
            (Action::NicsMode, View::Nics) => Some("mode"),
            (Action::NextItem, View::Nics) => Some("next"),
            (Action::Reload, View::Doctor) => Some("examine"),
            (Action::Select, View::Doctor) => Some("evidence"),
            (Action::NicsMode, View::Doctor) => Some("all/problems"),
            _ => self.hint(),
        }
    }

    /// The config-file name of this action.
    pub fn name(self) -> String {
        // The serde names are the snake_case of the variant names.
        let debug = format!("{self:?}");
        let mut out = String::with_capacity(debug.len() + 4);
        for (i, c) in debug.chars().enumerate() {
            if c.is_ascii_uppercase() {
                if i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde() {
        for a in Action::ALL {
            let parsed: Action = serde_yaml::from_str(&a.name()).unwrap();
            assert_eq!(parsed, a);
            assert_eq!(Action::from_name(&a.name()), Some(a));
        }
        assert_eq!(Action::ViewNccl.name(), "view_nccl");
        assert_eq!(Action::CompletePrev.name(), "complete_prev");
    }

    /// ux-walk wording: the host-key question's hints say accept / refuse / accept all
    /// new, not `y run  n close  a all`.
    #[test]
    fn the_host_key_questions_hints_say_what_they_do() {
        use crate::tui::state::View;
        let hint = |a: Action| a.hint_in(Context::Question, View::Fleets);
        assert_eq!(
            [
                hint(Action::Confirm),
                hint(Action::Close),
                hint(Action::AcceptAll)
            ],
            [Some("accept"), Some("refuse"), Some("accept all new")]
        );
    }
}
