//! The Jobs view's messages from its services.

/// What the jobs' services report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The jobs of the state store (with `Command::LoadFleets`), and the time.
    List {
        jobs: Vec<crate::store::JobRecord>,
        now: u64,
    },
    /// A `Command::PollJobs` finished: the jobs of the state store after asking the
    /// nodes of the running ones (`None`: the state could not be read), and the time.
    Polled {
        jobs: Option<Vec<crate::store::JobRecord>>,
        now: u64,
    },
    /// Lines of the followed job's nodes, in order per node: (rank, line).
    Lines {
        id: String,
        lines: Vec<(usize, String)>,
        now: u64,
    },
    /// How following one node of the followed job goes.
    Node {
        id: String,
        rank: usize,
        follow: super::NodeFollow,
    },
    /// A `Command::RunJob` finished: the job's id, or why it did not start.
    Started(Result<String, String>),
    /// A `Command::StopJob` finished: each node's outcome in a line, or why not.
    Stopped {
        id: String,
        result: Result<String, String>,
    },
}
