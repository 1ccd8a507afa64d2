//! Bringing a GCP fleet up through the Compute API.
//!
//! ```text
//!  apply:  reconcile records left `creating`/`deleting` by a crash (GET each: adopt or forget)
//!          for each candidate in price order (skipping blocked zones / regions):
//!            networks, firewalls, subnetworks, placement policy  (recorded, then inserted)
//!            instances, all at once                              (recorded, then inserted)
//!            stockout → block the zone, regional quota → the region (for that model);
//!            permission / global quota / other → stop
//!            placement: cluster → a partial set is deleted before the next candidate
//!          all failed → everything this run created is deleted
//!          plan's deletions done (nodes beyond the count, places left)
//!          RUNNING + SSH banner on port 22 (or a login through gcp.proxy_jump) → nodes
//! ```
//!
//! Delete, gc and node checks are in `upkeep.rs`.
//!
//! Every resource is written to the state (through [`Recorder`]) as `creating` *before*
//! its insert is sent and as `deleting` before its delete; a record is dropped only once
//! Compute says the resource is gone.

use super::error::GcpError;
use super::ops::{advice, classify, Compute, ComputeError, Failure, Instance, Named, Scope};
use super::plan::Model;
use super::plan::{self, Candidate, Context, Kind, Resource};
use super::settings::GcpSettings;
use crate::catalog::Catalog;
use crate::cloud::Progress;
use crate::fleet::spec::Placement;
use crate::fleet::{Fleet, NodeTarget};
use crate::store::{FleetRecord, ResourceRecord};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Where resource records go: the state store in the CLI and cockpit, memory in tests.
pub trait Recorder: Send + Sync {
    /// Insert or replace (by kind, name and place).
    fn put(&self, r: &ResourceRecord) -> Result<(), String>;
    fn remove(&self, r: &ResourceRecord) -> Result<(), String>;
    /// The fleet's records now.
    fn list(&self) -> Result<Vec<ResourceRecord>, String>;
}

/// The GCP backend of one project.
pub struct Gcp {
    pub compute: Compute,
    pub settings: GcpSettings,
    pub catalog: Arc<Catalog>,
    /// The `flightdeck-owner` label value.
    pub owner: String,
    /// `user:ssh-ed25519 …` lines for the `ssh-keys` metadata.
    pub ssh_keys: String,
    pub identity_file: Option<String>,
    /// How long to wait for instances to run and for SSH to answer.
    pub ready_wait: Duration,
    /// Port probed for the SSH banner (22 on GCE).
    pub ssh_port: u16,
    /// How to log in to nodes behind `gcp.proxy_jump` (their readiness is a login there,
    /// since their port cannot be probed from here).
    pub ssh: Option<crate::reach::Reach>,
    /// Set when the operator cancels the apply.
    pub cancel: crate::cloud::Cancel,
}

/// How long a flex-start request may wait in Google's queue: the fleet's `flex_wait`,
/// else 2 hours.
pub fn flex_wait(fleet: &Fleet) -> Duration {
    Duration::from_secs(fleet.spec.flex_wait.map_or(7_200, |w| w.0))
}

/// When the next "queued for capacity" line is due, the last one said at `told`: the
/// first after a few seconds, then once a minute.
fn queued_word_due(told: Duration) -> Duration {
    if told.is_zero() {
        Duration::from_secs(2)
    } else {
        told + Duration::from_secs(60)
    }
}

/// `1h 05m`, `12m 30s`, `45s`.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 3600 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m {:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// Why an attempt in one place failed.
struct AttemptError {
    failure: Failure,
    error: ComputeError,
}

/// An attempt that cannot go on for a reason of flightdeck's own (the state store).
fn fatal(e: String) -> AttemptError {
    AttemptError {
        failure: Failure::Other,
        error: ComputeError::Http(GcpError::Config(e)),
    }
}

impl Gcp {
    fn context<'a>(
        &'a self,
        fleet: &'a Fleet,
        regions: &'a [String],
        subnets: &'a BTreeMap<(String, String), Vec<String>>,
    ) -> Context<'a> {
        Context {
            fleet,
            settings: &self.settings,
            project: &self.compute.project,
            owner: &self.owner,
            ssh_keys: &self.ssh_keys,
            regions,
            subnets,
            reservation_placement: None,
        }
    }

    /// The placement policy of the fleet's reservation in `zone` (its `resourcePolicies`:
    /// the one keyed `placement`, else the first), looked up once a zone. A reservation
    /// that is not there in the zone has none here; inserting a VM names what is wrong.
    async fn reservation_placement(
        &self,
        fleet: &Fleet,
        c: &Candidate,
        found: &mut BTreeMap<String, Option<String>>,
    ) -> Result<Option<String>, String> {
        let Some(name) = fleet
            .spec
            .reservation
            .as_deref()
            .filter(|_| c.model == Model::Standard)
        else {
            return Ok(None);
        };
        if let Some(p) = found.get(&c.zone) {
            return Ok(p.clone());
        }
        let res: Option<serde_json::Value> = self
            .compute
            .get(&Scope::Zone(c.zone.clone()), "reservations", name)
            .await
            .map_err(|e| format!("reservation {name} in {}: {e}", c.zone))?;
        let policies = res.as_ref().and_then(|r| r["resourcePolicies"].as_object());
        let policy = policies.and_then(|m| {
            m.get("placement")
                .or_else(|| m.values().next())
                .and_then(|v| v.as_str())
                .map(str::to_string)
        });
        found.insert(c.zone.clone(), policy.clone());
        Ok(policy)
    }

    /// Settle records a crash left half-way: a `creating` resource that exists is adopted
    /// (`created`), one that does not is forgotten; a `deleting` one is deleted again.
    pub async fn reconcile(&self, rec: &dyn Recorder, progress: Progress<'_>) -> Result<(), String> {
        for r in rec.list()? {
            if r.state == "created" {
                continue;
            }
            let Some(kind) = Kind::parse(&r.kind) else {
                continue;
            };
            let scope = plan::record_scope(&r);
            if r.state == "deleting" {
                progress(format!("{} {}: deleting (left half-way)", r.kind, r.name));
                self.compute
                    .delete_wait(&scope, kind.collection(), &r.name)
                    .await
                    .map_err(|e| e.to_string())?;
                rec.remove(&r)?;
                continue;
            }
            let found = self
                .settle(kind, &scope, &r.name)
                .await
                .map_err(|e| e.to_string())?;
            match found {
                Some(inst) => {
                    let mut r = r.clone();
                    r.state = "created".into();
                    if let Some(i) = inst {
                        r.external_ip = i.external_ip().map(str::to_string);
                        r.internal_ip = i.internal_ip().map(str::to_string);
                    }
                    progress(format!(
                        "{} {}: found in {} (recorded before an interrupted apply), adopted",
                        r.kind,
                        r.name,
                        scope.place()
                    ));
                    rec.put(&r)?;
                }
                None => {
                    progress(format!(
                        "{} {}: recorded as creating but absent in {}, forgotten",
                        r.kind,
                        r.name,
                        scope.place()
                    ));
                    rec.remove(&r)?;
                }
            }
        }
        Ok(())
    }

    /// Does it exist (an instance: once it is no longer provisioning)? `Some(Some(instance))`
    /// for instances, `Some(None)` for other kinds, `None` when absent.
    async fn settle(
        &self,
        kind: Kind,
        scope: &Scope,
        name: &str,
    ) -> Result<Option<Option<Instance>>, ComputeError> {
        if kind != Kind::Instance {
            let got: Option<Value> = self.compute.get(scope, kind.collection(), name).await?;
            return Ok(got.map(|_| None));
        }
        let start = tokio::time::Instant::now();
        loop {
            let got: Option<Instance> = self.compute.get(scope, "instances", name).await?;
            match got {
                None => return Ok(None),
                Some(i)
                    if matches!(i.status.as_str(), "PROVISIONING" | "STAGING")
                        && start.elapsed() < self.ready_wait =>
                {
                    tokio::time::sleep(self.compute.wait.poll).await;
                }
                Some(i) => return Ok(Some(Some(i))),
            }
        }
    }

    /// Bring the fleet up; returns its nodes once SSH answers on each.
    pub async fn apply(
        &self,
        fleet: &Fleet,
        rec: &dyn Recorder,
        progress: Progress<'_>,
    ) -> Result<Vec<NodeTarget>, String> {
        self.reconcile(rec, progress).await?;
        let cands = plan::candidates(fleet, &self.settings, &self.catalog)?;
        let regions = plan::regions(&cands);
        let recorded = FleetRecord {
            name: fleet.name.clone(),
            backend: crate::fleet::BackendKind::Gcp,
            file: None,
            nodes: vec![],
            resources: rec.list()?,
            created_at: 0,
            applied: None,
        };
        let order = plan::ordered(fleet, &cands, Some(&recorded))?;
        let mut subnets = BTreeMap::new();
        let mut placements = BTreeMap::new();
        let mut blocked_zones = HashSet::new();
        let mut blocked_regions = HashSet::new();
        let mut created: Vec<ResourceRecord> = vec![];
        let mut attempts = vec![];
        let mut outcome: Result<(), String> = Err(String::new());
        for (n, c) in order.iter().enumerate() {
            // Capacity and quota are per provisioning model (Spot has its own pool and its
            // PREEMPTIBLE_* quotas); an unusable zone is unusable for all.
            let all = None;
            if blocked_zones.contains(&(c.zone.clone(), Some(c.model)))
                || blocked_zones.contains(&(c.zone.clone(), all))
                || blocked_regions.contains(&(c.region.clone(), Some(c.model)))
            {
                continue;
            }
            if self.cancel.is_cancelled() {
                outcome = Err("cancelled by the operator".into());
                break;
            }
            progress(format!("try {}: {}", n + 1, c.describe()));
            if let Err(e) = self.find_named_subnets(fleet, c, &mut subnets).await {
                outcome = Err(e);
                break;
            }
            let reserved = match self.reservation_placement(fleet, c, &mut placements).await {
                Ok(p) => p,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            };
            let mut ctx = self.context(fleet, &regions, &subnets);
            ctx.reservation_placement = reserved.as_deref();
            if let Some(p) = &reserved {
                progress(format!(
                    "reservation {}: its placement policy {} places the VMs; flightdeck makes none of its own",
                    fleet.spec.reservation.as_deref().unwrap_or(""),
                    p.rsplit('/').next().unwrap_or(p)
                ));
            }
            let res = match plan::resources(&ctx, c) {
                Ok(r) => r,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            };
            match self.attempt(fleet, c, &res, rec, &mut created, progress).await {
                Ok(()) => {
                    attempts.push(format!("{}: created", c.describe()));
                    // What is left over stays recorded for the next apply or delete; the
                    // fleet just made is not rolled back for it.
                    if let Err(e) = self.drop_stale(fleet, c, &res, rec, progress).await {
                        progress(format!(
                            "warning: could not delete what the fleet no longer needs: {e}"
                        ));
                    }
                    outcome = Ok(());
                    break;
                }
                Err(AttemptError { failure, error }) => {
                    let reason = format!("{}: {}", error.code(), error.message());
                    attempts.push(format!("{}: {reason}", c.describe()));
                    match failure {
                        Failure::UnknownInZone => {
                            progress(format!(
                                "  {}: {reason}: an error flightdeck does not know; {} blocked, trying the next zone",
                                c.zone, c.zone
                            ));
                            blocked_zones.insert((c.zone.clone(), None));
                        }
                        Failure::Capacity | Failure::ZoneUnusable => {
                            let hint = error.zones_available();
                            let hint = if hint.is_empty() {
                                String::new()
                            } else {
                                format!(" (Google suggests {})", hint.join(", "))
                            };
                            progress(format!("  {}: {reason}; trying the next zone{hint}", c.zone));
                            let model = (failure == Failure::Capacity).then_some(c.model);
                            blocked_zones.insert((c.zone.clone(), model));
                        }
                        Failure::RegionQuota => {
                            progress(format!("  {}: {reason}; trying another region", c.region));
                            progress(format!("  {}", advice(&error, failure, &self.compute.project)));
                            blocked_regions.insert((c.region.clone(), Some(c.model)));
                        }
                        Failure::GlobalQuota | Failure::Permission | Failure::Other => {
                            let what = advice(&error, failure, &self.compute.project);
                            // With advice of its own, the error is only its code and
                            // message (its generic hint would say the same, less well).
                            let msg = if what.is_empty() {
                                format!("{}: {error}", c.describe())
                            } else {
                                format!(
                                    "{}: {}: {}\n  what to do: {what}",
                                    c.describe(),
                                    error.code(),
                                    error.message()
                                )
                            };
                            outcome = Err(msg);
                            break;
                        }
                    }
                }
            }
        }
        if let Err(e) = outcome {
            let mut msg = String::new();
            if !e.is_empty() {
                msg.push_str(&e);
                msg.push('\n');
            }
            if !attempts.is_empty() {
                msg.push_str(&format!(
                    "tried {}:\n  {}",
                    crate::words::plural(attempts.len(), "place"),
                    attempts.join("\n  ")
                ));
            } else if e.is_empty() {
                msg.push_str("no place left to try");
            }
            if !created.is_empty() {
                progress(format!(
                    "rolling back {} this apply created",
                    crate::words::plural(created.len(), "resource")
                ));
                if let Err(r) = self.teardown(created, rec, progress).await {
                    msg.push_str(&format!(
                        "\nrollback incomplete (the state keeps what is left; `fleet delete` retries): {r}"
                    ));
                }
            }
            return Err(msg.trim_end().to_string());
        }
        match self.ready_nodes(rec, flex_wait(fleet), progress).await {
            // Cancelled while the VMs this apply made were still coming up (queued for
            // capacity): they go, as in any rollback.
            Err(e) if self.cancel.is_cancelled() && !created.is_empty() => {
                progress(format!(
                    "rolling back {} this apply created",
                    crate::words::plural(created.len(), "resource")
                ));
                match self.teardown(created, rec, progress).await {
                    Ok(()) => Err("cancelled by the operator; what this apply made was deleted".into()),
                    Err(r) => Err(format!(
                        "{e}\nrollback incomplete (the state keeps what is left; `fleet delete` retries): {r}"
                    )),
                }
            }
            other => other,
        }
    }

    /// Names of the subnetworks of named VPCs in the candidate's region, listed once.
    async fn find_named_subnets(
        &self,
        fleet: &Fleet,
        c: &Candidate,
        subnets: &mut BTreeMap<(String, String), Vec<String>>,
    ) -> Result<(), String> {
        let empty = BTreeMap::new();
        let regions = [c.region.clone()];
        let ctx = self.context(fleet, &regions, &empty);
        let nets = plan::networks(&ctx, c.flavour, &c.zone)?;
        for n in nets.iter().filter(|n| !n.create) {
            let key = (n.name.clone(), c.region.clone());
            if subnets.contains_key(&key) {
                continue;
            }
            let url = format!(
                "https://www.googleapis.com/compute/v1/projects/{}/global/networks/{}",
                self.compute.project, n.name
            );
            let mut found: Vec<Named> = self
                .compute
                .list(
                    &Scope::Region(c.region.clone()),
                    "subnetworks",
                    Some(&format!("network = \"{url}\"")),
                )
                .await
                .map_err(|e| format!("subnetworks of VPC {} in {}: {e}", n.name, c.region))?;
            found.sort_by(|a, b| a.name.cmp(&b.name));
            let names: Vec<String> = found.into_iter().map(|s| s.name).collect();
            let need = if n.role == plan::NetRole::Roce { 8 } else { 1 };
            if names.len() < need {
                return Err(format!(
                    "VPC {} has {} in {}, {need} needed: create them, or set network.create: true to let flightdeck make its own VPCs",
                    n.name,
                    crate::words::plural(names.len(), "subnetwork"),
                    c.region
                ));
            }
            subnets.insert(key, names);
        }
        Ok(())
    }

    /// Create the fleet's resources in one candidate.
    async fn attempt(
        &self,
        fleet: &Fleet,
        c: &Candidate,
        res: &[Resource],
        rec: &dyn Recorder,
        created: &mut Vec<ResourceRecord>,
        progress: Progress<'_>,
    ) -> Result<(), AttemptError> {
        let had = rec.list().map_err(fatal)?;
        // Networks first, then their firewalls and subnetworks, then the placement policy;
        // the resources of one step are created at once.
        let steps: [&[Kind]; 3] = [
            &[Kind::Network],
            &[Kind::Firewall, Kind::Subnetwork],
            &[Kind::PlacementPolicy],
        ];
        for kinds in steps {
            let group: Vec<&Resource> = res
                .iter()
                .filter(|r| kinds.contains(&r.kind))
                .filter(|r| {
                    !had.iter()
                        .any(|h| h.same(&r.record("creating")) && h.state == "created")
                })
                .collect();
            self.create_group(fleet, &group, rec, created, progress).await?;
        }
        // Instances: the nodes not yet up, all inserted at once.
        let up: HashSet<usize> = rec
            .list()
            .map_err(fatal)?
            .iter()
            .filter(|h| h.kind == "instance" && h.state == "created")
            .filter_map(|h| h.node)
            .collect();
        let todo: Vec<&Resource> = res
            .iter()
            .filter(|r| r.kind == Kind::Instance && !r.node.is_some_and(|n| up.contains(&n)))
            .collect();
        for r in &todo {
            rec.put(&r.record("creating")).map_err(fatal)?;
        }
        let mut set = tokio::task::JoinSet::new();
        for (i, r) in todo.iter().enumerate() {
            progress(format!(
                "  create instance {} ({}, {}, NICs {})",
                r.name,
                c.zone,
                c.model.api(),
                r.nics.as_ref().map_or("?".into(), |n| n.layout.clone())
            ));
            let compute = self.compute.clone();
            let scope = r.scope.clone();
            let body = r.body.clone();
            // A flex-start request waits in Google's queue as long as the fleet allows,
            // never a fixed 10 minutes; other inserts as long as any operation.
            let timeout = if c.model == Model::FlexStart {
                flex_wait(fleet)
            } else {
                compute.wait.timeout
            };
            set.spawn(async move {
                (
                    i,
                    compute.insert_wait_for(&scope, "instances", &body, timeout).await,
                )
            });
        }
        let mut results: Vec<Option<Result<(), ComputeError>>> = vec![None; todo.len()];
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut told = Duration::ZERO;
        let mut cancelled = false;
        loop {
            tokio::select! {
                joined = set.join_next() => match joined {
                    Some(Ok((i, r))) => results[i] = Some(r.map(|_| ())),
                    Some(Err(_)) => {}
                    None => break,
                },
                _ = tick.tick() => {
                    if self.cancel.is_cancelled() {
                        cancelled = true;
                        set.abort_all();
                        break;
                    }
                    let waited = started.elapsed();
                    if c.model == Model::FlexStart && waited >= queued_word_due(told) {
                        told = waited;
                        let waiting = results.iter().filter(|r| r.is_none()).count();
                        progress(format!(
                            "  {} queued for capacity in {}: {} of up to {} (flex_wait); Ctrl-C cancels", crate::words::plural(waiting as usize, "instance"),
                            c.zone,
                            elapsed(waited),
                            elapsed(flex_wait(fleet))
                        ));
                    }
                }
            }
        }
        if cancelled {
            progress(format!(
                "  cancelled: deleting the {} requested in {}",
                crate::words::plural(todo.len(), "instance"),
                c.zone
            ));
            let mut mine: Vec<ResourceRecord> = todo.iter().map(|r| r.record("creating")).collect();
            mine.extend(
                created
                    .iter()
                    .filter(|r| r.kind == "instance" && r.zone.as_deref() == Some(&c.zone))
                    .cloned(),
            );
            let names: HashSet<String> = mine.iter().map(|r| r.name.clone()).collect();
            created.retain(|r| !(r.kind == "instance" && names.contains(&r.name)));
            if let Err(e) = self.teardown(mine, rec, progress).await {
                return Err(fatal(format!(
                    "cancelled, and deleting the requested instances failed: {e}"
                )));
            }
            return Err(AttemptError {
                failure: Failure::Other,
                error: ComputeError::Http(GcpError::Config("cancelled by the operator".into())),
            });
        }
        let mut first_error: Option<ComputeError> = None;
        let mut ok_now = vec![];
        for (r, result) in todo.iter().zip(results) {
            let result = result.unwrap_or_else(|| {
                Err(ComputeError::Http(GcpError::Config(
                    "the create task stopped".into(),
                )))
            });
            match result {
                Ok(()) => {
                    let done = r.record("created");
                    rec.put(&done).map_err(fatal)?;
                    progress(format!("  instance {}: created", r.name));
                    created.push(done.clone());
                    ok_now.push(done);
                }
                Err(e) => {
                    progress(format!("  instance {}: {}: {}", r.name, e.code(), e.message()));
                    // A failed insert normally leaves nothing; delete whatever is there.
                    let record = r.record("deleting");
                    rec.put(&record).map_err(fatal)?;
                    match self.compute.delete_wait(&r.scope, "instances", &r.name).await {
                        Ok(()) => rec.remove(&record).map_err(fatal)?,
                        Err(d) => progress(format!(
                            "  instance {}: cleanup failed ({d}); kept in the state",
                            r.name
                        )),
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        let Some(error) = first_error else {
            return Ok(());
        };
        let cluster = fleet.spec.placement == Some(Placement::Cluster);
        if cluster && !ok_now.is_empty() {
            progress(format!(
                "  placement: cluster is all or nothing: deleting the {} created in {}",
                crate::words::plural(ok_now.len(), "instance"),
                c.zone
            ));
            let names: HashSet<String> = ok_now.iter().map(|r| r.name.clone()).collect();
            created.retain(|r| {
                !(r.kind == "instance" && names.contains(&r.name) && r.zone.as_deref() == Some(&c.zone))
            });
            if let Err(e) = self.teardown(ok_now, rec, progress).await {
                return Err(fatal(format!("rolling back the partial cluster failed: {e}")));
            }
        }
        Err(AttemptError {
            failure: classify(&error),
            error,
        })
    }

    /// After a successful attempt: delete what the fleet no longer needs (nodes beyond its
    /// count, resources of places it left), as the plan showed.
    async fn drop_stale(
        &self,
        fleet: &Fleet,
        c: &Candidate,
        res: &[Resource],
        rec: &dyn Recorder,
        progress: Progress<'_>,
    ) -> Result<(), String> {
        let count = plan::node_count(fleet);
        let all = rec.list()?;
        let used_regions: HashSet<String> = all
            .iter()
            .filter(|r| r.kind == "instance" && r.node.is_some_and(|n| n < count))
            .filter_map(|r| {
                r.zone
                    .as_deref()
                    .map(|z| super::compute::region_of_zone(z).to_string())
            })
            .collect();
        let stale: Vec<ResourceRecord> = all
            .into_iter()
            .filter(|h| {
                if res.iter().any(|r| r.record("x").same(h)) {
                    return false;
                }
                // Nodes left in other regions (placement: any) keep their networks there.
                let elsewhere = used_regions.iter().any(|r| r != &c.region);
                match (h.kind.as_str(), &h.region) {
                    ("instance", _) => h.node.is_none_or(|n| n >= count),
                    (_, Some(r)) => r == &c.region || !used_regions.contains(r),
                    (_, None) => !elsewhere,
                }
            })
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        progress(format!(
            "deleting {} the fleet no longer needs",
            crate::words::plural(stale.len(), "resource")
        ));
        self.teardown(stale, rec, progress).await
    }

    /// Create non-instance resources at once: each recorded `creating` first, then inserted;
    /// an existing one of this fleet (409 with its marker) is adopted.
    async fn create_group(
        &self,
        fleet: &Fleet,
        group: &[&Resource],
        rec: &dyn Recorder,
        created: &mut Vec<ResourceRecord>,
        progress: Progress<'_>,
    ) -> Result<(), AttemptError> {
        for r in group {
            rec.put(&r.record("creating")).map_err(fatal)?;
            progress(format!(
                "  create {} {} ({})",
                r.kind.as_str(),
                r.name,
                r.scope.place()
            ));
        }
        let mut set = tokio::task::JoinSet::new();
        for (i, r) in group.iter().enumerate() {
            let compute = self.compute.clone();
            let (scope, collection, body) = (r.scope.clone(), r.kind.collection(), r.body.clone());
            set.spawn(async move { (i, compute.insert_wait(&scope, collection, &body).await) });
        }
        let mut results: Vec<Option<Result<(), ComputeError>>> = vec![None; group.len()];
        while let Some(joined) = set.join_next().await {
            if let Ok((i, r)) = joined {
                results[i] = Some(r.map(|_| ()));
            }
        }
        let mut first_error = None;
        for (r, result) in group.iter().zip(results) {
            let record = r.record("creating");
            let result = result.unwrap_or_else(|| {
                Err(ComputeError::Http(GcpError::Config(
                    "the create task stopped".into(),
                )))
            });
            match result {
                Ok(()) => {}
                Err(e) if e.status() == Some(409) => {
                    // Exists: ours (an earlier run) is adopted, anything else is refused.
                    let got: Option<Named> = self
                        .compute
                        .get(&r.scope, r.kind.collection(), &r.name)
                        .await
                        .map_err(|e| AttemptError {
                        failure: classify(&e),
                        error: e,
                    })?;
                    let ours = got
                        .as_ref()
                        .and_then(|g| plan::parse_marker(&g.description))
                        .is_some_and(|(f, _)| f == fleet.name);
                    if !ours {
                        rec.remove(&record).map_err(fatal)?;
                        first_error.get_or_insert(fatal(format!(
                            "{} {} exists in project {} and is not this fleet's: rename the fleet or name that resource in the fleet file",
                            r.kind.as_str(),
                            r.name,
                            self.compute.project
                        )));
                        continue;
                    }
                    progress(format!(
                        "  {} {} exists (this fleet's), adopted",
                        r.kind.as_str(),
                        r.name
                    ));
                }
                Err(e) => {
                    progress(format!(
                        "  {} {}: {}: {}",
                        r.kind.as_str(),
                        r.name,
                        e.code(),
                        e.message()
                    ));
                    // Compute created nothing; make sure, then forget the record.
                    let gone = self
                        .compute
                        .get::<Value>(&r.scope, r.kind.collection(), &r.name)
                        .await
                        .is_ok_and(|g| g.is_none());
                    if gone {
                        rec.remove(&record).map_err(fatal)?;
                    }
                    first_error.get_or_insert(AttemptError {
                        failure: classify(&e),
                        error: e,
                    });
                    continue;
                }
            }
            let done = r.record("created");
            rec.put(&done).map_err(fatal)?;
            created.push(done);
        }
        match first_error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Delete resources in teardown order (instances first), each recorded `deleting` before
    /// its call and forgotten once gone. Continues past failures; returns them.
    pub async fn teardown(
        &self,
        mut items: Vec<ResourceRecord>,
        rec: &dyn Recorder,
        progress: Progress<'_>,
    ) -> Result<(), String> {
        items.sort_by_key(|r| Kind::parse(&r.kind).map_or(9, Kind::teardown_rank));
        let mut failures = vec![];
        let mut i = 0;
        let (total, mut gone) = (items.len(), 0);
        progress(crate::progress::tally(0, total, "resources deleted"));
        while i < items.len() {
            let rank = Kind::parse(&items[i].kind).map_or(9, Kind::teardown_rank);
            let group: Vec<ResourceRecord> = items[i..]
                .iter()
                .take_while(|r| Kind::parse(&r.kind).map_or(9, Kind::teardown_rank) == rank)
                .cloned()
                .collect();
            i += group.len();
            let mut set = tokio::task::JoinSet::new();
            for r in &group {
                let mut d = r.clone();
                d.state = "deleting".into();
                if let Err(e) = rec.put(&d) {
                    failures.push(e);
                    continue;
                }
                progress(format!(
                    "  delete {} {} ({})",
                    r.kind,
                    r.name,
                    plan::record_scope(r).place()
                ));
                let compute = self.compute.clone();
                let collection = Kind::parse(&r.kind).map_or("instances", Kind::collection);
                let scope = plan::record_scope(r);
                let name = r.name.clone();
                let d2 = d.clone();
                set.spawn(async move { (d2, compute.delete_wait(&scope, collection, &name).await) });
            }
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((d, Ok(()))) => {
                        if let Err(e) = rec.remove(&d) {
                            failures.push(e);
                        }
                        progress(format!("  {} {}: deleted", d.kind, d.name));
                        gone += 1;
                        progress(crate::progress::tally(gone, total, "resources deleted"));
                    }
                    Ok((d, Err(e))) => failures.push(format!("{} {}: {e}", d.kind, d.name)),
                    Err(e) => failures.push(format!("delete task: {e}")),
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    /// Wait until every recorded instance runs and answers on SSH; their nodes.
    async fn ready_nodes(
        &self,
        rec: &dyn Recorder,
        flex: Duration,
        progress: Progress<'_>,
    ) -> Result<Vec<NodeTarget>, String> {
        let mut instances: Vec<ResourceRecord> = rec
            .list()?
            .into_iter()
            .filter(|r| r.kind == "instance" && r.state == "created")
            .collect();
        instances.sort_by_key(|r| r.node.unwrap_or(usize::MAX));
        let start = tokio::time::Instant::now();
        let public = self.settings.public_ips.unwrap_or(true);
        let mut nodes = vec![];
        let mut told = Duration::ZERO;
        let total = instances.len();
        progress(crate::progress::tally(0, total, "nodes up"));
        for r in &mut instances {
            let scope = plan::record_scope(r);
            // A flex-start VM may sit PROVISIONING while Google finds its capacity: it
            // waits as long as the fleet's flex_wait allows.
            let queued = r.provisioning_model.as_deref() == Some("FLEX_START");
            let limit = if queued {
                flex.max(self.ready_wait)
            } else {
                self.ready_wait
            };
            let inst = loop {
                if self.cancel.is_cancelled() {
                    return Err(format!(
                        "cancelled by the operator while waiting for {}; `flightdeck fleet delete` removes what was made",
                        r.name
                    ));
                }
                let got: Option<Instance> = self
                    .compute
                    .get(&scope, "instances", &r.name)
                    .await
                    .map_err(|e| format!("instance {}: {e}", r.name))?;
                match got {
                    None => {
                        return Err(format!(
                            "instance {} vanished after it was created (preempted?)",
                            r.name
                        ))
                    }
                    Some(i) if i.status == "RUNNING" => break i,
                    Some(i)
                        if matches!(
                            i.status.as_str(),
                            "TERMINATED" | "STOPPED" | "STOPPING" | "SUSPENDED"
                        ) =>
                    {
                        return Err(format!(
                            "instance {} is {} before it was ready (preempted?)",
                            r.name, i.status
                        ))
                    }
                    Some(i) if start.elapsed() >= limit => {
                        return Err(format!(
                            "instance {} is {} after {}",
                            r.name,
                            i.status,
                            elapsed(limit)
                        ))
                    }
                    Some(i) => {
                        let waited = start.elapsed();
                        if queued && i.status == "PROVISIONING" && waited >= queued_word_due(told) {
                            told = waited;
                            progress(format!(
                                "  {}: queued for capacity, {} of up to {} (flex_wait); Ctrl-C cancels",
                                r.name,
                                elapsed(waited),
                                elapsed(flex)
                            ));
                        }
                        tokio::time::sleep(self.compute.wait.poll).await
                    }
                }
            };
            r.external_ip = inst.external_ip().map(str::to_string);
            r.internal_ip = inst.internal_ip().map(str::to_string);
            rec.put(r)?;
            let host = if public {
                r.external_ip.clone()
            } else {
                r.internal_ip.clone()
            };
            let host = host.ok_or_else(|| {
                format!(
                    "instance {} has no {} address",
                    r.name,
                    if public { "external" } else { "internal" }
                )
            })?;
            let ssh = crate::fleet::SshAddress {
                host: host.clone(),
                port: (self.ssh_port != 22).then_some(self.ssh_port),
                user: Some(self.settings.ssh_user()),
                identity_file: self.identity_file.clone(),
                proxy_jump: self
                    .settings
                    .proxy_jump
                    .as_ref()
                    .map(crate::fleet::JumpTarget::from),
            };
            let direct = ssh.proxy_jump.is_none();
            let node = NodeTarget {
                index: r.node.unwrap_or(nodes.len()),
                name: r.name.clone(),
                internal_ip: r.internal_ip.clone(),
                address: crate::fleet::Address::Ssh(ssh),
            };
            if direct {
                let left = self.ready_wait.saturating_sub(start.elapsed());
                let banner = wait_ssh(&host, self.ssh_port, left.max(Duration::from_secs(5)))
                    .await
                    .map_err(|e| format!("instance {} ({host}): SSH not answering: {e}", r.name))?;
                progress(format!("  {}: RUNNING at {host}, SSH answers ({banner})", r.name));
            }
            nodes.push(node);
            progress(crate::progress::tally(nodes.len(), total, "nodes up"));
        }
        if self.settings.proxy_jump.is_some() {
            self.wait_login(&nodes, start, progress).await?;
        }
        Ok(nodes)
    }

    /// Log in to every node (through the bastion) until each runs `uname -n`.
    async fn wait_login(
        &self,
        nodes: &[NodeTarget],
        start: tokio::time::Instant,
        progress: Progress<'_>,
    ) -> Result<(), String> {
        let reach = self
            .ssh
            .clone()
            .ok_or("gcp.proxy_jump is set but no SSH client was given to reach the nodes through it")?;
        let mut waiting: Vec<NodeTarget> = nodes.to_vec();
        loop {
            let (tx, mut rx) = crate::exec::channel(64);
            let run = tokio::spawn(crate::exec::run(
                reach.clone(),
                waiting.clone(),
                "uname -n".into(),
                32,
                tx,
            ));
            let mut names = vec![String::new(); waiting.len()];
            let mut ready = vec![false; waiting.len()];
            let mut last = vec![String::new(); waiting.len()];
            while let Some(e) = rx.recv().await {
                match e {
                    crate::exec::Event::Line { node, text, .. } => names[node] = text,
                    crate::exec::Event::Done { node, result } => {
                        ready[node] = result.code == 0 && result.error.is_none();
                        last[node] = result.error.unwrap_or_else(|| format!("exit {}", result.code));
                    }
                }
            }
            let _ = run.await;
            let mut still = vec![];
            let mut why = vec![];
            for (i, n) in waiting.iter().enumerate() {
                if ready[i] {
                    progress(format!(
                        "  {}: RUNNING at {}, SSH login works ({})",
                        n.name,
                        n.host(),
                        names[i]
                    ));
                } else {
                    still.push(n.clone());
                    why.push(format!("{}: {}", n.name, last[i]));
                }
            }
            if still.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= self.ready_wait {
                return Err(format!(
                    "SSH login failed after {:?}: {}",
                    self.ready_wait,
                    why.join("; ")
                ));
            }
            waiting = still;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Connect to `host:port` until the server sends an SSH banner (`SSH-2.0-…`); the banner.
pub async fn wait_ssh(host: &str, port: u16, within: Duration) -> Result<String, String> {
    use tokio::io::AsyncReadExt;
    let start = tokio::time::Instant::now();
    loop {
        let attempt = async {
            let mut s = tokio::time::timeout(
                Duration::from_secs(5),
                tokio::net::TcpStream::connect((host, port)),
            )
            .await
            .map_err(|_| "connect timed out".to_string())?
            .map_err(|e| e.to_string())?;
            let mut buf = vec![0u8; 256];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
                .await
                .map_err(|_| "no banner".to_string())?
                .map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            match text.lines().next() {
                Some(l) if l.starts_with("SSH-") => Ok(l.trim().to_string()),
                _ => Err(format!(
                    "not an SSH server: {:?}",
                    text.chars().take(40).collect::<String>()
                )),
            }
        };
        let last = match attempt.await {
            Ok(b) => return Ok(b),
            Err(e) => e,
        };
        if start.elapsed() >= within {
            return Err(format!("{last} (waited {:?})", start.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
