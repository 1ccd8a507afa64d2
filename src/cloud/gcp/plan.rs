//! The GCP plan, pure: from a fleet file, the backend settings and the catalog, the places
//! to try in price order ([`candidates`]), the resources a fleet needs in one of them with
//! their exact request bodies ([`resources`]), and the diff against what the state records
//! ([`plan`]).
//!
//! ```text
//!  Fleet + GcpSettings + Catalog ──candidates──> [a3-megagpu-8g SPOT us-east4-b $16.60, …]
//!                                  └─resources(candidate)──> networks, firewalls,
//!                                      subnetworks, placement policy, instances (bodies)
//!  resources vs FleetRecord.resources ──plan──> create / keep / delete, cost per hour
//! ```
//!
//! Names: instances `{fleet}-{i}`; created networks `{fleet}-net`, `{fleet}-data-{k}`,
//! `{fleet}-roce-{zone}`; their subnetworks `{network}-{region}`; firewalls
//! `{network}-ssh` / `{network}-internal`; the placement policy `{fleet}-placement`.
//! Instances carry the labels `flightdeck-fleet` and `flightdeck-owner`; networks,
//! subnetworks, firewalls and resource policies have no labels in Compute v1, so they carry
//! the same pairs in their `description` ([`marker`]).

use super::layout::{self, MachineProfile, NicRole};
use super::ops::Scope;
use super::settings::GcpSettings;
use crate::catalog::{Catalog, GpuDirect, Pricing};
use crate::cloud::{Change, CloudDetail, NicSummary, Plan};
use crate::fleet::spec::{Placement, SpotPolicy};
use crate::fleet::Fleet;
use crate::store::{FleetRecord, ResourceRecord};
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const FLEET_LABEL: &str = "flightdeck-fleet";
pub const OWNER_LABEL: &str = "flightdeck-owner";

/// The provisioning model of an instance (`Scheduling.provisioningModel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Model {
    Spot,
    Standard,
    FlexStart,
}

impl Model {
    pub fn api(self) -> &'static str {
        match self {
            Model::Standard => "STANDARD",
            Model::Spot => "SPOT",
            Model::FlexStart => "FLEX_START",
        }
    }

    pub fn parse(s: &str) -> Option<Model> {
        [Model::Standard, Model::Spot, Model::FlexStart]
            .into_iter()
            .find(|m| m.api() == s)
    }

    pub fn pricing(self) -> Pricing {
        match self {
            Model::Standard => Pricing::OnDemand,
            Model::Spot => Pricing::Spot,
            Model::FlexStart => Pricing::Flex,
        }
    }
}

/// One place to try: a machine type in a zone under a provisioning model.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub machine_type: String,
    pub zone: String,
    pub region: String,
    pub model: Model,
    /// The machine's price per hour from the catalog; `None` when unknown.
    pub hourly_usd: Option<f64>,
    pub flavour: GpuDirect,
    /// GPUs attached to a general-purpose host (N1): accelerator type and count.
    pub attached: Option<(String, u32)>,
}

impl Candidate {
    /// `a3-megagpu-8g SPOT in us-east4-b at $16.60/h`.
    pub fn describe(&self) -> String {
        format!(
            "{} {} in {} at {}",
            self.machine_type,
            self.model.api(),
            self.zone,
            price(self.hourly_usd)
        )
    }
}

pub fn price(p: Option<f64>) -> String {
    match p {
        Some(v) => format!("${v:.2}/h"),
        None => "an unknown price".into(),
    }
}

/// The models to try, in order.
pub fn models(fleet: &Fleet) -> Vec<Model> {
    if fleet.spec.flex_start.is_some() {
        return vec![Model::FlexStart];
    }
    match fleet.spec.spot_policy {
        Some(SpotPolicy::Spot) => vec![Model::Spot],
        Some(SpotPolicy::Auto) => vec![Model::Spot, Model::Standard],
        Some(SpotPolicy::OnDemand) | None => vec![Model::Standard],
    }
}

/// Node count: `nodes` (its minimum for a range).
pub fn node_count(fleet: &Fleet) -> usize {
    fleet.spec.nodes.and_then(|n| n.min).unwrap_or(1) as usize
}

/// Every place the fleet may go, in the order apply tries them: by model (Spot before
/// on-demand for `spot_policy: auto`), then price (unknown last), then machine type and zone.
pub fn candidates(
    fleet: &Fleet,
    settings: &GcpSettings,
    catalog: &Catalog,
) -> Result<Vec<Candidate>, String> {
    let s = &fleet.spec;
    let gpudirect = s.network.as_ref().map(|n| n.gpudirect).unwrap_or_default();
    let regions: Option<Vec<String>> = s.regions.clone().or_else(|| settings.regions.clone());
    let zones = s.availability_zones.clone();
    let types = s.instance_types.clone();
    let gpu = s.resources.as_ref().and_then(|r| r.gpu.clone());
    let models = models(fleet);
    let mut out = Vec::new();
    let mut over_price = 0;
    let mut not_sold = 0;
    for o in catalog.offers() {
        if let Some(t) = &types {
            if !t.iter().any(|t| t == &o.machine_type) {
                continue;
            }
        }
        if let Some(g) = &gpu {
            let name_ok = g.names.is_empty()
                || g.names.iter().any(|n| {
                    o.gpu.eq_ignore_ascii_case(n) || o.gpu_aliases().iter().any(|a| a.eq_ignore_ascii_case(n))
                });
            let count = u64::from(o.gpu_count);
            let count_ok = g.count.min.is_none_or(|m| count >= m) && g.count.max.is_none_or(|m| count <= m);
            let mem_ok = g.memory.is_none_or(|m| {
                let mem = o.gpu_memory_gb.map(f64::from);
                m.min_gb.is_none_or(|lo| mem.is_some_and(|v| v >= lo))
                    && m.max_gb.is_none_or(|hi| mem.is_some_and(|v| v <= hi))
            });
            if !(name_ok && count_ok && mem_ok) {
                continue;
            }
        }
        if let Some(z) = &zones {
            if !z.contains(&o.zone) {
                continue;
            }
        }
        if let Some(r) = &regions {
            if !r.contains(&o.region) {
                continue;
            }
        }
        let Ok(flavour) = layout::resolve(gpudirect, &o.machine_type) else {
            continue;
        };
        for m in &models {
            // Google sells no plain on-demand of these (A3 Ultra, A4, a3-highgpu-1/2/4g):
            // STANDARD only through a reservation.
            if *m == Model::Standard
                && s.reservation.is_none()
                && o.flags.contains(crate::catalog::model::Flag::NoPlainOnDemand)
            {
                not_sold += 1;
                continue;
            }
            let p = o.price(m.pricing());
            if let Some(max) = s.max_price {
                if p.is_none_or(|p| p > max) {
                    over_price += 1;
                    continue;
                }
            }
            out.push(Candidate {
                machine_type: o.machine_type.clone(),
                zone: o.zone.clone(),
                region: o.region.clone(),
                model: *m,
                hourly_usd: p,
                flavour,
                attached: o.gpus_attached.then(|| (o.accelerator_type.clone(), o.gpu_count)),
            });
        }
    }
    // Machine types and zones named explicitly but not in the catalog: still tried, price unknown.
    if let (Some(t), Some(z), None) = (&types, &zones, s.max_price) {
        for mt in t {
            for zone in z {
                for m in &models {
                    if out
                        .iter()
                        .any(|c| &c.machine_type == mt && &c.zone == zone && c.model == *m)
                    {
                        continue;
                    }
                    let Ok(flavour) = layout::resolve(gpudirect, mt) else {
                        continue;
                    };
                    out.push(Candidate {
                        machine_type: mt.clone(),
                        zone: zone.clone(),
                        region: super::compute::region_of_zone(zone).to_string(),
                        model: *m,
                        hourly_usd: None,
                        flavour,
                        attached: None,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| {
        let rank = |c: &Candidate| models.iter().position(|m| *m == c.model).unwrap_or(9);
        rank(a)
            .cmp(&rank(b))
            .then(match (a.hourly_usd, b.hourly_usd) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.machine_type.cmp(&b.machine_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    if out.is_empty() {
        let mut why = vec![];
        if let Some(t) = &types {
            why.push(format!("instance_types {}", t.join(", ")));
        }
        if let Some(g) = &gpu {
            why.push(format!("gpu {}:{}", g.names.join(","), g.count));
        }
        if let Some(r) = &regions {
            why.push(format!("regions {}", r.join(", ")));
        }
        if let Some(z) = &zones {
            why.push(format!("zones {}", z.join(", ")));
        }
        let models: Vec<&str> = models.iter().map(|m| m.api()).collect();
        why.push(format!("provisioning {}", models.join(" or ")));
        let mut msg = format!("no offer in the catalog matches ({})", why.join("; "));
        if over_price > 0 {
            msg.push_str(&format!("; {over_price} were above max_price or had no price"));
        }
        if not_sold > 0 {
            msg.push_str(&format!(
                "; {not_sold} are not sold plain on-demand (use Spot, flex_start, or a reservation: NAME)"
            ));
        }
        return Err(msg);
    }
    Ok(out)
}

/// The resource kinds flightdeck creates, in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Network,
    Firewall,
    Subnetwork,
    PlacementPolicy,
    Instance,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Network,
        Kind::Firewall,
        Kind::Subnetwork,
        Kind::PlacementPolicy,
        Kind::Instance,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Firewall => "firewall",
            Kind::Subnetwork => "subnetwork",
            Kind::PlacementPolicy => "placement_policy",
            Kind::Instance => "instance",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The Compute collection.
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Network => "networks",
            Kind::Firewall => "firewalls",
            Kind::Subnetwork => "subnetworks",
            Kind::PlacementPolicy => "resourcePolicies",
            Kind::Instance => "instances",
        }
    }

    /// Teardown goes the other way: instances, then policies, firewalls, subnetworks,
    /// networks (compute-api.md §7.3).
    pub fn teardown_rank(self) -> u8 {
        match self {
            Kind::Instance => 0,
            Kind::PlacementPolicy => 1,
            Kind::Firewall => 2,
            Kind::Subnetwork => 3,
            Kind::Network => 4,
        }
    }
}

/// A resource the fleet needs, with the body of its insert call.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub kind: Kind,
    pub name: String,
    pub scope: Scope,
    pub body: Value,
    pub node: Option<usize>,
    pub machine_type: Option<String>,
    pub nics: Option<NicSummary>,
    pub model: Option<Model>,
    pub hourly_usd: Option<f64>,
}

impl Resource {
    /// The state record of it, in `state`.
    pub fn record(&self, state: &str) -> ResourceRecord {
        let mut r = ResourceRecord::new(self.kind.as_str(), &self.name, state);
        match &self.scope {
            Scope::Zone(z) => r.zone = Some(z.clone()),
            Scope::Region(g) => r.region = Some(g.clone()),
            Scope::Global => {}
        }
        r.machine_type = self.machine_type.clone();
        r.provisioning_model = self.model.map(|m| m.api().to_string());
        r.node = self.node;
        r.nics = self.nics.as_ref().map(|n| n.layout.clone());
        r.hourly_micro_usd = self.hourly_usd.map(|p| (p * 1e6).round() as u64);
        r.vm_count = self.body["groupPlacementPolicy"]["vmCount"]
            .as_u64()
            .map(|n| n as usize);
        r
    }
}

/// The scope of a recorded resource.
pub fn record_scope(r: &ResourceRecord) -> Scope {
    match (&r.zone, &r.region) {
        (Some(z), _) => Scope::Zone(z.clone()),
        (None, Some(g)) => Scope::Region(g.clone()),
        (None, None) => Scope::Global,
    }
}

/// `flightdeck-fleet=NAME flightdeck-owner=OWNER`: the labels, in a description.
pub fn marker(fleet: &str, owner: &str) -> String {
    format!("managed by flightdeck: {FLEET_LABEL}={fleet} {OWNER_LABEL}={owner}")
}

/// The fleet and owner a description marks, if it is flightdeck's.
pub fn parse_marker(description: &str) -> Option<(String, String)> {
    let rest = description.split("managed by flightdeck: ").nth(1)?;
    let mut fleet = None;
    let mut owner = None;
    for word in rest.split_whitespace() {
        if let Some(v) = word.strip_prefix(&format!("{FLEET_LABEL}=")) {
            fleet = Some(v.to_string());
        }
        if let Some(v) = word.strip_prefix(&format!("{OWNER_LABEL}=")) {
            owner = Some(v.to_string());
        }
    }
    Some((fleet?, owner.unwrap_or_default()))
}

/// What the pure builders need besides the fleet.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub fleet: &'a Fleet,
    pub settings: &'a GcpSettings,
    pub project: &'a str,
    pub owner: &'a str,
    /// `user:ssh-ed25519 AAAA… comment` for the `ssh-keys` metadata.
    pub ssh_keys: &'a str,
    /// Regions of all candidates, sorted: a region's index picks its subnet ranges.
    pub regions: &'a [String],
    /// Subnetworks of named (not created) VPCs, per (network, region), found by apply.
    pub subnets: &'a BTreeMap<(String, String), Vec<String>>,
    /// The placement policy of the fleet's `reservation:` in the candidate's zone (its
    /// `resourcePolicies`), found by apply: VMs consuming it take that one, as dstack's
    /// `create_instance_struct` does, and flightdeck makes none of its own. `None`: the
    /// reservation has none, or it was not looked up (a plan).
    pub reservation_placement: Option<&'a str>,
}

/// A VPC an instance's NICs use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetUse {
    pub name: String,
    /// flightdeck creates it (and its subnetworks and firewall rules).
    pub create: bool,
    pub mtu: Option<u32>,
    /// `projects/P/global/networkProfiles/{zone}-vpc-roce` for a RoCE VPC.
    pub profile: Option<String>,
    pub role: NetRole,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetRole {
    Primary,
    Data(u8),
    Roce,
}

/// The VPCs for a flavour in a zone: nic0's, the data VPCs, the RoCE VPC.
pub fn networks(ctx: &Context, flavour: GpuDirect, zone: &str) -> Result<Vec<NetUse>, String> {
    let fleet = &ctx.fleet.name;
    let net = ctx.fleet.spec.network.clone().unwrap_or_default();
    let p = layout::profile("", flavour);
    let mut out = vec![];
    let primary = net.vpc.clone().or_else(|| ctx.settings.vpc_name.clone());
    out.push(match primary {
        Some(n) => NetUse {
            name: n,
            create: false,
            mtu: None,
            profile: None,
            role: NetRole::Primary,
        },
        // nic0 carries NCCL's bootstrap and MPI's control traffic: Cluster Toolkit's
        // blueprints give it the data VPCs' jumbo MTU (8244 on A3 High/Mega's sysnet,
        // 8896 on A3 Ultra/A4's net-0); a plain fleet keeps Google's default.
        None if net.create => NetUse {
            name: format!("{fleet}-net"),
            create: true,
            mtu: match flavour {
                GpuDirect::None => None,
                GpuDirect::Tcpx | GpuDirect::Tcpxo => Some(layout::DATA_MTU),
                GpuDirect::Rdma => Some(layout::RDMA_MTU),
            },
            profile: None,
            role: NetRole::Primary,
        },
        None => NetUse {
            name: "default".into(),
            create: false,
            mtu: None,
            profile: None,
            role: NetRole::Primary,
        },
    });
    if p.data_nics > 0 {
        let named = net.data_vpcs.clone().or_else(|| ctx.settings.extra_vpcs.clone());
        let mtu = if flavour == GpuDirect::Rdma {
            layout::RDMA_MTU
        } else {
            layout::DATA_MTU
        };
        for k in 1..=p.data_nics {
            match &named {
                Some(v) => match v.get(usize::from(k) - 1) {
                    Some(n) => out.push(NetUse {
                        name: n.clone(),
                        create: false,
                        mtu: None,
                        profile: None,
                        role: NetRole::Data(k),
                    }),
                    None => {
                        return Err(format!(
                            "GPUDirect-{} needs {} data VPCs, {} are named (network.data_vpcs or the config's gcp.extra_vpcs)",
                            flavour.label(),
                            p.data_nics,
                            v.len()
                        ))
                    }
                },
                None if net.create => out.push(NetUse {
                    name: format!("{fleet}-data-{k}"),
                    create: true,
                    mtu: Some(mtu),
                    profile: None,
                    role: NetRole::Data(k),
                }),
                None => {
                    return Err(format!(
                        "GPUDirect-{} needs {} data VPCs: name them in network.data_vpcs (or the config's gcp.extra_vpcs), set network.create: true to have flightdeck create them, or set network.gpudirect: none",
                        flavour.label(),
                        p.data_nics
                    ))
                }
            }
        }
    }
    if p.rdma_nics > 0 {
        let named = net
            .roce_vpc
            .clone()
            .or_else(|| ctx.settings.roce_vpcs.as_ref().and_then(|v| v.first().cloned()));
        out.push(match named {
            Some(n) => NetUse {
                name: n,
                create: false,
                mtu: None,
                profile: None,
                role: NetRole::Roce,
            },
            None if net.create => NetUse {
                name: layout::placed_name(&format!("{fleet}-roce"), zone),
                create: true,
                mtu: Some(layout::RDMA_MTU),
                profile: Some(format!(
                    "projects/{}/global/networkProfiles/{zone}-vpc-roce",
                    ctx.project
                )),
                role: NetRole::Roce,
            },
            None => {
                return Err(
                    "GPUDirect-RDMA needs a RoCE VPC: name it in network.roce_vpc (or the config's gcp.roce_vpcs), set network.create: true, or set network.gpudirect: none"
                        .into(),
                )
            }
        });
    }
    Ok(out)
}

/// The subnetworks flightdeck names for a VPC it creates, in a region, with their ranges:
/// nic0's VPC `10.{10+r}.0.0/20`; data VPC k `192.168.{9r+k}.0/24`; RoCE VPC eight /21
/// in `192.168.128.0/18` (CTK's range), r being the region's index.
pub fn created_subnets(n: &NetUse, region: &str, region_index: usize) -> Vec<(String, String)> {
    let r = region_index;
    match n.role {
        NetRole::Primary => vec![(
            layout::placed_name(&n.name, region),
            format!("10.{}.0.0/20", 10 + r),
        )],
        NetRole::Data(k) => vec![(
            layout::placed_name(&n.name, region),
            format!("192.168.{}.0/24", 9 * r + usize::from(k)),
        )],
        NetRole::Roce => (0..8)
            .map(|j| {
                (
                    layout::placed_name(&n.name, &format!("{region}-{j}")),
                    format!("192.168.{}.0/21", 128 + 8 * j),
                )
            })
            .collect(),
    }
}

/// The subnetworks of a VPC in a region, created or looked up.
fn subnets_of(ctx: &Context, n: &NetUse, region: &str) -> Vec<String> {
    if n.create {
        let ri = ctx.regions.iter().position(|r| r == region).unwrap_or(0);
        created_subnets(n, region, ri)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    } else {
        ctx.subnets
            .get(&(n.name.clone(), region.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

/// Every resource the fleet needs in `c`, in creation order, with request bodies.
pub fn resources(ctx: &Context, c: &Candidate) -> Result<Vec<Resource>, String> {
    let fleet = &ctx.fleet.name;
    let p = ctx.project;
    let desc = marker(fleet, ctx.owner);
    let nets = networks(ctx, c.flavour, &c.zone)?;
    let region = &c.region;
    let ri = ctx.regions.iter().position(|r| r == region).unwrap_or(0);
    if ri > 13 && nets.iter().any(|n| n.create) {
        return Err(
            "flightdeck creates networks for at most 14 regions per fleet: list fewer regions".into(),
        );
    }
    let mut out = vec![];
    let plain = |kind, name: String, scope: Scope, body: Value| Resource {
        kind,
        name,
        scope,
        body,
        node: None,
        machine_type: None,
        nics: None,
        model: None,
        hourly_usd: Some(0.0),
    };
    for n in nets.iter().filter(|n| n.create) {
        let mut body = json!({
            "name": n.name,
            "description": desc,
            "autoCreateSubnetworks": false,
            "routingConfig": {"routingMode": "REGIONAL"},
        });
        if let Some(m) = n.mtu {
            body["mtu"] = json!(m);
        }
        if let Some(prof) = &n.profile {
            body["networkProfile"] = json!(prof);
        }
        out.push(plain(Kind::Network, n.name.clone(), Scope::Global, body));
    }
    for n in nets.iter().filter(|n| n.create) {
        let url = format!("projects/{p}/global/networks/{}", n.name);
        match n.role {
            NetRole::Primary => {
                out.push(plain(
                    Kind::Firewall,
                    format!("{}-ssh", n.name),
                    Scope::Global,
                    json!({"name": format!("{}-ssh", n.name), "description": desc, "network": url,
                           "direction": "INGRESS", "priority": 1000,
                           "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}],
                           "sourceRanges": ["0.0.0.0/0"], "targetTags": [network_tag(fleet)]}),
                ));
                out.push(plain(
                    Kind::Firewall,
                    format!("{}-internal", n.name),
                    Scope::Global,
                    internal_rule(&n.name, &url, &desc, "10.0.0.0/8"),
                ));
            }
            NetRole::Data(_) => out.push(plain(
                Kind::Firewall,
                format!("{}-internal", n.name),
                Scope::Global,
                internal_rule(&n.name, &url, &desc, "192.168.0.0/16"),
            )),
            // RoCE VPCs take no classic firewall rules (compute-api.md §7.2).
            NetRole::Roce => {}
        }
    }
    for n in nets.iter().filter(|n| n.create) {
        for (name, range) in created_subnets(n, region, ri) {
            out.push(plain(
                Kind::Subnetwork,
                name.clone(),
                Scope::Region(region.clone()),
                json!({"name": name, "description": desc,
                       "network": format!("projects/{p}/global/networks/{}", n.name),
                       "ipCidrRange": range, "region": region}),
            ));
        }
    }
    let nodes = node_count(ctx.fleet);
    let reserved = match (c.model, &ctx.fleet.spec.reservation) {
        (Model::Standard, Some(_)) => ctx.reservation_placement,
        _ => None,
    };
    let cluster = ctx.fleet.spec.placement == Some(Placement::Cluster) && nodes > 1 && reserved.is_none();
    let policy = match reserved {
        Some(url) => url.to_string(),
        None => format!("{fleet}-placement"),
    };
    if cluster {
        out.push(plain(
            Kind::PlacementPolicy,
            policy.clone(),
            Scope::Region(region.clone()),
            {
                let mut group = json!({"collocation": "COLLOCATED", "vmCount": nodes});
                if let Some(d) = ctx.fleet.spec.placement_max_distance {
                    group["maxDistance"] = json!(d);
                }
                json!({"name": policy, "description": desc, "groupPlacementPolicy": group})
            },
        ));
    }
    let profile = layout::profile(&c.machine_type, c.flavour);
    for i in 0..nodes {
        let name = format!("{fleet}-{i}");
        let placed = cluster || reserved.is_some();
        let body = instance_body(ctx, c, &profile, &nets, &name, placed.then_some(policy.as_str()));
        let nics = body["networkInterfaces"].as_array().map(|a| NicSummary {
            count: a.len(),
            types: a
                .iter()
                .map(|n| n["nicType"].as_str().unwrap_or("DEFAULT").to_string())
                .collect(),
            layout: layout::nics_label(&profile),
        });
        out.push(Resource {
            kind: Kind::Instance,
            name,
            scope: Scope::Zone(c.zone.clone()),
            body,
            node: Some(i),
            machine_type: Some(c.machine_type.clone()),
            nics,
            model: Some(c.model),
            hourly_usd: c.hourly_usd,
        });
    }
    Ok(out)
}

fn internal_rule(net: &str, url: &str, desc: &str, range: &str) -> Value {
    json!({"name": format!("{net}-internal"), "description": desc, "network": url,
           "direction": "INGRESS", "priority": 1000,
           "allowed": [{"IPProtocol": "tcp", "ports": ["0-65535"]},
                       {"IPProtocol": "udp", "ports": ["0-65535"]},
                       {"IPProtocol": "icmp"}],
           "sourceRanges": [range]})
}

/// The network tag the SSH firewall rule targets.
pub fn network_tag(fleet: &str) -> String {
    format!("flightdeck-{fleet}")
}

/// The `instances.insert` body (compute-api.md §2).
pub fn instance_body(
    ctx: &Context,
    c: &Candidate,
    profile: &MachineProfile,
    nets: &[NetUse],
    name: &str,
    policy: Option<&str>,
) -> Value {
    let p = ctx.project;
    let zone = &c.zone;
    let region = &c.region;
    let fleet = &ctx.fleet.name;
    let mut labels = serde_json::Map::new();
    for (k, v) in ctx.settings.tags.iter().flatten() {
        labels.insert(
            super::settings::label_key(k),
            json!(super::settings::label_value(v)),
        );
    }
    labels.insert(FLEET_LABEL.into(), json!(fleet));
    labels.insert(OWNER_LABEL.into(), json!(ctx.owner));
    let public = ctx.settings.public_ips.unwrap_or(true);
    let mut nics = vec![];
    let find = |role: NetRole| nets.iter().find(|n| n.role == role);
    for role in layout::nics(profile) {
        let (net, subnet_index, nic_type) = match role {
            NicRole::Primary => (find(NetRole::Primary), 0, profile.gvnic.then_some("GVNIC")),
            NicRole::Data(k) => (find(NetRole::Data(k)), 0, Some("GVNIC")),
            NicRole::Rdma(j) => (find(NetRole::Roce), usize::from(j), Some("MRDMA")),
        };
        let Some(net) = net else { continue };
        let mut nic = json!({"network": format!("projects/{p}/global/networks/{}", net.name)});
        if let Some(s) = subnets_of(ctx, net, region).get(subnet_index) {
            nic["subnetwork"] = json!(format!("projects/{p}/regions/{region}/subnetworks/{s}"));
        }
        if let Some(t) = nic_type {
            nic["nicType"] = json!(t);
        }
        if role == NicRole::Primary && public {
            nic["accessConfigs"] =
                json!([{"name": "External NAT", "type": "ONE_TO_ONE_NAT", "networkTier": "PREMIUM"}]);
        }
        nics.push(nic);
    }
    let scheduling = match c.model {
        Model::Spot => json!({"provisioningModel": "SPOT", "instanceTerminationAction": "STOP",
                              "onHostMaintenance": "TERMINATE", "automaticRestart": false}),
        Model::FlexStart => json!({"provisioningModel": "FLEX_START",
                                   "maxRunDuration": {"seconds": ctx.fleet.spec.flex_start.map_or(0, |d| d.0).to_string()},
                                   "instanceTerminationAction": "DELETE",
                                   "onHostMaintenance": "TERMINATE", "automaticRestart": false}),
        // A VM in a compact placement policy may not restart elsewhere (Cluster Toolkit's
        // vm-instance sets automaticRestart false with compact placement).
        Model::Standard => json!({"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE",
                                  "automaticRestart": policy.is_none()}),
    };
    let disk_gb = ctx
        .fleet
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.disk)
        .and_then(|d| d.min_gb)
        .map(|g| g.ceil() as u32)
        .or(ctx.settings.disk_size_gb)
        .unwrap_or(200);
    let mut body = json!({
        "name": name,
        "machineType": format!("zones/{zone}/machineTypes/{}", c.machine_type),
        "disks": [{"boot": true, "autoDelete": true, "type": "PERSISTENT",
                   "initializeParams": {"diskSizeGb": disk_gb.to_string(),
                                        "diskType": format!("zones/{zone}/diskTypes/{}", profile.disk_type),
                                        "sourceImage": profile.image,
                                        "labels": Value::Object(labels.clone())}}],
        "networkInterfaces": nics,
        "scheduling": scheduling,
        "metadata": {"items": [{"key": "ssh-keys", "value": ctx.ssh_keys}]},
        "labels": Value::Object(labels),
        "tags": {"items": [network_tag(fleet)]},
    });
    if c.model == Model::FlexStart {
        body["reservationAffinity"] = json!({"consumeReservationType": "NO_RESERVATION"});
    }
    // dstack's `reservation:`, as Cluster Toolkit's vm-instance and Slurm resume send it.
    if let (Model::Standard, Some(r)) = (c.model, &ctx.fleet.spec.reservation) {
        body["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
                                             "key": "compute.googleapis.com/reservation-name",
                                             "values": [r]});
    }
    if let Some(pol) = policy {
        // The reservation's own policy comes as its URL; flightdeck's as its name.
        let url = if pol.contains("/resourcePolicies/") {
            pol.trim_start_matches("https://www.googleapis.com/compute/v1/")
                .to_string()
        } else {
            format!("projects/{p}/regions/{region}/resourcePolicies/{pol}")
        };
        body["resourcePolicies"] = json!([url]);
    }
    if let Some((acc, n)) = &c.attached {
        body["guestAccelerators"] = json!([{"acceleratorType": format!("projects/{p}/zones/{zone}/acceleratorTypes/{acc}"), "acceleratorCount": n}]);
    }
    // The GPUDirect bootstrap pulls from Artifact Registry (containers, apt): without a
    // configured account, the project's Compute Engine default one, with the scope the
    // references use (dstack, SkyPilot, Cluster Toolkit: cloud-platform).
    let sa = match (&ctx.settings.vm_service_account, c.flavour) {
        (Some(sa), _) => Some(sa.as_str()),
        (None, GpuDirect::None) => None,
        (None, _) => Some("default"),
    };
    if let Some(sa) = sa {
        body["serviceAccounts"] = json!([{"email": sa, "scopes": [super::auth::CLOUD_PLATFORM_SCOPE]}]);
    }
    body
}

/// What the operator should know about a plan beyond its resources: the on-demand Google
/// does not sell, the VM service account, reservations.
pub fn notes(ctx: &Context, first: &Candidate) -> Vec<String> {
    let s = &ctx.fleet.spec;
    let mut out = vec![];
    let wanted: Vec<String> = s
        .instance_types
        .clone()
        .unwrap_or_else(|| vec![first.machine_type.clone()]);
    let mut types: Vec<&str> = Catalog::embedded()
        .offers()
        .iter()
        .filter(|o| {
            wanted.contains(&o.machine_type) && o.flags.contains(crate::catalog::model::Flag::NoPlainOnDemand)
        })
        .map(|o| o.machine_type.as_str())
        .collect();
    types.sort();
    types.dedup();
    if !types.is_empty() && s.reservation.is_none() && models(ctx.fleet).contains(&Model::Standard) {
        out.push(format!(
            "no on-demand (STANDARD) attempt for {}: Google sells it plain on-demand only through a reservation (`reservation: NAME`); Spot or flex_start otherwise",
            types.join(", ")
        ));
    }
    if first.flavour != GpuDirect::None {
        match &ctx.settings.vm_service_account {
            Some(sa) => out.push(format!(
                "VM service account {sa} (cloud-platform scope): the GPUDirect bootstrap pulls from Artifact Registry with it (it needs roles/artifactregistry.reader)"
            )),
            None => out.push(
                "VM service account: the project's Compute Engine default service account, cloud-platform scope (gcp.vm_service_account names another): the GPUDirect bootstrap pulls from Artifact Registry with it"
                    .to_string(),
            ),
        }
    }
    if let Some(r) = &s.reservation {
        out.push(format!(
            "on-demand VMs consume reservation {r} (SPECIFIC_RESERVATION); it must be in {} with this machine type",
            first.zone
        ));
    }
    out
}

/// The candidate the recorded instances are in, if any: a fleet that is up stays where it
/// is. `Err` when the fleet file no longer allows it (another machine type or model).
pub fn recorded_candidate(
    cands: &[Candidate],
    recorded: Option<&FleetRecord>,
) -> Result<Option<Candidate>, String> {
    let Some(inst) = recorded.and_then(|r| {
        r.resources
            .iter()
            .find(|r| r.kind == "instance" && r.state == "created")
    }) else {
        return Ok(None);
    };
    let zone = inst.zone.clone().unwrap_or_default();
    let mt = inst.machine_type.clone().unwrap_or_default();
    let model = inst.provisioning_model.clone().unwrap_or_default();
    match cands
        .iter()
        .find(|c| c.zone == zone && c.machine_type == mt && c.model.api() == model)
    {
        Some(c) => Ok(Some(c.clone())),
        None => Err(format!(
            "the fleet runs {mt} {model} in {zone}, which the fleet file no longer allows (machine type, provisioning model, zones or max_price changed): delete the fleet first (`flightdeck fleet delete NAME`), then apply"
        )),
    }
}

/// Refuse a node count a recorded compact placement cannot take: Google cannot change a
/// policy's `vmCount` while VMs use it, nor add running VMs to a policy, so a cluster
/// grows past its policy (or into one) only by being made again. Shrinking is fine: the
/// policy keeps the rest collocated.
pub fn check_placement(fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<(), String> {
    let Some(rec) = recorded else { return Ok(()) };
    let instances = rec
        .resources
        .iter()
        .filter(|r| r.kind == "instance" && r.state == "created")
        .count();
    if instances == 0 {
        return Ok(());
    }
    let nodes = node_count(fleet);
    let cluster = fleet.spec.placement == Some(Placement::Cluster) && nodes > 1;
    let policy = rec
        .resources
        .iter()
        .find(|r| r.kind == Kind::PlacementPolicy.as_str());
    let name = &fleet.name;
    match (cluster, policy) {
        (true, Some(p)) => {
            let holds = p.vm_count.unwrap_or(instances);
            if nodes > holds {
                return Err(format!(
                    "fleet `{name}` has a compact placement policy for {holds} VMs ({}), and Google cannot raise its vmCount while VMs use it: `flightdeck fleet delete {name}`, then apply with nodes: {nodes} (or drop placement: cluster to add VMs outside it)",
                    p.name
                ));
            }
            Ok(())
        }
        (true, None) => Err(format!(
            "fleet `{name}` runs {instances} VM(s) without a compact placement policy, and running VMs cannot join one: `flightdeck fleet delete {name}`, then apply with placement: cluster and nodes: {nodes}"
        )),
        _ => Ok(()),
    }
}

/// Candidates with the recorded one first; for `placement: cluster` with nodes up, only
/// the recorded one (a cluster is not split over zones).
pub fn ordered(
    fleet: &Fleet,
    cands: &[Candidate],
    recorded: Option<&FleetRecord>,
) -> Result<Vec<Candidate>, String> {
    check_placement(fleet, recorded)?;
    let mut out = cands.to_vec();
    if let Some(r) = recorded_candidate(cands, recorded)? {
        if fleet.spec.placement == Some(Placement::Cluster) {
            return Ok(vec![r]);
        }
        out.retain(|c| !(c.zone == r.zone && c.machine_type == r.machine_type && c.model == r.model));
        out.insert(0, r);
    }
    Ok(out)
}

/// All regions of the candidates, sorted.
pub fn regions(cands: &[Candidate]) -> Vec<String> {
    let mut r: Vec<String> = cands.iter().map(|c| c.region.clone()).collect();
    r.sort();
    r.dedup();
    r
}

/// The plan: the resources of the first candidate (or where the fleet already is) against
/// the recorded ones.
pub fn plan(ctx: &Context, cands: &[Candidate], recorded: Option<&FleetRecord>) -> Result<Plan, String> {
    let order = ordered(ctx.fleet, cands, recorded)?;
    let first = order.first().ok_or("no place to create the fleet in")?;
    let want = resources(ctx, first)?;
    let had: Vec<ResourceRecord> = recorded.map(|r| r.resources.clone()).unwrap_or_default();
    let mut changes = vec![];
    let mut total = Some(0.0);
    for r in &want {
        let rec = r.record("planned");
        let exists = had.iter().any(|h| h.same(&rec));
        changes.push(change(if exists { "keep" } else { "create" }, r));
        if r.kind == Kind::Instance {
            total = match (total, r.hourly_usd) {
                (Some(t), Some(p)) => Some(t + p),
                _ => None,
            };
        }
    }
    for h in &had {
        if !want.iter().any(|r| r.record("planned").same(h)) {
            let kind = Kind::parse(&h.kind).map_or("resource", Kind::as_str);
            let scope = record_scope(h);
            changes.push(Change {
                action: "delete",
                kind,
                name: h.name.clone(),
                place: scope.place(),
                cloud: Some(CloudDetail {
                    zone: h.zone.clone(),
                    region: h.region.clone(),
                    machine_type: h.machine_type.clone(),
                    nics: None,
                    provisioning_model: h.provisioning_model.clone(),
                    hourly_usd: h.hourly_micro_usd.map(|m| m as f64 / 1e6).or(Some(0.0)),
                }),
            });
        }
    }
    Ok(Plan {
        notes: notes(ctx, first),
        fleet: ctx.fleet.name.clone(),
        backend: crate::fleet::BackendKind::Gcp,
        changes,
        hourly_usd: Some(total),
        fallbacks: order.iter().skip(1).map(Candidate::describe).collect(),
    })
}

fn change(action: &'static str, r: &Resource) -> Change {
    let (zone, region) = match &r.scope {
        Scope::Zone(z) => (Some(z.clone()), None),
        Scope::Region(g) => (None, Some(g.clone())),
        Scope::Global => (None, None),
    };
    Change {
        action,
        kind: r.kind.as_str(),
        name: r.name.clone(),
        place: r.scope.place(),
        cloud: Some(CloudDetail {
            zone,
            region,
            machine_type: r.machine_type.clone(),
            nics: r.nics.clone(),
            provisioning_model: r.model.map(|m| m.api().to_string()),
            hourly_usd: r.hourly_usd,
        }),
    }
}

#[cfg(test)]
mod tests;
