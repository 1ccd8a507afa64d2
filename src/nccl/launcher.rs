//! Where an NCCL run runs, behind one seam: [`RunLauncher`] starts a run on a fleet,
//! names the nodes to follow it on, and removes what it left. One implementation per way
//! of running, picked by the fleet's backend family in [`super::launcher_for`] (the only
//! place that asks the family):
//! * [`super::nodes::NodeLauncher`]: local, SSH and GCP fleets. The run's scripts start
//!   detached on the nodes themselves (nccl-tests through mpirun on the first, or torchrun
//!   on every node), after the GPUDirect pre-flight and node-to-node SSH.
//! * [`super::pods::PodLauncher`]: GKE fleets. One test pod per node (the GKE guides'
//!   image for the flavour), the image's run script detached in the first pod; the pods go
//!   when the run has been followed to its end.
//!
//! Both record the run in the state store and the history the same way
//! ([`super::remote::record_run`], [`super::remote::saved_run`]), and a started run is
//! followed the same way ([`super::remote::follow_to_end`]) on the nodes
//! [`RunLauncher::heads`] names. The NCCL environment a family starts from is
//! [`super::profile::env_lines`].

use super::history::SavedRun;
use super::runner::RunSpec;
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::RunRecord;
use std::path::Path;

/// Progress lines for the operator (CLI stderr, the cockpit's log).
pub type Progress<'a> = &'a (dyn Fn(String) + Sync);

/// Where and how a run starts.
pub struct Start {
    pub fleet: String,
    /// The nodes, head first.
    pub nodes: Vec<NodeTarget>,
    pub reach: Reach,
    pub spec: RunSpec,
    /// The head node's mpirun (nccl-tests on several nodes).
    pub mpirun: String,
    /// The machine type the verdict is judged for, and where it came from.
    pub machine: Option<(String, String)>,
    /// Why the run is made when not by hand (the straggler finder's groups).
    pub purpose: Option<String>,
    /// Set up node-to-node SSH first when the run goes through mpirun (the straggler
    /// finder does it once for all its groups).
    pub node_ssh: bool,
    /// Check the GPUDirect pieces of every node first ([`crate::bootstrap::preflight`]).
    pub preflight: bool,
}

/// A started run: its id, the nodes that run a script (the ones to follow), and its
/// history entry as saved.
pub struct Started {
    pub id: String,
    pub heads: Vec<NodeTarget>,
    pub saved: SavedRun,
}

/// Starting, following and cleaning up NCCL runs on one family of fleets.
pub trait RunLauncher: Send + Sync {
    /// Start a run: whatever the family needs first, the launch, then the record in the
    /// state store and the history entry. `progress` hears each step.
    fn start<'a>(
        &'a self,
        state_dir: &'a Path,
        start: &'a Start,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, anyhow::Result<Started>>;

    /// The nodes a recorded run's scripts run on (the ones to follow), from its fleet's
    /// nodes.
    fn heads(&self, run: &RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget>;

    /// What a started run leaves on the fleet until it is followed to its end and
    /// [`RunLauncher::cleanup`] removes it (`"its pods"`), for the operator; `None` when
    /// nothing.
    fn leaves(&self) -> Option<&'static str>;

    /// Remove what run `id` (on `heads`, as [`RunLauncher::heads`] names them) left on
    /// the fleet: the line that says what went, `None` when there was nothing to remove,
    /// or why it stayed.
    fn cleanup<'a>(
        &'a self,
        reach: &'a Reach,
        id: &'a str,
        heads: &'a [NodeTarget],
    ) -> BoxFuture<'a, Result<Option<String>, String>>;
}
