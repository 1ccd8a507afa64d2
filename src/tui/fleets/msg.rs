//! The Fleets view's messages from its services.

/// What the fleets' services report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The fleets of the state store (`Command::LoadFleets`).
    Loaded(Result<Vec<crate::store::FleetRecord>, String>),
    /// A `Command::PlanFleet` finished: the confirmation to show, or why there is none.
    Planned(Result<Box<super::Confirm>, String>),
    /// A line of the running apply or delete (zone tried, stockout, rollback, SSH wait).
    Log(String),
    /// The apply or delete of fleet `name` ended: a summary, or why it failed.
    Done {
        name: String,
        result: Result<String, String>,
    },
    /// A `Command::EditFile` read the file: its path and text, or why not.
    FileOpened(Result<(String, String), String>),
    /// A `Command::WriteFile` or `Command::SaveFile` of the editor finished: the path
    /// written, or why not.
    FileWritten(Result<String, String>),
}
