//! GKE's [`Inventory`]: the cluster's node pools, nodes and Kueue's workloads as
//! [`super::view`] works them out, looked at every 10 s by the cockpit; `fleet status`
//! prints them; `fleet gc` removes what flightdeck made in the fleets' clusters.

use super::backend::{self, Target};
use super::view::{self, Snapshot, POOL_HEADER};
use crate::cloud::inventory::{
    Block, Body, Cell, Context, Inventory, NodeView, Row, Seen, Status, Sweep, Table, Tone, Upkept,
};
use crate::fleet::BackendKind;
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, State, Store};
use std::time::Duration;

pub struct GkeInventory;

impl Inventory for GkeInventory {
    fn kind(&self) -> BackendKind {
        BackendKind::Gke
    }

    /// Node pools above the nodes, Kueue's workloads below, from the last snapshot.
    fn nodes(&self, record: &FleetRecord, seen: Option<&Seen>) -> NodeView {
        let title = format!("Nodes of {} (gke backend)", record.name);
        let snap = match seen {
            Some(Ok(s)) => Some(s.as_ref()),
            Some(Err(e)) => {
                return NodeView {
                    above: None,
                    nodes: Table {
                        title,
                        columns: vec![],
                        body: Body::Note(Some(Cell::Toned(
                            format!("cannot read the cluster: {e}"),
                            Tone::Fail,
                        ))),
                        height: 0,
                    },
                    below: None,
                }
            }
            None => None,
        };
        NodeView {
            above: Some(pools(record, snap)),
            nodes: node_table(record, snap, title),
            below: Some(workloads(snap)),
        }
    }

    fn refuses_bootstrap(&self, fleet: &str) -> Option<String> {
        Some(format!(
            "fleet `{fleet}` is a GKE fleet: GKE sets its nodes up for GPUDirect itself (the GPUDirect guides' NCCL installer and device-plugin DaemonSets); the bootstrap is for VM fleets"
        ))
    }

    fn upkeep_every(&self, _ctx: &Context) -> Option<Duration> {
        Some(Duration::from_secs(10))
    }

    /// Each GKE fleet's snapshot.
    fn upkeep<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Vec<Upkept>, String>> {
        Box::pin(async move {
            let d = ctx.state_dir.clone();
            let (state, _) = tokio::task::spawn_blocking(move || Store::new(&d).load())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            let mut out = vec![];
            for f in state.fleets.iter().filter(|f| f.backend == BackendKind::Gke) {
                let seen = match Target::of_record(f) {
                    Ok(t) => t
                        .snapshot(&ctx.kube, &f.name, crate::store::now_unix())
                        .await
                        .map(Box::new),
                    Err(e) => Err(e),
                };
                out.push(Upkept::Seen {
                    fleet: f.name.clone(),
                    seen,
                });
            }
            Ok(out)
        })
    }

    /// The nodes of its pools now: a pool at zero when the fleet was applied has nodes
    /// once a job or test brought them up, and none again after scale-down.
    fn live_nodes<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> Option<BoxFuture<'a, Result<Vec<crate::fleet::NodeTarget>, String>>> {
        Some(Box::pin(async move {
            let target = Target::of_record(record)?;
            let nodes = target.nodes(&ctx.kube).await?;
            Ok(target.targets(&record.name, &nodes))
        }))
    }

    /// Its node pools, nodes and Kueue's workloads now.
    fn status<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> BoxFuture<'a, Result<Status, String>> {
        Box::pin(async move {
            let target = Target::of_record(record)?;
            let snap = target
                .snapshot(&ctx.kube, &record.name, crate::store::now_unix())
                .await?;
            Ok(Status {
                json: serde_json::to_value(&snap).map_err(|e| e.to_string())?,
                blocks: status_blocks(&record.name, &snap),
                lost: snap.nodes.iter().any(|n| !n.ready),
            })
        })
    }

    /// When a GKE fleet is recorded (its cluster is where to look).
    fn sweeps(&self, state: &State, _ctx: &Context) -> bool {
        state.fleets.iter().any(|f| f.backend == BackendKind::Gke)
    }

    /// Pods and JobSets of flightdeck's in the recorded fleets' clusters that no fleet
    /// or running run needs.
    fn sweep<'a>(&'a self, ctx: &'a Context, state: &'a State) -> BoxFuture<'a, Result<Sweep, String>> {
        Box::pin(async move {
            let running: Vec<String> = state
                .runs
                .iter()
                .filter(|r| r.nodes.iter().any(|n| n.exit_code.is_none()))
                .map(|r| r.id.clone())
                .collect();
            let found = backend::orphans(&ctx.kube, &state.fleets, &running).await?;
            let rows = found
                .iter()
                .map(|o| {
                    vec![
                        o.kind.to_string(),
                        o.name.clone(),
                        o.namespace.clone(),
                        o.fleet.clone(),
                        o.why.clone(),
                    ]
                })
                .collect();
            let clients = ctx.kube.clone();
            Ok(Sweep::new(
                serde_json::to_value(&found).map_err(|e| e.to_string())?,
                vec!["KIND", "NAME", "NAMESPACE", "FLEET", "WHY"],
                rows,
                "GKE: nothing of flightdeck's to remove in the fleets' clusters".into(),
                {
                    let kept = found.iter().filter(|o| o.keep).count();
                    let mine = found.len() - kept;
                    let others = if kept > 0 {
                        format!(
                            "; {} of other owners listed, not touched",
                            crate::words::plural(kept, "GKE object")
                        )
                    } else {
                        String::new()
                    };
                    if mine > 0 {
                        format!(
                            "{} to remove; `flightdeck fleet gc --yes` removes them{others}",
                            crate::words::plural(mine, "GKE object")
                        )
                    } else {
                        format!("GKE: nothing of yours to remove{others}")
                    }
                },
                None,
                None,
                Box::new(move |progress| {
                    Box::pin(async move { backend::delete_orphans(&clients, &found, progress).await })
                }),
            ))
        })
    }
}

fn pools(record: &FleetRecord, snap: Option<&Snapshot>) -> Table {
    let pools = snap.map(|s| s.pools.as_slice()).unwrap_or_default();
    let rows = pools
        .iter()
        .map(|p| {
            let tone = if p.ready < p.nodes { Tone::Warn } else { Tone::Info };
            Row {
                node: None,
                keys: vec![],
                cells: p
                    .cells()
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if i == 4 {
                            Cell::Toned(c, tone)
                        } else {
                            Cell::Text(c)
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    let widths = [18, 16, 20, 24, 7, 8];
    Table {
        title: match snap {
            Some(s) => format!("Node pools of {} ({})", record.name, s.cluster),
            None => format!("Node pools of {} (asking the cluster…)", record.name),
        },
        columns: POOL_HEADER.into_iter().zip(widths).collect(),
        body: Body::Rows(rows),
        height: pools.len() as u16 + 3,
    }
}

fn node_table(record: &FleetRecord, snap: Option<&Snapshot>, title: String) -> Table {
    let rows = record
        .nodes
        .iter()
        .map(|n| {
            let r = snap.and_then(|s| s.nodes.iter().find(|r| r.name == n.name));
            let status = match r {
                None if snap.is_some() => Cell::Toned("gone from the cluster".into(), Tone::Fail),
                None => Cell::Toned("-".into(), Tone::Info),
                Some(r) if !r.ready || !r.conditions.is_empty() => {
                    Cell::Toned(r.conditions.join(", "), Tone::Fail)
                }
                Some(_) => Cell::Toned("Ready".into(), Tone::Pass),
            };
            Row::node(
                &n.name,
                vec![n.name.clone(), n.host().to_string()],
                vec![
                    Cell::Text(n.name.clone()),
                    Cell::Text(r.map(|r| r.pool.clone()).unwrap_or_default()),
                    Cell::Text(n.host().to_string()),
                    status,
                    Cell::Text(
                        r.map(|r| format!("{}/{}", r.gpus_used, r.gpus))
                            .unwrap_or_default(),
                    ),
                    Cell::Text(r.map(|r| r.pods.to_string()).unwrap_or_default()),
                    Cell::Pane { toned: false },
                ],
            )
        })
        .collect();
    Table {
        title,
        columns: vec![
            ("NODE", 24),
            ("POOL", 14),
            ("ADDRESS", 15),
            ("STATUS", 22),
            ("GPUS", 6),
            ("PODS", 5),
            ("PANE", 10),
        ],
        body: Body::Rows(rows),
        height: 0,
    }
}

/// Kueue's workloads, pending first.
fn workloads(snap: Option<&Snapshot>) -> Table {
    let queues: Vec<String> = snap
        .map(|s| s.queues.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|q| {
            format!(
                "{} → {}: {} pending, {} admitted",
                q.name, q.cluster_queue, q.pending, q.admitted
            )
        })
        .collect();
    let title = if queues.is_empty() {
        "Kueue workloads".to_string()
    } else {
        format!("Kueue workloads · {}", queues.join(" · "))
    };
    let body = match snap {
        Some(s) if s.kueue.is_some() => Body::Note(Some(Cell::Muted(s.kueue.clone().unwrap_or_default()))),
        Some(s) if s.workloads.is_empty() => Body::Note(Some(Cell::Muted("no workloads".into()))),
        Some(s) => {
            let mut w: Vec<&view::WorkloadRow> = s.workloads.iter().collect();
            w.sort_by_key(|w| (w.state != "pending", w.state != "admitted", w.name.clone()));
            Body::Rows(
                w.iter()
                    .map(|w| {
                        let tone = match w.state.as_str() {
                            "pending" => Tone::Warn,
                            "evicted" | "rejected" => Tone::Fail,
                            "finished" => Tone::Info,
                            _ => Tone::Pass,
                        };
                        Row {
                            node: None,
                            keys: vec![],
                            cells: vec![
                                Cell::Text(w.owner.clone().unwrap_or_else(|| w.name.clone())),
                                Cell::Text(w.queue.clone()),
                                Cell::Toned(w.state.clone(), tone),
                                Cell::Text(w.age_s.map(view::age).unwrap_or_default()),
                                Cell::Text(w.detail.clone()),
                            ],
                        }
                    })
                    .collect(),
            )
        }
        None => Body::Note(None),
    };
    let loads = snap.map_or(0, |s| s.workloads.len().max(1));
    Table {
        title,
        columns: vec![("JOB", 28), ("QUEUE", 14), ("STATE", 9), ("FOR", 7), ("WHY", 10)],
        body,
        height: loads as u16 + 3,
    }
}

/// `fleet status`'s text: the cluster, its pools, nodes, LocalQueues and workloads.
fn status_blocks(fleet: &str, snap: &Snapshot) -> Vec<Block> {
    let mut out = vec![
        Block::Line(format!("{} (fleet `{fleet}`)", snap.cluster)),
        Block::Table(
            view::POOL_STATUS_HEADER.to_vec(),
            snap.pools.iter().map(|p| p.status_cells()).collect(),
        ),
        Block::Blank,
    ];
    let nodes = snap
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.pool.clone(),
                n.internal_ip.clone().unwrap_or_default(),
                if n.ready {
                    "Ready".into()
                } else {
                    "NotReady".into()
                },
                format!("{}/{}", n.gpus_used, n.gpus),
                if n.conditions.is_empty() {
                    n.pods.to_string()
                } else {
                    format!("{} ({})", n.pods, n.conditions.join(", "))
                },
            ]
        })
        .collect();
    out.push(Block::Table(
        vec!["NODE", "POOL", "IP", "STATUS", "GPUS USED", "PODS"],
        nodes,
    ));
    out.push(Block::Blank);
    if !snap.queues.is_empty() {
        let rows = snap
            .queues
            .iter()
            .map(|q| {
                vec![
                    q.name.clone(),
                    q.cluster_queue.clone(),
                    q.pending.to_string(),
                    q.admitted.to_string(),
                ]
            })
            .collect();
        out.push(Block::Table(
            vec!["LOCALQUEUE", "CLUSTERQUEUE", "PENDING", "ADMITTED"],
            rows,
        ));
        out.push(Block::Blank);
    }
    for p in &snap.plugins {
        out.push(Block::Line(format!("GPUDirect {}", p.line())));
    }
    if !snap.plugins.is_empty() {
        out.push(Block::Blank);
    }
    for w in &snap.waiting {
        out.push(Block::Line(format!("job {}: {}", w.job, w.line())));
    }
    if !snap.waiting.is_empty() {
        out.push(Block::Blank);
    }
    match &snap.kueue {
        Some(why) => out.push(Block::Line(format!("Kueue: {why}"))),
        None if snap.workloads.is_empty() => {
            out.push(Block::Line("Kueue: no workloads in the namespace".into()))
        }
        None => {
            let rows = snap
                .workloads
                .iter()
                .map(|w| {
                    vec![
                        w.name.clone(),
                        w.queue.clone(),
                        w.state.clone(),
                        w.age_s.map(view::age).unwrap_or_default(),
                        w.detail.clone(),
                    ]
                })
                .collect();
            out.push(Block::Table(
                vec!["WORKLOAD", "QUEUE", "STATE", "FOR", "WHY"],
                rows,
            ));
        }
    }
    out
}
