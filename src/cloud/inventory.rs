//! Node inventory per backend family: what the Nodes view, `fleet status`, `fleet gc`, the
//! cockpit's upkeep and the doctor's placement check know of a recorded fleet's nodes, and
//! the plan of deleting it. One trait, [`Inventory`]; [`super::lifecycle::inventory_for`]
//! is the one `match` on the family ([`super::lifecycle::sweepers`]: which families `fleet gc` looks in). Impls: GCP in `gcp/upkeep.rs` (Compute's instances),
//! GKE in `gke/view.rs` (the cluster's pools, nodes and workloads) and [`Recorded`] here
//! (local and SSH: what the record holds).

use super::gcp::backend::GcpBackend;
use super::gcp::settings::GcpSettings;
use super::gke::view::Snapshot;
use super::gke::Clients;
use super::{Change, Plan, Progress};
use crate::fleet::{BackendKind, Fleet};
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, State, Store};
use std::time::Duration;

/// What the inventories read and write: the state store (GCP records what its check
/// finds there), the config's `gcp:` block (unset: not configured), the Kubernetes
/// clients of GKE fleets.
#[derive(Clone)]
pub struct Context {
    pub state_dir: std::path::PathBuf,
    pub gcp: Option<GcpSettings>,
    pub kube: Clients,
}

impl Context {
    /// The same with the cockpit's Kubernetes clients (they cache connections).
    pub fn with_kube(self, kube: Clients) -> Context {
        Context { kube, ..self }
    }

    pub fn store(&self) -> Store {
        Store::new(&self.state_dir)
    }

    /// The GCP backend of the `gcp:` block (its defaults when there is none: ADC and the
    /// environment's project), for what connects to Compute without applying.
    pub fn gcp_backend(&self) -> GcpBackend {
        GcpBackend {
            settings: self.gcp.clone().unwrap_or_default(),
            catalog: std::sync::Arc::new(crate::catalog::Catalog::embedded().clone()),
            state_dir: self.state_dir.clone(),
            home: std::env::var_os("HOME").map(std::path::PathBuf::from),
            ssh: None,
            cancel: super::Cancel::default(),
        }
    }
}

/// The last look at a fleet that its record does not hold: a GKE cluster's pools, nodes
/// and workloads, or why the cluster could not be read.
pub type Seen = Result<Box<Snapshot>, String>;

/// How a cell reads: the cockpit maps it to its theme's tones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    Pass,
    Warn,
    Fail,
}

/// One cell of a Nodes view table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    Toned(String, Tone),
    /// A remark in the muted style.
    Muted(String),
    /// The state of the node's pane (`-` without one), in its tone when `toned`.
    Pane {
        toned: bool,
    },
}

/// A row of a table; a node's row has its name (the selection and the pane are by name)
/// and the texts the Nodes filter looks in.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub node: Option<String>,
    pub keys: Vec<String>,
    pub cells: Vec<Cell>,
}

impl Row {
    /// A node's row: `keys` are what the filter matches besides nothing else (the name
    /// first).
    pub fn node(name: &str, keys: Vec<String>, cells: Vec<Cell>) -> Row {
        Row {
            node: Some(name.to_string()),
            keys,
            cells,
        }
    }

    /// Whether the Nodes filter (lowercase) keeps it.
    pub fn matches(&self, filter: &str) -> bool {
        filter.is_empty() || self.keys.iter().any(|k| k.to_lowercase().contains(filter))
    }
}

/// What a table holds: rows under the header, or a note instead of both.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Rows(Vec<Row>),
    Note(Option<Cell>),
}

/// A table of the Nodes view: title, columns (name, width; the last width is a minimum)
/// and body; `height` is the rows it wants besides borders and header (tables above and
/// below the nodes).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub columns: Vec<(&'static str, u16)>,
    pub body: Body,
    pub height: u16,
}

/// The Nodes view of a fleet: the nodes' table (paged, filtered, selectable), with the
/// family's tables above and below it (a GKE cluster's node pools and Kueue's workloads).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub above: Option<Table>,
    pub nodes: Table,
    pub below: Option<Table>,
}

impl NodeView {
    /// The names of the nodes the filter (lowercase) keeps, in the table's order.
    pub fn listed(&self, filter: &str) -> Vec<String> {
        match &self.nodes.body {
            Body::Rows(rows) => rows
                .iter()
                .filter(|r| r.matches(filter))
                .filter_map(|r| r.node.clone())
                .collect(),
            Body::Note(_) => vec![],
        }
    }
}

/// Something `fleet status` prints: a line, a table, a blank line.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Line(String),
    Table(Vec<&'static str>, Vec<Vec<String>>),
    Blank,
}

/// `fleet status` of a fleet: `--json`'s value, the text, and whether a node is lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub json: serde_json::Value,
    pub blocks: Vec<Block>,
    pub lost: bool,
}

/// An instance's placement as the cloud's API reports it (the doctor's `placement`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placed {
    pub instance: String,
    pub node: Option<usize>,
    /// Its `resourcePolicies` (URLs).
    pub policies: Vec<String>,
    /// `COLLOCATED` when a policy of its places it compactly.
    pub collocation: Option<String>,
    /// The instance no longer exists.
    pub gone: bool,
}

/// What one look at a family's fleets found (the cockpit's upkeep).
#[derive(Debug)]
pub enum Upkept {
    /// What was found went into the state (a node's `lost`): read it again.
    StateChanged,
    /// A fleet's cluster as it is now, or why it could not be read.
    Seen { fleet: String, seen: Seen },
}

/// How the removal of what `fleet gc` found runs: it owns what it needs.
type Remove = Box<dyn for<'a> FnOnce(Progress<'a>) -> BoxFuture<'a, Result<(), String>> + Send>;

/// What `fleet gc` found of one family: `--json`'s value, the table, what to say, and the
/// removal.
pub struct Sweep {
    pub json: serde_json::Value,
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
    /// Said when nothing was found.
    pub none: String,
    /// Said when some were found and `--yes` was not given.
    pub found: String,
    /// Asked on a terminal before removing without `--yes` (cloud resources); `None`:
    /// nothing is removed without `--yes`.
    pub ask: Option<String>,
    /// Said once all were removed.
    pub removed: Option<String>,
    remove: Remove,
}

impl Sweep {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        json: serde_json::Value,
        header: Vec<&'static str>,
        rows: Vec<Vec<String>>,
        none: String,
        found: String,
        ask: Option<String>,
        removed: Option<String>,
        remove: Remove,
    ) -> Sweep {
        Sweep {
            json,
            header,
            rows,
            none,
            found,
            ask,
            removed,
            remove,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Remove what was found.
    pub async fn remove(self, progress: Progress<'_>) -> Result<(), String> {
        (self.remove)(progress).await
    }
}

/// What differs per backend family about a recorded fleet's nodes.
pub trait Inventory: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// The Nodes view of `record`, with the last look at it when the family has one.
    fn nodes(&self, record: &FleetRecord, seen: Option<&Seen>) -> NodeView {
        let _ = seen;
        recorded_nodes(record)
    }

    /// The plan of deleting a recorded fleet: every node and resource it holds.
    fn delete_plan(&self, record: &FleetRecord) -> Plan {
        Plan {
            changes: node_deletes(record),
            ..Plan::new(record.name.clone(), record.backend)
        }
    }

    /// Whether `fleet apply` bootstraps the nodes for their GPUDirect flavour.
    fn bootstraps_after_apply(&self) -> bool {
        false
    }

    /// Why `fleet bootstrap` does not set up this family's nodes, if it does not.
    fn refuses_bootstrap(&self, fleet: &str) -> Option<String> {
        let _ = fleet;
        None
    }

    /// How many nodes a fleet file asks for, as `fleet validate` says it.
    fn declared_nodes(&self, fleet: &Fleet) -> String {
        crate::words::plural(fleet.node_targets().len(), "node")
    }

    /// How often the cockpit looks at this family's fleets; `None`: it does not.
    fn upkeep_every(&self, ctx: &Context) -> Option<Duration> {
        let _ = ctx;
        None
    }

    /// Whether the cockpit also looks when it loads the fleets (else its first look is
    /// at once, then every [`Inventory::upkeep_every`]).
    fn upkeep_on_load(&self) -> bool {
        false
    }

    /// One look at every recorded fleet of this family.
    fn upkeep<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Vec<Upkept>, String>> {
        let _ = ctx;
        Box::pin(async { Ok(vec![]) })
    }

    /// The fleet's nodes now, where they come and go without flightdeck (GKE pools that
    /// autoscale, from zero too); `None` where the recorded nodes are the nodes.
    fn live_nodes<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> Option<BoxFuture<'a, Result<Vec<crate::fleet::NodeTarget>, String>>> {
        let _ = (ctx, record);
        None
    }

    /// `fleet status`: the fleet's nodes as the cloud sees them now.
    fn status<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> BoxFuture<'a, Result<Status, String>> {
        let _ = ctx;
        Box::pin(async move {
            Err(format!(
                "fleet `{}` is {}; status asks the cloud, for GCP and GKE fleets",
                record.name,
                crate::words::a(&format!("{} fleet", record.backend))
            ))
        })
    }

    /// Whether `fleet gc` looks in this family, given the state and the settings.
    fn sweeps(&self, state: &State, ctx: &Context) -> bool {
        let _ = (state, ctx);
        false
    }

    /// `fleet gc`: what flightdeck made in this family that no record explains.
    fn sweep<'a>(&'a self, ctx: &'a Context, state: &'a State) -> BoxFuture<'a, Result<Sweep, String>> {
        let _ = (ctx, state);
        Box::pin(async { Err(format!("fleet gc: nothing to look for in {} fleets", self.kind())) })
    }

    /// A fleet not in the state that this family may still hold (a GCP fleet deleted
    /// before, or never recorded: its labelled instances), as a record to delete.
    fn unrecorded(&self, ctx: &Context, name: &str) -> Option<FleetRecord> {
        let _ = (ctx, name);
        None
    }

    /// The doctor's `placement` check: where the fleet's nodes stand on compact placement,
    /// from the cloud's API; `None` where the family has no such API.
    fn placement<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> Option<BoxFuture<'a, Result<Vec<Placed>, String>>> {
        let _ = (ctx, record);
        None
    }
}

/// Local and SSH fleets: what the record holds, nothing to ask.
pub struct Recorded(pub BackendKind);

impl Inventory for Recorded {
    fn kind(&self) -> BackendKind {
        self.0
    }

    /// Deleting a local or SSH fleet forgets it: the hosts are the operator's and stay
    /// as they are (no `delete node` over a machine nobody will touch).
    fn delete_plan(&self, record: &FleetRecord) -> Plan {
        let changes = node_deletes(record)
            .into_iter()
            .map(|c| Change {
                action: "forget",
                kind: "host",
                ..c
            })
            .collect();
        Plan {
            changes,
            ..Plan::new(record.name.clone(), record.backend)
        }
    }
}

/// Delete changes for the record's nodes that no recorded instance stands for.
pub fn node_deletes(record: &FleetRecord) -> Vec<Change> {
    record
        .nodes
        .iter()
        .filter(|n| {
            !record
                .resources
                .iter()
                .any(|r| r.kind == "instance" && r.name == n.name)
        })
        .map(|n| Change {
            action: "delete",
            kind: "node",
            name: n.name.clone(),
            place: n.host().to_string(),
            cloud: None,
        })
        .collect()
}

/// The Nodes view of a fleet whose nodes are given: how each is reached, and its pane.
pub fn recorded_nodes(record: &FleetRecord) -> NodeView {
    let rows = record
        .nodes
        .iter()
        .map(|n| {
            Row::node(
                &n.name,
                vec![n.name.clone(), n.host().to_string()],
                vec![
                    Cell::Text(n.name.clone()),
                    Cell::Text(match n.port() {
                        Some(p) if p != 22 => format!("{}:{p}", n.host()),
                        _ => n.host().to_string(),
                    }),
                    Cell::Text(n.user().unwrap_or_default().to_string()),
                    Cell::Text(
                        n.ssh()
                            .and_then(|s| s.proxy_jump.as_ref())
                            .map(|j| j.host.clone())
                            .unwrap_or_default(),
                    ),
                    Cell::Pane { toned: true },
                ],
            )
        })
        .collect();
    NodeView {
        above: None,
        nodes: Table {
            title: format!("Nodes of {} ({} backend)", record.name, record.backend),
            columns: vec![
                ("NODE", 22),
                ("ADDRESS", 22),
                ("USER", 10),
                ("VIA", 18),
                ("PANE", 10),
            ],
            body: Body::Rows(rows),
            height: 0,
        },
        below: None,
    }
}
