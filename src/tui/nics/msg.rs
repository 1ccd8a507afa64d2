//! The NICs view's messages from its samplers.

/// What the telemetry samplers report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Samplers started on a fleet's nodes (their names by index).
    Started { fleet: String, nodes: Vec<String> },
    /// A sampler reported.
    Sample(Box<crate::telemetry::service::TelemetryEvent>),
}
