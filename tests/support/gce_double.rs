//! A **double** of the Compute Engine v1 API (a test double, not Google): an HTTP/1.1
//! server on 127.0.0.1 speaking the subset the GCP backend uses, with the request and
//! reply shapes of ../shared/reference/gcp/compute-api.md, so the real client (reqwest,
//! google-cloud-auth, retries, operations polling) runs against it unchanged.
//!
//! * `POST /token`: the OAuth endpoint of `authorized_user` credentials (as in
//!   `gcp_double`); every API call needs a token it issued.
//! * `POST|GET|DELETE /compute/v1/projects/{p}/{scope}/{collection}[/{name}]` for
//!   instances (zonal), subnetworks and resourcePolicies (regional), networks and
//!   firewalls (global): insert returns an `Operation`; `requestId` repeats return the
//!   first call's operation (idempotent); a name taken answers 409 `alreadyExists`;
//!   unknown fields in a body (at any depth the double knows) and bad enum values answer
//!   400 like Google (`Invalid JSON payload received. Unknown name "x"`).
//! * Operations `GET …/operations/{name}`: `PENDING` → `RUNNING` on the first poll →
//!   `DONE` once polled again after the operation's delay (or, unpolled, after delay +
//!   500 ms), with `error.errors[]` inside when the insert fails (stockout, quota).
//!   An instance exists as `PROVISIONING` from its insert; it runs, or vanishes on error,
//!   when its operation is done.
//! * Lists with `filter` (`(labels.k = "v") AND (…)`, `network = "URL"`, `operationType =
//!   "…"`), `maxResults` / `pageToken` pagination, aggregated lists of instances,
//!   subnetworks and resource policies, zone operation lists (preemption system events).
//! * Faults: stockout in chosen zones, quota exceeded in a region, an operation error of
//!   any code in a zone, HTTP error bursts (429 / 503 / 403 rate limits) on paths, slow
//!   operations, flex-start requests queued for capacity, Spot instances preempted N ms
//!   after they run, permission denied on instance inserts, a small page size.
//! * Google's rules (`check_constraints`): STANDARD refused for machine types sold
//!   on-demand only through reservations, MRDMA NICs only on a RoCE-profile network of
//!   the instance's zone, hyperdisk boot disks for A3 Ultra and A4 only.
//!
//! Every request is recorded for assertions.

use super::gcp_double::google_error;
use super::http_double::{json_reply, HttpDouble, Recorded, Reply};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

pub const PROJECT: &str = "double-project";
pub const CLIENT_ID: &str = "gce-double-client.apps.googleusercontent.com";
pub const CLIENT_SECRET: &str = "gce-double-secret-do-not-print";
pub const REFRESH_TOKEN: &str = "1//gce-double-refresh-do-not-print";
/// Regions the `default` VPC has a subnetwork in.
pub const DEFAULT_REGIONS: [&str; 6] = [
    "us-central1",
    "us-east1",
    "us-east4",
    "us-west2",
    "europe-west4",
    "asia-southeast1",
];
const SELF: &str = "https://www.googleapis.com/compute/v1";

#[derive(Debug, Clone)]
struct Op {
    value: Value,
    created: Instant,
    delay: Duration,
    polls: u32,
    effect: Effect,
    done: bool,
}

#[derive(Debug, Clone)]
enum Effect {
    /// Make the resource at `key` real (instances: RUNNING), or fail with `error`.
    Create {
        key: Key,
        error: Option<(String, String)>,
    },
    Delete {
        key: Key,
    },
}

/// (collection, scope path, name): `("instances", "zones/us-east4-b", "demo-0")`.
type Key = (String, String, String);

#[derive(Default)]
struct State {
    tokens: HashSet<String>,
    issued: usize,
    resources: BTreeMap<Key, Value>,
    ops: BTreeMap<(String, String), Op>,
    request_ids: HashMap<String, (String, String)>,
    next_id: u64,
    /// Instance -> when it started RUNNING (for preemption).
    running_since: HashMap<Key, Instant>,
    nat_pool: Vec<String>,
    nat_next: usize,
    internal_pool: Vec<String>,
    // Faults.
    stockout: HashSet<String>,
    quota: HashMap<String, String>,
    bursts: Vec<(String, u16, usize)>,
    op_delay: Duration,
    preempt_after: Option<Duration>,
    deny_inserts: bool,
    page_size: Option<usize>,
    capacity: HashMap<String, usize>,
    spot_outage: bool,
    /// Zone -> (code, message): instance inserts there fail with this operation error.
    op_errors: HashMap<String, (String, String)>,
    /// FLEX_START inserts stay queued (operation RUNNING, instance PROVISIONING) this long.
    flex_queue: Option<Duration>,
}

/// The double; stops when dropped.
pub struct GceDouble {
    server: HttpDouble,
    state: Arc<Mutex<State>>,
}

impl GceDouble {
    /// Listen on 127.0.0.1 (a free port). Needs a running Tokio runtime.
    pub async fn start() -> GceDouble {
        let state = Arc::new(Mutex::new(State {
            op_delay: Duration::from_millis(20),
            ..State::default()
        }));
        let s = state.clone();
        let server = HttpDouble::start("the GCE double", move |req| respond(req, &s)).await;
        let d = GceDouble { server, state };
        // A fresh project's `default` VPC: auto mode, a `default` subnetwork per region.
        d.plant(
            "networks",
            "global",
            "default",
            json!({"autoCreateSubnetworks": true, "mtu": 1460}),
        );
        for (i, r) in DEFAULT_REGIONS.iter().enumerate() {
            d.plant(
                "subnetworks",
                &format!("regions/{r}"),
                "default",
                json!({"network": format!("{SELF}/projects/{PROJECT}/global/networks/default"),
                       "ipCidrRange": format!("10.{}.0.0/20", 128 + i), "region": format!("{SELF}/projects/{PROJECT}/regions/{r}")}),
            );
        }
        d
    }

    pub fn origin(&self) -> String {
        self.server.origin()
    }

    /// `authorized_user` credentials whose token endpoint is this double.
    pub fn credentials(&self) -> Value {
        json!({
            "type": "authorized_user",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "token_uri": format!("{}/token", self.origin()),
        })
    }

    /// External addresses handed to new instances, in order (then cycled).
    pub fn nat_pool(&self, ips: &[&str]) {
        self.state.lock().unwrap().nat_pool = ips.iter().map(|s| s.to_string()).collect();
    }

    /// nic0's internal addresses for new instances, in order (binds them to testbed nodes).
    pub fn internal_pool(&self, ips: &[&str]) {
        self.state.lock().unwrap().internal_pool = ips.iter().map(|s| s.to_string()).collect();
    }

    /// No Spot capacity anywhere: every Spot instance insert ends in a stockout.
    pub fn spot_outage(&self) {
        self.state.lock().unwrap().spot_outage = true;
    }

    /// Inserts of instances in `zone` fail with ZONE_RESOURCE_POOL_EXHAUSTED.
    pub fn stockout(&self, zone: &str) {
        self.state.lock().unwrap().stockout.insert(zone.into());
    }

    /// Inserts of instances in `region` fail with QUOTA_EXCEEDED on `metric`.
    pub fn quota_exceeded(&self, region: &str, metric: &str) {
        self.state
            .lock()
            .unwrap()
            .quota
            .insert(region.into(), metric.into());
    }

    /// The next `times` requests whose path contains `path` get `status` (429 or 503).
    pub fn burst(&self, path: &str, status: u16, times: usize) {
        self.state
            .lock()
            .unwrap()
            .bursts
            .push((path.into(), status, times));
    }

    /// Instance inserts in `zone` fail with an operation error of this code and message.
    pub fn operation_error(&self, zone: &str, code: &str, message: &str) {
        self.state
            .lock()
            .unwrap()
            .op_errors
            .insert(zone.into(), (code.into(), message.into()));
    }

    /// FLEX_START inserts wait in Google's queue this long before their VMs are made.
    pub fn flex_queue(&self, d: Duration) {
        self.state.lock().unwrap().flex_queue = Some(d);
    }

    /// Operations take at least this long.
    pub fn slow_operations(&self, d: Duration) {
        self.state.lock().unwrap().op_delay = d;
    }

    /// Spot instances are preempted (stopped: TERMINATED) this long after they run.
    pub fn preempt_spot_after(&self, d: Duration) {
        self.state.lock().unwrap().preempt_after = Some(d);
    }

    /// Instance inserts answer 403 (the caller lacks compute.instances.create).
    pub fn deny_instance_inserts(&self) {
        self.state.lock().unwrap().deny_inserts = true;
    }

    /// Lists return at most `n` items per page.
    pub fn page_size(&self, n: usize) {
        self.state.lock().unwrap().page_size = Some(n);
    }

    /// The next `n` instance inserts in `zone` find capacity; later ones a stockout.
    pub fn capacity(&self, zone: &str, n: usize) {
        self.state.lock().unwrap().capacity.insert(zone.into(), n);
    }

    /// A resource made outside flightdeck (a named VPC, its subnetworks), as stored.
    pub fn plant(&self, collection: &str, scope: &str, name: &str, mut value: Value) {
        value["name"] = json!(name);
        value["selfLink"] = json!(format!("{SELF}/projects/{PROJECT}/{scope}/{collection}/{name}"));
        self.state
            .lock()
            .unwrap()
            .resources
            .insert((collection.into(), scope.into(), name.into()), value);
    }

    /// An instance created behind flightdeck's back (an orphan), running.
    pub fn plant_instance(&self, zone: &str, name: &str, labels: Value) {
        let key: Key = ("instances".into(), format!("zones/{zone}"), name.into());
        let v = json!({"kind": "compute#instance", "name": name, "status": "RUNNING",
                       "zone": format!("{SELF}/projects/{PROJECT}/zones/{zone}"),
                       "labels": labels, "networkInterfaces": []});
        self.state.lock().unwrap().resources.insert(key, v);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    /// Requests with this method whose path ends with `suffix`.
    pub fn calls(&self, method: &str, suffix: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.ends_with(suffix))
            .collect()
    }

    /// Bodies of accepted (200) instance inserts, as JSON.
    pub fn instance_inserts(&self) -> Vec<Value> {
        self.calls("POST", "/instances")
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| serde_json::from_str(&r.body).unwrap())
            .collect()
    }

    /// Names of the resources of a collection that exist now, with their scope (the
    /// project's `default` VPC left out).
    pub fn existing(&self, collection: &str) -> Vec<(String, String)> {
        let mut st = self.state.lock().unwrap();
        tick(&mut st);
        st.resources
            .keys()
            .filter(|(c, _, n)| c == collection && n != "default")
            .map(|(_, s, n)| (s.clone(), n.clone()))
            .collect()
    }

    /// The stored resource.
    pub fn resource(&self, collection: &str, scope: &str, name: &str) -> Option<Value> {
        let mut st = self.state.lock().unwrap();
        tick(&mut st);
        st.resources
            .get(&(collection.to_string(), scope.to_string(), name.to_string()))
            .cloned()
    }
}

fn now_rfc3339() -> String {
    "2026-11-22T05:00:00.000-00:00".into()
}

fn respond(req: &Recorded, state: &Arc<Mutex<State>>) -> Reply {
    let mut st = state.lock().unwrap();
    if req.method == "POST" && req.path == "/token" {
        let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
        if body["refresh_token"] != REFRESH_TOKEN || body["client_secret"] != CLIENT_SECRET {
            return json_reply(
                400,
                json!({"error": "invalid_grant", "error_description": "Bad Request"}),
            );
        }
        st.issued += 1;
        let t = format!("ya29.gce-double-{}", st.issued);
        st.tokens.insert(t.clone());
        return json_reply(
            200,
            json!({"access_token": t, "expires_in": 3599, "token_type": "Bearer"}),
        );
    }
    if let Some(i) = st
        .bursts
        .iter()
        .position(|(p, _, n)| req.path.contains(p.as_str()) && *n > 0)
    {
        st.bursts[i].2 -= 1;
        let status = st.bursts[i].1;
        let (reason, msg) = if status == 429 {
            ("rateLimitExceeded", "Rate Limit Exceeded")
        } else if status == 403 {
            ("userRateLimitExceeded", "Rate Limit Exceeded")
        } else {
            ("backendError", "The service is currently unavailable.")
        };
        return Reply {
            retry_after: None,
            ..json_reply(status, google_error(status, reason, msg))
        };
    }
    let token = req
        .header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or("");
    if !st.tokens.contains(token) {
        return json_reply(
            401,
            google_error(
                401,
                "authError",
                "Request had invalid authentication credentials.",
            ),
        );
    }
    let prefix = format!("/compute/v1/projects/{PROJECT}/");
    let Some(rest) = req.path.strip_prefix(&prefix) else {
        return json_reply(
            403,
            google_error(
                403,
                "forbidden",
                "Permission denied on resource project (or it may not exist).",
            ),
        );
    };
    tick(&mut st);
    let parts: Vec<&str> = rest.split('/').collect();
    // aggregated/{collection}
    if parts.len() == 2 && parts[0] == "aggregated" && req.method == "GET" {
        return aggregated(&st, parts[1], req);
    }
    let (scope, tail) = match parts.as_slice() {
        ["zones", z, tail @ ..] => (format!("zones/{z}"), tail.to_vec()),
        ["regions", r, tail @ ..] => (format!("regions/{r}"), tail.to_vec()),
        ["global", tail @ ..] => ("global".to_string(), tail.to_vec()),
        _ => return not_found(&req.path),
    };
    match (req.method.as_str(), tail.as_slice()) {
        ("GET", ["operations", name]) => get_op(&mut st, &scope, name),
        ("GET", ["operations"]) => {
            let items: Vec<Value> = st
                .ops
                .iter()
                .filter(|((s, _), _)| *s == scope)
                .map(|(_, o)| o.value.clone())
                .collect();
            list_reply(&st, items, req)
        }
        ("GET", [collection]) if known(&scope, collection) => {
            let items: Vec<Value> = st
                .resources
                .iter()
                .filter(|((c, s, _), _)| c == collection && *s == scope)
                .map(|(_, v)| v.clone())
                .collect();
            list_reply(&st, items, req)
        }
        ("GET", [collection, name]) if known(&scope, collection) => {
            match st
                .resources
                .get(&(collection.to_string(), scope.clone(), name.to_string()))
            {
                Some(v) => json_reply(200, v.clone()),
                None => not_found(&req.path),
            }
        }
        ("POST", [collection]) if known(&scope, collection) => insert(&mut st, &scope, collection, req),
        ("DELETE", [collection, name]) if known(&scope, collection) => {
            delete(&mut st, &scope, collection, name, req)
        }
        _ => not_found(&req.path),
    }
}

fn known(scope: &str, collection: &str) -> bool {
    match collection {
        // Reservations are only read (flightdeck looks up their placement policy); the
        // double holds the ones a test plants.
        "instances" | "reservations" => scope.starts_with("zones/"),
        "subnetworks" | "resourcePolicies" => scope.starts_with("regions/"),
        "networks" | "firewalls" => scope == "global",
        _ => false,
    }
}

fn not_found(path: &str) -> Reply {
    let what = path.trim_start_matches("/compute/v1/");
    json_reply(
        404,
        google_error(404, "notFound", &format!("The resource '{what}' was not found")),
    )
}

fn bad(message: &str) -> Reply {
    json_reply(400, google_error(400, "invalid", message))
}

/// Fields each body may have (a subset of the real messages' fields: those flightdeck
/// sends and a few more). Anything else is refused as Google refuses unknown names.
fn allowed(path: &str) -> Option<&'static [&'static str]> {
    Some(match path {
        "instance" => &[
            "name",
            "description",
            "machineType",
            "disks",
            "networkInterfaces",
            "scheduling",
            "metadata",
            "labels",
            "tags",
            "serviceAccounts",
            "guestAccelerators",
            "resourcePolicies",
            "reservationAffinity",
            "minCpuPlatform",
            "canIpForward",
        ],
        "instance.disks" => &[
            "boot",
            "autoDelete",
            "type",
            "initializeParams",
            "interface",
            "mode",
            "deviceName",
        ],
        "instance.disks.initializeParams" => &["diskSizeGb", "diskType", "sourceImage", "labels"],
        "instance.networkInterfaces" => &[
            "network",
            "subnetwork",
            "nicType",
            "accessConfigs",
            "stackType",
            "queueCount",
            "networkIP",
        ],
        "instance.networkInterfaces.accessConfigs" => &["name", "type", "networkTier", "natIP"],
        "instance.scheduling" => &[
            "onHostMaintenance",
            "automaticRestart",
            "provisioningModel",
            "instanceTerminationAction",
            "maxRunDuration",
            "terminationTime",
            "preemptible",
        ],
        "instance.scheduling.maxRunDuration" => &["seconds", "nanos"],
        "instance.metadata" => &["items", "fingerprint"],
        "instance.metadata.items" => &["key", "value"],
        "instance.tags" => &["items", "fingerprint"],
        "instance.serviceAccounts" => &["email", "scopes"],
        "instance.guestAccelerators" => &["acceleratorType", "acceleratorCount"],
        "instance.reservationAffinity" => &["consumeReservationType", "key", "values"],
        "network" => &[
            "name",
            "description",
            "autoCreateSubnetworks",
            "mtu",
            "routingConfig",
            "networkProfile",
        ],
        "network.routingConfig" => &["routingMode"],
        "subnetwork" => &[
            "name",
            "description",
            "network",
            "ipCidrRange",
            "region",
            "stackType",
            "privateIpGoogleAccess",
        ],
        "firewall" => &[
            "name",
            "description",
            "network",
            "direction",
            "priority",
            "allowed",
            "denied",
            "sourceRanges",
            "targetTags",
            "sourceTags",
        ],
        "firewall.allowed" => &["IPProtocol", "ports"],
        "resourcePolicy" => &["name", "description", "groupPlacementPolicy"],
        "resourcePolicy.groupPlacementPolicy" => &["collocation", "vmCount", "availabilityDomainCount"],
        _ => return None,
    })
}

/// Fields whose values are free maps (labels).
fn free_map(path: &str) -> bool {
    path.ends_with(".labels") || path == "instance.labels"
}

fn check_fields(path: &str, v: &Value) -> Result<(), String> {
    match v {
        Value::Object(m) => {
            if free_map(path) {
                for (k, val) in m {
                    let ok_key = k.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                        && k.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
                    let ok_val = val.as_str().is_some_and(|s| {
                        s.len() <= 63
                            && s.chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
                    });
                    if !ok_key || !ok_val {
                        return Err(format!("Invalid value for field 'resource.labels': '{k}'. Label keys and values must conform to the pattern."));
                    }
                }
                return Ok(());
            }
            let Some(fields) = allowed(path) else {
                return Ok(());
            };
            for (k, val) in m {
                if !fields.contains(&k.as_str()) {
                    let at = path
                        .split_once('.')
                        .map_or(String::new(), |(_, r)| format!(".{r}"));
                    return Err(format!(
                        "Invalid JSON payload received. Unknown name \"{k}\" at 'resource{at}': Cannot find field."
                    ));
                }
                check_fields(&format!("{path}.{k}"), val)?;
            }
            Ok(())
        }
        Value::Array(a) => a.iter().try_for_each(|x| check_fields(path, x)),
        _ => Ok(()),
    }
}

fn check_enums(kind: &str, body: &Value) -> Result<(), String> {
    let one_of = |v: &Value, field: &str, ok: &[&str]| -> Result<(), String> {
        match v.as_str() {
            None => Ok(()),
            Some(s) if ok.contains(&s) => Ok(()),
            Some(s) => Err(format!("Invalid value for field 'resource.{field}': '{s}'.")),
        }
    };
    if kind == "instance" {
        for n in body["networkInterfaces"].as_array().into_iter().flatten() {
            one_of(
                &n["nicType"],
                "networkInterfaces.nicType",
                &["GVNIC", "VIRTIO_NET", "MRDMA", "IRDMA", "IDPF"],
            )?;
        }
        let s = &body["scheduling"];
        one_of(
            &s["provisioningModel"],
            "scheduling.provisioningModel",
            &["STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND"],
        )?;
        one_of(
            &s["instanceTerminationAction"],
            "scheduling.instanceTerminationAction",
            &["STOP", "DELETE"],
        )?;
        one_of(
            &s["onHostMaintenance"],
            "scheduling.onHostMaintenance",
            &["MIGRATE", "TERMINATE"],
        )?;
        if s["provisioningModel"] == "SPOT" && s["instanceTerminationAction"].is_null() {
            return Err("Invalid value for field 'resource.scheduling.instanceTerminationAction': ''. Spot VMs need a termination action.".into());
        }
        if s["provisioningModel"] == "FLEX_START" && s["maxRunDuration"]["seconds"].as_str().is_none() {
            return Err("Invalid value for field 'resource.scheduling.maxRunDuration': Flex-start VMs need maxRunDuration.".into());
        }
        if !body["machineType"]
            .as_str()
            .is_some_and(|m| m.contains("/machineTypes/"))
        {
            return Err("Invalid value for field 'resource.machineType'.".into());
        }
    }
    Ok(())
}

/// The machine types Google sells no plain on-demand (STANDARD without a reservation) of.
const NO_PLAIN_ON_DEMAND: [&str; 6] = [
    "a3-ultragpu-8g",
    "a3-ultragpu-8g-nolssd",
    "a4-highgpu-8g",
    "a3-highgpu-1g",
    "a3-highgpu-2g",
    "a3-highgpu-4g",
];

/// Google's rules an instance body must meet beyond its fields (as the double knows
/// them): STANDARD only where Google sells it (or with a specific reservation); MRDMA
/// NICs only on a network with the RoCE profile of the instance's zone; the boot disk
/// type the machine family takes (hyperdisk for A3 Ultra and A4, not for the others).
fn check_constraints(st: &State, kind: &str, scope: &str, body: &Value) -> Result<(), String> {
    if kind != "instance" {
        return Ok(());
    }
    let zone = scope.trim_start_matches("zones/");
    let mt = body["machineType"]
        .as_str()
        .unwrap_or("")
        .rsplit('/')
        .next()
        .unwrap_or("");
    let reserved = body["reservationAffinity"]["consumeReservationType"] == "SPECIFIC_RESERVATION";
    if body["scheduling"]["provisioningModel"] == "STANDARD" && NO_PLAIN_ON_DEMAND.contains(&mt) && !reserved
    {
        return Err(format!(
            "Invalid value for field 'resource.scheduling.provisioningModel': 'STANDARD'. {mt} is available on demand only through a reservation, Spot or flex-start."
        ));
    }
    for nic in body["networkInterfaces"].as_array().into_iter().flatten() {
        if nic["nicType"] != "MRDMA" {
            continue;
        }
        let net = nic["network"]
            .as_str()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("");
        let profile = st
            .resources
            .get(&("networks".to_string(), "global".to_string(), net.to_string()))
            .and_then(|n| n["networkProfile"].as_str().map(str::to_string));
        match profile {
            Some(p) if p.ends_with(&format!("/networkProfiles/{zone}-vpc-roce")) => {}
            Some(p) => {
                let at = p.rsplit('/').next().unwrap_or("").trim_end_matches("-vpc-roce").to_string();
                return Err(format!("Network profile only allows resource creation in location {at}"));
            }
            None => {
                return Err(format!(
                    "Invalid value for field 'resource.networkInterfaces': MRDMA NICs need a network with an RDMA network profile; {net} has none."
                ))
            }
        }
    }
    let disk = body["disks"][0]["initializeParams"]["diskType"]
        .as_str()
        .unwrap_or("")
        .rsplit('/')
        .next()
        .unwrap_or("");
    let hyperdisk_family = mt.starts_with("a3-ultragpu") || mt.starts_with("a4-");
    if !disk.is_empty() && hyperdisk_family != disk.starts_with("hyperdisk") {
        return Err(format!(
            "[{disk}] disk type cannot be used by [{mt}] machine type."
        ));
    }
    Ok(())
}

fn insert(st: &mut State, scope: &str, collection: &str, req: &Recorded) -> Reply {
    let Some(rid) = req.param("requestId").map(str::to_string) else {
        return bad("flightdeck's double expects a requestId on every insert");
    };
    if let Some(op_key) = st.request_ids.get(&rid).cloned() {
        // The same request again: the first call's operation, nothing new.
        return json_reply(200, st.ops[&op_key].value.clone());
    }
    let kind = match collection {
        "instances" => "instance",
        "networks" => "network",
        "subnetworks" => "subnetwork",
        "firewalls" => "firewall",
        _ => "resourcePolicy",
    };
    let body: Value = match serde_json::from_str(&req.body) {
        Ok(v) => v,
        Err(e) => return bad(&format!("Invalid JSON payload received. {e}")),
    };
    if let Err(m) = check_fields(kind, &body)
        .and_then(|_| check_enums(kind, &body))
        .and_then(|_| check_constraints(st, kind, scope, &body))
    {
        return bad(&m);
    }
    let Some(name) = body["name"].as_str().map(str::to_string) else {
        return bad("Invalid value for field 'resource.name': ''. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'");
    };
    if collection == "instances" && st.deny_inserts {
        return json_reply(403, google_error(403, "forbidden", &format!(
            "Required 'compute.instances.create' permission for 'projects/{PROJECT}/{scope}/instances/{name}'")));
    }
    let key: Key = (collection.into(), scope.into(), name.clone());
    if st.resources.contains_key(&key) {
        return json_reply(
            409,
            google_error(
                409,
                "alreadyExists",
                &format!("The resource 'projects/{PROJECT}/{scope}/{collection}/{name}' already exists"),
            ),
        );
    }
    let mut error = None;
    let mut value = body.clone();
    value["kind"] = json!(format!("compute#{kind}"));
    value["selfLink"] = json!(format!("{SELF}/projects/{PROJECT}/{scope}/{collection}/{name}"));
    value["creationTimestamp"] = json!(now_rfc3339());
    if collection == "instances" {
        let zone = scope.trim_start_matches("zones/").to_string();
        let region = zone.rsplit_once('-').map_or(zone.clone(), |(r, _)| r.to_string());
        let out_of_capacity = match st.capacity.get_mut(&zone) {
            Some(0) => true,
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        };
        let spot = body["scheduling"]["provisioningModel"] == "SPOT";
        if st.stockout.contains(&zone) || out_of_capacity || (spot && st.spot_outage) {
            let mt = body["machineType"]
                .as_str()
                .unwrap_or("")
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string();
            error = Some((
                "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".to_string(),
                format!("The zone 'projects/{PROJECT}/zones/{zone}' does not have enough resources available to fulfill the request. '(resource type:compute)'. A {mt} VM instance is currently unavailable in the {zone} zone."),
            ));
        } else if let Some((code, message)) = st.op_errors.get(&zone) {
            error = Some((code.clone(), message.clone()));
        } else if let Some(metric) = st.quota.get(&region) {
            error = Some((
                "QUOTA_EXCEEDED".to_string(),
                format!("Quota '{metric}' exceeded.  Limit: 0.0 in region {region}."),
            ));
        }
        value["status"] = json!("PROVISIONING");
        value["zone"] = json!(format!("{SELF}/projects/{PROJECT}/zones/{zone}"));
        let n = st.resources.keys().filter(|(c, _, _)| c == "instances").count() + st.next_id as usize;
        if let Some(nics) = value["networkInterfaces"].as_array_mut() {
            for (i, nic) in nics.iter_mut().enumerate() {
                nic["networkIP"] = json!(format!("10.{}.{}.{}", 10 + i, n / 250, 2 + n % 250));
                nic["name"] = json!(format!("nic{i}"));
            }
        }
    }
    if collection == "subnetworks" || collection == "resourcePolicies" {
        value["region"] = json!(format!("{SELF}/projects/{PROJECT}/{scope}"));
    }
    st.resources.insert(key.clone(), value);
    let op = new_op(
        st,
        scope,
        "insert",
        &key,
        Effect::Create {
            key: key.clone(),
            error,
        },
    );
    if collection == "instances" && body["scheduling"]["provisioningModel"] == "FLEX_START" {
        if let Some(q) = st.flex_queue {
            st.ops.get_mut(&op).unwrap().delay = q;
        }
    }
    st.request_ids.insert(rid, op.clone());
    json_reply(200, st.ops[&op].value.clone())
}

fn delete(st: &mut State, scope: &str, collection: &str, name: &str, req: &Recorded) -> Reply {
    if let Some(op_key) = req
        .param("requestId")
        .and_then(|r| st.request_ids.get(r))
        .cloned()
    {
        return json_reply(200, st.ops[&op_key].value.clone());
    }
    let key: Key = (collection.into(), scope.into(), name.into());
    if !st.resources.contains_key(&key) {
        return not_found(&req.path);
    }
    if collection == "resourcePolicies" {
        let url_tail = format!("{scope}/resourcePolicies/{name}");
        let used = st
            .resources
            .iter()
            .filter(|((c, _, _), _)| c == "instances")
            .any(|(_, v)| {
                v["resourcePolicies"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p.as_str().is_some_and(|p| p.ends_with(&url_tail)))
            });
        if used {
            return bad(&format!("The resource_policy resource 'projects/{PROJECT}/{url_tail}' is already being used by 'instances'"));
        }
    }
    let op = new_op(st, scope, "delete", &key, Effect::Delete { key: key.clone() });
    if let Some(r) = req.param("requestId") {
        st.request_ids.insert(r.to_string(), op.clone());
    }
    json_reply(200, st.ops[&op].value.clone())
}

fn new_op(st: &mut State, scope: &str, op_type: &str, key: &Key, effect: Effect) -> (String, String) {
    st.next_id += 1;
    let name = format!(
        "operation-{}-{:08x}",
        st.next_id,
        st.next_id * 2_654_435_761 % 0xffff_ffff
    );
    let mut v = json!({
        "kind": "compute#operation",
        "id": st.next_id.to_string(),
        "name": name,
        "operationType": op_type,
        "targetLink": format!("{SELF}/projects/{PROJECT}/{}/{}/{}", key.1, key.0, key.2),
        "status": "PENDING",
        "user": "tester@double-project.iam.gserviceaccount.com",
        "progress": 0,
        "insertTime": now_rfc3339(),
        "selfLink": format!("{SELF}/projects/{PROJECT}/{scope}/operations/{name}"),
    });
    if let Some(z) = scope.strip_prefix("zones/") {
        v["zone"] = json!(format!("{SELF}/projects/{PROJECT}/zones/{z}"));
    } else if let Some(r) = scope.strip_prefix("regions/") {
        v["region"] = json!(format!("{SELF}/projects/{PROJECT}/regions/{r}"));
    }
    let k = (scope.to_string(), name);
    st.ops.insert(
        k.clone(),
        Op {
            value: v,
            created: Instant::now(),
            delay: st.op_delay,
            polls: 0,
            effect,
            done: false,
        },
    );
    k
}

fn get_op(st: &mut State, scope: &str, name: &str) -> Reply {
    let key = (scope.to_string(), name.to_string());
    let Some(op) = st.ops.get_mut(&key) else {
        return not_found(&format!("projects/{PROJECT}/{scope}/operations/{name}"));
    };
    op.polls += 1;
    if !op.done {
        if op.polls >= 2 && op.created.elapsed() >= op.delay {
            finish(st, &key);
        } else {
            let op = st.ops.get_mut(&key).unwrap();
            op.value["status"] = json!("RUNNING");
            op.value["progress"] = json!(50);
        }
    }
    json_reply(200, st.ops[&key].value.clone())
}

/// Finish an operation: its effect happens and it is DONE (with errors, if it failed).
fn finish(st: &mut State, key: &(String, String)) {
    let op = st.ops.get_mut(key).unwrap();
    op.done = true;
    op.value["status"] = json!("DONE");
    op.value["progress"] = json!(100);
    op.value["endTime"] = json!(now_rfc3339());
    let effect = op.effect.clone();
    match effect {
        Effect::Create {
            key: rk,
            error: Some((code, message)),
        } => {
            let op = st.ops.get_mut(key).unwrap();
            let zone = rk.1.trim_start_matches("zones/").to_string();
            op.value["httpErrorStatusCode"] = json!(if code.starts_with("ZONE") { 503 } else { 403 });
            op.value["httpErrorMessage"] = json!(if code.starts_with("ZONE") {
                "SERVICE UNAVAILABLE"
            } else {
                "FORBIDDEN"
            });
            let mut details = vec![
                json!({"help": {"links": [{"description": "Troubleshooting documentation",
                                                            "url": "https://cloud.google.com/compute/docs/resource-error"}]}}),
            ];
            if code.starts_with("ZONE") {
                details.push(json!({"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com",
                                                  "metadatas": {"zone": zone, "zonesAvailable": ""}}}));
            }
            op.value["error"] =
                json!({"errors": [{"code": code, "message": message, "errorDetails": details}]});
            st.resources.remove(&rk);
        }
        Effect::Create { key: rk, error: None } => {
            if rk.0 == "instances" {
                let ip = if st.nat_pool.is_empty() {
                    format!("203.0.113.{}", 10 + st.nat_next % 200)
                } else {
                    st.nat_pool[st.nat_next % st.nat_pool.len()].clone()
                };
                let internal = (!st.internal_pool.is_empty())
                    .then(|| st.internal_pool[(st.nat_next) % st.internal_pool.len()].clone());
                st.nat_next += 1;
                if let Some(v) = st.resources.get_mut(&rk) {
                    v["status"] = json!("RUNNING");
                    if let (Some(ip), Some(nic0)) = (internal, v.pointer_mut("/networkInterfaces/0")) {
                        nic0["networkIP"] = json!(ip);
                    }
                    if let Some(ac) = v.pointer_mut("/networkInterfaces/0/accessConfigs/0") {
                        ac["natIP"] = json!(ip);
                    }
                }
                st.running_since.insert(rk, Instant::now());
            }
        }
        Effect::Delete { key: rk } => {
            st.resources.remove(&rk);
            st.running_since.remove(&rk);
        }
    }
}

/// Time passes: unpolled operations finish after their delay + 500 ms; Spot instances are
/// preempted once their time is up.
fn tick(st: &mut State) {
    let due: Vec<(String, String)> = st
        .ops
        .iter()
        .filter(|(_, o)| !o.done && o.created.elapsed() >= o.delay + Duration::from_millis(500))
        .map(|(k, _)| k.clone())
        .collect();
    for k in due {
        finish(st, &k);
    }
    let Some(after) = st.preempt_after else { return };
    let due: Vec<Key> = st
        .running_since
        .iter()
        .filter(|(k, t)| {
            t.elapsed() >= after
                && st.resources.get(*k).is_some_and(|v| {
                    v["scheduling"]["provisioningModel"] == "SPOT" && v["status"] == "RUNNING"
                })
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in due {
        if let Some(v) = st.resources.get_mut(&k) {
            v["status"] = json!("TERMINATED");
        }
        st.running_since.remove(&k);
        st.next_id += 1;
        let name = format!("systemevent-{}", st.next_id);
        let v = json!({"kind": "compute#operation", "id": st.next_id.to_string(), "name": name,
                       "operationType": "compute.instances.preempted",
                       "targetLink": format!("{SELF}/projects/{PROJECT}/{}/instances/{}", k.1, k.2),
                       "status": "DONE", "user": "system", "progress": 100,
                       "statusMessage": "Instance was preempted.",
                       "zone": format!("{SELF}/projects/{PROJECT}/{}", k.1)});
        st.ops.insert(
            (k.1.clone(), name),
            Op {
                value: v,
                created: Instant::now(),
                delay: Duration::ZERO,
                polls: 0,
                effect: Effect::Delete {
                    key: ("none".into(), String::new(), String::new()),
                },
                done: true,
            },
        );
    }
}

/// `(a = "b") AND (c = "d")` → [("a", "b"), ("c", "d")]; `None` for other syntax.
fn parse_filter(f: &str) -> Option<Vec<(String, String)>> {
    f.split(" AND ")
        .map(|t| {
            let t = t.trim().trim_start_matches('(').trim_end_matches(')').trim();
            let (k, v) = t.split_once(" = ")?;
            Some((k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

fn matches(item: &Value, terms: &[(String, String)]) -> bool {
    terms.iter().all(|(k, v)| {
        let got = match k.strip_prefix("labels.") {
            Some(l) => item["labels"][l].as_str().map(str::to_string),
            None => item[k.as_str()].as_str().map(str::to_string),
        };
        let norm = |s: &str| s.trim_start_matches(SELF).trim_start_matches('/').to_string();
        got.is_some_and(|g| norm(&g) == norm(v))
    })
}

fn filtered(items: Vec<Value>, req: &Recorded) -> Result<Vec<Value>, Reply> {
    match req.param("filter") {
        None => Ok(items),
        Some(f) => match parse_filter(f) {
            Some(terms) => Ok(items.into_iter().filter(|i| matches(i, &terms)).collect()),
            None => Err(bad(&format!(
                "Invalid value for field 'filter': '{f}'. Invalid list filter expression."
            ))),
        },
    }
}

/// The page `pageToken` names, `maxResults` (or the double's page size) long.
fn page_of(st: &State, items: Vec<Value>, req: &Recorded) -> Result<(Vec<Value>, Option<String>), Reply> {
    let size = req
        .param("maxResults")
        .and_then(|m| m.parse::<usize>().ok())
        .unwrap_or(500)
        .min(st.page_size.unwrap_or(500))
        .max(1);
    let start = match req.param("pageToken") {
        None => 0,
        Some(t) => match t
            .strip_prefix("double-page-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => n,
            None => return Err(bad("Invalid value for field 'pageToken'.")),
        },
    };
    let end = (start + size).min(items.len());
    let next = (end < items.len()).then(|| format!("double-page-{end}"));
    Ok((items.get(start..end).unwrap_or(&[]).to_vec(), next))
}

fn list_reply(st: &State, items: Vec<Value>, req: &Recorded) -> Reply {
    let items = match filtered(items, req) {
        Ok(i) => i,
        Err(r) => return r,
    };
    let (page, next) = match page_of(st, items, req) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut v = json!({"kind": "compute#list", "items": page});
    if let Some(n) = next {
        v["nextPageToken"] = json!(n);
    }
    json_reply(200, v)
}

fn aggregated(st: &State, collection: &str, req: &Recorded) -> Reply {
    if !matches!(collection, "instances" | "subnetworks" | "resourcePolicies") {
        return not_found(&req.path);
    }
    let all: Vec<(String, Value)> = st
        .resources
        .iter()
        .filter(|((c, _, _), _)| c == collection)
        .map(|((_, s, _), v)| (s.clone(), v.clone()))
        .collect();
    let values: Vec<Value> = all.iter().map(|(s, v)| json!({"scope": s, "v": v})).collect();
    let values: Vec<Value> = match req.param("filter") {
        None => values,
        Some(f) => match parse_filter(f) {
            Some(terms) => values.into_iter().filter(|x| matches(&x["v"], &terms)).collect(),
            None => {
                return bad(&format!(
                    "Invalid value for field 'filter': '{f}'. Invalid list filter expression."
                ))
            }
        },
    };
    let (page, next) = match page_of(st, values, req) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut items = Map::new();
    for x in page {
        let scope = x["scope"].as_str().unwrap().to_string();
        let entry = items.entry(scope).or_insert_with(|| json!({ collection: [] }));
        entry[collection].as_array_mut().unwrap().push(x["v"].clone());
    }
    // A scope with nothing on this page, as Google shows it.
    items.entry("zones/us-central1-f".to_string()).or_insert_with(|| {
        json!({"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/us-central1-f' on this page.",
                           "data": [{"key": "scope", "value": "zones/us-central1-f"}]}})
    });
    let mut v = json!({"kind": format!("compute#{collection}AggregatedList"), "items": items});
    if let Some(n) = next {
        v["nextPageToken"] = json!(n);
    }
    json_reply(200, v)
}

/// A TCP server at `ip:22` that sends an SSH banner, as a VM's sshd would (enough for
/// flightdeck's wait for SSH). Needs root (port 22). Stops when dropped.
pub struct SshBanner {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SshBanner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SshBanner {
    pub async fn start(ip: &str) -> SshBanner {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind((ip, 22))
            .await
            .unwrap_or_else(|e| panic!("bind {ip}:22 (tests run as root): {e}"));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut c, _)) = listener.accept().await else {
                    return;
                };
                let _ = c.write_all(b"SSH-2.0-OpenSSH_9.6 gce-double\r\n").await;
            }
        });
        SshBanner { task }
    }
}
