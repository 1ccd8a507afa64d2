//! Fleet files: dstack's fleet format (`type: fleet`), accepted as-is, plus flightdeck's
//! own `network` block.
//!
//! Every field dstack's `FleetConfiguration` has is accepted (those flightdeck does not
//! use are kept and reported by `fleet validate` as ignored); anything else is an error
//! at its line and column with a "did you mean". Values with a grammar of their own
//! (`nodes: 2..4`, `resources.gpu: "H100:80GB:8"`, sizes like `100GB..`) are parsed while
//! deserializing, so their errors point at the value too.

pub use crate::node::kube::KubeOptIn;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    #[serde(rename = "type")]
    pub kind: Option<FleetType>,
    pub name: Option<String>,
    pub nodes: Option<Range>,
    pub placement: Option<Placement>,
    /// The backends flightdeck knows; dstack's other backend names (aws, azure, ...) are
    /// rejected with the list of these.
    pub backends: Option<Vec<super::kind::BackendKind>>,
    pub regions: Option<Vec<String>>,
    pub availability_zones: Option<Vec<String>>,
    pub instance_types: Option<Vec<String>>,
    pub spot_policy: Option<SpotPolicy>,
    pub resources: Option<Resources>,
    pub max_price: Option<f64>,
    pub ssh_config: Option<SshConfig>,
    /// flightdeck's own block: GPUDirect flavour and VPCs.
    pub network: Option<Network>,
    /// flightdeck's own: provision as flex-start (Dynamic Workload Scheduler) VMs that run
    /// at most this long (`24h`, `7d`, `3600`; 10 minutes to 7 days).
    pub flex_start: Option<RunDuration>,
    /// flightdeck's own: how long a flex-start request may stay queued for capacity
    /// before apply gives up on it (default and most 2 hours).
    pub flex_wait: Option<RunDuration>,
    /// flightdeck's own: `placement: cluster`'s `maxDistance` (1, 2 or 3: how close the
    /// VMs must be; unset lets Google choose).
    pub placement_max_distance: Option<u8>,
    /// dstack's: consume this specific reservation (`reservationAffinity`
    /// SPECIFIC_RESERVATION); the way to plain on-demand A3 Ultra and A4 capacity.
    pub reservation: Option<String>,
    /// flightdeck's own: the fleet is nodes of an existing GKE cluster (node pools or a
    /// label selector), reached through the Kubernetes API.
    pub gke: Option<Gke>,
    // dstack fields flightdeck accepts without acting on them.
    pub env: Option<serde_yaml::Value>,
    pub blocks: Option<serde_yaml::Value>,
    pub retry: Option<serde_yaml::Value>,
    pub idle_duration: Option<serde_yaml::Value>,
    pub termination_policy: Option<String>,
    pub termination_idle_time: Option<serde_yaml::Value>,
    pub tags: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FleetType {
    Fleet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Any,
    Cluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpotPolicy {
    Spot,
    OnDemand,
    Auto,
}

/// `network.gpudirect` as written: `auto` (the machine type's flavour, the default) or a
/// flavour. Read into `Option<GpuDirect>` (`auto` is `None`), so the file's words and
/// serde's "expected one of" list stay as they were.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum GpuDirectSetting {
    Auto,
    None,
    Tcpx,
    Tcpxo,
    Rdma,
}

fn gpudirect_setting<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::gpudirect::GpuDirect>, D::Error> {
    use crate::gpudirect::GpuDirect;
    Ok(match GpuDirectSetting::deserialize(d)? {
        GpuDirectSetting::Auto => None,
        GpuDirectSetting::None => Some(GpuDirect::None),
        GpuDirectSetting::Tcpx => Some(GpuDirect::Tcpx),
        GpuDirectSetting::Tcpxo => Some(GpuDirect::Tcpxo),
        GpuDirectSetting::Rdma => Some(GpuDirect::Rdma),
    })
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// The flavour to set up; `None` (`auto`, the default): the machine type's.
    #[serde(default, deserialize_with = "gpudirect_setting")]
    pub gpudirect: Option<crate::gpudirect::GpuDirect>,
    /// The VPC of the first NIC (dstack's `vpc_name`).
    pub vpc: Option<String>,
    /// VPCs of the gVNIC data NICs (TCPX/TCPXO), in NIC order.
    pub data_vpcs: Option<Vec<String>>,
    /// The RoCE VPC of the MRDMA NICs (RDMA).
    pub roce_vpc: Option<String>,
    /// Create the networks, subnets and firewall rules when they do not exist.
    #[serde(default)]
    pub create: bool,
}

/// A GKE fleet: which cluster (`project` + `location` + `cluster`, reached as gcloud's GKE
/// auth plugin reaches it, or a kubeconfig `context`) and which of its nodes.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Gke {
    pub project: Option<String>,
    /// A region (regional cluster) or a zone (zonal cluster).
    pub location: Option<String>,
    pub cluster: Option<String>,
    /// A kubeconfig context instead of project/location/cluster.
    pub context: Option<String>,
    /// The kubeconfig file (default `$KUBECONFIG`, else `~/.kube/config`). A relative
    /// path is taken from the fleet file's folder; once the file is read
    /// ([`crate::fleet::load`]) this holds the absolute path.
    pub kubeconfig: Option<String>,
    /// Refused with its reason: a fleet file cannot let the kubeconfig it names run a
    /// credential plugin (it would vouch for itself); the operator allows whole command
    /// lines in their own config (`gke.allow_exec_plugins`).
    pub allow_exec_plugin: Option<serde_yaml::Value>,
    /// Where flightdeck's pods go (debug pods, NCCL test pods, jobs); default `default`.
    pub namespace: Option<String>,
    /// The node pools whose nodes are the fleet.
    pub node_pools: Option<Vec<String>>,
    /// A label selector picking the fleet's nodes (`cloud.google.com/gke-accelerator=nvidia-h200-141gb`).
    pub selector: Option<String>,
    /// The Kueue LocalQueue jobs are submitted to (their `kueue.x-k8s.io/queue-name`).
    pub queue: Option<String>,
    /// The image of the per-node debug pods that carry panes, exec and telemetry
    /// (default `ubuntu:24.04`).
    pub debug_image: Option<String>,
    /// The cluster's multi-network `Network` objects of the GPU NICs, in NIC order (TCPX
    /// 4, TCPXO 8, RDMA 8), for job pods' `networking.gke.io/interfaces`; default the
    /// GKE guides' names (`vpc1`.., `rdma-0`..).
    pub networks: Option<Vec<String>>,
    /// Kueue Topology Aware Scheduling for the fleet's jobs (a job file's `topology`
    /// wins).
    pub topology: Option<Topology>,
}

/// Kueue Topology Aware Scheduling: the topology level (a node label of Kueue's
/// Topology, e.g. `cloud.google.com/gce-topology-block`) a job's pods are packed in,
/// `preferred` or `required` (`kueue.x-k8s.io/podset-preferred-topology` /
/// `-required-topology` on the pod template, as cluster-toolkit's A4 JobSet asks).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub preferred: Option<String>,
    pub required: Option<String>,
}

impl Topology {
    /// The pod-template annotation and the level; an error for none or both, or a
    /// level that is not a label key.
    pub fn annotation(&self) -> Result<(&'static str, &str), String> {
        let (key, level) = match (&self.preferred, &self.required) {
            (Some(p), None) => ("kueue.x-k8s.io/podset-preferred-topology", p),
            (None, Some(r)) => ("kueue.x-k8s.io/podset-required-topology", r),
            _ => return Err("give `preferred: LEVEL` or `required: LEVEL` (a topology level's node label, e.g. cloud.google.com/gce-topology-block)".into()),
        };
        let (prefix, name) = level.rsplit_once('/').unwrap_or(("", level));
        let name_ok = !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !name_ok || (!prefix.is_empty() && !valid_subdomain(prefix)) {
            return Err(format!("`{level}` is not a node label key (the topology level, e.g. cloud.google.com/gce-topology-block)"));
        }
        Ok((key, level))
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    pub gpu: Option<GpuSpec>,
    pub cpu: Option<Range>,
    pub memory: Option<SizeRange>,
    pub shm_size: Option<SizeRange>,
    pub disk: Option<SizeRange>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SshConfig {
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_file: Option<String>,
    pub ssh_key: Option<serde_yaml::Value>,
    pub proxy_jump: Option<ProxyJump>,
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// The cluster network, `<ip>/<prefix>` (dstack).
    pub network: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProxyJump {
    pub hostname: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<String>,
    pub ssh_key: Option<serde_yaml::Value>,
}

/// A host: a bare hostname, or a mapping overriding the fleet-wide SSH settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub hostname: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<String>,
    pub proxy_jump: Option<ProxyJump>,
    pub internal_ip: Option<String>,
    pub blocks: Option<serde_yaml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostMap {
    hostname: String,
    port: Option<u16>,
    user: Option<String>,
    identity_file: Option<String>,
    proxy_jump: Option<ProxyJump>,
    internal_ip: Option<String>,
    #[allow(dead_code)]
    ssh_key: Option<serde_yaml::Value>,
    blocks: Option<serde_yaml::Value>,
}

impl<'de> Deserialize<'de> for Host {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Host;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a hostname or a mapping with `hostname`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Host, E> {
                if v.trim().is_empty() {
                    return Err(E::custom("empty hostname"));
                }
                Ok(Host::named(v.trim()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Host, A::Error> {
                let m = HostMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Host {
                    hostname: m.hostname,
                    port: m.port,
                    user: m.user,
                    identity_file: m.identity_file,
                    proxy_jump: m.proxy_jump,
                    internal_ip: m.internal_ip,
                    blocks: m.blocks,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Host {
    pub fn named(hostname: &str) -> Host {
        Host {
            hostname: hostname.to_string(),
            port: None,
            user: None,
            identity_file: None,
            proxy_jump: None,
            internal_ip: None,
            blocks: None,
        }
    }
}

/// An integer range: `2`, `"2..4"`, `"2.."`, `"..4"`, or `{min: 2, max: 4}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl Range {
    pub fn exact(n: u64) -> Range {
        Range {
            min: Some(n),
            max: Some(n),
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => write!(f, "{a}"),
            (a, b) => write!(
                f,
                "{}..{}",
                a.map(|v| v.to_string()).unwrap_or_default(),
                b.map(|v| v.to_string()).unwrap_or_default()
            ),
        }
    }
}

fn parse_bounds<T: Copy + PartialOrd + fmt::Display>(
    s: &str,
    one: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<(Option<T>, Option<T>), String> {
    let bad = || format!("`{s}` is not {what}");
    let s = s.trim();
    let (lo, hi) = match s.split_once("..") {
        Some((a, b)) => {
            let lo = if a.trim().is_empty() {
                None
            } else {
                Some(one(a.trim()).ok_or_else(bad)?)
            };
            let hi = if b.trim().is_empty() {
                None
            } else {
                Some(one(b.trim()).ok_or_else(bad)?)
            };
            if lo.is_none() && hi.is_none() {
                return Err(bad());
            }
            (lo, hi)
        }
        None => {
            let v = one(s).ok_or_else(bad)?;
            (Some(v), Some(v))
        }
    };
    if let (Some(a), Some(b)) = (lo, hi) {
        if a > b {
            return Err(format!("`{s}`: the minimum {a} is above the maximum {b}"));
        }
    }
    Ok((lo, hi))
}

impl std::str::FromStr for Range {
    type Err = String;
    fn from_str(s: &str) -> Result<Range, String> {
        let (min, max) = parse_bounds(s, |t| t.parse::<u64>().ok(), "a number or a range like 2..4")?;
        Ok(Range { min, max })
    }
}

/// Implements Deserialize for types parsed from a scalar (and `{min, max}` mappings),
/// so errors carry the scalar's position.
macro_rules! scalar_or_minmax {
    ($ty:ty, $expecting:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> de::Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<$ty, A::Error> {
                        let (mut min, mut max): (Option<String>, Option<String>) = (None, None);
                        while let Some(k) = map.next_key::<String>()? {
                            let v: serde_yaml::Value = map.next_value()?;
                            let v = match v {
                                serde_yaml::Value::Number(n) => n.to_string(),
                                serde_yaml::Value::String(s) => s,
                                other => {
                                    return Err(de::Error::custom(format!(
                                        "`{k}`: expected a value, got {other:?}"
                                    )))
                                }
                            };
                            match k.as_str() {
                                "min" => min = Some(v),
                                "max" => max = Some(v),
                                other => {
                                    return Err(de::Error::custom(format!(
                                        "unknown field `{other}`, expected `min` or `max`"
                                    )))
                                }
                            }
                        }
                        format!("{}..{}", min.unwrap_or_default(), max.unwrap_or_default())
                            .parse()
                            .map_err(de::Error::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

scalar_or_minmax!(Range, "a number, a range like 2..4, or {min, max}");
scalar_or_minmax!(SizeRange, "a size like 100GB, a range like 80GB.., or {min, max}");

/// A size range in GB: `100GB`, `80GB..`, `16..64` (GB implied), `512MB..`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeRange {
    pub min_gb: Option<f64>,
    pub max_gb: Option<f64>,
}

fn parse_size_gb(s: &str) -> Option<f64> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("TB") {
        (n, 1024.0)
    } else if let Some(n) = t.strip_suffix("GB") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("MB") {
        (n, 1.0 / 1024.0)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

impl std::str::FromStr for SizeRange {
    type Err = String;
    fn from_str(s: &str) -> Result<SizeRange, String> {
        let (min_gb, max_gb) = parse_bounds(s, parse_size_gb, "a size like 100GB or a range like 80GB..")?;
        Ok(SizeRange { min_gb, max_gb })
    }
}

/// `resources.gpu`: `"H100:8"`, `"A100:40GB:2"`, `"24GB..:1..2"`, `"8"`, `"H100,H200:8"`,
/// `"nvidia:B200:8"`, or `{name, count, memory}`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSpec {
    pub names: Vec<String>,
    pub count: Range,
    pub memory: Option<SizeRange>,
}

impl std::str::FromStr for GpuSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<GpuSpec, String> {
        let mut spec = GpuSpec {
            names: vec![],
            count: Range::exact(1),
            memory: None,
        };
        let mut count_seen = false;
        for part in s.split(':').map(str::trim) {
            if part.is_empty() {
                return Err(format!("`{s}`: empty part between `:`"));
            }
            let lower = part.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "nvidia" | "amd" | "google" | "intel" | "tenstorrent"
            ) {
                continue;
            }
            let looks_like_size = lower.contains("gb") || lower.contains("mb") || lower.contains("tb");
            if looks_like_size {
                spec.memory = Some(part.parse()?);
            } else if part
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '.')
            {
                if count_seen {
                    return Err(format!("`{s}`: two GPU counts"));
                }
                spec.count = part.parse().map_err(|e: String| format!("{e} (GPU count)"))?;
                count_seen = true;
            } else if spec.names.is_empty() {
                spec.names.extend(
                    part.split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty()),
                );
            } else {
                return Err(format!(
                    "`{s}`: `{part}` is not a GPU count or memory size (list several GPU names in one part, comma-separated)"
                ));
            }
        }
        Ok(spec)
    }
}

impl<'de> Deserialize<'de> for GpuSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = GpuSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a GPU spec like \"H100:8\" or {name, count, memory}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<GpuSpec, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<GpuSpec, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<GpuSpec, A::Error> {
                #[derive(Deserialize)]
                #[serde(deny_unknown_fields)]
                struct M {
                    name: Option<OneOrMany>,
                    count: Option<Range>,
                    memory: Option<SizeRange>,
                    #[allow(dead_code)]
                    vendor: Option<String>,
                    #[allow(dead_code)]
                    total_memory: Option<SizeRange>,
                    #[allow(dead_code)]
                    compute_capability: Option<serde_yaml::Value>,
                }
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum OneOrMany {
                    One(String),
                    Many(Vec<String>),
                }
                let m = M::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(GpuSpec {
                    names: match m.name {
                        None => vec![],
                        Some(OneOrMany::One(n)) => vec![n],
                        Some(OneOrMany::Many(v)) => v,
                    },
                    count: m.count.unwrap_or(Range::exact(1)),
                    memory: m.memory,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A run duration in seconds: `600`, `90m`, `24h`, `7d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDuration(pub u64);

impl std::str::FromStr for RunDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<RunDuration, String> {
        let t = s.trim();
        let (num, mult) = match t.char_indices().last() {
            Some((i, 's')) => (&t[..i], 1),
            Some((i, 'm')) => (&t[..i], 60),
            Some((i, 'h')) => (&t[..i], 3600),
            Some((i, 'd')) => (&t[..i], 86_400),
            _ => (t, 1),
        };
        let n: u64 = num
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not a duration: expected e.g. 24h, 90m, 7d or seconds"))?;
        Ok(RunDuration(n.saturating_mul(mult)))
    }
}

impl<'de> Deserialize<'de> for RunDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = RunDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration like 24h, 90m, 7d or seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RunDuration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RunDuration, E> {
                Ok(RunDuration(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RunDuration, E> {
                u64::try_from(v)
                    .map(RunDuration)
                    .map_err(|_| E::custom(format!("{v} is not a duration")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A Kubernetes object name that is a DNS subdomain (RFC 1123): lowercase letters,
/// digits, `-` and `.`, at most 253, each dot-separated label starting and ending with a
/// letter or digit (Secrets, service accounts, claims, Networks).
pub fn valid_subdomain(n: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !n.is_empty()
        && n.len() <= 253
        && n.split('.')
            .all(|l| alnum(l.chars().next()) && alnum(l.chars().last()))
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
}
