//! Conformance of the GCP request bodies: for each GPUDirect flavour's example fleet, the
//! exact bodies `fleet apply` sends for its first place (networks, firewalls,
//! subnetworks, placement policy, instances) are kept in tests/fixtures/gcp/<flavour>.json,
//! and every field of every body is annotated in tests/fixtures/gcp/sources.yaml with
//! the reference it comes from (dstack, SkyPilot, Cluster Toolkit, Google's API
//! reference). A change to a body fails here until the golden file is regenerated
//! (`FLIGHTDECK_UPDATE_GOLDEN=1 cargo test --test gcp_golden`) and reviewed; a new field
//! fails until it is annotated.

use flightdeck::catalog::Catalog;
use flightdeck::cloud::gcp::plan::{self, Context};
use flightdeck::cloud::gcp::settings::GcpSettings;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CASES: [(&str, &str); 4] = [
    ("tcpx", "a3-high-tcpx.yaml"),
    ("tcpxo", "a3-mega-tcpxo.yaml"),
    ("rdma-a3-ultra", "a3-ultra-rdma.yaml"),
    ("rdma-a4", "a4-rdma.yaml"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bodies apply would send for `file`'s first candidate, with a fixed project,
/// owner and key (and, for named VPCs, their subnetworks as apply finds them).
fn bodies(file: &str) -> Value {
    let fleet = flightdeck::fleet::load(&root().join("fleets").join(file)).expect("a valid example");
    let settings = GcpSettings::default();
    let cands = plan::candidates(&fleet, &settings, Catalog::embedded()).expect("candidates");
    let first = &cands[0];
    let regions = plan::regions(&cands);
    let mut subnets = BTreeMap::new();
    if let Some(n) = fleet.spec.network.as_ref() {
        let r = &first.region;
        if let Some(v) = &n.vpc {
            subnets.insert((v.clone(), r.clone()), vec![format!("{v}-sub")]);
        }
        for d in n.data_vpcs.iter().flatten() {
            subnets.insert((d.clone(), r.clone()), vec![format!("{d}-sub")]);
        }
        if let Some(v) = &n.roce_vpc {
            subnets.insert(
                (v.clone(), r.clone()),
                (0..8).map(|j| format!("{v}-sub-{j}")).collect(),
            );
        }
    }
    let ctx = Context {
        fleet: &fleet,
        settings: &settings,
        project: "my-project",
        owner: "alice",
        ssh_keys: "ubuntu:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGoldenKeyForTests alice@laptop",
        regions: &regions,
        subnets: &subnets,
        reservation_placement: None,
    };
    let res = plan::resources(&ctx, first).expect("resources");
    json!({
        "fleet": format!("fleets/{file}"),
        "place": first.describe(),
        "resources": res.iter().map(|r| json!({
            "kind": r.kind.as_str(),
            "name": r.name,
            "where": r.scope.place(),
            "body": r.body,
        })).collect::<Vec<_>>(),
    })
}

/// `kind.path.to.field` of every leaf, arrays as `[]`.
fn leaves(kind: &str, v: &Value, path: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                // Label maps: their keys are data, not fields.
                if k == "labels" {
                    out.insert(format!("{kind}.{}", join(path, k)));
                    continue;
                }
                leaves(kind, x, &join(path, k), out);
            }
        }
        Value::Array(a) => {
            for x in a {
                leaves(kind, x, &format!("{path}[]"), out);
            }
        }
        _ => {
            out.insert(format!("{kind}.{path}"));
        }
    }
}

fn join(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

#[test]
fn request_bodies_match_the_golden_files_and_every_field_names_its_source() {
    let dir = root().join("tests/fixtures/gcp");
    let update = std::env::var_os("FLIGHTDECK_UPDATE_GOLDEN").is_some();
    let sources: BTreeMap<String, String> = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("sources.yaml")).expect("tests/fixtures/gcp/sources.yaml"),
    )
    .expect("sources.yaml is a map of field path to source");
    let mut seen = BTreeSet::new();
    for (flavour, file) in CASES {
        let got = bodies(file);
        let golden = dir.join(format!("{flavour}.json"));
        let text = serde_json::to_string_pretty(&got).unwrap() + "\n";
        if update {
            std::fs::write(&golden, &text).unwrap();
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        assert!(
            want == text,
            "{}: the bodies for {file} changed; review and regenerate with FLIGHTDECK_UPDATE_GOLDEN=1\n--- now:\n{text}",
            golden.display()
        );
        for r in got["resources"].as_array().unwrap() {
            leaves(r["kind"].as_str().unwrap(), &r["body"], "", &mut seen);
        }
    }
    let missing: Vec<&String> = seen.iter().filter(|p| !sources.contains_key(*p)).collect();
    assert!(
        missing.is_empty(),
        "fields without a source in sources.yaml: {missing:#?}"
    );
    let stale: Vec<&String> = sources.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(
        stale.is_empty(),
        "sources.yaml names fields no body has: {stale:#?}"
    );
    for (k, v) in &sources {
        assert!(
            v.contains('/') || v.contains("compute-api.md"),
            "{k}: a source names a repository path or the API reference: {v}"
        );
    }
}

#[test]
fn golden_files_are_what_the_flavours_need() {
    let dir = root().join("tests/fixtures/gcp");
    let read = |f: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(Path::new(&dir).join(f)).unwrap()).unwrap()
    };
    let nic_types = |v: &Value| -> Vec<String> {
        let inst = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == "instance")
            .unwrap();
        inst["body"]["networkInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["nicType"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(nic_types(&read("tcpx.json")), vec!["GVNIC"; 5]);
    assert_eq!(nic_types(&read("tcpxo.json")), vec!["GVNIC"; 9]);
    let mut rdma = vec!["GVNIC".to_string(); 2];
    rdma.extend(vec!["MRDMA".to_string(); 8]);
    assert_eq!(nic_types(&read("rdma-a3-ultra.json")), rdma);
    assert_eq!(nic_types(&read("rdma-a4.json")), rdma);
}
