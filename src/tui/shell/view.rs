//! The cockpit's views, in tab order, and how each is named (its tab, its palette
//! command). Switching is the shell's global actions (`act.rs`) and the mouse on a tab.

/// The cockpit's views, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    Offers,
    Fleets,
    Nodes,
    Panes,
    Nccl,
    Jobs,
    Nics,
    Doctor,
}

impl View {
    pub const ALL: [View; 8] = [
        View::Offers,
        View::Fleets,
        View::Nodes,
        View::Panes,
        View::Nccl,
        View::Jobs,
        View::Nics,
        View::Doctor,
    ];

    pub fn index(self) -> usize {
        View::ALL
            .iter()
            .position(|v| *v == self)
            .expect("every view is in ALL")
    }

    pub fn title(self) -> &'static str {
        match self {
            View::Offers => "Offers",
            View::Fleets => "Fleets",
            View::Nodes => "Nodes",
            View::Panes => "Panes",
            View::Nccl => "NCCL",
            View::Jobs => "Jobs",
            View::Nics => "NICs",
            View::Doctor => "Doctor",
        }
    }

    /// The palette command that opens this view.
    pub fn command(self) -> &'static str {
        match self {
            View::Offers => "offers",
            View::Fleets => "fleets",
            View::Nodes => "nodes",
            View::Panes => "panes",
            View::Nccl => "nccl",
            View::Jobs => "jobs",
            View::Nics => "nics",
            View::Doctor => "doctor",
        }
    }

    pub fn from_command(name: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.command() == name)
    }

    /// Whether the view is built around a table that `/` filters.
    pub fn has_table(self) -> bool {
        !matches!(self, View::Panes)
    }

    pub fn next(self) -> View {
        View::ALL[(self.index() + 1) % View::ALL.len()]
    }

    pub fn prev(self) -> View {
        View::ALL[(self.index() + View::ALL.len() - 1) % View::ALL.len()]
    }
}

/// The area the views get: below the tab bar, above the status bar.
pub fn body(size: (u16, u16)) -> ratatui::layout::Rect {
    ratatui::layout::Rect::new(0, 1, size.0, size.1.saturating_sub(2))
}
