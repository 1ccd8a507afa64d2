//! Compute Engine v1 lists the catalog needs (and the provisioner will): zones, machine
//! types and accelerator types of a project.
//!
//! * `GET {compute}/projects/{p}/zones` → `{items: [Zone], nextPageToken}`
//! * `GET {compute}/projects/{p}/aggregated/machineTypes` and `.../aggregated/acceleratorTypes`
//!   → `{items: {"zones/Z": {"machineTypes": [...]} | {"warning": {...}}}, nextPageToken,
//!   unreachables}` (compute-api.md §0, §8). `returnPartialSuccess=true` is sent, so a zone
//!   that cannot be read is listed in `unreachables` instead of failing the whole call.
//!
//! Field names from `google-cloud-compute-v1`'s serializer (compute-api.md, RSM). `int32`
//! values are numbers; `int64` values are strings (both are accepted for counts).

use super::error::{GcpError, Service};
use super::http::{GcpClient, Page};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// Results per page requested (the API's maximum).
pub const MAX_RESULTS: u32 = 500;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deprecated {
    /// `ACTIVE`, `DEPRECATED`, `OBSOLETE`, `DELETED`.
    #[serde(default)]
    pub state: String,
}

/// `ACTIVE` or unset: usable.
fn usable(d: &Option<Deprecated>) -> bool {
    d.as_ref()
        .is_none_or(|d| d.state.is_empty() || d.state.eq_ignore_ascii_case("ACTIVE"))
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Zone {
    pub name: String,
    /// URL of the region: `https://www.googleapis.com/compute/v1/projects/p/regions/us-central1`.
    #[serde(default)]
    pub region: String,
    /// `UP` or `DOWN`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub deprecated: Option<Deprecated>,
}

impl Zone {
    /// The region's name: the last segment of `region`, else the zone name without its
    /// last `-x`.
    pub fn region_name(&self) -> String {
        match self.region.rsplit('/').next().filter(|s| !s.is_empty()) {
            Some(r) => r.to_string(),
            None => region_of_zone(&self.name).to_string(),
        }
    }

    /// `UP` (or no status) and not deprecated.
    pub fn is_usable(&self) -> bool {
        (self.status.is_empty() || self.status.eq_ignore_ascii_case("UP")) && usable(&self.deprecated)
    }
}

/// `us-central1-a` → `us-central1`.
pub fn region_of_zone(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneList {
    #[serde(default)]
    pub items: Vec<Zone>,
    #[serde(default)]
    pub next_page_token: String,
}

impl Page for ZoneList {
    fn next_page_token(&self) -> Option<&str> {
        Some(&self.next_page_token)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineAccelerator {
    /// `nvidia-h100-80gb`.
    pub guest_accelerator_type: String,
    #[serde(deserialize_with = "count")]
    pub guest_accelerator_count: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineType {
    pub name: String,
    #[serde(default, deserialize_with = "count")]
    pub guest_cpus: u32,
    #[serde(default, deserialize_with = "count64")]
    pub memory_mb: u64,
    /// GPUs bundled with the machine type (A2, A3, A4, G2); empty for general-purpose types.
    #[serde(default)]
    pub accelerators: Vec<MachineAccelerator>,
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub deprecated: Option<Deprecated>,
}

impl MachineType {
    pub fn is_usable(&self) -> bool {
        usable(&self.deprecated)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorType {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, deserialize_with = "count")]
    pub maximum_cards_per_instance: u32,
    #[serde(default)]
    pub zone: String,
    #[serde(default)]
    pub deprecated: Option<Deprecated>,
}

impl AcceleratorType {
    pub fn is_usable(&self) -> bool {
        usable(&self.deprecated)
    }
}

/// A scope's entry in an aggregated list: its items, or a warning such as
/// `NO_RESULTS_ON_PAGE`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineTypesScoped {
    #[serde(default)]
    pub machine_types: Vec<MachineType>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AcceleratorTypesScoped {
    #[serde(default)]
    pub accelerator_types: Vec<AcceleratorType>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedList<S> {
    /// Scope (`zones/us-central1-a`) → its entry.
    #[serde(default = "BTreeMap::new")]
    pub items: BTreeMap<String, S>,
    #[serde(default)]
    pub next_page_token: String,
    /// Scopes that could not be read (with `returnPartialSuccess`).
    #[serde(default)]
    pub unreachables: Vec<String>,
}

impl<S: for<'de> Deserialize<'de>> Page for AggregatedList<S> {
    fn next_page_token(&self) -> Option<&str> {
        Some(&self.next_page_token)
    }
}

/// A zone's name from an aggregated list's scope key (`zones/us-central1-a`).
pub fn scope_zone(scope: &str) -> Option<&str> {
    scope.strip_prefix("zones/").filter(|z| !z.is_empty())
}

/// Items of an aggregated list by zone, and the scopes Google could not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByZone<T> {
    pub items: Vec<(String, T)>,
    pub unreachable: Vec<String>,
}

fn project_path(project: &str, rest: &str) -> String {
    format!("/projects/{project}{rest}")
}

/// Every zone of the project.
pub async fn list_zones(client: &GcpClient, project: &str) -> Result<Vec<Zone>, GcpError> {
    let url = client.url(Service::Compute, &project_path(project, "/zones"));
    let mut zones = Vec::new();
    client
        .list_pages(
            Service::Compute,
            &url,
            &[("maxResults", MAX_RESULTS.to_string())],
            "Compute zones",
            |page: ZoneList| {
                zones.extend(page.items);
                Ok(())
            },
        )
        .await?;
    Ok(zones)
}

/// Machine types in every zone, optionally narrowed by a Compute `filter` expression (e.g.
/// `name eq "(a[0-9]+x?|g[0-9]+|n1)-.*"`: a regular expression the whole name must match).
pub async fn aggregated_machine_types(
    client: &GcpClient,
    project: &str,
    filter: Option<&str>,
) -> Result<ByZone<MachineType>, GcpError> {
    aggregated(
        client,
        project,
        "/aggregated/machineTypes",
        filter,
        "Compute machine types",
        |s: MachineTypesScoped| s.machine_types,
    )
    .await
}

/// Accelerator types in every zone.
pub async fn aggregated_accelerator_types(
    client: &GcpClient,
    project: &str,
) -> Result<ByZone<AcceleratorType>, GcpError> {
    aggregated(
        client,
        project,
        "/aggregated/acceleratorTypes",
        None,
        "Compute accelerator types",
        |s: AcceleratorTypesScoped| s.accelerator_types,
    )
    .await
}

/// One of Compute's aggregated lists, every page, flattened to (zone, item); scopes that
/// are not zones are skipped, unreachable scopes kept.
async fn aggregated<S, T>(
    client: &GcpClient,
    project: &str,
    path: &str,
    filter: Option<&str>,
    what: &str,
    take: impl Fn(S) -> Vec<T>,
) -> Result<ByZone<T>, GcpError>
where
    AggregatedList<S>: Page,
{
    let url = client.url(Service::Compute, &project_path(project, path));
    let mut query = vec![
        ("maxResults", MAX_RESULTS.to_string()),
        ("returnPartialSuccess", "true".to_string()),
    ];
    if let Some(f) = filter {
        query.push(("filter", f.to_string()));
    }
    let mut out = ByZone {
        items: Vec::new(),
        unreachable: Vec::new(),
    };
    client
        .list_pages(Service::Compute, &url, &query, what, |page: AggregatedList<S>| {
            for (scope, s) in page.items {
                if let Some(z) = scope_zone(&scope) {
                    out.items.extend(take(s).into_iter().map(|m| (z.to_string(), m)));
                }
            }
            out.unreachable.extend(page.unreachables);
            Ok(())
        })
        .await?;
    Ok(out)
}

fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = count64(d)?;
    u32::try_from(v).map_err(|_| serde::de::Error::custom(format!("{v} is too large")))
}

/// A count as a JSON number or (int64 style) a string.
fn count64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        N(u64),
        S(String),
    }
    match N::deserialize(d)? {
        N::N(n) => Ok(n),
        N::S(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("expected a whole number, found {s:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_machine_types_with_warnings_read() {
        let page = r#"{"kind": "compute#machineTypeAggregatedList", "id": "projects/p/aggregated/machineTypes",
          "items": {
            "zones/us-central1-a": {"machineTypes": [
              {"kind": "compute#machineType", "id": "1000208", "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
               "name": "a3-highgpu-8g", "description": "208 vCPUs, 1872 GB RAM", "guestCpus": 208,
               "memoryMb": 1916928, "imageSpaceGb": 0, "maximumPersistentDisks": 128,
               "maximumPersistentDisksSizeGb": "263168", "zone": "us-central1-a",
               "selfLink": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/machineTypes/a3-highgpu-8g",
               "isSharedCpu": false, "accelerators": [{"guestAcceleratorType": "nvidia-h100-80gb", "guestAcceleratorCount": 8}],
               "bundledLocalSsds": {"defaultInterface": "NVME", "partitionCount": 16}}]},
            "zones/asia-south1-c": {"warning": {"code": "NO_RESULTS_ON_PAGE",
               "message": "There are no results for scope 'zones/asia-south1-c' on this page.",
               "data": [{"key": "scope", "value": "zones/asia-south1-c"}]}}
          },
          "nextPageToken": "t2", "unreachables": ["zones/me-west1-a"]}"#;
        let l: AggregatedList<MachineTypesScoped> = serde_json::from_str(page).unwrap();
        assert_eq!(l.next_page_token, "t2");
        assert_eq!(l.unreachables, ["zones/me-west1-a"]);
        let m = &l.items["zones/us-central1-a"].machine_types[0];
        assert_eq!((m.guest_cpus, m.memory_mb), (208, 1916928));
        assert_eq!(m.accelerators[0].guest_accelerator_count, 8);
        assert!(m.is_usable());
        assert!(l.items["zones/asia-south1-c"].machine_types.is_empty());
        assert_eq!(scope_zone("zones/us-central1-a"), Some("us-central1-a"));
        assert_eq!(scope_zone("regions/us-central1"), None);
    }

    #[test]
    fn zones_and_deprecation() {
        let z: Zone = serde_json::from_str(
            r#"{"name": "us-central1-a", "status": "UP",
                "region": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1"}"#,
        )
        .unwrap();
        assert_eq!(z.region_name(), "us-central1");
        assert!(z.is_usable());
        let z: Zone = serde_json::from_str(r#"{"name": "europe-west4-b", "status": "DOWN"}"#).unwrap();
        assert_eq!(z.region_name(), "europe-west4");
        assert!(!z.is_usable());
        let a: AcceleratorType = serde_json::from_str(
            r#"{"name": "nvidia-tesla-k80", "maximumCardsPerInstance": "8", "deprecated": {"state": "OBSOLETE"}}"#,
        )
        .unwrap();
        assert_eq!(a.maximum_cards_per_instance, 8);
        assert!(!a.is_usable());
        assert!(serde_json::from_str::<MachineType>(r#"{"name": "x", "guestCpus": "many"}"#).is_err());
    }
}
