use super::*;
use crate::catalog::Catalog;
use std::path::Path;

fn fleet(text: &str) -> Fleet {
    crate::fleet::parse(Path::new("f.yaml"), text).unwrap_or_else(|d| panic!("{d:?}"))
}

fn ctx_with<'a>(
    f: &'a Fleet,
    s: &'a GcpSettings,
    regions: &'a [String],
    subnets: &'a BTreeMap<(String, String), Vec<String>>,
) -> Context<'a> {
    Context {
        fleet: f,
        settings: s,
        project: "p1",
        owner: "alice",
        ssh_keys: "ubuntu:ssh-ed25519 AAAAC3Nz alice@laptop",
        regions,
        subnets,
        reservation_placement: None,
    }
}

const MEGA: &str = "type: fleet\nname: mega\nnodes: 2\nplacement: cluster\ninstance_types: [a3-megagpu-8g]\nregions: [us-east4]\nspot_policy: auto\nnetwork:\n  create: true\n";

#[test]
fn candidates_are_in_model_then_price_order() {
    let f = fleet(MEGA);
    let c = candidates(&f, &GcpSettings::default(), Catalog::embedded()).unwrap();
    // us-east4 has three zones at the same prices: Spot first, then on-demand.
    let models: Vec<Model> = c.iter().map(|c| c.model).collect();
    assert_eq!(
        models,
        vec![
            Model::Spot,
            Model::Spot,
            Model::Spot,
            Model::Standard,
            Model::Standard,
            Model::Standard
        ]
    );
    assert_eq!(c[0].zone, "us-east4-a");
    assert_eq!(c[0].hourly_usd, Some(16.59872));
    assert_eq!(c[3].hourly_usd, Some(92.2143));
    assert!(c[0]
        .describe()
        .starts_with("a3-megagpu-8g SPOT in us-east4-a at $16.60/h"));
    let f = fleet("type: fleet\nname: x\nnodes: 1\ninstance_types: [a3-megagpu-8g]\nregions: [us-east4]\nmax_price: 5\n");
    let e = candidates(&f, &GcpSettings::default(), Catalog::embedded()).unwrap_err();
    assert!(
        e.contains("no offer in the catalog matches") && e.contains("above max_price"),
        "{e}"
    );
}

#[test]
fn gpu_specs_pick_machine_types() {
    let f = fleet("type: fleet\nname: b\nnodes: 2\nresources:\n  gpu: B200:8\nspot_policy: spot\n");
    let c = candidates(&f, &GcpSettings::default(), Catalog::embedded()).unwrap();
    assert!(c
        .iter()
        .all(|c| c.machine_type == "a4-highgpu-8g" && c.model == Model::Spot));
    // The embedded catalog has no A4 host price: unknown, ordered by zone.
    assert!(c.iter().all(|c| c.hourly_usd.is_none()));
    let zones: Vec<&str> = c.iter().map(|c| c.zone.as_str()).collect();
    let mut sorted = zones.clone();
    sorted.sort();
    assert_eq!(zones, sorted);
}

#[test]
fn a3_mega_layout_placement_and_spot_scheduling() {
    let f = fleet(MEGA);
    let s = GcpSettings::default();
    let cands = candidates(&f, &s, Catalog::embedded()).unwrap();
    let regions = regions(&cands);
    let subnets = BTreeMap::new();
    let ctx = ctx_with(&f, &s, &regions, &subnets);
    let res = resources(&ctx, &cands[0]).unwrap();
    let kinds: Vec<(&str, &str)> = res.iter().map(|r| (r.kind.as_str(), r.name.as_str())).collect();
    assert_eq!(kinds[0], ("network", "mega-net"));
    assert_eq!(kinds[8], ("network", "mega-data-8"));
    assert!(kinds.contains(&("firewall", "mega-net-ssh")));
    assert!(kinds.contains(&("subnetwork", "mega-data-3-us-east4")));
    assert_eq!(kinds[kinds.len() - 3], ("placement_policy", "mega-placement"));
    assert_eq!(
        &kinds[kinds.len() - 2..],
        &[("instance", "mega-0"), ("instance", "mega-1")]
    );
    let data_net = res.iter().find(|r| r.name == "mega-data-1").unwrap();
    assert_eq!(data_net.body["mtu"], 8244);
    let nic0_net = res.iter().find(|r| r.name == "mega-net").unwrap();
    assert_eq!(nic0_net.body["mtu"], 8244, "nic0's VPC is jumbo as CTK's sysnet");
    let sub = res.iter().find(|r| r.name == "mega-data-2-us-east4").unwrap();
    assert_eq!(sub.body["ipCidrRange"], "192.168.2.0/24");
    let i = &res[res.len() - 1].body;
    let nics = i["networkInterfaces"].as_array().unwrap();
    assert_eq!(nics.len(), 9);
    assert!(nics.iter().all(|n| n["nicType"] == "GVNIC"));
    assert_eq!(nics[0]["network"], "projects/p1/global/networks/mega-net");
    assert_eq!(
        nics[0]["subnetwork"],
        "projects/p1/regions/us-east4/subnetworks/mega-net-us-east4"
    );
    assert_eq!(nics[0]["accessConfigs"][0]["type"], "ONE_TO_ONE_NAT");
    assert_eq!(nics[8]["network"], "projects/p1/global/networks/mega-data-8");
    assert!(nics[1].get("accessConfigs").is_none());
    assert_eq!(
        i["scheduling"],
        json!({"provisioningModel": "SPOT", "instanceTerminationAction": "STOP",
               "onHostMaintenance": "TERMINATE", "automaticRestart": false})
    );
    assert_eq!(
        i["resourcePolicies"][0],
        "projects/p1/regions/us-east4/resourcePolicies/mega-placement"
    );
    assert_eq!(i["labels"][FLEET_LABEL], "mega");
    assert_eq!(i["labels"][OWNER_LABEL], "alice");
    assert_eq!(i["metadata"]["items"][0]["key"], "ssh-keys");
    assert_eq!(i["machineType"], "zones/us-east4-a/machineTypes/a3-megagpu-8g");
    assert_eq!(
        i["disks"][0]["initializeParams"]["diskType"],
        "zones/us-east4-a/diskTypes/pd-balanced"
    );
}

#[test]
fn a4_rdma_layout_with_named_vpcs_and_flex_start() {
    let f = fleet("type: fleet\nname: b\nnodes: 2\nplacement: cluster\ninstance_types: [a4-highgpu-8g]\navailability_zones: [us-east4-b]\nflex_start: 24h\nnetwork:\n  gpudirect: rdma\n  vpc: main\n  data_vpcs: [second]\n  roce_vpc: roce\n");
    let s = GcpSettings::default();
    let cands = candidates(&f, &s, Catalog::embedded()).unwrap();
    assert_eq!(cands[0].model, Model::FlexStart);
    let regions = regions(&cands);
    let mut subnets = BTreeMap::new();
    subnets.insert(
        ("main".to_string(), "us-east4".to_string()),
        vec!["main-sub".to_string()],
    );
    subnets.insert(
        ("second".to_string(), "us-east4".to_string()),
        vec!["second-sub".to_string()],
    );
    subnets.insert(
        ("roce".to_string(), "us-east4".to_string()),
        (0..8).map(|j| format!("roce-sub-{j}")).collect(),
    );
    let ctx = ctx_with(&f, &s, &regions, &subnets);
    let res = resources(&ctx, &cands[0]).unwrap();
    assert!(
        res.iter()
            .all(|r| matches!(r.kind, Kind::Instance | Kind::PlacementPolicy)),
        "named VPCs are not created"
    );
    let i = &res.last().unwrap().body;
    let nics = i["networkInterfaces"].as_array().unwrap();
    let types: Vec<&str> = nics.iter().map(|n| n["nicType"].as_str().unwrap()).collect();
    assert_eq!(types, [vec!["GVNIC"; 2], vec!["MRDMA"; 8]].concat());
    assert_eq!(
        nics[1]["subnetwork"],
        "projects/p1/regions/us-east4/subnetworks/second-sub"
    );
    assert_eq!(
        nics[9]["subnetwork"],
        "projects/p1/regions/us-east4/subnetworks/roce-sub-7"
    );
    assert_eq!(nics[9]["network"], "projects/p1/global/networks/roce");
    assert_eq!(
        i["scheduling"],
        json!({"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "86400"},
               "instanceTerminationAction": "DELETE", "onHostMaintenance": "TERMINATE",
               "automaticRestart": false})
    );
    assert_eq!(
        i["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert_eq!(
        i["disks"][0]["initializeParams"]["diskType"],
        "zones/us-east4-b/diskTypes/hyperdisk-balanced"
    );
}

#[test]
fn created_roce_vpc_has_the_zone_profile_and_no_firewall() {
    let res = first_resources(
        "type: fleet\nname: u\nnodes: 1\ninstance_types: [a3-ultragpu-8g]\navailability_zones: [us-central1-b]\nnetwork:\n  create: true\n",
        &GcpSettings::default(),
    )
    .unwrap();
    let roce = res.iter().find(|r| r.name == "u-roce-us-central1-b").unwrap();
    assert_eq!(
        roce.body["networkProfile"],
        "projects/p1/global/networkProfiles/us-central1-b-vpc-roce"
    );
    assert_eq!(roce.body["mtu"], 8896);
    let nic0_net = res.iter().find(|r| r.name == "u-net").unwrap();
    assert_eq!(nic0_net.body["mtu"], 8896, "nic0's VPC is jumbo as CTK's net-0");
    assert!(!res
        .iter()
        .any(|r| r.kind == Kind::Firewall && r.name.starts_with("u-roce")));
    let roce_subnets = res
        .iter()
        .filter(|r| r.kind == Kind::Subnetwork && r.name.starts_with("u-roce"))
        .count();
    assert_eq!(roce_subnets, 8);
    assert!(
        !res.iter().any(|r| r.kind == Kind::PlacementPolicy),
        "one node, no placement policy"
    );
}

#[test]
fn missing_data_vpcs_say_what_to_do() {
    let text = "type: fleet\nname: h\nnodes: 2\ninstance_types: [a3-highgpu-8g]\nregions: [us-central1]\n";
    let e = first_resources(text, &GcpSettings::default()).unwrap_err();
    assert!(
        e.contains("GPUDirect-TCPX needs 4 data VPCs") && e.contains("network.create: true"),
        "{e}"
    );
    let s = GcpSettings {
        extra_vpcs: Some(vec!["d1".into(), "d2".into(), "d3".into(), "d4".into()]),
        ..Default::default()
    };
    let res = first_resources(text, &s).unwrap();
    let nics = res[0].body["networkInterfaces"].as_array().unwrap();
    assert_eq!(nics.len(), 5);
    assert_eq!(nics[4]["network"], "projects/p1/global/networks/d4");
}

#[test]
fn plan_diffs_against_the_record_and_stays_in_the_recorded_zone() {
    let f = fleet(MEGA);
    let s = GcpSettings::default();
    let cands = candidates(&f, &s, Catalog::embedded()).unwrap();
    let regions = regions(&cands);
    let subnets = BTreeMap::new();
    let ctx = ctx_with(&f, &s, &regions, &subnets);
    let p = plan(&ctx, &cands, None).unwrap();
    assert!(p.changes.iter().all(|c| c.action == "create"));
    let total = p.hourly_usd.unwrap().unwrap();
    assert!((total - 2.0 * 16.59872).abs() < 1e-9, "{total}");
    assert_eq!(p.fallbacks.len(), cands.len() - 1);
    let json = serde_json::to_value(&p).unwrap();
    let inst = json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "instance")
        .unwrap();
    assert_eq!(inst["zone"], "us-east4-a");
    assert_eq!(inst["machine_type"], "a3-megagpu-8g");
    assert_eq!(inst["nics"]["count"], 9);
    assert_eq!(inst["provisioning_model"], "SPOT");
    assert_eq!(inst["hourly_usd"], 16.59872);
    // Recorded in another zone (after a failover): the plan keeps it there.
    let other = cands
        .iter()
        .find(|c| c.zone == "us-east4-c" && c.model == Model::Spot)
        .unwrap();
    let mut rec = FleetRecord {
        name: "mega".into(),
        backend: crate::fleet::BackendKind::Gcp,
        file: None,
        nodes: vec![],
        resources: resources(&ctx, other)
            .unwrap()
            .iter()
            .map(|r| r.record("created"))
            .collect(),
        created_at: 0,
        applied: None,
    };
    rec.resources.push(ResourceRecord {
        zone: Some("us-east4-c".into()),
        ..ResourceRecord::new("instance", "mega-7", "created")
    });
    let p = plan(&ctx, &cands, Some(&rec)).unwrap();
    let summary: Vec<(&str, &str)> = p
        .changes
        .iter()
        .filter(|c| c.kind == "instance")
        .map(|c| (c.action, c.name.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![("keep", "mega-0"), ("keep", "mega-1"), ("delete", "mega-7")]
    );
    assert!(p
        .changes
        .iter()
        .filter(|c| c.kind != "instance")
        .all(|c| c.action == "keep"));
}

#[test]
fn markers_round_trip() {
    let m = marker("demo", "alice");
    assert_eq!(parse_marker(&m), Some(("demo".into(), "alice".into())));
    assert_eq!(parse_marker("someone else's"), None);
}

/// The resources of `text`'s first candidate (no named subnetworks, no reservation).
fn first_resources(text: &str, settings: &GcpSettings) -> Result<Vec<Resource>, String> {
    let f = fleet(text);
    let cands = candidates(&f, settings, Catalog::embedded()).unwrap();
    let regions = regions(&cands);
    let subnets = BTreeMap::new();
    let ctx = ctx_with(&f, settings, &regions, &subnets);
    resources(&ctx, &cands[0])
}

/// The instance body and plan of `text`'s first candidate.
fn first_body(text: &str, settings: &GcpSettings) -> (Value, Plan) {
    let f = fleet(text);
    let cands = candidates(&f, settings, Catalog::embedded()).unwrap();
    let regions = regions(&cands);
    let subnets = BTreeMap::new();
    let ctx = ctx_with(&f, settings, &regions, &subnets);
    let res = resources(&ctx, &cands[0]).unwrap();
    let body = res
        .iter()
        .find(|r| r.kind == Kind::Instance)
        .unwrap()
        .body
        .clone();
    (body, plan(&ctx, &cands, None).unwrap())
}

#[test]
fn no_plain_on_demand_is_never_tried_and_the_plan_says_why() {
    let text = "type: fleet\nname: u\nnodes: 2\ninstance_types: [a3-ultragpu-8g]\nspot_policy: auto\nnetwork:\n  create: true\n";
    let f = fleet(text);
    let c = candidates(&f, &GcpSettings::default(), Catalog::embedded()).unwrap();
    assert!(!c.is_empty() && c.iter().all(|c| c.model == Model::Spot), "{c:?}");
    let (_, p) = first_body(text, &GcpSettings::default());
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("no on-demand (STANDARD) attempt for a3-ultragpu-8g")),
        "{:?}",
        p.notes
    );
    // on-demand only: nothing to try, and the error says why.
    let f = fleet("type: fleet\nname: u\nnodes: 2\ninstance_types: [a3-ultragpu-8g]\n");
    let e = candidates(&f, &GcpSettings::default(), Catalog::embedded()).unwrap_err();
    assert!(
        e.contains("not sold plain on-demand (use Spot, flex_start, or a reservation: NAME)"),
        "{e}"
    );
    // With a reservation, STANDARD is tried and consumes it.
    let (body, p) = first_body(
        "type: fleet\nname: u\nnodes: 2\ninstance_types: [a3-ultragpu-8g]\nreservation: my-res\nnetwork:\n  create: true\n",
        &GcpSettings::default(),
    );
    assert_eq!(body["scheduling"]["provisioningModel"], "STANDARD");
    assert_eq!(
        body["reservationAffinity"],
        json!({"consumeReservationType": "SPECIFIC_RESERVATION",
               "key": "compute.googleapis.com/reservation-name", "values": ["my-res"]})
    );
    assert!(p.notes.iter().any(|n| n.contains("consume reservation my-res")));
}

#[test]
fn compact_placement_max_distance_restart_and_default_service_account() {
    let (body, p) = first_body(
        &format!("{MEGA}placement_max_distance: 2\n").replace("spot_policy: auto", "spot_policy: on-demand"),
        &GcpSettings::default(),
    );
    assert_eq!(
        body["scheduling"]["automaticRestart"], false,
        "compact placement: no restart elsewhere"
    );
    assert_eq!(
        body["serviceAccounts"],
        json!([{"email": "default", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}])
    );
    assert!(p
        .notes
        .iter()
        .any(|n| n.contains("Compute Engine default service account")));
    let res = first_resources(
        &format!("{MEGA}placement_max_distance: 2\n"),
        &GcpSettings::default(),
    )
    .unwrap();
    let pol = res.iter().find(|r| r.kind == Kind::PlacementPolicy).unwrap();
    assert_eq!(
        pol.body["groupPlacementPolicy"],
        json!({"collocation": "COLLOCATED", "vmCount": 2, "maxDistance": 2})
    );
    assert_eq!(pol.record("created").vm_count, Some(2));
    // Without GPUDirect and without a configured account: no service account.
    let (body, _) = first_body(
        "type: fleet\nname: g\nnodes: 1\ninstance_types: [g2-standard-8]\nregions: [us-central1]\n",
        &GcpSettings::default(),
    );
    assert!(body["serviceAccounts"].is_null(), "{body}");
    assert_eq!(body["scheduling"]["automaticRestart"], true);
}

#[test]
fn a_compact_cluster_does_not_grow_past_its_policy() {
    let f = fleet(MEGA);
    let s = GcpSettings::default();
    let cands = candidates(&f, &s, Catalog::embedded()).unwrap();
    let regions = regions(&cands);
    let subnets = BTreeMap::new();
    let ctx = ctx_with(&f, &s, &regions, &subnets);
    let rec = FleetRecord {
        name: "mega".into(),
        backend: crate::fleet::BackendKind::Gcp,
        file: None,
        nodes: vec![],
        resources: resources(&ctx, &cands[0])
            .unwrap()
            .iter()
            .map(|r| r.record("created"))
            .collect(),
        created_at: 0,
        applied: None,
    };
    let bigger = fleet(&MEGA.replace("nodes: 2", "nodes: 3"));
    let e = check_placement(&bigger, Some(&rec)).unwrap_err();
    assert!(
        e.contains("compact placement policy for 2 VMs (mega-placement)") && e.contains("fleet delete mega"),
        "{e}"
    );
    assert!(ordered(&bigger, &cands, Some(&rec)).is_err());
    let smaller = fleet(&MEGA.replace("nodes: 2", "nodes: 1"));
    assert!(check_placement(&smaller, Some(&rec)).is_ok());
    // VMs made without a policy cannot join one.
    let mut plain = rec.clone();
    plain.resources.retain(|r| r.kind != "placement_policy");
    let e = check_placement(&f, Some(&plain)).unwrap_err();
    assert!(e.contains("without a compact placement policy"), "{e}");
}

#[test]
fn label_keys_from_config_tags_are_sanitised() {
    let s = GcpSettings {
        tags: Some(
            [("Team.Name".to_string(), "ML Infra".to_string())]
                .into_iter()
                .collect(),
        ),
        ..Default::default()
    };
    let (body, _) = first_body(MEGA, &s);
    assert_eq!(body["labels"]["team-name"], "ml-infra");
}

#[test]
fn nolssd_types_get_their_base_layout() {
    let (body, _) = first_body(
        "type: fleet\nname: n\nnodes: 1\ninstance_types: [a3-ultragpu-8g-nolssd]\nspot_policy: spot\nnetwork:\n  create: true\n",
        &GcpSettings::default(),
    );
    let types: Vec<&str> = body["networkInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nicType"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types.len(), 10, "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "MRDMA").count(), 8);
    assert!(body["disks"][0]["initializeParams"]["diskType"]
        .as_str()
        .unwrap()
        .ends_with("hyperdisk-balanced"));
}

#[test]
fn a_plain_fleets_created_vpc_keeps_googles_default_mtu() {
    let res = first_resources(
        "type: fleet\nname: g\nnodes: 1\ninstance_types: [g2-standard-4]\nregions: [us-central1]\nnetwork:\n  create: true\n",
        &GcpSettings::default(),
    )
    .unwrap();
    let net = res.iter().find(|r| r.name == "g-net").unwrap();
    assert!(net.body.get("mtu").is_none(), "{}", net.body);
}
