//! GCP provisioning against the Compute Engine **double** (tests/support/gce_double.rs):
//! the real `flightdeck` binary plans, applies, checks and deletes fleets; the double
//! records what it received, so the NIC layouts, scheduling and labels of the actual
//! requests are asserted. Nothing here talks to Google. Node addresses are loopback
//! addresses with an SSH banner on port 22 (tests run as root, like the SSH testbed).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use support::gce_double::{GceDouble, SshBanner, PROJECT};
use support::text;

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGceDoubleTestKeyOnlyForTests tester@flightdeck";

/// A home with an SSH key, credentials for the double and a config pointing at it.
struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    env: Vec<(&'static str, String)>,
    _banners: Vec<SshBanner>,
    ips: Vec<String>,
}

static NEXT_NET: AtomicU8 = AtomicU8::new(1);

impl Env {
    async fn new(d: &GceDouble, extra_config: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join("fd")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519.pub"), format!("{KEY}\n")).unwrap();
        std::fs::write(home.join("adc.json"), d.credentials().to_string()).unwrap();
        std::fs::write(
            home.join("fd/config.yaml"),
            format!(
                "gcp:\n  project_id: {PROJECT}\n  owner: tester\n  operation_poll_secs: 0.02\n  ssh_wait_secs: 30\n{bootstrap}{extra_config}",
                // The loopback nodes only show an SSH banner: no bootstrap, unless the
                // test binds real nodes and asks for it.
                bootstrap = if extra_config.contains("bootstrap:") {
                    ""
                } else {
                    "  bootstrap: false\n"
                }
            ),
        )
        .unwrap();
        // Four loopback addresses of our own, each with an SSH banner on port 22.
        let net = NEXT_NET.fetch_add(1, Ordering::Relaxed);
        let pid = (std::process::id() % 200) as u8 + 20;
        let ips: Vec<String> = (1..=4).map(|i| format!("127.{pid}.{net}.{i}")).collect();
        let mut banners = vec![];
        for ip in &ips {
            banners.push(SshBanner::start(ip).await);
        }
        let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        d.nat_pool(&refs);
        let env = vec![
            ("FLIGHTDECK_HOME", home.join("fd").display().to_string()),
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                home.join("adc.json").display().to_string(),
            ),
            ("FLIGHTDECK_GCP_COMPUTE_URL", d.origin()),
            ("USER", "tester".to_string()),
        ];
        Env {
            _dir: dir,
            home,
            env,
            _banners: banners,
            ips,
        }
    }

    /// Run flightdeck off the runtime's threads.
    async fn run(&self, args: &[&str]) -> std::process::Output {
        let home = self.home.clone();
        let env = self.env.clone();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            support::flightdeck_env(&home, &a, &env)
        })
        .await
        .unwrap()
    }

    fn state(&self) -> Value {
        let text =
            std::fs::read_to_string(self.home.join("fd/state/state.json")).unwrap_or_else(|_| "{}".into());
        serde_json::from_str(&text).unwrap()
    }

    fn fleet_resources(&self, fleet: &str) -> Vec<Value> {
        self.state()["fleets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["name"] == fleet)
            .flat_map(|f| f["resources"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// Start flightdeck in the background (to kill or interrupt it mid-way); its stderr
    /// is a pipe to read when it ends.
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"));
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    fn write_fleet(&self, name: &str, text: &str) -> String {
        let p = self.home.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fleets")
        .join(name)
        .display()
        .to_string()
}

/// What a command that must succeed printed: the plan (stdout), then its progress (stderr).
fn ok(out: &std::process::Output, what: &str) -> String {
    let err = text(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{err}",
        out.status,
        text(&out.stdout)
    );
    format!("{}{err}", text(&out.stdout))
}

fn nic_types(body: &Value) -> Vec<String> {
    body["networkInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["nicType"].as_str().unwrap_or("DEFAULT").to_string())
        .collect()
}

/// Every mutating request carried a requestId.
fn assert_request_ids(d: &GceDouble) {
    for r in d.requests() {
        if r.method == "POST" && r.path.starts_with("/compute/") || r.method == "DELETE" {
            assert!(
                r.param("requestId").is_some_and(|id| id.len() == 36),
                "{} {} without requestId",
                r.method,
                r.path
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_mega_two_nodes_apply_with_tcpxo_layout_then_delete_twice() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = example("a3-mega-tcpxo.yaml");
    let out = env.run(&["fleet", "plan", &file, "--json"]).await;
    ok(&out, "plan");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let inst: Vec<&Value> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "instance")
        .collect();
    assert_eq!(inst.len(), 2);
    assert_eq!(inst[0]["nics"]["count"], 9);
    assert_eq!(inst[0]["provisioning_model"], "SPOT");
    assert!(d.requests().is_empty(), "plan calls nothing");

    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(err.contains("try 1: a3-megagpu-8g SPOT in us-east4-a"), "{err}");
    assert!(err.contains("SSH answers"), "{err}");

    let inserts = d.instance_inserts();
    assert_eq!(inserts.len(), 2, "one insert per node");
    for body in &inserts {
        assert_eq!(nic_types(body), vec!["GVNIC"; 9]);
        let nets: Vec<&str> = body["networkInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["network"].as_str().unwrap())
            .collect();
        assert_eq!(nets[0], format!("projects/{PROJECT}/global/networks/a3-mega-net"));
        for k in 1..=8 {
            assert_eq!(
                nets[k],
                format!("projects/{PROJECT}/global/networks/a3-mega-data-{k}")
            );
            assert_eq!(
                body["networkInterfaces"][k]["subnetwork"],
                format!("projects/{PROJECT}/regions/us-east4/subnetworks/a3-mega-data-{k}-us-east4")
            );
        }
        assert!(body["networkInterfaces"][0]["accessConfigs"].is_array());
        assert!(body["networkInterfaces"][1]["accessConfigs"].is_null());
        assert_eq!(body["scheduling"]["provisioningModel"], "SPOT");
        assert_eq!(body["scheduling"]["instanceTerminationAction"], "STOP");
        assert_eq!(body["scheduling"]["onHostMaintenance"], "TERMINATE");
        assert_eq!(body["labels"]["flightdeck-fleet"], "a3-mega");
        assert_eq!(body["labels"]["flightdeck-owner"], "tester");
        assert_eq!(body["metadata"]["items"][0]["value"], format!("ubuntu:{KEY}"));
        assert_eq!(
            body["resourcePolicies"][0],
            format!("projects/{PROJECT}/regions/us-east4/resourcePolicies/a3-mega-placement")
        );
    }
    let mut names: Vec<&str> = inserts.iter().map(|b| b["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, vec!["a3-mega-0", "a3-mega-1"]);
    let policy: Value =
        serde_json::from_str(&d.calls("POST", "/regions/us-east4/resourcePolicies")[0].body).unwrap();
    assert_eq!(policy["groupPlacementPolicy"]["collocation"], "COLLOCATED");
    assert_eq!(policy["groupPlacementPolicy"]["vmCount"], 2);
    let data1 = d.resource("networks", "global", "a3-mega-data-1").unwrap();
    assert_eq!(data1["mtu"], 8244);
    assert_request_ids(&d);

    // Every resource is recorded and created; the nodes are reachable addresses.
    let res = env.fleet_resources("a3-mega");
    assert_eq!(res.len(), 9 + 10 + 9 + 1 + 2, "{res:?}");
    assert!(res.iter().all(|r| r["state"] == "created"));
    let state = env.state();
    let nodes = state["fleets"][0]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    let hosts: std::collections::BTreeSet<&str> = nodes.iter().map(|n| n["host"].as_str().unwrap()).collect();
    assert_eq!(hosts.len(), 2, "{nodes:?}");
    assert!(
        hosts.iter().all(|h| env.ips.iter().any(|ip| ip == h)),
        "{nodes:?}"
    );
    assert_eq!(nodes[0]["name"], "a3-mega-0");
    assert_eq!(nodes[0]["user"], "ubuntu");

    // No credential reaches the state, the log or the output.
    let mut written = std::fs::read_to_string(env.home.join("fd/state/state.json")).unwrap();
    written.push_str(&std::fs::read_to_string(env.home.join("fd/state/flightdeck.log")).unwrap_or_default());
    written.push_str(&err);
    for secret in ["do-not-print", "ya29.", "1//"] {
        assert!(!written.contains(secret), "`{secret}` leaked");
    }

    // The doctor's placement check asks the API: both instances in the COLLOCATED policy.
    let placement = |out: std::process::Output| -> Vec<(String, String, String)> {
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["node"].as_str().unwrap_or("fleet").to_string(),
                    f["outcome"].as_str().unwrap().to_string(),
                    f["what"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let out = env
        .run(&["doctor", "a3-mega", "--only", "placement", "--json"])
        .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        placement(out),
        vec![
            (
                "a3-mega-0".into(),
                "pass".into(),
                "in a COLLOCATED placement policy".into()
            ),
            (
                "a3-mega-1".into(),
                "pass".into(),
                "in a COLLOCATED placement policy".into()
            ),
        ]
    );
    // An instance without the policy (made by hand, say) is named.
    let (scope, name) = d
        .existing("instances")
        .into_iter()
        .find(|(_, n)| n == "a3-mega-1")
        .unwrap();
    let mut inst = d.resource("instances", &scope, &name).unwrap();
    inst["resourcePolicies"] = serde_json::json!([]);
    d.plant("instances", &scope, &name, inst);
    let out = env
        .run(&["doctor", "a3-mega", "--only", "placement", "--json"])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let found = placement(out);
    assert_eq!(
        found[1],
        (
            "a3-mega-1".into(),
            "fail".into(),
            "no placement policy: the fleet asked for compact placement".into()
        ),
        "{found:?}"
    );
    let mut inst = d.resource("instances", &scope, &name).unwrap();
    inst["resourcePolicies"] = serde_json::json!([format!(
        "projects/{PROJECT}/regions/us-east4/resourcePolicies/a3-mega-placement"
    )]);
    d.plant("instances", &scope, &name, inst);

    // Apply again: nothing new.
    let api_posts = |d: &GceDouble| {
        d.calls("POST", "")
            .iter()
            .filter(|r| r.path.starts_with("/compute/"))
            .count()
    };
    let before = api_posts(&d);
    let out = env.run(&["fleet", "plan", &file, "--json"]).await;
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["action"] == "keep"),
        "{plan}"
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    ok(&out, "apply again");
    assert_eq!(api_posts(&d), before, "a second apply creates nothing");

    let out = env.run(&["fleet", "delete", "a3-mega", "--yes"]).await;
    ok(&out, "delete");
    for c in [
        "instances",
        "networks",
        "firewalls",
        "subnetworks",
        "resourcePolicies",
    ] {
        assert!(d.existing(c).is_empty(), "{c} left: {:?}", d.existing(c));
    }
    assert!(env.state()["fleets"].as_array().unwrap().is_empty());
    let out = env.run(&["fleet", "delete", "a3-mega", "--yes"]).await;
    let err = ok(&out, "delete twice");
    assert!(err.contains("already gone"), "{err}");
}

/// Named VPCs for an RDMA fleet, as a user made them: `{p}-net-0`, `{p}-net-1` and
/// `{p}-roce` (with `profile_zone`'s RoCE network profile), each with its subnetworks
/// in `region` (`{p}-sub-0`, `{p}-sub-1`, `{p}-roce-sub-0..7`).
fn plant_rdma_vpcs(d: &GceDouble, p: &str, region: &str, profile_zone: &str) {
    let net = |n: &str| format!("projects/{PROJECT}/global/networks/{n}");
    let scope = format!("regions/{region}");
    for k in 0..2 {
        d.plant(
            "networks",
            "global",
            &format!("{p}-net-{k}"),
            serde_json::json!({}),
        );
        d.plant(
            "subnetworks",
            &scope,
            &format!("{p}-sub-{k}"),
            serde_json::json!({"network": net(&format!("{p}-net-{k}"))}),
        );
    }
    // A RoCE VPC is made with a zone's network profile (the double checks it).
    d.plant(
        "networks",
        "global",
        &format!("{p}-roce"),
        serde_json::json!({"networkProfile": format!("projects/{PROJECT}/global/networkProfiles/{profile_zone}-vpc-roce")}),
    );
    for j in 0..8 {
        d.plant(
            "subnetworks",
            &scope,
            &format!("{p}-roce-sub-{j}"),
            serde_json::json!({"network": net(&format!("{p}-roce"))}),
        );
    }
}

async fn apply_flavour(
    file: &str,
    config: &str,
    prepare: impl Fn(&GceDouble),
) -> (GceDouble, Env, Vec<Value>) {
    let d = GceDouble::start().await;
    prepare(&d);
    let env = Env::new(&d, config).await;
    let out = env.run(&["fleet", "apply", file, "--yes"]).await;
    ok(&out, file);
    let inserts = d.instance_inserts();
    (d, env, inserts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a3_high_tcpx_a3_ultra_and_a4_rdma_layouts_and_scheduling() {
    // A3 High: nic0 + 4 gVNIC data NICs; created VPCs with MTU 8244.
    let (d, _env, inserts) = apply_flavour(&example("a3-high-tcpx.yaml"), "", |_| {}).await;
    assert_eq!(inserts.len(), 2);
    assert_eq!(nic_types(&inserts[0]), vec!["GVNIC"; 5]);
    assert_eq!(
        inserts[0]["disks"][0]["initializeParams"]["sourceImage"],
        "projects/cos-cloud/global/images/family/cos-105-lts"
    );
    assert_eq!(
        d.resource("networks", "global", "a3-high-data-4").unwrap()["mtu"],
        8244
    );
    // nic0's VPC carries NCCL's bootstrap: jumbo as Cluster Toolkit's sysnet.
    assert_eq!(
        d.resource("networks", "global", "a3-high-net").unwrap()["mtu"],
        8244
    );
    assert!(d.resource("networks", "global", "a3-high-data-5").is_none());

    // A3 Ultra, Spot: 2 gVNIC + 8 MRDMA on a RoCE VPC made with the zone's profile.
    let (d, _env, inserts) = apply_flavour(&example("a3-ultra-rdma.yaml"), "", |_| {}).await;
    let mut want = vec!["GVNIC"; 2];
    want.extend(vec!["MRDMA"; 8]);
    assert_eq!(nic_types(&inserts[0]), want);
    let roce = d
        .resource("networks", "global", "a3-ultra-roce-us-central1-b")
        .unwrap();
    assert_eq!(
        roce["networkProfile"],
        format!("projects/{PROJECT}/global/networkProfiles/us-central1-b-vpc-roce")
    );
    assert!(d
        .resource("firewalls", "global", "a3-ultra-roce-us-central1-b-internal")
        .is_none());
    for (j, nic) in inserts[1]["networkInterfaces"].as_array().unwrap()[2..]
        .iter()
        .enumerate()
    {
        assert_eq!(
            nic["subnetwork"],
            format!("projects/{PROJECT}/regions/us-central1/subnetworks/a3-ultra-roce-us-central1-b-us-central1-{j}")
        );
    }
    assert_eq!(inserts[0]["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(
        inserts[0]["disks"][0]["initializeParams"]["diskType"],
        "zones/us-central1-b/diskTypes/hyperdisk-balanced"
    );

    // A4, flex-start, named VPCs (planted with their subnetworks).
    let (d, _env, inserts) = apply_flavour(&example("a4-rdma.yaml"), "", |d| {
        plant_rdma_vpcs(d, "a4", "us-west2", "us-west2-c")
    })
    .await;
    assert_eq!(nic_types(&inserts[0]), want);
    let nics = inserts[0]["networkInterfaces"].as_array().unwrap();
    assert_eq!(
        nics[0]["subnetwork"],
        format!("projects/{PROJECT}/regions/us-west2/subnetworks/a4-sub-0")
    );
    assert_eq!(
        nics[1]["subnetwork"],
        format!("projects/{PROJECT}/regions/us-west2/subnetworks/a4-sub-1")
    );
    assert_eq!(
        nics[9]["subnetwork"],
        format!("projects/{PROJECT}/regions/us-west2/subnetworks/a4-roce-sub-7")
    );
    assert_eq!(inserts[0]["scheduling"]["provisioningModel"], "FLEX_START");
    assert_eq!(inserts[0]["scheduling"]["maxRunDuration"]["seconds"], "86400");
    assert_eq!(
        inserts[0]["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert!(
        d.calls("POST", "/networks").is_empty(),
        "named VPCs are used, not created"
    );
}

const MEGA_SPOT: &str = "type: fleet\nname: mega\nnodes: 2\nplacement: cluster\ninstance_types: [a3-megagpu-8g]\nregions: [us-east4, us-central1]\nspot_policy: spot\nnetwork:\n  gpudirect: none\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stockout_fails_over_to_the_next_zone_and_shows_every_attempt() {
    let d = GceDouble::start().await;
    d.stockout("us-east4-a");
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(err.contains("try 1: a3-megagpu-8g SPOT in us-east4-a"), "{err}");
    assert!(err.contains("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"), "{err}");
    assert!(err.contains("trying the next zone"), "{err}");
    assert!(err.contains("try 2: a3-megagpu-8g SPOT in us-east4-b"), "{err}");
    let zones: Vec<String> = d.existing("instances").into_iter().map(|(z, _)| z).collect();
    assert_eq!(zones, vec!["zones/us-east4-b", "zones/us-east4-b"]);
    let res = env.fleet_resources("mega");
    assert!(res
        .iter()
        .filter(|r| r["kind"] == "instance")
        .all(|r| r["zone"] == "us-east4-b"));
    // The failed zone's instances are in no record.
    assert!(!res.iter().any(|r| r["zone"] == "us-east4-a"), "{res:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_cluster_is_rolled_back_and_a_failed_apply_leaves_nothing() {
    let d = GceDouble::start().await;
    // us-east4-a has room for one of the two nodes.
    d.capacity("us-east4-a", 1);
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(err.contains("placement: cluster is all or nothing"), "{err}");
    let deleted: Vec<String> = d
        .calls("DELETE", "")
        .iter()
        .filter(|r| r.path.contains("/zones/us-east4-a/instances/"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        deleted.len(),
        2,
        "the node that was created and the failed one: {deleted:?}"
    );
    let zones: Vec<String> = d.existing("instances").into_iter().map(|(z, _)| z).collect();
    assert_eq!(
        zones,
        vec!["zones/us-east4-b", "zones/us-east4-b"],
        "the whole cluster in one zone"
    );
    ok(&env.run(&["fleet", "delete", "mega", "--yes"]).await, "delete");

    // No capacity anywhere: everything this apply made is deleted, nothing stays recorded.
    for z in [
        "us-east4-a",
        "us-east4-b",
        "us-east4-c",
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
    ] {
        d.stockout(z);
    }
    let file = env.write_fleet(
        "mega2.yaml",
        &MEGA_SPOT
            .replace("name: mega", "name: mega2")
            .replace("gpudirect: none", "create: true"),
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("tried 6 places"), "{err}");
    assert!(err.contains("rolling back"), "{err}");
    assert!(err.contains("nothing was recorded"), "{err}");
    for c in [
        "instances",
        "networks",
        "firewalls",
        "subnetworks",
        "resourcePolicies",
    ] {
        assert!(d.existing(c).is_empty(), "{c} left: {:?}", d.existing(c));
    }
    assert!(env.fleet_resources("mega2").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_moves_to_another_region_and_permission_errors_say_what_to_do() {
    let d = GceDouble::start().await;
    d.quota_exceeded("us-east4", "PREEMPTIBLE_NVIDIA_H100_MEGA_GPUS");
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(err.contains("QUOTA_EXCEEDED"), "{err}");
    assert!(err.contains("trying another region"), "{err}");
    assert!(err.contains("iam-admin/quotas?project=double-project"), "{err}");
    assert!(
        !err.contains("try 2: a3-megagpu-8g SPOT in us-east4-b"),
        "the region is skipped: {err}"
    );
    assert!(d
        .existing("instances")
        .iter()
        .all(|(z, _)| z.starts_with("zones/us-central1-")));

    let d = GceDouble::start().await;
    d.deny_instance_inserts();
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("compute.instances.create"), "{err}");
    assert!(err.contains("roles/compute.instanceAdmin.v1"), "{err}");
    // One piece of advice, not a generic hint beside it (it named machineTypes.list).
    assert_eq!(err.matches("permission denied").count(), 1, "{err}");
    assert!(!err.contains("compute.machineTypes.list"), "{err}");
    assert_eq!(
        d.calls("POST", "/instances").len(),
        2,
        "no other zone is tried after a permission error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_apply_then_applied_again_leaves_no_duplicate_and_nothing_unrecorded() {
    let d = GceDouble::start().await;
    d.slow_operations(Duration::from_secs(3));
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let mut child = env.spawn(&["fleet", "apply", &file, "--yes"]);
    // Wait (with a deadline) until both instance inserts reached the double, then kill -9.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while d.calls("POST", "/instances").len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the inserts never came: {:?}",
            d.requests().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Everything the double has is in the state (recorded before its create call).
    let res = env.fleet_resources("mega");
    for (zone, name) in d.existing("instances") {
        let zone = zone.trim_start_matches("zones/").to_string();
        assert!(
            res.iter()
                .any(|r| r["kind"] == "instance" && r["name"] == name.as_str() && r["zone"] == zone.as_str()),
            "{name} in {zone} unrecorded: {res:?}"
        );
    }
    assert!(res.iter().any(|r| r["state"] == "creating"), "{res:?}");

    d.slow_operations(Duration::from_millis(20));
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply again");
    assert!(err.contains("adopted"), "{err}");
    for name in ["mega-0", "mega-1"] {
        let posts = d.instance_inserts().iter().filter(|b| b["name"] == name).count();
        assert_eq!(posts, 1, "{name} inserted once");
    }
    assert_eq!(d.existing("instances").len(), 2);
    assert!(env
        .fleet_resources("mega")
        .iter()
        .all(|r| r["state"] == "created"));
    // gc agrees: nothing unknown.
    let out = env.run(&["fleet", "gc", "--json"]).await;
    ok(&out, "gc");
    let orphans: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(orphans, serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_finds_a_planted_orphan_and_deletes_it_with_yes() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    d.plant_instance(
        "us-central1-a",
        "ghost-0",
        serde_json::json!({"flightdeck-fleet": "ghost", "flightdeck-owner": "tester"}),
    );
    d.plant_instance(
        "us-central1-a",
        "someone-else",
        serde_json::json!({"flightdeck-fleet": "x", "flightdeck-owner": "bob"}),
    );
    let out = env.run(&["fleet", "gc", "--json"]).await;
    ok(&out, "gc");
    let orphans: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        orphans,
        serde_json::json!([{"kind": "instance", "name": "ghost-0", "scope": "us-central1-a", "fleet": "ghost"}])
    );
    assert!(
        d.calls("DELETE", "").is_empty(),
        "gc without --yes deletes nothing"
    );
    let out = env.run(&["fleet", "gc", "--yes"]).await;
    ok(&out, "gc --yes");
    let mut left: Vec<String> = d.existing("instances").into_iter().map(|(_, n)| n).collect();
    left.sort();
    assert_eq!(left, vec!["mega-0", "mega-1", "someone-else"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_spot_nodes_show_up_in_status() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    let out = env.run(&["fleet", "status", "mega", "--json"]).await;
    ok(&out, "status while running");
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        h.as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "RUNNING" && n["lost"].is_null()),
        "{h}"
    );
    // Spot VMs that have run 100 ms are preempted from now on.
    d.preempt_spot_after(Duration::from_millis(100));
    // Poll status until the double has preempted both (a deadline, not a timed assertion).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let health = loop {
        let out = env.run(&["fleet", "status", "mega", "--json"]).await;
        let h: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if h.as_array()
            .is_some_and(|a| a.iter().all(|n| !n["lost"].is_null()))
        {
            assert_eq!(out.status.code(), Some(1), "lost nodes make status fail");
            break h;
        }
        assert!(std::time::Instant::now() < deadline, "never preempted: {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for n in health.as_array().unwrap() {
        assert_eq!(n["status"], "TERMINATED");
        assert_eq!(n["lost"], "preempted (TERMINATED)");
        assert_eq!(n["provisioning_model"], "SPOT");
    }
    let res = env.fleet_resources("mega");
    assert!(res
        .iter()
        .filter(|r| r["kind"] == "instance")
        .all(|r| r["lost"] == "preempted (TERMINATED)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_429_and_503_are_retried_with_the_same_request_id() {
    let d = GceDouble::start().await;
    d.burst("/zones/us-east4-a/instances", 503, 2);
    d.burst("/operations/", 429, 3);
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    let posts = d.calls("POST", "/zones/us-east4-a/instances");
    assert_eq!(posts.iter().filter(|r| r.status == 503).count(), 2);
    assert_eq!(posts.iter().filter(|r| r.status == 200).count(), 2);
    for ok_post in posts.iter().filter(|r| r.status == 200) {
        let name = serde_json::from_str::<Value>(&ok_post.body).unwrap()["name"].clone();
        let ids: std::collections::HashSet<&str> = posts
            .iter()
            .filter(|r| serde_json::from_str::<Value>(&r.body).unwrap()["name"] == name)
            .map(|r| r.param("requestId").unwrap())
            .collect();
        assert_eq!(ids.len(), 1, "retries of {name} carry one requestId");
    }
    assert_eq!(d.existing("instances").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dstack_a4_and_a3_mega_files_plan_as_is() {
    let d = GceDouble::start().await;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dstack");
    // dstack's backend settings for A3 Mega: eight extra VPCs.
    let vpcs: Vec<String> = (1..=8).map(|k| format!("dstack-gpu-data-net-{k}")).collect();
    let env = Env::new(
        &d,
        &format!("  regions: [europe-west4]\n  extra_vpcs: [{}]\n", vpcs.join(", ")),
    )
    .await;
    let out = env
        .run(&[
            "fleet",
            "plan",
            &fixtures.join("a3mega-fleet.dstack.yml").display().to_string(),
            "--json",
        ])
        .await;
    ok(&out, "plan a3mega");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["placement_policy", "instance", "instance"]);
    let i = &plan["changes"][1];
    assert_eq!(
        (i["zone"].as_str(), i["provisioning_model"].as_str()),
        (Some("europe-west4-b"), Some("SPOT"))
    );
    assert_eq!(i["nics"]["layout"], "1+8 GVNIC");
    assert!(plan["fallbacks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f.as_str().unwrap().contains("STANDARD")));

    // A4: one extra VPC and a RoCE VPC, in the zone the file names.
    let env = Env::new(
        &d,
        "  extra_vpcs: [dstack-gvnic-net-1]\n  roce_vpcs: [dstack-mrdma]\n",
    )
    .await;
    let out = env
        .run(&[
            "fleet",
            "plan",
            &fixtures.join("a4-fleet.dstack.yml").display().to_string(),
            "--json",
        ])
        .await;
    ok(&out, "plan a4");
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "instance")
        .unwrap()
        .clone();
    assert_eq!(i["zone"], "us-west2-c");
    assert_eq!(i["machine_type"], "a4-highgpu-8g");
    assert_eq!(i["nics"]["count"], 10);
    assert_eq!(i["hourly_usd"], Value::Null, "the catalog has no A4 host price");
    assert!(d.requests().is_empty(), "plans call nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shrinking_a_fleet_deletes_the_nodes_the_plan_says() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", &MEGA_SPOT.replace("nodes: 2", "nodes: 3"));
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply 3");
    assert_eq!(d.existing("instances").len(), 3);
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "plan", &file, "--json"]).await;
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let deletes: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "delete")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(deletes, vec!["mega-2"]);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply 2");
    let mut left: Vec<String> = d.existing("instances").into_iter().map(|(_, n)| n).collect();
    left.sort();
    assert_eq!(left, vec!["mega-0", "mega-1"]);
    let state = env.state();
    assert_eq!(state["fleets"][0]["nodes"].as_array().unwrap().len(), 2);
    assert!(!env.fleet_resources("mega").iter().any(|r| r["name"] == "mega-2"));
}

/// The double's instances bound to testbed nodes (real sshd in network namespaces behind
/// a bastion): apply logs in to each through the bastion, `exec` runs on them, delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_bound_to_testbed_nodes_apply_exec_delete() {
    let Some(tb) = tokio::task::spawn_blocking(|| support::testbed::Testbed::new(2, 0))
        .await
        .unwrap()
    else {
        return;
    };
    let d = GceDouble::start().await;
    let addrs: Vec<String> = tb.nodes.iter().map(|n| n.addr.clone()).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    d.internal_pool(&refs);
    let key = tb.user_key.display();
    let config = format!(
        "  public_ips: false\n  ssh_user: root\n  ssh_public_key: {key}.pub\n  identity_file: {key}\n  proxy_jump:\n    hostname: {b}\n    user: root\n    identity_file: {key}\n",
        b = tb.bastion.addr
    );
    let env = Env::new(&d, &config).await;
    let file = env.write_fleet("tbg.yaml", &MEGA_SPOT.replace("name: mega", "name: tbg"));
    let out = env
        .run(&["fleet", "apply", &file, "--yes", "--accept-new-host-keys"])
        .await;
    let err = ok(&out, "apply");
    assert!(err.contains("SSH login works"), "{err}");
    let body = &d.instance_inserts()[0];
    assert!(
        body["networkInterfaces"][0]["accessConfigs"].is_null(),
        "no external IP: {body}"
    );
    let state = env.state();
    let mut hosts: Vec<String> = state["fleets"][0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_eq!(n["proxy_jump"]["host"], tb.bastion.addr.as_str());
            n["host"].as_str().unwrap().to_string()
        })
        .collect();
    hosts.sort();
    let mut want = addrs.clone();
    want.sort();
    assert_eq!(hosts, want);

    let out = env.run(&["exec", "tbg", "--", "ip -4 -o addr show eth0"]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for i in 0..2 {
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.starts_with(&format!("tbg-{i}: ")))
                .count(),
            1,
            "{stdout}"
        );
    }
    for a in &addrs {
        assert!(stdout.contains(&format!("{a}/")), "{a} not among\n{stdout}");
    }
    ok(&env.run(&["fleet", "delete", "tbg", "--yes"]).await, "delete");
    assert!(d.existing("instances").is_empty());
    drop(tb);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_also_finds_unrecorded_resources_marked_for_the_fleet() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    let marker = flightdeck::cloud::gcp::plan::marker("mega", "tester");
    d.plant(
        "networks",
        "global",
        "mega-stray",
        serde_json::json!({"description": marker}),
    );
    d.plant(
        "networks",
        "global",
        "theirs",
        serde_json::json!({"description": "not ours"}),
    );
    let out = env.run(&["fleet", "delete", "mega", "--yes"]).await;
    let err = ok(&out, "delete");
    assert!(
        err.contains("mega-stray: marked for this fleet but not recorded"),
        "{err}"
    );
    let nets: Vec<String> = d.existing("networks").into_iter().map(|(_, n)| n).collect();
    assert_eq!(nets, vec!["theirs"]);
    assert!(d.existing("instances").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_policy_auto_falls_back_to_on_demand_after_every_spot_zone() {
    let d = GceDouble::start().await;
    d.spot_outage();
    let env = Env::new(&d, "").await;
    let file = env.write_fleet(
        "mega.yaml",
        &MEGA_SPOT.replace("spot_policy: spot", "spot_policy: auto"),
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    for n in 1..=6 {
        assert!(err.contains(&format!("try {n}: a3-megagpu-8g SPOT in")), "{err}");
    }
    assert!(
        err.contains("try 7: a3-megagpu-8g STANDARD in us-central1-a at $92.21/h"),
        "{err}"
    );
    let models: Vec<Value> = d
        .instance_inserts()
        .iter()
        .map(|b| b["scheduling"]["provisioningModel"].clone())
        .collect();
    assert_eq!(
        models.iter().filter(|m| *m == "SPOT").count(),
        12,
        "two nodes in each of six Spot zones"
    );
    assert_eq!(models.iter().filter(|m| *m == "STANDARD").count(), 2);
    let standard = d
        .instance_inserts()
        .into_iter()
        .find(|b| b["scheduling"]["provisioningModel"] == "STANDARD")
        .unwrap();
    // In a compact placement policy a VM is not restarted elsewhere (Cluster Toolkit's
    // vm-instance sets automaticRestart false with compact placement).
    assert_eq!(standard["scheduling"]["automaticRestart"], false);
    assert_eq!(standard["scheduling"]["onHostMaintenance"], "TERMINATE");
    assert!(standard["scheduling"]["instanceTerminationAction"].is_null());
    let res = env.fleet_resources("mega");
    assert!(res
        .iter()
        .filter(|r| r["kind"] == "instance")
        .all(|r| r["provisioning_model"] == "STANDARD"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_delete_then_deleted_again_leaves_nothing() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", &MEGA_SPOT.replace("gpudirect: none", "create: true"));
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    d.slow_operations(Duration::from_secs(3));
    let mut child = env.spawn(&["fleet", "delete", "mega", "--yes"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while d.calls("DELETE", "").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the deletes never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let res = env.fleet_resources("mega");
    assert!(
        res.iter().any(|r| r["state"] == "deleting"),
        "recorded as deleting before the call: {res:?}"
    );
    d.slow_operations(Duration::from_millis(20));
    ok(
        &env.run(&["fleet", "delete", "mega", "--yes"]).await,
        "delete again",
    );
    for c in [
        "instances",
        "networks",
        "firewalls",
        "subnetworks",
        "resourcePolicies",
    ] {
        assert!(d.existing(c).is_empty(), "{c} left: {:?}", d.existing(c));
    }
    assert!(env.state()["fleets"].as_array().unwrap().is_empty());
}

/// What the cockpit runs on each reload of the Fleets view: every GCP fleet's nodes
/// checked, lost ones marked in the state (the views show them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cockpits_check_marks_preempted_nodes_in_the_state() {
    use flightdeck::cloud::gcp::backend::GcpBackend;
    use flightdeck::cloud::gcp::settings::{Creds, GcpSettings};
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    // Only this test reads the process environment (the others hand it to children).
    std::env::set_var("FLIGHTDECK_GCP_COMPUTE_URL", d.origin());
    let backend = GcpBackend {
        settings: GcpSettings {
            project_id: Some(PROJECT.into()),
            owner: Some("tester".into()),
            creds: Some(Creds::ServiceAccount {
                filename: None,
                data: Some(d.credentials().to_string()),
            }),
            ..GcpSettings::default()
        },
        catalog: std::sync::Arc::new(flightdeck::catalog::Catalog::embedded().clone()),
        state_dir: env.home.join("fd/state"),
        home: Some(env.home.clone()),
        ssh: None,
        cancel: Default::default(),
    };
    let check = flightdeck::cloud::gcp::upkeep::check_all(&backend).await.unwrap();
    assert!(!check, "all running: nothing changed");
    d.preempt_spot_after(Duration::from_millis(100));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !flightdeck::cloud::gcp::upkeep::check_all(&backend).await.unwrap() {
        assert!(std::time::Instant::now() < deadline, "never preempted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lost: Vec<Value> = env
        .fleet_resources("mega")
        .into_iter()
        .filter(|r| r["kind"] == "instance")
        .map(|r| r["lost"].clone())
        .collect();
    assert!(lost.iter().any(|l| l == "preempted (TERMINATED)"), "{lost:?}");
}

/// `fleet apply` of each example fleet (TCPX, TCPXO, RDMA) against the double, its
/// instances bound to testbed machine nodes (tests/support/testbed.rs `new_machines`,
/// with the recording shims for apt, docker and the kernel pieces): apply ends with the
/// nodes bootstrapped for the fleet's flavour, and `fleet bootstrap` then finds every
/// step done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_example_fleet_applies_to_bootstrapped_nodes() {
    use support::testbed::{a3_high_nics, a3_mega_nics, a3_ultra_nics, Testbed};
    type Nics = fn(&Testbed, usize);
    let cases: [(&str, &str, &str, usize, usize, Nics); 3] = [
        ("a3-high-tcpx.yaml", "a3-high", "tcpx", 7, 4, a3_high_nics),
        ("a3-mega-tcpxo.yaml", "a3-mega", "tcpxo", 9, 8, a3_mega_nics),
        ("a3-ultra-rdma.yaml", "a3-ultra", "rdma", 6, 1, a3_ultra_nics),
    ];
    for (file, name, flavour, steps, data_nics, nics) in cases {
        let Some(tb) = tokio::task::spawn_blocking(move || Testbed::new_machines(2, data_nics))
            .await
            .unwrap()
        else {
            return;
        };
        // The NICs as the flavour's image names them (and, for RDMA, a double of its
        // MRDMA devices), before anything connects.
        for i in 0..2 {
            nics(&tb, i);
        }
        let d = GceDouble::start().await;
        let addrs: Vec<String> = tb.nodes.iter().map(|n| n.addr.clone()).collect();
        let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
        d.internal_pool(&refs);
        let key = tb.user_key.display();
        let config = format!(
            "  bootstrap: true\n  public_ips: false\n  ssh_user: root\n  ssh_public_key: {key}.pub\n  identity_file: {key}\n  proxy_jump:\n    hostname: {b}\n    user: root\n    identity_file: {key}\n",
            b = tb.bastion.addr
        );
        let env = Env::new(&d, &config).await;
        let out = env
            .run(&[
                "fleet",
                "apply",
                &example(file),
                "--yes",
                "--accept-new-host-keys",
            ])
            .await;
        let err = ok(&out, file);
        assert!(
            err.contains(&format!("bootstrap {flavour}: 2 nodes ready")),
            "{err}"
        );
        assert!(err.contains(&format!("{name}-1: bootstrapped")), "{err}");
        for n in &tb.nodes {
            let calls =
                std::fs::read_to_string(n.root.as_ref().unwrap().join("var/lib/fd-shim/calls.log")).unwrap();
            assert!(calls.lines().count() > steps, "{file}: {calls}");
        }
        let out = env.run(&["fleet", "bootstrap", name]).await;
        let err = ok(&out, "bootstrap again");
        assert_eq!(err.matches(": done already").count(), 2 * steps, "{err}");
        // The pre-flight of a run on the fleet passes on both nodes (the run itself then
        // finds no mpirun on the testbed; it is not what this checks).
        let out = env.run(&["nccl", "run", name, "-g", "1", "-e", "1M"]).await;
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("pre-flight: GPUDirect-{flavour} pieces on 2 nodes")),
            "{err}"
        );
        assert!(!err.contains("pre-flight for"), "{file}: {err}");
        ok(&env.run(&["fleet", "delete", name, "--yes"]).await, "delete");
        drop(tb);
    }
}

const ULTRA: &str = "type: fleet\nname: ultra\nnodes: 2\nplacement: cluster\ninstance_types: [a3-ultragpu-8g]\nregions: [us-central1]\nnetwork:\n  create: true\n";

/// A flex-start request waits in Google's queue (the double keeps it queued a few
/// seconds) with "queued for capacity" and the time shown, and is not given up after a
/// fixed time; then the fleet comes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flex_start_request_waits_queued_for_capacity() {
    let d = GceDouble::start().await;
    d.flex_queue(Duration::from_secs(4));
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("ultra.yaml", &format!("{ULTRA}flex_start: 24h\nflex_wait: 30m\n"));
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(
        err.contains("2 instances queued for capacity in us-central1-")
            && err.contains("of up to 30m 00s (flex_wait)"),
        "{err}"
    );
    assert!(err.contains("fleet `ultra`: 2 nodes ready"), "{err}");
    // Tallies feed the status line of a terminal; off one (here, a pipe) they are not text.
    assert!(!err.contains("@@fd-tally"), "{err}");
    assert!(
        d.calls("DELETE", "/instances/ultra-0").is_empty(),
        "a queued VM is never deleted: {err}"
    );
}

/// Ctrl-C while the request is queued cancels it: the queued VMs and what the apply made
/// are deleted, and the state keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_a_queued_flex_start_request_and_leaves_nothing() {
    let d = GceDouble::start().await;
    d.flex_queue(Duration::from_secs(120));
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("ultra.yaml", &format!("{ULTRA}flex_start: 24h\n"));
    let child = env.spawn(&["fleet", "apply", &file, "--yes"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while d.calls("POST", "/instances").len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the inserts never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cancelling: what this apply made is deleted"),
        "{err}"
    );
    assert!(err.contains("cancelled by the operator"), "{err}");
    assert!(
        d.existing("instances").is_empty(),
        "{:?}\n{err}",
        d.existing("instances")
    );
    assert!(
        d.existing("networks").iter().all(|(_, n)| n == "default"),
        "{err}"
    );
    assert!(
        env.fleet_resources("ultra").is_empty(),
        "{:?}",
        env.fleet_resources("ultra")
    );
}

/// No STANDARD request goes out for a type Google sells on-demand only through
/// reservations (the double refuses one); with `reservation:` it does, consuming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_demand_a3_ultra_only_through_a_reservation() {
    let d = GceDouble::start().await;
    d.spot_outage();
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("ultra.yaml", &format!("{ULTRA}spot_policy: auto\n"));
    let out = env.run(&["fleet", "plan", &file]).await;
    let err = ok(&out, "plan");
    assert!(
        err.contains("note: no on-demand (STANDARD) attempt for a3-ultragpu-8g"),
        "{err}"
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    assert!(!out.status.success());
    assert!(d
        .instance_inserts()
        .iter()
        .all(|b| b["scheduling"]["provisioningModel"] == "SPOT"));
    let file = env.write_fleet("ultra.yaml", &format!("{ULTRA}reservation: ultra-res\n"));
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    ok(&out, "apply with a reservation");
    let body = d.instance_inserts().into_iter().last().unwrap();
    assert_eq!(body["scheduling"]["provisioningModel"], "STANDARD");
    assert_eq!(body["reservationAffinity"]["values"][0], "ultra-res");
    assert_eq!(body["serviceAccounts"][0]["email"], "default");
}

/// A reservation with a placement policy of its own (A3 Ultra and A4 reservations
/// usually carry one): the VMs take that policy, as dstack's `create_instance_struct`
/// does, and flightdeck makes no compact policy of its own that could conflict with it
/// (D16). The plan says so before apply looks. Where the double stops: whether Google
/// refuses a VM naming another policy than its reservation's is not modelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservations_own_placement_policy_is_used_and_none_is_made() {
    let d = GceDouble::start().await;
    let policy = format!(
        "https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/us-central1/resourcePolicies/ultra-block-7"
    );
    for z in ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"] {
        d.plant(
            "reservations",
            &format!("zones/{z}"),
            "ultra-res",
            serde_json::json!({"name": "ultra-res", "specificReservationRequired": true,
                   "resourcePolicies": {"placement": policy}}),
        );
    }
    let env = Env::new(&d, "").await;
    let file = env.write_fleet(
        "ultra.yaml",
        &format!(
            "{ULTRA}reservation: ultra-res
"
        ),
    );
    let out = env.run(&["fleet", "plan", &file]).await;
    let err = ok(&out, "plan");
    assert!(
        err.contains("reservation ultra-res: apply looks up its placement policy"),
        "{err}"
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(
        err.contains("its placement policy ultra-block-7 places the VMs"),
        "{err}"
    );
    let inserts = d.instance_inserts();
    assert_eq!(inserts.len(), 2);
    for b in &inserts {
        assert_eq!(
            b["resourcePolicies"],
            serde_json::json!([format!(
                "projects/{PROJECT}/regions/us-central1/resourcePolicies/ultra-block-7"
            )])
        );
        assert_eq!(b["reservationAffinity"]["values"][0], "ultra-res");
    }
    assert!(
        d.calls("POST", "/resourcePolicies").is_empty(),
        "no policy of flightdeck's own"
    );
}

/// An operation error flightdeck does not know blocks that zone and the next is tried,
/// its code and message shown; 403 rate limits are waited out, not called permissions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_operation_errors_block_the_zone_and_rate_limits_are_retried() {
    let d = GceDouble::start().await;
    let env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    let out = env.run(&["fleet", "plan", &file, "--json"]).await;
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "instance")
        .unwrap()["place"]
        .as_str()
        .unwrap()
        .to_string();
    d.operation_error(&first, "NEW_FANCY_FAILURE", "Something Google added last week");
    d.burst("/instances", 403, 2);
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = ok(&out, "apply");
    assert!(
        err.contains(&format!(
            "{first}: NEW_FANCY_FAILURE: Something Google added last week: an error flightdeck does not know; {first} blocked, trying the next zone"
        )),
        "{err}"
    );
    assert!(!err.contains("permission denied"), "{err}");
    assert_eq!(d.existing("instances").len(), 2);
}

/// A named RoCE VPC of another zone: the double answers as Google does, and the zone is
/// left for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mrdma_nics_need_the_roce_profile_of_their_zone() {
    let d = GceDouble::start().await;
    // The RoCE VPC was made for another zone than the one the fleet asks for.
    plant_rdma_vpcs(&d, "u", "us-central1", "europe-west1-b");
    let env = Env::new(&d, "").await;
    let file = env.write_fleet(
        "u.yaml",
        "type: fleet\nname: u\nnodes: 1\ninstance_types: [a3-ultragpu-8g]\navailability_zones: [us-central1-b]\nspot_policy: spot\nnetwork:\n  gpudirect: rdma\n  vpc: u-net-0\n  data_vpcs: [u-net-1]\n  roce_vpc: u-roce\n",
    );
    let out = env.run(&["fleet", "apply", &file, "--yes"]).await;
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Network profile only allows resource creation in location europe-west1-b"),
        "{err}"
    );
    assert!(d.existing("instances").is_empty());
}

/// Apply without credentials (no GOOGLE_APPLICATION_CREDENTIALS, no gcloud file, no
/// metadata server): one error that names Application Default Credentials and how to get
/// them, before any request; nothing is recorded, so nothing is left to delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_without_credentials_fails_once_before_anything() {
    let d = GceDouble::start().await;
    let mut env = Env::new(&d, "").await;
    env.env.retain(|(k, _)| *k != "GOOGLE_APPLICATION_CREDENTIALS");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    env.env.push(("GCE_METADATA_HOST", format!("127.0.0.1:{port}")));
    // A fleet with networks of its own: each would be a request that fails the same way.
    let out = env
        .run(&["fleet", "apply", &example("a3-mega-tcpxo.yaml"), "--yes"])
        .await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("gcloud auth application-default login").count(),
        1,
        "one error, naming how to get credentials:\n{err}"
    );
    assert!(
        err.contains("no Google Cloud access token, nothing was changed"),
        "{err}"
    );
    assert!(err.contains("nothing was recorded"), "{err}");
    assert!(d.requests().is_empty(), "{:?}", d.requests().len());
    // ux-walk-2 item 12: without --yes the credentials are found missing before the
    // question is asked, not after a `y`.
    let out = env.run(&["fleet", "apply", &example("a3-mega-tcpxo.yaml")]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no Google Cloud access token"), "{err}");
    assert!(!err.contains("Apply fleet"), "asked first:\n{err}");
    assert!(
        env.state()["fleets"].as_array().is_none_or(|f| f.is_empty()),
        "{}",
        env.state()
    );
}

/// A GCP fleet whose cloud cannot be asked any more (the credentials are gone): delete
/// fails and says how to drop the record; `--forget` drops it and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_that_cannot_be_deleted_can_be_forgotten() {
    let d = GceDouble::start().await;
    let mut env = Env::new(&d, "").await;
    let file = env.write_fleet("mega.yaml", MEGA_SPOT);
    ok(&env.run(&["fleet", "apply", &file, "--yes"]).await, "apply");
    env.env.retain(|(k, _)| *k != "GOOGLE_APPLICATION_CREDENTIALS");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    env.env.push(("GCE_METADATA_HOST", format!("127.0.0.1:{port}")));
    let out = env.run(&["fleet", "delete", "mega", "--yes"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the state keeps fleet `mega`; to drop its record without touching GCP: `flightdeck fleet delete mega --forget`"),
        "{err}"
    );
    assert!(!env.fleet_resources("mega").is_empty());
    let before = d.requests().len();
    let out = env.run(&["fleet", "delete", "mega", "--forget", "--yes"]).await;
    let said = ok(&out, "forget");
    assert!(said.contains("forget  instance         mega-0"), "{said}");
    assert!(
        said.contains("may still exist in GCP: `flightdeck fleet gc`"),
        "{said}"
    );
    assert_eq!(d.requests().len(), before, "--forget asks the cloud nothing");
    assert!(
        env.state()["fleets"].as_array().is_none_or(|f| f.is_empty()),
        "{}",
        env.state()
    );
    assert_eq!(d.existing("instances").len(), 2, "the cloud kept its VMs");
}
