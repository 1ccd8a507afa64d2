//! Keeping a GCP fleet's resources accounted for once it is up: delete (recorded,
//! labelled and marked resources, in teardown order, until none is left), gc (this
//! owner's resources no fleet record knows) and node checks (preempted, stopped, gone);
//! [`GcpInventory`], GCP's [`Inventory`].

use super::ops::{ComputeError, Instance, Named, Scope};
use super::plan::{self, Kind, FLEET_LABEL, OWNER_LABEL};
use super::provision::{Gcp, Recorder};
use crate::cloud::inventory::{
    node_deletes, Block, Body, Cell, Context, Inventory, NodeView, Placed, Row, Seen, Status, Sweep, Table,
    Tone, Upkept,
};
use crate::cloud::{Plan, Progress};
use crate::fleet::{BackendKind, Fleet};
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, ResourceRecord, State};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

impl Gcp {
    /// The `labels.flightdeck-fleet = F AND labels.flightdeck-owner = O` filter.
    pub(super) fn fleet_filter(&self, fleet: &str) -> String {
        format!(
            "(labels.{FLEET_LABEL} = \"{fleet}\") AND (labels.{OWNER_LABEL} = \"{}\")",
            self.owner
        )
    }

    /// Delete everything of the fleet: recorded resources and instances labelled with its
    /// name; returns once none is left. Idempotent.
    pub async fn delete(
        &self,
        fleet: &str,
        rec: &dyn Recorder,
        progress: Progress<'_>,
    ) -> Result<(), String> {
        let mut items = rec.list()?;
        let labelled = self
            .compute
            .aggregated_instances(&self.fleet_filter(fleet))
            .await
            .map_err(|e| e.to_string())?;
        for i in &labelled {
            let mut r = ResourceRecord::new("instance", &i.name, "deleting");
            r.zone = Some(i.zone_name().to_string());
            if !items.iter().any(|h| h.same(&r)) {
                progress(format!(
                    "  instance {} ({}): labelled for this fleet but not recorded",
                    i.name,
                    i.zone_name()
                ));
                items.push(r);
            }
        }
        // Networks, firewalls, subnetworks and policies marked for this fleet, recorded or not.
        for o in self.orphans(&[]).await? {
            if o.fleet != fleet || o.kind == Kind::Instance {
                continue;
            }
            let mut r = ResourceRecord::new(o.kind.as_str(), &o.name, "deleting");
            match &o.scope {
                Scope::Zone(z) => r.zone = Some(z.clone()),
                Scope::Region(g) => r.region = Some(g.clone()),
                Scope::Global => {}
            }
            if !items.iter().any(|h| h.same(&r)) {
                progress(format!(
                    "  {} {}: marked for this fleet but not recorded",
                    o.kind.as_str(),
                    o.name
                ));
                items.push(r);
            }
        }
        if items.is_empty() {
            progress(format!(
                "{fleet}: nothing recorded and no labelled instance: already gone"
            ));
            return Ok(());
        }
        self.teardown(items, rec, progress).await?;
        let left = self
            .compute
            .aggregated_instances(&self.fleet_filter(fleet))
            .await
            .map_err(|e| e.to_string())?;
        if !left.is_empty() {
            let names: Vec<&str> = left.iter().map(|i| i.name.as_str()).collect();
            return Err(format!("still there after delete: {}", names.join(", ")));
        }
        Ok(())
    }

    /// Resources of this owner that no fleet record knows: labelled instances and
    /// marked networks, firewalls, subnetworks and resource policies.
    pub async fn orphans(&self, known: &[FleetRecord]) -> Result<Vec<Orphan>, String> {
        let e = |e: ComputeError| e.to_string();
        let knows = |kind: &str, name: &str, zone: Option<&str>, region: Option<&str>| {
            known.iter().flat_map(|f| &f.resources).any(|r| {
                r.kind == kind
                    && r.name == name
                    && (zone.is_none() || r.zone.as_deref() == zone)
                    && (region.is_none() || r.region.as_deref() == region)
            })
        };
        let mut out = vec![];
        let filter = format!("labels.{OWNER_LABEL} = \"{}\"", self.owner);
        for i in self.compute.aggregated_instances(&filter).await.map_err(e)? {
            if !knows("instance", &i.name, Some(i.zone_name()), None) {
                out.push(Orphan {
                    kind: Kind::Instance,
                    name: i.name.clone(),
                    scope: Scope::Zone(i.zone_name().to_string()),
                    fleet: i.labels.get(FLEET_LABEL).cloned().unwrap_or_default(),
                });
            }
        }
        for kind in [
            Kind::PlacementPolicy,
            Kind::Firewall,
            Kind::Subnetwork,
            Kind::Network,
        ] {
            let items: Vec<(Scope, Named)> = match kind {
                Kind::Firewall | Kind::Network => self
                    .compute
                    .list::<Named>(&Scope::Global, kind.collection(), None)
                    .await
                    .map_err(e)?
                    .into_iter()
                    .map(|n| (Scope::Global, n))
                    .collect(),
                _ => self.aggregated(kind).await.map_err(e)?,
            };
            for (scope, n) in items {
                let Some((fleet, owner)) = plan::parse_marker(&n.description) else {
                    continue;
                };
                if owner != self.owner {
                    continue;
                }
                let region = match &scope {
                    Scope::Region(r) => Some(r.as_str()),
                    _ => None,
                };
                if !knows(kind.as_str(), &n.name, None, region) {
                    out.push(Orphan {
                        kind,
                        name: n.name,
                        scope,
                        fleet,
                    });
                }
            }
        }
        Ok(out)
    }

    /// `aggregated/{collection}` of a regional kind: `(region, item)` pairs.
    async fn aggregated(&self, kind: Kind) -> Result<Vec<(Scope, Named)>, ComputeError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Agg {
            #[serde(default)]
            items: BTreeMap<String, Value>,
            #[serde(default)]
            next_page_token: String,
        }
        impl super::http::Page for Agg {
            fn next_page_token(&self) -> Option<&str> {
                Some(&self.next_page_token)
            }
        }
        let url = self.compute.client.url(
            super::error::Service::Compute,
            &format!(
                "/projects/{}/aggregated/{}",
                self.compute.project,
                kind.collection()
            ),
        );
        let mut out = vec![];
        self.compute
            .client
            .list_pages::<Agg>(
                super::error::Service::Compute,
                &url,
                &[("returnPartialSuccess", "true".to_string())],
                kind.collection(),
                |p| {
                    for (scope, v) in p.items {
                        let region = scope.strip_prefix("regions/").unwrap_or(&scope).to_string();
                        for item in v
                            .get(kind.collection())
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if let Ok(n) = serde_json::from_value::<Named>(item.clone()) {
                                out.push((Scope::Region(region.clone()), n));
                            }
                        }
                    }
                    Ok(())
                },
            )
            .await?;
        Ok(out)
    }

    /// Delete orphans (teardown order); records nothing (they were unknown).
    pub async fn delete_orphans(&self, orphans: &[Orphan], progress: Progress<'_>) -> Result<(), String> {
        let mut items = orphans.to_vec();
        items.sort_by_key(|o| o.kind.teardown_rank());
        let mut failures = vec![];
        for o in &items {
            progress(format!(
                "  delete {} {} ({})",
                o.kind.as_str(),
                o.name,
                o.scope.place()
            ));
            if let Err(e) = self
                .compute
                .delete_wait(&o.scope, o.kind.collection(), &o.name)
                .await
            {
                failures.push(format!("{} {}: {e}", o.kind.as_str(), o.name));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    /// How each created instance is doing: running (or starting), or lost (preempted,
    /// stopped, gone). Instances an apply or delete is still working on are left out: the
    /// cockpit checks in the background, and a node being made is not lost.
    pub async fn check(&self, record: &FleetRecord) -> Result<Vec<NodeHealth>, String> {
        let mut out = vec![];
        let mut events: BTreeMap<Scope, Vec<Value>> = BTreeMap::new();
        for r in created_instances(record) {
            let (scope, got) = self.instance_of(r).await.map_err(|e| e.to_string())?;
            // The zone's preemption events, listed once per zone.
            if let (Scope::Zone(z), false) = (&scope, events.contains_key(&scope)) {
                let ops: Vec<Value> = self
                    .compute
                    .list(
                        &scope,
                        "operations",
                        Some("operationType = \"compute.instances.preempted\""),
                    )
                    .await
                    .map_err(|e| format!("preemption events of {z}: {e}"))?;
                events.insert(scope.clone(), ops);
            }
            let preempted = events.get(&scope).into_iter().flatten().any(|o| {
                o["targetLink"]
                    .as_str()
                    .is_some_and(|t| t.ends_with(&format!("/instances/{}", r.name)))
            });
            let status = got.as_ref().map_or("GONE".to_string(), |i| i.status.clone());
            let lost = match (status.as_str(), preempted) {
                ("RUNNING" | "PROVISIONING" | "STAGING", _) => None,
                (_, true) => Some(format!("preempted ({status})")),
                ("GONE", false) => Some("deleted outside flightdeck".into()),
                (s, false) => Some(format!("not running ({s})")),
            };
            out.push(NodeHealth {
                name: r.name.clone(),
                zone: r.zone.clone().unwrap_or_default(),
                status,
                provisioning_model: r.provisioning_model.clone().unwrap_or_default(),
                lost,
            });
        }
        Ok(out)
    }
}

impl Gcp {
    /// Where each created instance of the fleet stands on placement, from the API: the
    /// resource policies it carries and each policy's collocation (the doctor's
    /// `placement` check).
    pub async fn placement(&self, record: &FleetRecord) -> Result<Vec<Placed>, String> {
        let mut out = vec![];
        let mut policies: BTreeMap<String, Option<String>> = BTreeMap::new();
        for r in created_instances(record) {
            let (_, got) = self
                .instance_of(r)
                .await
                .map_err(|e| format!("instance {}: {e}", r.name))?;
            let Some(inst) = got else {
                out.push(Placed {
                    instance: r.name.clone(),
                    node: r.node,
                    policies: vec![],
                    collocation: None,
                    gone: true,
                });
                continue;
            };
            let mut collocation = None;
            for url in &inst.resource_policies {
                if !policies.contains_key(url) {
                    // `.../projects/p/regions/r/resourcePolicies/name`
                    let parts: Vec<&str> = url.rsplit('/').collect();
                    let (name, region) = (
                        parts.first().copied().unwrap_or(""),
                        parts.get(2).copied().unwrap_or(""),
                    );
                    let pol: Option<Value> = self
                        .compute
                        .get(&Scope::Region(region.to_string()), "resourcePolicies", name)
                        .await
                        .map_err(|e| format!("resource policy {name}: {e}"))?;
                    let c = pol.and_then(|p| {
                        p["groupPlacementPolicy"]["collocation"]
                            .as_str()
                            .map(str::to_string)
                    });
                    policies.insert(url.clone(), c);
                }
                if let Some(c) = policies.get(url).cloned().flatten() {
                    collocation = Some(c);
                }
            }
            out.push(Placed {
                instance: r.name.clone(),
                node: r.node,
                policies: inst.resource_policies.clone(),
                collocation,
                gone: false,
            });
        }
        Ok(out)
    }
}

/// The instances of a fleet whose create finished (not those an apply or delete is
/// still working on).
fn created_instances(record: &FleetRecord) -> impl Iterator<Item = &ResourceRecord> {
    record
        .resources
        .iter()
        .filter(|r| r.kind == "instance" && r.state == "created")
}

impl Gcp {
    /// A recorded instance as the API has it now (`None`: gone), with its scope.
    async fn instance_of(&self, r: &ResourceRecord) -> Result<(Scope, Option<Instance>), ComputeError> {
        let scope = plan::record_scope(r);
        let got = self.compute.get(&scope, "instances", &r.name).await?;
        Ok((scope, got))
    }
}

/// A resource flightdeck made that no fleet record knows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Orphan {
    #[serde(serialize_with = "kind_name")]
    pub kind: Kind,
    pub name: String,
    #[serde(serialize_with = "scope_name")]
    pub scope: Scope,
    /// The fleet its label or description names.
    pub fleet: String,
}

fn kind_name<S: serde::Serializer>(k: &Kind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.as_str())
}

fn scope_name<S: serde::Serializer>(k: &Scope, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&k.place())
}

/// A node's state as Compute reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeHealth {
    pub name: String,
    pub zone: String,
    /// RUNNING, TERMINATED, ..., or GONE.
    pub status: String,
    pub provisioning_model: String,
    /// Why the node is lost, when it is.
    pub lost: Option<String>,
}

/// Write what a check found into the state: each instance's `lost` (cleared when it runs
/// again). Returns whether anything changed.
pub fn record_health(
    store: &crate::store::Store,
    fleet: &str,
    health: &[NodeHealth],
) -> Result<bool, String> {
    store
        .update(|s| {
            let mut changed = false;
            if let Some(f) = s.fleets.iter_mut().find(|f| f.name == fleet) {
                for r in f.resources.iter_mut().filter(|r| r.kind == "instance") {
                    if let Some(h) = health.iter().find(|h| h.name == r.name) {
                        changed |= r.lost != h.lost;
                        r.lost = h.lost.clone();
                    }
                }
            }
            changed
        })
        .map(|(c, _)| c)
        .map_err(|e| e.to_string())
}

/// Check every GCP fleet of the state (the cockpit does on each reload); whether any
/// node's state changed. The state file is read and written off the async threads.
pub async fn check_all(backend: &super::backend::GcpBackend) -> Result<bool, String> {
    let dir = backend.state_dir.clone();
    let fleets: Vec<FleetRecord> = tokio::task::spawn_blocking(move || crate::store::Store::new(&dir).load())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?
        .0
        .fleets
        .into_iter()
        .filter(|f| f.backend == crate::fleet::BackendKind::Gcp)
        .collect();
    if fleets.is_empty() {
        return Ok(false);
    }
    let gcp = backend.connect().await?;
    let mut changed = false;
    for f in fleets {
        let health = gcp.check(&f).await?;
        let dir = backend.state_dir.clone();
        changed |= tokio::task::spawn_blocking(move || {
            record_health(&crate::store::Store::new(&dir), &f.name, &health)
        })
        .await
        .map_err(|e| e.to_string())??;
    }
    Ok(changed)
}

/// The inventory of GCP fleets: Compute's instances, recorded as they are made.
pub struct GcpInventory;

impl Inventory for GcpInventory {
    fn kind(&self) -> BackendKind {
        BackendKind::Gcp
    }

    /// Each instance with its zone, provisioning model, NIC layout, price and, when a check
    /// found it so, why it is lost.
    fn nodes(&self, record: &FleetRecord, _seen: Option<&Seen>) -> NodeView {
        let rows = record
            .resources
            .iter()
            .filter(|r| r.kind == "instance")
            .map(|r| {
                let node = record.nodes.iter().find(|n| n.name == r.name);
                let status = match (&r.lost, r.state.as_str()) {
                    (Some(l), _) => Cell::Toned(l.clone(), Tone::Fail),
                    (None, s) if s != "created" => Cell::Toned(s.to_string(), Tone::Warn),
                    (None, _) => Cell::Pane { toned: true },
                };
                let price = r
                    .hourly_micro_usd
                    .map_or("?".to_string(), |m| format!("${:.2}", m as f64 / 1e6));
                Row::node(
                    &r.name,
                    vec![r.name.clone(), r.zone.clone().unwrap_or_default()],
                    vec![
                        Cell::Text(r.name.clone()),
                        Cell::Text(
                            node.map(|n| n.host().to_string())
                                .or(r.external_ip.clone())
                                .unwrap_or_default(),
                        ),
                        Cell::Text(r.internal_ip.clone().unwrap_or_default()),
                        Cell::Text(r.zone.clone().unwrap_or_default()),
                        Cell::Text(r.provisioning_model.clone().unwrap_or_default()),
                        Cell::Text(r.nics.clone().unwrap_or_default()),
                        Cell::Text(price),
                        status,
                    ],
                )
            })
            .collect();
        NodeView {
            above: None,
            nodes: Table {
                title: format!("Nodes of {} (gcp backend)", record.name),
                columns: vec![
                    ("NODE", 18),
                    ("ADDRESS", 16),
                    ("INTERNAL", 14),
                    ("ZONE", 16),
                    ("MODEL", 10),
                    ("NICS", 11),
                    ("$/H", 8),
                    ("STATE", 10),
                ],
                body: Body::Rows(rows),
                height: 0,
            },
            below: None,
        }
    }

    /// Every recorded resource (with its place, machine and price) and the nodes no
    /// instance stands for.
    fn delete_plan(&self, record: &FleetRecord) -> Plan {
        use crate::cloud::{Change, CloudDetail, NicSummary};
        let mut changes = vec![];
        for r in &record.resources {
            let place = plan::record_scope(r).place();
            let price = r.hourly_micro_usd.map(|m| m as f64 / 1e6);
            changes.push(Change {
                action: "delete",
                kind: Kind::parse(&r.kind).map_or("resource", |k| k.as_str()),
                name: r.name.clone(),
                place,
                cloud: Some(CloudDetail {
                    zone: r.zone.clone(),
                    region: r.region.clone(),
                    machine_type: r.machine_type.clone(),
                    nics: r.nics.as_ref().map(|l| NicSummary {
                        count: 0,
                        types: vec![],
                        layout: l.clone(),
                    }),
                    provisioning_model: r.provisioning_model.clone(),
                    hourly_usd: price,
                }),
            });
        }
        changes.extend(node_deletes(record));
        let prices: Vec<Option<f64>> = record
            .resources
            .iter()
            .filter(|r| r.kind == "instance")
            .map(|r| r.hourly_micro_usd.map(|m| m as f64 / 1e6))
            .collect();
        Plan {
            changes,
            hourly_usd: (!prices.is_empty()).then(|| prices.iter().copied().sum::<Option<f64>>()),
            ..Plan::new(record.name.clone(), record.backend)
        }
    }

    fn bootstraps_after_apply(&self) -> bool {
        true
    }

    fn declared_nodes(&self, fleet: &Fleet) -> String {
        fleet.spec.nodes.map(|n| format!("{n} nodes")).unwrap_or_default()
    }

    /// `gcp.health_check_secs` (60 by default; 0: never), while a `gcp:` block is set.
    fn upkeep_every(&self, ctx: &Context) -> Option<Duration> {
        let secs = ctx.gcp.as_ref()?.health_check_secs.unwrap_or(60);
        (secs > 0).then(|| Duration::from_secs(secs))
    }

    fn upkeep_on_load(&self) -> bool {
        true
    }

    /// Ask Compute how the instances are (preempted, stopped, gone) and write it into the
    /// state.
    fn upkeep<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Vec<Upkept>, String>> {
        Box::pin(async move {
            if ctx.gcp.is_none() {
                return Ok(vec![]);
            }
            let changed = check_all(&ctx.gcp_backend()).await?;
            Ok(if changed {
                vec![Upkept::StateChanged]
            } else {
                vec![]
            })
        })
    }

    /// Each instance as Compute sees it; lost ones are marked in the state.
    fn status<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> BoxFuture<'a, Result<Status, String>> {
        Box::pin(async move {
            let gcp = ctx.gcp_backend().connect().await?;
            let health = gcp.check(record).await?;
            record_health(&ctx.store(), &record.name, &health)?;
            let rows = health
                .iter()
                .map(|h| {
                    vec![
                        h.name.clone(),
                        h.zone.clone(),
                        h.provisioning_model.clone(),
                        h.status.clone(),
                        h.lost.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            Ok(Status {
                json: serde_json::to_value(&health).map_err(|e| e.to_string())?,
                blocks: vec![Block::Table(
                    vec!["NODE", "ZONE", "MODEL", "STATUS", "LOST"],
                    rows,
                )],
                lost: health.iter().any(|h| h.lost.is_some()),
            })
        })
    }

    /// With a `gcp:` block in the config.
    fn sweeps(&self, _state: &State, ctx: &Context) -> bool {
        ctx.gcp.is_some()
    }

    /// Resources labelled with this owner that no fleet record knows.
    fn sweep<'a>(&'a self, ctx: &'a Context, state: &'a State) -> BoxFuture<'a, Result<Sweep, String>> {
        Box::pin(async move {
            let gcp = ctx.gcp_backend().connect().await?;
            let orphans = gcp.orphans(&state.fleets).await?;
            let rows = orphans
                .iter()
                .map(|o| {
                    vec![
                        o.kind.as_str().to_string(),
                        o.name.clone(),
                        o.scope.place(),
                        o.fleet.clone(),
                    ]
                })
                .collect();
            let n = orphans.len();
            let plural = crate::words::plural;
            Ok(Sweep::new(
                serde_json::to_value(&orphans).map_err(|e| e.to_string())?,
                vec!["KIND", "NAME", "WHERE", "FLEET"],
                rows,
                format!(
                    "no orphans: every resource labelled flightdeck-owner={} in project {} is in the state",
                    gcp.owner, gcp.compute.project
                ),
                format!(
                    "{} found; `flightdeck fleet gc --yes` deletes them",
                    plural(n, "orphan")
                ),
                Some(format!("Delete these {}?", plural(n, "resource"))),
                Some(format!("{} deleted", plural(n, "orphan"))),
                Box::new(move |progress| {
                    Box::pin(async move { gcp.delete_orphans(&orphans, progress).await })
                }),
            ))
        })
    }

    /// With a `gcp:` block: delete looks for instances labelled with the name anyway, so
    /// a second delete is fine and finds stragglers.
    fn unrecorded(&self, ctx: &Context, name: &str) -> Option<FleetRecord> {
        ctx.gcp.as_ref()?;
        Some(FleetRecord {
            name: name.to_string(),
            backend: BackendKind::Gcp,
            file: None,
            nodes: vec![],
            resources: vec![],
            created_at: 0,
            applied: None,
        })
    }

    fn placement<'a>(
        &'a self,
        ctx: &'a Context,
        record: &'a FleetRecord,
    ) -> Option<BoxFuture<'a, Result<Vec<Placed>, String>>> {
        Some(Box::pin(async move {
            ctx.gcp_backend().connect().await?.placement(record).await
        }))
    }
}
