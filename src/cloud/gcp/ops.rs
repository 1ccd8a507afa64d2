//! The mutating side of Compute Engine v1: inserts and deletes made idempotent with
//! `requestId`, operations polled to `DONE` with the errors inside them surfaced, gets that
//! read 404 as "gone", and label-filtered lists (compute-api.md §0, §8, §9, §10).
//!
//! ```text
//!  insert(scope, collection, body) ──POST ?requestId=<uuid>──> Operation (PENDING)
//!  wait(op) ──GET …/operations/{name} every poll──> RUNNING … DONE
//!            └─ DONE with error.errors[] ──> ComputeError::Operation{code, message}
//! ```
//!
//! A retried POST carries the same `requestId`, so Compute runs it once; a delete of
//! something already gone (404) is success with no operation.

use super::error::{redact, GcpError, Service};
use super::http::{GcpClient, Method, Page};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Where a resource lives: a zone (instances), a region (subnetworks, resource policies)
/// or the project (networks, firewalls).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Zone(String),
    Region(String),
    Global,
}

impl Scope {
    /// `/zones/Z`, `/regions/R`, `/global`.
    pub fn path(&self) -> String {
        match self {
            Scope::Zone(z) => format!("/zones/{z}"),
            Scope::Region(r) => format!("/regions/{r}"),
            Scope::Global => "/global".into(),
        }
    }

    /// Where it is, as tables show it: the zone or region name, or `global`.
    pub fn place(&self) -> String {
        match self {
            Scope::Global => "global".into(),
            other => other.location().to_string(),
        }
    }

    /// The zone or region name; empty for global.
    pub fn location(&self) -> &str {
        match self {
            Scope::Zone(z) | Scope::Region(z) => z,
            Scope::Global => "",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Zone(z) => write!(f, "zone {z}"),
            Scope::Region(r) => write!(f, "region {r}"),
            Scope::Global => f.write_str("global"),
        }
    }
}

/// One entry of `Operation.error.errors[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationErrorItem {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub error_details: Vec<Value>,
}

impl OperationErrorItem {
    /// `errorInfo.metadatas.zonesAvailable` of a stockout: zones Google says have capacity.
    pub fn zones_available(&self) -> Vec<String> {
        self.error_details
            .iter()
            .filter_map(|d| d.pointer("/errorInfo/metadatas/zonesAvailable"))
            .filter_map(Value::as_str)
            .flat_map(|s| s.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct OperationErrors {
    #[serde(default)]
    pub errors: Vec<OperationErrorItem>,
}

/// A Compute `Operation` (the fields flightdeck reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub name: String,
    /// `PENDING`, `RUNNING`, `DONE`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub operation_type: String,
    #[serde(default)]
    pub target_link: String,
    /// URL of the zone, for zonal operations.
    #[serde(default)]
    pub zone: String,
    /// URL of the region, for regional operations.
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub error: Option<OperationErrors>,
    #[serde(default)]
    pub http_error_status_code: Option<u16>,
    #[serde(default)]
    pub http_error_message: String,
}

impl Operation {
    pub fn is_done(&self) -> bool {
        self.status == "DONE"
    }

    /// The scope to poll it in, from its `zone` / `region` URL.
    pub fn scope(&self) -> Scope {
        let last = |u: &str| u.rsplit('/').next().unwrap_or("").to_string();
        if !self.zone.is_empty() {
            Scope::Zone(last(&self.zone))
        } else if !self.region.is_empty() {
            Scope::Region(last(&self.region))
        } else {
            Scope::Global
        }
    }

    /// The target's last path segment (`tcpx-0` of `…/instances/tcpx-0`).
    pub fn target_name(&self) -> &str {
        self.target_link.rsplit('/').next().unwrap_or("")
    }

    /// The errors of a finished operation; empty when it succeeded.
    pub fn errors(&self) -> &[OperationErrorItem] {
        self.error.as_ref().map_or(&[], |e| &e.errors)
    }
}

/// What can go wrong with a Compute call that changes something.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ComputeError {
    /// The request itself failed (HTTP error after retries, credentials, network).
    #[error(transparent)]
    Http(#[from] GcpError),
    /// The request was accepted; the operation finished with errors.
    #[error("{}", operation_message(op_type, target, errors, *http_status))]
    Operation {
        op_type: String,
        target: String,
        errors: Vec<OperationErrorItem>,
        http_status: Option<u16>,
    },
    /// The operation was not done within the wait.
    #[error("{op_type} of {target}: not done after {waited:?} (operation {operation} is still {status})")]
    Timeout {
        op_type: String,
        target: String,
        operation: String,
        status: String,
        waited: Duration,
    },
}

fn operation_message(
    op_type: &str,
    target: &str,
    errors: &[OperationErrorItem],
    http: Option<u16>,
) -> String {
    let mut s = format!("{op_type} of {target} failed");
    if let Some(h) = http {
        s.push_str(&format!(" (HTTP {h})"));
    }
    for e in errors {
        s.push_str(&format!(": {}: {}", e.code, redact(&e.message)));
    }
    s
}

impl ComputeError {
    /// The first error code: `ZONE_RESOURCE_POOL_EXHAUSTED` inside an operation,
    /// `quotaExceeded` / `forbidden` of an HTTP error; empty if none.
    pub fn code(&self) -> &str {
        match self {
            ComputeError::Operation { errors, .. } => errors.first().map_or("", |e| e.code.as_str()),
            ComputeError::Http(GcpError::Api { reason, .. }) => reason,
            ComputeError::Timeout { .. } => "TIMEOUT",
            ComputeError::Http(_) => "",
        }
    }

    /// The first message, redacted.
    pub fn message(&self) -> String {
        match self {
            ComputeError::Operation { errors, .. } => {
                errors.first().map_or(String::new(), |e| redact(&e.message))
            }
            ComputeError::Http(GcpError::Api { message, .. }) => message.clone(),
            other => other.to_string(),
        }
    }

    /// The HTTP status of a synchronous API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ComputeError::Http(e) => e.status(),
            _ => None,
        }
    }

    /// Zones Google suggested in a stockout's details.
    pub fn zones_available(&self) -> Vec<String> {
        match self {
            ComputeError::Operation { errors, .. } => {
                errors.iter().flat_map(|e| e.zones_available()).collect()
            }
            _ => vec![],
        }
    }
}

/// How an error bears on provisioning: what to try next (compute-api.md §10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No capacity in the zone (stockout): try another zone.
    Capacity,
    /// A regional quota is exhausted: try another region.
    RegionQuota,
    /// A project-wide quota (`GPUS_ALL_REGIONS`): no other place helps.
    GlobalQuota,
    /// The credentials may not do this, or the API is off: stop and say what to do.
    Permission,
    /// The zone cannot take this request (not enabled, RoCE profile of another zone).
    ZoneUnusable,
    /// An error inside a zone's operation that flightdeck does not know: that zone is
    /// blocked and the next place tried (as SkyPilot does), the code and message shown.
    UnknownInZone,
    /// Anything else: stop.
    Other,
}

/// Classify an error for failover. Pure.
pub fn classify(e: &ComputeError) -> Failure {
    let code = e.code();
    let message = e.message();
    let upper = code.to_ascii_uppercase();
    if upper.starts_with("ZONE_RESOURCE_POOL_EXHAUSTED")
        || upper == "INSUFFICIENTCAPACITY"
        || upper == "RESOURCE_NOT_FOUND"
        || upper == "VM_MIN_COUNT_NOT_REACHED"
        || upper == "UNSUPPORTED_OPERATION"
        || upper == "RESOURCE_OPERATION_RATE_EXCEEDED"
        || upper == "TIMEOUT"
    {
        return Failure::Capacity;
    }
    if upper == "QUOTA_EXCEEDED" || upper == "QUOTAEXCEEDED" {
        return if message.contains("GPUS_ALL_REGIONS") {
            Failure::GlobalQuota
        } else {
            Failure::RegionQuota
        };
    }
    if message.contains("Network profile only allows resource creation in location")
        || message.contains("is not found or access is unauthorized")
    {
        return Failure::ZoneUnusable;
    }
    // A rate limit that outlived the client's retries: still not a permission problem.
    if upper == "RATELIMITEXCEEDED" || upper == "USERRATELIMITEXCEEDED" {
        return Failure::Other;
    }
    if upper == "IAM_PERMISSION_DENIED"
        || upper == "FORBIDDEN"
        || upper == "ACCESSNOTCONFIGURED"
        || upper == "SERVICE_DISABLED"
        || upper == "PERMISSION_DENIED"
        || e.status() == Some(403)
        || e.status() == Some(401)
        || matches!(e, ComputeError::Http(GcpError::Auth(_)))
    {
        return Failure::Permission;
    }
    // A 503 that survived retries on the insert itself is Google's way of saying stockout
    // for some shapes (DST treats ServiceUnavailable as "next zone").
    if e.status() == Some(503) {
        return Failure::Capacity;
    }
    // Anything else the zone's operation reports is about that zone (SkyPilot blocks the
    // zone for any error it does not know); an error of the request itself stops.
    if matches!(e, ComputeError::Operation { .. }) {
        return Failure::UnknownInZone;
    }
    Failure::Other
}

/// What an operator should do about an error that stops provisioning; empty when nothing
/// specific helps.
pub fn advice(e: &ComputeError, failure: Failure, project: &str) -> String {
    match failure {
        Failure::RegionQuota | Failure::GlobalQuota => format!(
            "quota: {} — raise it at https://console.cloud.google.com/iam-admin/quotas?project={project} \
             (or try other regions / a smaller fleet)",
            e.message()
        ),
        Failure::Permission => {
            let code = e.code().to_ascii_lowercase();
            if code.contains("accessnotconfigured") || code.contains("service_disabled") {
                format!(
                    "the Compute Engine API is off for project {project}: `gcloud services enable compute.googleapis.com --project {project}`"
                )
            } else {
                format!(
                    "permission denied in project {project}: the account behind the credentials needs \
                     roles/compute.instanceAdmin.v1 and roles/compute.networkAdmin (or \
                     compute.instances.create/delete/get/list, compute.networks.*, compute.subnetworks.*, \
                     compute.firewalls.*, compute.resourcePolicies.*, compute.zoneOperations.get), and \
                     roles/iam.serviceAccountUser for a VM service account"
                )
            }
        }
        _ => String::new(),
    }
}

/// A page of a plain list: `{items: [...], nextPageToken}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound = "T: DeserializeOwned")]
pub struct ListPage<T> {
    #[serde(default = "Vec::new")]
    pub items: Vec<T>,
    #[serde(default)]
    pub next_page_token: String,
}

impl<T: DeserializeOwned> Page for ListPage<T> {
    fn next_page_token(&self) -> Option<&str> {
        Some(&self.next_page_token)
    }
}

/// A page of `aggregated/instances`: `{items: {"zones/Z": {instances: [...]} | {warning}}}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedInstances {
    #[serde(default)]
    pub items: BTreeMap<String, InstancesScoped>,
    #[serde(default)]
    pub next_page_token: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct InstancesScoped {
    #[serde(default)]
    pub instances: Vec<Instance>,
}

impl Page for AggregatedInstances {
    fn next_page_token(&self) -> Option<&str> {
        Some(&self.next_page_token)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessConfig {
    #[serde(default, rename = "natIP")]
    pub nat_ip: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[serde(default)]
    pub network: String,
    #[serde(default)]
    pub subnetwork: String,
    #[serde(default, rename = "networkIP")]
    pub network_ip: String,
    #[serde(default)]
    pub nic_type: String,
    #[serde(default)]
    pub access_configs: Vec<AccessConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scheduling {
    #[serde(default)]
    pub provisioning_model: String,
}

/// An instance as `instances.get` / lists return it (the fields flightdeck reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub name: String,
    /// URL of the zone.
    #[serde(default)]
    pub zone: String,
    /// `PROVISIONING`, `STAGING`, `RUNNING`, `STOPPING`, `TERMINATED`, ...
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub machine_type: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default)]
    pub scheduling: Scheduling,
    #[serde(default)]
    pub resource_policies: Vec<String>,
}

impl Instance {
    pub fn zone_name(&self) -> &str {
        self.zone.rsplit('/').next().unwrap_or("")
    }

    /// nic0's internal address.
    pub fn internal_ip(&self) -> Option<&str> {
        self.network_interfaces
            .first()
            .map(|n| n.network_ip.as_str())
            .filter(|s| !s.is_empty())
    }

    /// nic0's external address.
    pub fn external_ip(&self) -> Option<&str> {
        self.network_interfaces
            .first()
            .and_then(|n| n.access_configs.first())
            .map(|a| a.nat_ip.as_str())
            .filter(|s| !s.is_empty())
    }
}

/// Any named resource with a description (networks, subnetworks, firewalls, policies).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Named {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub network: String,
}

/// How long and how often to poll an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    pub poll: Duration,
    pub timeout: Duration,
}

impl Default for WaitOptions {
    fn default() -> Self {
        WaitOptions {
            poll: Duration::from_secs(2),
            timeout: Duration::from_secs(600),
        }
    }
}

/// The Compute Engine API of one project.
#[derive(Clone, Debug)]
pub struct Compute {
    pub client: GcpClient,
    pub project: String,
    pub wait: WaitOptions,
}

/// A random UUID v4 for `requestId`, from the kernel's random source.
pub fn request_id() -> String {
    let mut b = [0u8; 16];
    let read =
        std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b));
    if read.is_err() {
        // No /dev/urandom: the clock and a counter, still unique per process.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b[..8].copy_from_slice(&t.to_le_bytes());
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed) ^ u64::from(std::process::id());
        b[8..].copy_from_slice(&n.to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

impl Compute {
    pub fn new(client: GcpClient, project: impl Into<String>) -> Compute {
        Compute {
            client,
            project: project.into(),
            wait: WaitOptions::default(),
        }
    }

    /// `{compute}/projects/{p}{scope}/{collection}`.
    pub fn collection_url(&self, scope: &Scope, collection: &str) -> String {
        self.client.url(
            Service::Compute,
            &format!("/projects/{}{}/{collection}", self.project, scope.path()),
        )
    }

    /// `projects/{p}{scope}/{collection}/{name}`: the partial URL other resources refer by.
    pub fn partial(&self, scope: &Scope, collection: &str, name: &str) -> String {
        format!("projects/{}{}/{collection}/{name}", self.project, scope.path())
    }

    /// POST `body` to a collection with a fresh `requestId`; the operation it started.
    pub async fn insert(
        &self,
        scope: &Scope,
        collection: &str,
        body: &Value,
    ) -> Result<Operation, ComputeError> {
        let url = self.collection_url(scope, collection);
        let query = [("requestId", request_id())];
        let reply = self
            .client
            .send(Method::Post, Service::Compute, &url, &query, Some(body))
            .await?;
        Ok(parse(&reply, "insert operation")?)
    }

    /// DELETE a resource with a fresh `requestId`; `None` when it was already gone (404).
    pub async fn delete(
        &self,
        scope: &Scope,
        collection: &str,
        name: &str,
    ) -> Result<Option<Operation>, ComputeError> {
        let url = format!("{}/{name}", self.collection_url(scope, collection));
        let query = [("requestId", request_id())];
        match self
            .client
            .send(Method::Delete, Service::Compute, &url, &query, None)
            .await
        {
            Ok(reply) => Ok(Some(parse(&reply, "delete operation")?)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// GET a resource; `None` on 404.
    pub async fn get<T: DeserializeOwned>(
        &self,
        scope: &Scope,
        collection: &str,
        name: &str,
    ) -> Result<Option<T>, ComputeError> {
        let url = format!("{}/{name}", self.collection_url(scope, collection));
        match self.client.get(Service::Compute, &url, &[]).await {
            Ok(reply) => Ok(Some(parse(&reply, collection)?)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every item of a list, with an optional `filter`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        scope: &Scope,
        collection: &str,
        filter: Option<&str>,
    ) -> Result<Vec<T>, ComputeError> {
        let url = self.collection_url(scope, collection);
        let mut query = vec![("maxResults", "500".to_string())];
        if let Some(f) = filter {
            query.push(("filter", f.to_string()));
        }
        let mut out = Vec::new();
        self.client
            .list_pages::<ListPage<T>>(Service::Compute, &url, &query, collection, |p| {
                out.extend(p.items);
                Ok(())
            })
            .await?;
        Ok(out)
    }

    /// Instances of every zone matching `filter` (`labels.flightdeck-fleet = demo`).
    pub async fn aggregated_instances(&self, filter: &str) -> Result<Vec<Instance>, ComputeError> {
        let url = self.client.url(
            Service::Compute,
            &format!("/projects/{}/aggregated/instances", self.project),
        );
        let query = vec![
            ("filter", filter.to_string()),
            ("maxResults", "500".to_string()),
            ("returnPartialSuccess", "true".to_string()),
        ];
        let mut out = Vec::new();
        self.client
            .list_pages::<AggregatedInstances>(Service::Compute, &url, &query, "instances", |p| {
                for (_, scoped) in p.items {
                    out.extend(scoped.instances);
                }
                Ok(())
            })
            .await?;
        Ok(out)
    }

    /// Poll an operation until `DONE`; an error inside it becomes [`ComputeError::Operation`].
    pub async fn wait(&self, op: Operation) -> Result<Operation, ComputeError> {
        self.wait_for(op, self.wait.timeout).await
    }

    /// [`Compute::wait`] with a timeout of its own (a flex-start request queued for
    /// capacity waits longer than other operations).
    pub async fn wait_for(&self, op: Operation, timeout: Duration) -> Result<Operation, ComputeError> {
        let start = tokio::time::Instant::now();
        let scope = op.scope();
        let mut op = op;
        loop {
            if op.is_done() {
                if op.errors().is_empty() {
                    return Ok(op);
                }
                return Err(ComputeError::Operation {
                    op_type: op.operation_type.clone(),
                    target: op.target_name().to_string(),
                    errors: op.errors().to_vec(),
                    http_status: op.http_error_status_code,
                });
            }
            if start.elapsed() >= timeout {
                return Err(ComputeError::Timeout {
                    op_type: op.operation_type.clone(),
                    target: op.target_name().to_string(),
                    operation: op.name.clone(),
                    status: op.status.clone(),
                    waited: start.elapsed(),
                });
            }
            tokio::time::sleep(self.wait.poll).await;
            let url = format!("{}/{}", self.collection_url(&scope, "operations"), op.name);
            let reply = self.client.get(Service::Compute, &url, &[]).await?;
            op = parse(&reply, "operation")?;
        }
    }

    /// Insert and wait.
    pub async fn insert_wait(
        &self,
        scope: &Scope,
        collection: &str,
        body: &Value,
    ) -> Result<Operation, ComputeError> {
        self.insert_wait_for(scope, collection, body, self.wait.timeout)
            .await
    }

    /// Insert and wait at most `timeout`.
    pub async fn insert_wait_for(
        &self,
        scope: &Scope,
        collection: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Operation, ComputeError> {
        let op = self.insert(scope, collection, body).await?;
        self.wait_for(op, timeout).await
    }

    /// Delete and wait; `Ok` when it is gone, including when it already was.
    pub async fn delete_wait(&self, scope: &Scope, collection: &str, name: &str) -> Result<(), ComputeError> {
        match self.delete(scope, collection, name).await? {
            None => Ok(()),
            Some(op) => match self.wait(op).await {
                Ok(_) => Ok(()),
                // Deleted by someone else meanwhile.
                Err(ComputeError::Operation { errors, .. })
                    if errors.iter().all(|e| e.code == "RESOURCE_NOT_FOUND") =>
                {
                    Ok(())
                }
                Err(e) => Err(e),
            },
        }
    }
}

fn parse<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T, GcpError> {
    serde_json::from_slice(body).map_err(|e| GcpError::Malformed {
        service: Service::Compute,
        what: what.to_string(),
        detail: redact(&e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op_err(code: &str, message: &str) -> ComputeError {
        ComputeError::Operation {
            op_type: "insert".into(),
            target: "x-0".into(),
            errors: vec![OperationErrorItem {
                code: code.into(),
                message: message.into(),
                error_details: vec![],
            }],
            http_status: None,
        }
    }

    fn api(status: u16, reason: &str, message: &str) -> ComputeError {
        ComputeError::Http(GcpError::Api {
            service: Service::Compute,
            status,
            reason: reason.into(),
            message: message.into(),
            attempts: 1,
        })
    }

    #[test]
    fn errors_are_classified_for_failover() {
        let cases = [
            (
                op_err(
                    "ZONE_RESOURCE_POOL_EXHAUSTED",
                    "The zone does not have enough resources",
                ),
                Failure::Capacity,
            ),
            (
                op_err("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "stockout"),
                Failure::Capacity,
            ),
            (
                op_err(
                    "QUOTA_EXCEEDED",
                    "Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 0.0 in region us-east4.",
                ),
                Failure::RegionQuota,
            ),
            (
                op_err(
                    "QUOTA_EXCEEDED",
                    "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 8.0 globally.",
                ),
                Failure::GlobalQuota,
            ),
            (
                api(
                    403,
                    "quotaExceeded",
                    "Quota 'CPUS' exceeded. Limit: 24.0 in region us-central1.",
                ),
                Failure::RegionQuota,
            ),
            (
                api(403, "forbidden", "Required 'compute.instances.create' permission"),
                Failure::Permission,
            ),
            (
                api(403, "accessNotConfigured", "Compute Engine API has not been used"),
                Failure::Permission,
            ),
            (
                api(
                    400,
                    "badRequest",
                    "Network profile only allows resource creation in location us-central1-b",
                ),
                Failure::ZoneUnusable,
            ),
            (
                api(400, "invalid", "Invalid value for field 'resource.name'"),
                Failure::Other,
            ),
            (api(503, "backendError", "unavailable"), Failure::Capacity),
            // A rate limit that outlived the retries is not a missing permission.
            (
                api(403, "userRateLimitExceeded", "Rate Limit Exceeded"),
                Failure::Other,
            ),
            (
                api(403, "rateLimitExceeded", "Rate Limit Exceeded"),
                Failure::Other,
            ),
            // An operation error nobody knows: that zone is blocked, the next one tried.
            (
                op_err("NEW_FANCY_FAILURE", "Something Google added last week"),
                Failure::UnknownInZone,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(classify(&e), want, "{e}");
        }
        let a = advice(&api(403, "accessNotConfigured", "off"), Failure::Permission, "p1");
        assert!(
            a.contains("gcloud services enable compute.googleapis.com --project p1"),
            "{a}"
        );
        let a = advice(
            &op_err("QUOTA_EXCEEDED", "Quota 'X' exceeded"),
            Failure::RegionQuota,
            "p1",
        );
        assert!(a.contains("iam-admin/quotas?project=p1"), "{a}");
    }

    #[test]
    fn operations_parse_with_errors_and_hints() {
        let text = r#"{"kind": "compute#operation", "id": "1", "name": "operation-1",
          "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b",
          "operationType": "insert", "targetLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b/instances/demo-0",
          "status": "DONE", "httpErrorStatusCode": 503, "httpErrorMessage": "SERVICE UNAVAILABLE",
          "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "message": "The zone does not have enough resources",
            "errorDetails": [{"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com",
              "metadatas": {"zonesAvailable": "us-central1-a,us-central1-f"}}}]}]}}"#;
        let op: Operation = serde_json::from_str(text).unwrap();
        assert!(op.is_done());
        assert_eq!(op.scope(), Scope::Zone("us-central1-b".into()));
        assert_eq!(op.target_name(), "demo-0");
        assert_eq!(
            op.errors()[0].zones_available(),
            vec!["us-central1-a", "us-central1-f"]
        );
    }

    #[test]
    fn request_ids_are_uuid_v4() {
        let a = request_id();
        let b = request_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
    }

    #[test]
    fn instances_read_addresses() {
        let text = r#"{"name": "d-0", "zone": "https://x/zones/us-east4-b", "status": "RUNNING",
          "networkInterfaces": [{"networkIP": "10.0.0.2", "nicType": "GVNIC",
             "accessConfigs": [{"name": "External NAT", "natIP": "34.1.2.3"}]}]}"#;
        let i: Instance = serde_json::from_str(text).unwrap();
        assert_eq!(i.zone_name(), "us-east4-b");
        assert_eq!(
            (i.internal_ip(), i.external_ip()),
            (Some("10.0.0.2"), Some("34.1.2.3"))
        );
    }
}
