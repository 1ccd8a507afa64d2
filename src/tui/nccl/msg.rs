//! The NCCL view's messages from its services.

/// What the NCCL services report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The runs of the state store (with `Command::LoadFleets`).
    Runs(Vec<crate::store::RunRecord>),
    /// The NCCL history of the state dir (with `Command::LoadFleets`).
    History(Vec<crate::nccl::history::SavedRun>),
    /// The followed run's report so far.
    Report {
        id: String,
        report: Box<crate::nccl::Report>,
    },
    /// The followed run ended (its exit code when known).
    Ended { id: String, end: Box<super::RunEnd> },
    /// The run could not be followed.
    Failed { id: String, error: String },
    /// The fleets for the NCCL run dialog (`Command::NcclRunChoices`), or why not.
    RunFleets(Result<Vec<super::FleetChoice>, String>),
    /// A `Command::StartNcclRun` finished: the run's id, or why it did not start.
    Started(Result<String, String>),
    /// The last straggler finder result of the state dir (with `Command::LoadFleets`).
    Stragglers(Option<Box<crate::nccl::history::StragglerReport>>),
}
