//! Backends bring a fleet's nodes up and down behind one trait: `local` (this machine),
//! `ssh` (existing hosts, like dstack's SSH fleets); the GCP backend plugs in here too.
//! What a recorded fleet's nodes look like (Nodes view, status, gc, upkeep, placement,
//! the delete plan) is each family's [`Inventory`]; [`lifecycle`] holds both factories.

pub mod gcp;
pub mod gke;
pub mod inventory;
pub mod lifecycle;
pub mod local;
pub mod ssh_hosts;

pub use inventory::Inventory;
pub use lifecycle::inventory_for;

use crate::fleet::{BackendKind, Fleet, NodeTarget};
use crate::ssh::client::BoxFuture;
use crate::store::FleetRecord;

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Change {
    /// create, delete, update, keep, or forget (a local or SSH host left as it is).
    pub action: &'static str,
    /// What kind of thing: node; with GCP instance, placement_policy, network, subnetwork,
    /// firewall.
    pub kind: &'static str,
    pub name: String,
    /// Where it is: an address, a zone, a region or `global`.
    pub place: String,
    /// Cloud resources: zone or region, machine type, NICs, provisioning model and price.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<CloudDetail>,
}

/// What a plan says about a cloud resource.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CloudDetail {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nics: Option<NicSummary>,
    /// STANDARD, SPOT, FLEX_START.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioning_model: Option<String>,
    /// USD per hour; null when the catalog has no price.
    pub hourly_usd: Option<f64>,
}

/// The NICs of an instance: how many, and each one's type in order (`GVNIC`, `MRDMA`;
/// `DEFAULT` where the API picks).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NicSummary {
    pub count: usize,
    pub types: Vec<String>,
    /// `1+8 GVNIC`.
    pub layout: String,
}

/// What `apply` would do, from the fleet file against what the state records.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    pub fleet: String,
    pub backend: BackendKind,
    pub changes: Vec<Change>,
    /// The cost per hour of what the fleet will run (cloud backends); null when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hourly_usd: Option<Option<f64>>,
    /// Where apply tries, in order, if the first place has no capacity (cloud backends).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
    /// What the operator should know beyond the resources (cloud backends): models not
    /// tried and why, the VM service account, a reservation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Plan {
    /// A plan of `fleet` on `backend` that changes nothing yet.
    pub fn new(fleet: impl Into<String>, backend: BackendKind) -> Plan {
        Plan {
            fleet: fleet.into(),
            backend,
            changes: vec![],
            hourly_usd: None,
            fallbacks: vec![],
            notes: vec![],
        }
    }

    pub fn is_noop(&self) -> bool {
        self.changes.iter().all(|c| c.action == "keep")
    }
}

/// A request to stop an apply (Ctrl-C in the CLI, `x` in the cockpit's Fleets view): the
/// GCP provisioner checks it between attempts and while it waits for instances (a
/// flex-start request queued for capacity), then rolls back what it made.
#[derive(Clone, Debug, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Progress lines for the operator (CLI stderr, TUI log).
pub type Progress<'a> = &'a (dyn Fn(String) + Send + Sync);

pub trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// What apply would do; changes nothing.
    fn plan(&self, fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<Plan, String> {
        Ok(node_plan(self.kind(), fleet, recorded))
    }

    /// Whether an apply could start now: the credentials and keys it needs, checked before
    /// the operator is asked to confirm (an apply refused for want of credentials after
    /// `y` wasted the question). Changes nothing.
    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// Bring the fleet up (or check it is reachable); returns its nodes as reached.
    fn apply<'a>(
        &'a self,
        fleet: &'a Fleet,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<Vec<NodeTarget>, String>>;

    /// Take the fleet down. For backends that own no resources this only forgets it.
    fn delete<'a>(
        &'a self,
        record: &'a FleetRecord,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// The plan for backends whose nodes are given (local, ssh): nodes to add, drop or keep.
pub fn node_plan(kind: BackendKind, fleet: &Fleet, recorded: Option<&FleetRecord>) -> Plan {
    let wanted = fleet.node_targets();
    let had: Vec<NodeTarget> = recorded.map(|r| r.nodes.clone()).unwrap_or_default();
    let mut changes = Vec::new();
    for n in &wanted {
        let action = if had.iter().any(|h| h.host() == n.host() && h.port() == n.port()) {
            "keep"
        } else {
            "create"
        };
        changes.push(Change {
            action,
            kind: "node",
            name: n.name.clone(),
            place: place(n),
            cloud: None,
        });
    }
    for h in &had {
        if !wanted
            .iter()
            .any(|n| n.host() == h.host() && n.port() == h.port())
        {
            changes.push(Change {
                action: "delete",
                kind: "node",
                name: h.name.clone(),
                place: place(h),
                cloud: None,
            });
        }
    }
    Plan {
        changes,
        ..Plan::new(fleet.name.clone(), kind)
    }
}

fn place(n: &NodeTarget) -> String {
    match n.port() {
        Some(p) if p != 22 => format!("{}:{p}", n.host()),
        _ => n.host().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn node_plan_diffs_hosts() {
        let f = crate::fleet::parse(
            Path::new("f"),
            "type: fleet\nname: lab\nssh_config:\n  hosts: [a, b, c]\n",
        )
        .unwrap();
        let first = node_plan(BackendKind::Ssh, &f, None);
        assert_eq!(first.changes.iter().filter(|c| c.action == "create").count(), 3);
        let rec = FleetRecord {
            name: "lab".into(),
            backend: BackendKind::Ssh,
            file: None,
            nodes: crate::fleet::parse(
                Path::new("f"),
                "type: fleet\nname: lab\nssh_config:\n  hosts: [a, d]\n",
            )
            .unwrap()
            .node_targets(),
            resources: vec![],
            created_at: 0,
            applied: None,
        };
        let p = node_plan(BackendKind::Ssh, &f, Some(&rec));
        let summary: Vec<(&str, &str)> = p.changes.iter().map(|c| (c.action, c.place.as_str())).collect();
        assert_eq!(
            summary,
            vec![("keep", "a"), ("create", "b"), ("create", "c"), ("delete", "d")]
        );
        assert!(!p.is_noop());
    }
}
