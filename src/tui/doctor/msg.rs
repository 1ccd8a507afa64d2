//! The doctor's messages to the cockpit (`Command::RunDoctor` starts it).

/// What the doctor's service reports, in order: started, events, done.
#[derive(Debug, Clone)]
pub enum Msg {
    /// The doctor started on a fleet's nodes.
    Started { fleet: String, nodes: Vec<String> },
    /// Findings or progress of the running doctor.
    Event(Box<crate::doctor::run::Event>),
    /// The doctor finished: its whole report, or why it could not run.
    Done {
        fleet: String,
        result: Result<Box<crate::doctor::Report>, String>,
    },
}
