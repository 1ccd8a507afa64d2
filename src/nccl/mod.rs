//! NCCL: reading nccl-tests output and NCCL's debug lines.
//!
//! - [`mod@parse`]: the streaming parser ([`Parser`]) turning nccl-tests output, as it is
//!   printed, into [`Event`]s and a [`Report`]; `flightdeck nccl parse` and the runner's
//!   live view both use it.
//! - [`transport`]: which transport NCCL used ([`Transport`], from `NCCL_DEBUG=INFO`
//!   lines) and the warning for a GPUDirect machine that fell back to sockets
//!   ([`fallback_warning`]).
//! - [`expect`]: expected curves per machine type, collective and node count, and the
//!   verdict of a run against them.
//! - [`history`]: runs kept in the state dir, and two runs compared.
//! - [`straggler`]: the straggler finder's decisions (which nodes to run together next,
//!   rankings, the slow node or link).
//! - [`runner`]: the commands that launch, follow and stop runs on the nodes.
//! - [`profile`]: the GPUDirect profile `auto` picks for a fleet (runs and jobs), and the
//!   NCCL environment per backend family ([`profile::env_lines`]).
//! - [`launcher`]: starting a run on a fleet ([`RunLauncher`]: start, the nodes to follow,
//!   clean-up), one implementation per way of running, picked by [`launcher_for`]:
//!   [`nodes`] (scripts on the nodes: local, SSH, GCP) and [`pods`] (test pods: GKE).
//! - [`remote`]: the I/O every launcher shares: recording a run, following it and
//!   concluding it, for `flightdeck nccl` and the cockpit alike.
//!
//! Pure but for [`launcher`]'s implementations and [`remote`]: no I/O, no terminal, no
//! clock.

pub mod baseline;
pub mod cause;
pub mod expect;
pub mod history;
pub mod launcher;
mod line;
pub mod nodes;
pub mod nodessh;
pub mod parse;
pub mod pods;
pub mod profile;
pub mod remote;
pub mod runner;
pub mod straggler;
pub mod transport;

pub use launcher::RunLauncher;
pub use parse::{parse_text, Device, Document, Event, Measurement, OutOfBounds, Parser, Report, Row};
pub use runner::human_size;
pub use transport::{fallback_warning, GpuDirect, Net, P2pLink, Transport, TransportDetector};

/// The [`RunLauncher`] of a fleet of backend family `kind`: the one place NCCL runs ask
/// the family.
pub fn launcher_for(kind: crate::fleet::BackendKind) -> &'static dyn RunLauncher {
    use crate::fleet::BackendKind;
    match kind {
        BackendKind::Local | BackendKind::Ssh | BackendKind::Gcp => &nodes::NodeLauncher,
        BackendKind::Gke => &pods::PodLauncher,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::BackendKind;

    /// GKE fleets run in test pods (which stay until the run is followed to its end); the
    /// other families on their nodes.
    #[test]
    fn each_family_gets_its_launcher() {
        assert_eq!(launcher_for(BackendKind::Gke).leaves(), Some("its pods"));
        for kind in [BackendKind::Local, BackendKind::Ssh, BackendKind::Gcp] {
            assert_eq!(launcher_for(kind).leaves(), None, "{kind:?}");
        }
    }
}
