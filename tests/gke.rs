//! The GKE backend against a DOUBLE of a GKE cluster's Kubernetes API
//! (tests/support/k8s_double.rs): first real kubectl v1.33 checks the double speaks the
//! API as a cluster does (get, exec over the websocket, logs -f), then flightdeck is
//! driven through it: a fleet of node pools, commands and pane shells on every node
//! through debug pods, an NCCL run in test pods replaying a recorded GKE all_gather, and
//! a JobSet job held by Kueue, then admitted, followed to its end.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::k8s_double::{KubeDouble, NodeSpec, Options, PoolSpec, Provisioning};
use support::{flightdeck, text};

/// A kubectl >= 1.30: `$FLIGHTDECK_TEST_KUBECTL` (scripts/test.sh finds one and sets it),
/// else v1.33 as google-cloud-cli ships it on this image (`/usr/bin/kubectl` is a version
/// dispatcher; Debian's kubernetes-client is v1.20, whose exec speaks only SPDY).
fn kubectl_path() -> String {
    std::env::var("FLIGHTDECK_TEST_KUBECTL")
        .ok()
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| "/usr/lib/google-cloud-sdk/bin/kubectl.1.33".into())
}

fn nodes() -> Vec<NodeSpec> {
    let n = |name: &str, pool: &str, p: Provisioning, ip: &str| NodeSpec {
        name: name.into(),
        pool: pool.into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: p,
        internal_ip: ip.into(),
    };
    vec![
        n("gke-a3u-flex-0", "a3u-flex", Provisioning::FlexStart, "10.0.0.10"),
        n("gke-a3u-flex-1", "a3u-flex", Provisioning::FlexStart, "10.0.0.11"),
        n("gke-a3u-spot-0", "a3u-spot", Provisioning::Spot, "10.0.0.20"),
    ]
}

/// A DWS flex-start pool with queued provisioning, as a queue with a ProvisioningRequest
/// admission check needs (GKE grows such a pool only for a ProvisioningRequest).
fn queued_pool(name: &str) -> PoolSpec {
    PoolSpec {
        name: name.into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::FlexStart,
        min_nodes: 0,
        max_nodes: 4,
        taints: vec![],
        queued: true,
    }
}

/// The environment that points flightdeck at the double's GKE API with Application
/// Default Credentials the double issues tokens for (written under `dir`).
fn adc_env(d: &KubeDouble, dir: &Path) -> [(&'static str, String); 2] {
    let adc = dir.join("adc.json");
    std::fs::write(&adc, d.adc_credentials().to_string()).unwrap();
    [
        ("GOOGLE_APPLICATION_CREDENTIALS", adc.display().to_string()),
        ("FLIGHTDECK_GKE_API_URL", format!("{}/v1", d.url)),
    ]
}

fn kubectl(d: &KubeDouble, home: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let k = kubectl_path();
    if !Path::new(&k).exists() {
        support::cannot_run(&format!(
            "{k} is missing: the double's conformance check needs kubectl >= 1.30 (websocket exec)"
        ));
    }
    let mut c = Command::new(&k);
    c.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .arg("--kubeconfig")
        .arg(&d.kubeconfig)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .arg("--request-timeout=20s")
        .args(args);
    match stdin {
        Some(input) => {
            use std::io::Write;
            c.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        }
        None => c.output().unwrap(),
    }
}

fn post_pod(d: &KubeDouble, pod: serde_json::Value) {
    // A raw POST: `kubectl create` validates against OpenAPI, which the double does not serve.
    let body = serde_json::to_vec(&pod).unwrap();
    let addr = d.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(s, "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    s.write_all(&body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
}

#[test]
fn kubectl_accepts_the_double() {
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tempfile::tempdir().unwrap();
    let out = kubectl(&d, home.path(), &["get", "nodes,pods", "-o", "json"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["gke-a3u-flex-0", "gke-a3u-flex-1", "gke-a3u-spot-0"]);
    let out = kubectl(
        &d,
        home.path(),
        &[
            "get",
            "nodes",
            "-l",
            "cloud.google.com/gke-nodepool=a3u-spot",
            "-o",
            "name",
        ],
        None,
    );
    assert_eq!(
        text(&out.stdout).trim(),
        "node/gke-a3u-spot-0",
        "{}",
        text(&out.stderr)
    );

    post_pod(
        &d,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
        "spec": {"nodeName": "gke-a3u-flex-0", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}]}}),
    );
    let out = kubectl(
        &d,
        home.path(),
        &[
            "exec",
            "sleeper",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "out\n");
    assert!(text(&out.stderr).contains("err"), "{}", text(&out.stderr));
    let out = kubectl(
        &d,
        home.path(),
        &["exec", "-i", "sleeper", "--", "cat"],
        Some("hello\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\n");

    post_pod(
        &d,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker"},
        "spec": {"nodeName": "gke-a3u-flex-1", "containers": [{"name": "c", "image": "busybox",
            "command": ["sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"]}]}}),
    );
    let out = kubectl(&d, home.path(), &["logs", "-f", "talker"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "line 1\nline 2\nline 3\n");
    let out = kubectl(
        &d,
        home.path(),
        &["get", "pod", "talker", "-o", "jsonpath={.status.phase}"],
        None,
    );
    assert_eq!(text(&out.stdout), "Succeeded");
    let out = kubectl(
        &d,
        home.path(),
        &["delete", "pod", "sleeper", "--wait=false"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!d.pods().iter().any(|p| p["metadata"]["name"] == "sleeper"));
}

/// A fleet file for the double's cluster: the flex-start pool.
fn fleet_file(dir: &Path, d: &KubeDouble, extra: &str) -> PathBuf {
    let f = dir.join("a3u.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: a3u\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-flex]\n  debug_image: ubuntu:24.04\n{extra}",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    f
}

/// The double's cluster with the flex-start pool's fleet applied: the double, the
/// operator's home and the fleet file.
fn applied(dir: &Path) -> (KubeDouble, PathBuf, PathBuf) {
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(dir, &d, "");
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (d, home, f)
}

/// The image directories: the gIB diagnostic image's run script replays a recorded
/// 2-node B200 all_gather on GKE (tests/fixtures/nccl/gke-b200-2node-all_gather.txt).
fn images(dir: &Path) -> Vec<(String, PathBuf)> {
    let gib = dir.join("image-gib");
    std::fs::create_dir_all(&gib).unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/gke-b200-2node-all_gather.txt");
    let script = gib.join("run_nccl_tests.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n# DOUBLE of the gIB image's run_nccl_tests.sh: replays a recorded real run\necho \"# DOUBLE run_nccl_tests.sh $*\"\nwhile IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.02; done < '{}'\n",
            fixture.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    vec![("us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/".into(), gib)]
}

#[test]
fn a_gke_fleet_shows_its_pools_runs_commands_and_an_nccl_test() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        images: images(tmp.path()),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("pool a3u-flex: a3-ultragpu-8g (DWS flex-start), 2 nodes, 2 ready, 16 GPUs"),
        "{err}"
    );
    let out = flightdeck(&home, &["fleet", "status", "a3u"]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    assert!(
        o.contains("a3u-flex") && o.contains("DWS flex-start") && o.contains("gke-a3u-flex-1"),
        "{o}"
    );
    assert!(
        !o.contains("gke-a3u-spot-0"),
        "the spot pool is not the fleet's:\n{o}"
    );

    // A command on every node, through a debug pod per node.
    let out = flightdeck(&home, &["exec", "a3u", "--", "echo node $HOSTNAME; exit 0"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let o = text(&out.stdout);
    assert!(
        o.contains("fd-debug-gke-a3u-flex-0") && o.contains("fd-debug-gke-a3u-flex-1"),
        "{o}"
    );
    // It made a debug pod per node, and removed them at its end (H3).
    let posts = d
        .requests()
        .iter()
        .filter(|r| r.as_str() == "POST /api/v1/namespaces/default/pods")
        .count();
    assert_eq!(posts, 2);
    assert!(d
        .pods()
        .iter()
        .all(|p| p["metadata"]["labels"]["flightdeck-role"] != "debug"));
    let out = flightdeck(&home, &["exec", "a3u", "--", "exit 7"]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    // The VM bootstrap is not for GKE nodes.
    let out = flightdeck(&home, &["fleet", "bootstrap", "a3u"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is a GKE fleet"),
        "{}",
        text(&out.stderr)
    );
    // NCCL: test pods per node, the gIB script on the first, parsed and judged.
    let out = flightdeck(&home, &["nccl", "run", "a3u", "--test", "all_gather", "--json"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 24, "{doc}");
    let last = doc["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["out_of_place"]["busbw"].as_f64(), Some(376.40), "{last}");
    assert_eq!(doc["machine_type"]["name"], "a3-ultragpu-8g");
    assert!(err.contains("creating 2 test pods"), "{err}");
    assert!(err.contains("removed 2 test pods"), "{err}");
    let log: String = d
        .pods()
        .iter()
        .map(|p| p["metadata"]["name"].to_string())
        .collect();
    assert!(
        !log.contains("fd-nccl-"),
        "test pods are removed after the run: {log}"
    );
    let run_script_saw = d
        .requests()
        .iter()
        .any(|r| r.contains("/pods/fd-nccl-") && r.ends_with("/exec?…"));
    assert!(run_script_saw, "the run went through exec into the test pod");

    // Deleting the fleet removes what flightdeck made for it.
    let out = flightdeck(&home, &["fleet", "delete", "a3u", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(d
        .pods()
        .iter()
        .all(|p| p["metadata"]["labels"]["flightdeck-fleet"] != "a3u"));
}

/// A fleet named by project, location and cluster: the GKE API gives the endpoint, and
/// Application Default Credentials the bearer token, as gke-gcloud-auth-plugin does.
#[test]
fn a_cluster_named_by_project_location_and_name_uses_adc() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.path().join("byname.yaml");
    std::fs::write(
        &f,
        "type: fleet\nname: byname\ngke:\n  project: my-project\n  location: us-central1\n  cluster: a3u-cluster\n  selector: cloud.google.com/gke-spot=true\n",
    )
    .unwrap();
    let env = adc_env(&d, tmp.path());
    let out = support::flightdeck_env(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"], &env);
    // The plan on stdout, the progress on stderr.
    let err = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("projects/my-project/locations/us-central1/clusters/a3u-cluster"),
        "{err}"
    );
    assert!(
        err.contains("pool a3u-spot: a3-ultragpu-8g (Spot), 1 node"),
        "{err}"
    );
    assert!(d
        .requests()
        .iter()
        .any(|r| r == "GET /v1/projects/my-project/locations/us-central1/clusters/a3u-cluster"));
    assert!(
        d.adc_requests() >= 2,
        "the GKE API and the cluster saw the ADC token"
    );
    // A wrong cluster: the GKE API's 404 in the operator's words.
    std::fs::write(
        &f,
        "type: fleet\nname: byname\ngke:\n  project: my-project\n  location: us-central1\n  cluster: no-such\n",
    )
    .unwrap();
    let out = support::flightdeck_env(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"], &env);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("GKE API projects/my-project/locations/us-central1/clusters/no-such: 404")
            && err.contains("NOT_FOUND"),
        "{err}"
    );
}

/// A DWS flex-start pool scaled to zero: the fleet has no nodes yet, and a job still
/// starts (its ranks on no node until Kueue admits it and GKE brings nodes up), asking
/// Kueue's ProvisioningRequest for the fleet file's `flex_start` as its longest run.
#[test]
fn a_job_on_a_flex_start_pool_at_zero_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        queues: vec![("dws-queue".into(), true)],
        admit_after: Duration::from_millis(500),
        pools: vec![queued_pool("a3u-dws")],
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.path().join("dws.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: dws\nflex_start: 2h\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-dws]\n  queue: dws-queue\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no nodes now"), "{err}");
    let job = tmp.path().join("j.yaml");
    // Without gpus_per_node and no node to count on (the pool is at zero), the job says
    // what it needs.
    std::fs::write(
        &job,
        "type: task\nname: dwsjob2\nfleet: dws\nnodes: 2\ncommands: [\"echo world $WORLD_SIZE\"]\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("give `gpus_per_node`"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&job, "type: task\nname: dwsjob\nfleet: dws\nnodes: 2\ngpus_per_node: 8\ncommands:\n  - echo rank $NODE_RANK world $WORLD_SIZE\n").unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("DWS flex-start (at most 7200 s)"), "{err}");
    let js = d.jobsets();
    assert_eq!(
        js[0]["metadata"]["annotations"]["provreq.kueue.x-k8s.io/maxRunDurationSeconds"],
        "7200"
    );
    assert_eq!(
        js[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"]
            ["cloud.google.com/gke-flex-start"],
        "true"
    );
    let out = flightdeck(&home, &["job", "logs", "dwsjob"]);
    let o = text(&out.stdout);
    assert!(
        o.contains("rank 0 world 16") && o.contains("rank 1 world 16"),
        "{o}{}",
        text(&out.stderr)
    );
    // Once the pool has nodes (the first job brought them up), the same job counts the
    // GPUs on the nodes the cluster has now (gke review H1: not on the apply's record).
    std::fs::write(
        &job,
        "type: task\nname: dwsjob3\nfleet: dws\nnodes: 2\ncommands: [\"echo world $WORLD_SIZE\"]\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&flightdeck(&home, &["job", "logs", "dwsjob3"]).stdout);
    assert!(o.contains("world 16"), "{o}");
}

/// A job on a GKE fleet runs in pods: its script gets the pod profile of its GPUDirect
/// flavour (GKE's mounts and `eth*` names, the driver's libraries first in
/// LD_LIBRARY_PATH, prepended to what the image has), never a VM's (Ubuntu NIC names,
/// plugins under /var/lib/tcpxo).
#[test]
fn a_gke_job_gets_the_pod_nccl_profile_not_the_vm_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home, _f) = applied(tmp.path());
    for flavour in ["tcpxo", "rdma"] {
        let name = format!("prof-{flavour}");
        let job = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(
            &job,
            format!("type: task\nname: {name}\nfleet: a3u\nnccl_profile: {flavour}\ngpus_per_node: 8\ncommands: [\"true\"]\n"),
        )
        .unwrap();
        let out = flightdeck(&home, &["job", "run", "--detach", job.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let sets = d.jobsets();
        let set = sets
            .iter()
            .find(|s| {
                s["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&name))
            })
            .unwrap_or_else(|| panic!("no JobSet for {name}: {sets:?}"));
        let script = set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
            [0]["command"][2]
            .as_str()
            .unwrap();
        for vm_only in ["enp", "/var/lib/tcpxo"] {
            assert!(
                !script.contains(vm_only),
                "{flavour}: a VM's {vm_only} in the pod script:\n{script}"
            );
        }
        assert!(
            script.contains(
                "export LD_LIBRARY_PATH='/usr/local/nvidia/lib64'\"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\""
            ),
            "{flavour}: the driver's libraries are not prepended:\n{script}"
        );
    }
}

/// A job of two 8-GPU ranks on two 8-GPU nodes puts a rank on each node and runs. The
/// double runs JobSet's pod webhook and counts GPUs as the scheduler does: the JobSet's
/// old `exclusive-topology: kubernetes.io/hostname` pinned rank 1 to rank 0's full node,
/// where it stayed Pending.
#[test]
fn a_multi_node_job_gets_a_node_per_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        images: images(tmp.path()),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = tmp.path().join("two.yaml");
    std::fs::write(
        &job,
        "type: task\nname: two\nfleet: a3u\nnodes: 2\ngpus_per_node: 8\ncommands: [\"echo rank $NODE_RANK\"]\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", "--detach", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Each rank placed and past Pending within 20 s (the ranks run `echo`).
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let placed = loop {
        let placed: Vec<(String, String)> = d
            .pods()
            .iter()
            .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "job")
            .map(|p| {
                (
                    p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                    p["status"]["phase"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let all = placed.len() == 2 && placed.iter().all(|(n, p)| !n.is_empty() && p != "Pending");
        if all || std::time::Instant::now() > end {
            break placed;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(placed.len(), 2, "{placed:?}\n{err}");
    assert!(
        placed.iter().all(|(n, p)| !n.is_empty() && p != "Pending"),
        "a rank was never scheduled: {placed:?}"
    );
    assert_ne!(placed[0].0, placed[1].0, "{placed:?}");
}

#[test]
fn a_job_waits_for_kueue_then_runs_to_its_end_with_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let mut images = images(tmp.path());
    let torch = tmp.path().join("image-torch");
    std::fs::create_dir_all(&torch).unwrap();
    images.push(("nvcr.io/nvidia/pytorch".into(), torch));
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        images,
        queues: vec![("a3u-queue".into(), true)],
        admit_after: Duration::from_secs(2),
        pools: vec![queued_pool("a3u-flex")],
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "  queue: a3u-queue\n");
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = tmp.path().join("train.yaml");
    // The lines as Cloud Logging exports them, prefix and all.
    std::fs::write(
        &job,
        "type: task\nname: train\nfleet: a3u\ncommands:\n  - echo \"rank $NODE_RANK of $NNODES master $MASTER_ADDR gpus $GPUS_PER_NODE\"\n  - |\n    for s in 1 2 3; do echo \"INFO 2025-09-09T16:10:48.6Z [resource.labels.containerName: job] Step: $s | Time: 27.02s | TFLOPs/s/GPU: 513.3 | Tokens/s/GPU: 1213 | Loss: 1.3$s\"; sleep 0.2; done\n",
    )
    .unwrap();
    let mut child = support::spawn_flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    // Held by Kueue: a workload waiting for DWS capacity, no pods yet.
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while d.workloads().is_empty() {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("job run ended ({st}) before Kueue saw it:\n{err}");
        }
        assert!(std::time::Instant::now() < end, "no workload within 20s");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(d
        .pods()
        .iter()
        .all(|p| p["metadata"]["labels"]["flightdeck-role"] != "job"));
    let out = flightdeck(&home, &["fleet", "status", "a3u"]);
    let o = text(&out.stdout);
    assert!(
        o.contains("waiting for quota, then DWS capacity") || o.contains("waiting for DWS capacity"),
        "{o}"
    );
    assert!(
        o.contains("a3u-queue") && o.contains("cq-a3u-queue") && o.contains("LOCALQUEUE"),
        "the LocalQueue and its ClusterQueue:\n{o}"
    );
    let status = child.wait().unwrap();
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
    assert!(err.contains("JobSet train-"), "{err}");
    assert!(err.contains("Kueue queue a3u-queue"), "{err}");
    let js = d.jobsets();
    assert_eq!(js[0]["status"]["terminalState"], "Completed", "{js:?}");
    let w = d.workloads();
    assert!(
        w[0]["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Finished"),
        "{w:?}"
    );
    let out = flightdeck(&home, &["job", "show", "train", "--json"]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["state"], "succeeded", "{v}");
    let out = flightdeck(&home, &["job", "logs", "train"]);
    let o = text(&out.stdout);
    assert!(o.contains("rank 0 of 2 master train-"), "{o}");
    assert!(o.contains("rank 1 of 2"), "{o}");
    assert!(
        o.contains("Step: 3 | Time: 27.02s") && !o.contains("[resource.labels"),
        "{o}"
    );
}

/// The NIC and GPU samplers run in the nodes' debug pods, as on SSH nodes: each GKE node
/// streams records with its NICs' counters (the double's pods share this machine's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_streams_from_every_gke_node() {
    use flightdeck::telemetry::{service, Interval, TelemetryEvent};
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let tmp = tempfile::tempdir().unwrap();
    let fleet = flightdeck::fleet::load(&fleet_file(tmp.path(), &d, "")).unwrap();
    let t = flightdeck::cloud::gke::backend::Target::of(&fleet).unwrap();
    let transport = test_reach(tmp.path());
    let targets = t.targets("a3u", &t.nodes(transport.kube()).await.unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let interval = Interval::from_millis(200).unwrap();
    let _samplers = service::spawn(transport, targets, service::Options::once(interval), tx);
    let mut seen = [0usize; 2];
    while seen.iter().any(|&n| n < 2) {
        match tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("records in time")
        {
            Some(TelemetryEvent::Record { node, record, .. }) => {
                assert!(record.nics.iter().any(|n| n.name == "lo"), "{:?}", record.nics);
                seen[node] += 1;
            }
            Some(TelemetryEvent::Down { node, error, .. }) => panic!("node {node} down: {error}"),
            Some(_) => {}
            None => panic!("the samplers ended"),
        }
    }
    assert_eq!(
        d.pods()
            .iter()
            .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "debug")
            .count(),
        2
    );
}

fn test_reach(home: &Path) -> flightdeck::reach::Reach {
    let pool = flightdeck::ssh::pool::Pool::new(flightdeck::ssh::client::SshOptions {
        known_hosts: vec![],
        policy: flightdeck::ssh::known_hosts::HostKeyPolicy::Refuse,
        prompter: std::sync::Arc::new(flightdeck::ssh::client::NoPrompt),
        use_agent: false,
        agent_socket: None,
        keys: Default::default(),
    });
    let resolver = std::sync::Arc::new(flightdeck::ssh::pool::Resolver::new(home));
    flightdeck::reach::Reach::new(pool, resolver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pane_is_a_shell_on_a_tty_in_the_node_debug_pod() {
    use flightdeck::term::session::{self, PaneEvent, PaneInput};
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let tmp = tempfile::tempdir().unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let fleet = flightdeck::fleet::load(&f).unwrap();
    let t = flightdeck::cloud::gke::backend::Target::of(&fleet).unwrap();
    let reach = test_reach(tmp.path());
    let nodes = t.nodes(reach.kube()).await.unwrap();
    let targets = t.targets("a3u", &nodes);
    let screen = flightdeck::term::new_screen(10, 60);
    let (etx, mut erx) = tokio::sync::mpsc::channel(1024);
    let h = session::spawn(0, reach.clone(), targets[1].clone(), screen.clone(), etx);
    h.input
        .send(PaneInput::Bytes(
            b"echo pane-$((6*7)) $HOSTNAME; stty size\n".to_vec(),
        ))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let c = screen.read().unwrap().screen().contents();
        if c.contains("pane-42 fd-debug-gke-a3u-flex-1") && c.contains("10 60") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never appeared:\n{c}");
        let _ = tokio::time::timeout(Duration::from_millis(200), erx.recv()).await;
    }
    // A pane in a chosen pod's container (`:open a3u app=torch-job`).
    post_pod(
        &d,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0", "labels": {"app": "torch-job"}},
        "spec": {"nodeName": "gke-a3u-flex-0", "containers": [{"name": "job", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "command": ["sleep", "300"]}]}}),
    );
    let pods = t.pods(reach.kube(), "a3u", "app=torch-job").await.unwrap();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].kube().unwrap().container.as_deref(), Some("job"));
    let screen2 = flightdeck::term::new_screen(10, 60);
    let (etx2, mut erx2) = tokio::sync::mpsc::channel(1024);
    let h2 = session::spawn(1, reach.clone(), pods[0].clone(), screen2.clone(), etx2);
    h2.input
        .send(PaneInput::Bytes(b"echo in-$HOSTNAME\n".to_vec()))
        .await
        .unwrap();
    loop {
        let c = screen2.read().unwrap().screen().contents();
        if c.contains("in-trainer-0") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never appeared:\n{c}");
        let _ = tokio::time::timeout(Duration::from_millis(200), erx2.recv()).await;
    }
    assert!(
        !d.pods()
            .iter()
            .any(|p| p["metadata"]["name"] == "fd-debug-gke-a3u-flex-0"),
        "a pod's pane needs no debug pod"
    );
    h.input
        .send(PaneInput::Bytes(b"exit 4\n".to_vec()))
        .await
        .unwrap();
    loop {
        let e = tokio::time::timeout_at(deadline, erx.recv())
            .await
            .expect("exit in time")
            .unwrap();
        if e == PaneEvent::State(0, session::PaneState::Exited(Some(4))) {
            break;
        }
    }
}

/// The cockpit on a GKE fleet: Enter opens a pane on every node (a shell in each node's
/// debug pod), broadcast typing reaches both, the Nodes view shows the pools, and
/// quitting removes the debug pods it made.
#[test]
fn the_cockpit_opens_panes_on_every_gke_node_and_cleans_up() {
    use support::tmux::{self, Tmux};
    assert!(
        tmux::tmux_available(),
        "tmux is not installed: run ./scripts/test.sh, which installs it"
    );
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let t = Tmux::start(&[], &[("SHELL", "/bin/sh")], 160, 40);
    t.wait_text("? help");
    let f = fleet_file(t.home.path(), &d, "");
    let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["fleet", "apply", f.to_str().unwrap(), "--yes"])
        .env("FLIGHTDECK_HOME", t.fd_home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    t.keys(&["2"]);
    t.keys(&["r"]);
    t.wait_text("gke");
    t.keys(&["Enter"]);
    t.wait_text("gke-a3u-flex-0 ● connected");
    t.wait_text("gke-a3u-flex-1 ● connected");
    t.keys(&["b"]);
    t.keys(&["i"]);
    t.wait_text("TYPING");
    t.type_text("echo hi-$HOSTNAME");
    t.keys(&["Enter"]);
    t.wait_text("hi-fd-debug-gke-a3u-flex-0");
    t.wait_text("hi-fd-debug-gke-a3u-flex-1");
    t.keys(&["C-]"]);
    t.wait_gone("TYPING");
    t.keys(&["3"]);
    t.wait_text("DWS flex-start");
    assert_eq!(
        d.pods()
            .iter()
            .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "debug")
            .count(),
        2
    );
    t.keys(&["q"]);
    t.wait_text("Quit flightdeck?");
    t.keys(&["y"]);
    assert_eq!(t.wait_exit(), 0);
    assert!(
        d.pods()
            .iter()
            .all(|p| p["metadata"]["labels"]["flightdeck-role"] != "debug"),
        "the cockpit removed its debug pods as it quit"
    );
}

/// A raw POST of `obj` to `path` on the double (as another operator's kubectl would).
fn post(d: &KubeDouble, path: &str, obj: &serde_json::Value) {
    let body = serde_json::to_vec(obj).unwrap();
    let addr = d.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(s, "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    s.write_all(&body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
}

/// flightdeck as operator `user`, with more environment.
fn fd_as(home: &Path, user: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut e: Vec<(&str, String)> = vec![("USER", user.to_string())];
    e.extend(env.iter().map(|(k, v)| (*k, v.to_string())));
    support::flightdeck_env(home, args, &e)
}

/// A JobSet held by a queue that does not exist (no pods), with `labels`.
fn held_jobset(name: &str, labels: serde_json::Value) -> serde_json::Value {
    let mut l = labels;
    l["kueue.x-k8s.io/queue-name"] = "nowhere".into();
    l["app.kubernetes.io/managed-by"] = "flightdeck".into();
    serde_json::json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": l}, "spec": {"suspend": true, "replicatedJobs": []}})
}

/// Hostile review D4: `fleet gc` and `fleet delete` remove only this owner's objects (the
/// owner label the GCP backend uses, and the state directory's id); a teammate's JobSets
/// and debug pods, even of a fleet with the same name, are listed and not touched.
#[test]
fn gc_and_delete_touch_only_this_owners_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = fd_as(
        &home,
        "carol",
        &["fleet", "apply", f.to_str().unwrap(), "--yes"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Carol's own object of a fleet she no longer has: hers (owner and state directory).
    let state = std::fs::canonicalize(home.join(".local/state/flightdeck")).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let carol = flightdeck::cloud::gke::Owner::new("carol", host.trim(), &state);
    let sets = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets";
    post(
        &d,
        sets,
        &held_jobset(
            "carol-old-1",
            serde_json::json!({"flightdeck-fleet": "gone",
        "flightdeck-owner": "carol", "flightdeck-state": carol.state}),
        ),
    );
    // Alice's running training job, and her job in a fleet also named a3u.
    post(
        &d,
        sets,
        &held_jobset(
            "alice-pretrain-1",
            serde_json::json!({"flightdeck-fleet": "alice-h200",
        "flightdeck-owner": "alice", "flightdeck-state": "0000beef"}),
        ),
    );
    post(
        &d,
        sets,
        &held_jobset(
            "a3u-alice-job",
            serde_json::json!({"flightdeck-fleet": "a3u",
        "flightdeck-owner": "alice", "flightdeck-state": "0000beef"}),
        ),
    );
    // Carol's object from another state directory of hers: not this one's.
    post(
        &d,
        sets,
        &held_jobset(
            "carol-laptop-1",
            serde_json::json!({"flightdeck-fleet": "gone",
        "flightdeck-owner": "carol", "flightdeck-state": "12345678"}),
        ),
    );
    // Alice's debug pod on a node of fleet a3u (her pane is open in it).
    post_pod(
        &d,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fd-debug-gke-a3u-flex-0-alice",
            "labels": {"app.kubernetes.io/managed-by": "flightdeck", "flightdeck-fleet": "a3u", "flightdeck-role": "debug",
                       "flightdeck-owner": "alice", "flightdeck-state": "0000beef"}},
        "spec": {"nodeName": "gke-a3u-flex-0", "containers": [{"name": "debug", "image": "ubuntu:24.04", "command": ["sleep", "300"]}]}}),
    );
    let out = fd_as(&home, "carol", &["fleet", "gc"], &[]);
    let o = text(&out.stdout) + &text(&out.stderr);
    assert!(out.status.success(), "{o}");
    assert!(
        o.contains("carol-old-1") && o.contains("its fleet is not in the state"),
        "{o}"
    );
    assert!(
        o.contains("alice-pretrain-1") && o.contains("owned by alice; not touched"),
        "{o}"
    );
    assert!(
        o.contains("carol-laptop-1") && o.contains("from another state directory"),
        "{o}"
    );
    assert!(o.contains("fd-debug-gke-a3u-flex-0-alice"), "{o}");
    let out = fd_as(&home, "carol", &["fleet", "gc", "--yes"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let names = |d: &KubeDouble| -> Vec<String> {
        d.jobsets()
            .iter()
            .map(|j| j["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let left = names(&d);
    assert!(!left.contains(&"carol-old-1".to_string()), "{left:?}");
    for kept in ["alice-pretrain-1", "a3u-alice-job", "carol-laptop-1"] {
        assert!(left.contains(&kept.to_string()), "{kept} was deleted: {left:?}");
    }
    assert!(!d
        .requests()
        .iter()
        .any(|r| r.starts_with("DELETE") && r.contains("alice")));
    // `fleet delete a3u` removes carol's objects of a3u only.
    let out = fd_as(&home, "carol", &["fleet", "delete", "a3u", "--yes"], &[]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("JobSet a3u-alice-job owned by alice; not touched"),
        "{err}"
    );
    assert!(
        err.contains("pod fd-debug-gke-a3u-flex-0-alice owned by alice; not touched"),
        "{err}"
    );
    assert!(names(&d).contains(&"a3u-alice-job".to_string()));
    assert!(d
        .pods()
        .iter()
        .any(|p| p["metadata"]["name"] == "fd-debug-gke-a3u-flex-0-alice"));
}

/// The debug pods of fleet `fleet` in the double.
fn debug_pods(d: &KubeDouble) -> Vec<String> {
    d.pods()
        .iter()
        .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "debug")
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GKE review H3 and M6: a debug pod lets Cluster Autoscaler remove its node, a CLI
/// command removes the debug pods it made (at Ctrl-C too), and `fleet gc` removes only
/// debug pods nobody uses (never one a command runs in), idle for a while.
#[test]
fn debug_pods_go_with_their_command_and_gc_keeps_the_ones_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = fd_as(
        &home,
        "carol",
        &["fleet", "apply", f.to_str().unwrap(), "--yes"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let long = |home: &Path| {
        Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(["exec", "a3u", "--", "sleep 60"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("USER", "carol")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // A command runs in both debug pods: gc, even with no idle time asked, keeps them.
    let mut busy = long(&home);
    wait_for("two running debug pods", || debug_pods(&d).len() == 2);
    let pods = d.pods();
    for p in pods
        .iter()
        .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "debug")
    {
        assert_eq!(
            p["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true",
            "{p}"
        );
    }
    std::thread::sleep(Duration::from_millis(1500));
    let idle0 = [("FLIGHTDECK_GKE_DEBUG_IDLE_SECS", "0")];
    let out = fd_as(&home, "carol", &["fleet", "gc", "--yes"], &idle0);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(debug_pods(&d).len(), 2, "gc deleted debug pods in use");
    // Ctrl-C: the command removes the pods it made.
    unsafe { libc::kill(busy.id() as i32, libc::SIGINT) };
    let st = busy.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert!(debug_pods(&d).is_empty(), "{:?}", debug_pods(&d));
    // A command killed outright leaves its pods: idle, so gc finds them, once idle long
    // enough (not with the default wait).
    let mut killed = long(&home);
    wait_for("two running debug pods", || debug_pods(&d).len() == 2);
    std::thread::sleep(Duration::from_millis(500));
    killed.kill().unwrap();
    killed.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = fd_as(&home, "carol", &["fleet", "gc"], &[]);
    assert!(!text(&out.stdout).contains("fd-debug-"), "{}", text(&out.stdout));
    let out = fd_as(&home, "carol", &["fleet", "gc"], &idle0);
    let o = text(&out.stdout);
    assert!(
        o.contains("fd-debug-gke-a3u-flex-0-") && o.contains("a debug pod unused for"),
        "{o}"
    );
    let out = fd_as(&home, "carol", &["fleet", "gc", "--yes"], &idle0);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(debug_pods(&d).is_empty(), "{:?}", debug_pods(&d));
}

/// Hostile review D6: a pod that has a debug pod's name is never used for one: exec
/// makes its own pod (generateName) and runs nothing in the squatter.
#[test]
fn a_pod_squatting_a_debug_pod_name_is_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = fd_as(
        &home,
        "carol",
        &["fleet", "apply", f.to_str().unwrap(), "--yes"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    post_pod(
        &d,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fd-debug-gke-a3u-flex-0",
            "labels": {"app": "not-flightdeck"}},
        "spec": {"nodeName": "gke-a3u-flex-1", "containers": [{"name": "debug", "image": "evil/steal:latest", "command": ["sleep", "300"]}]}}),
    );
    let out = fd_as(
        &home,
        "carol",
        &["exec", "a3u", "--nodes", "0", "--", "echo on $HOSTNAME"],
        &[],
    );
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    assert!(o.contains("on fd-debug-gke-a3u-flex-0-"), "{o}");
    assert!(
        !d.requests()
            .iter()
            .any(|r| r.contains("/pods/fd-debug-gke-a3u-flex-0/exec")),
        "exec went into the squatter"
    );
}

/// GKE review M4: node pools at zero nodes are shown, from the GKE API's node pools
/// (machine type, GPUs a node, autoscaling bounds, flex-start and queued provisioning),
/// in `fleet apply` and `fleet status`.
#[test]
fn pools_at_zero_nodes_are_shown_from_the_gke_api() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    d.add_node_pool(serde_json::json!({"name": "a3u-dws", "status": "RUNNING", "initialNodeCount": 0,
        "config": {"machineType": "a3-ultragpu-8g", "flexStart": true,
                   "accelerators": [{"acceleratorCount": "8", "acceleratorType": "nvidia-h200-141gb"}]},
        "autoscaling": {"enabled": true, "totalMinNodeCount": 0, "totalMaxNodeCount": 8, "locationPolicy": "ANY"},
        "queuedProvisioning": {"enabled": true}}));
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.path().join("dws.yaml");
    std::fs::write(
        &f,
        "type: fleet\nname: dws\ngke:\n  project: my-project\n  location: us-central1\n  cluster: a3u-cluster\n  node_pools: [a3u-flex, a3u-dws]\n",
    )
    .unwrap();
    let env = adc_env(&d, tmp.path());
    let out = support::flightdeck_env(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"], &env);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("pool a3u-dws: a3-ultragpu-8g (DWS flex-start (queued)), 0 nodes, 0 ready, 0 GPUs (autoscaling 0-8, 8x nvidia-h200-141gb a node)"),
        "{err}"
    );
    assert!(
        err.contains("pool a3u-flex: a3-ultragpu-8g (DWS flex-start), 2 nodes, 2 ready, 16 GPUs (autoscaling 0-4 per zone)"),
        "{err}"
    );
    assert!(!err.contains("pool a3u-spot"), "not the fleet's: {err}");
    let out = support::flightdeck_env(&home, &["fleet", "status", "dws"], &env);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    let row = o
        .lines()
        .find(|l| l.starts_with("a3u-dws"))
        .unwrap_or_else(|| panic!("{o}"));
    for cell in [
        "a3-ultragpu-8g",
        "8x nvidia-h200-141gb",
        "DWS flex-start (queued)",
        "0/0",
        "0-8",
    ] {
        assert!(row.contains(cell), "{cell} missing: {row}");
    }
}

/// GKE review M2: with no `network.gpudirect`, a GKE fleet's flavour comes from its
/// nodes' machine type (A3 Ultra: RDMA, so the job pod sources gIB's NCCL script), and
/// a fleet whose machine type has GPUDirect but that gets none is warned about.
#[test]
fn a_gke_fleet_gets_the_flavour_of_its_machine_type() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let script_of = |d: &KubeDouble, name: &str| -> String {
        let sets = d.jobsets();
        let set = sets
            .iter()
            .find(|s| {
                s["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name))
            })
            .unwrap_or_else(|| panic!("no JobSet for {name}: {sets:?}"))
            .clone();
        set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
            [2]
        .as_str()
        .unwrap()
        .to_string()
    };
    for (fleet, network, expect_gib) in [
        ("plain", "", true),
        ("nogd", "network:\n  gpudirect: none\n", false),
    ] {
        let f = tmp.path().join(format!("{fleet}.yaml"));
        std::fs::write(
            &f,
            format!(
                "type: fleet\nname: {fleet}\n{network}gke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-flex]\n",
                d.kubeconfig.display()
            ),
        )
        .unwrap();
        let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let name = format!("md-{fleet}");
        let job = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(
            &job,
            format!("type: task\nname: {name}\nfleet: {fleet}\ngpus_per_node: 8\ncommands: [\"true\"]\n"),
        )
        .unwrap();
        let out = flightdeck(
            &home,
            &["job", "run", "--detach", "--no-preflight", job.to_str().unwrap()],
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        let script = script_of(&d, &name);
        assert_eq!(
            script.contains("/usr/local/gib/scripts/set_nccl_env.sh"),
            expect_gib,
            "{fleet}:\n{script}"
        );
        assert_eq!(
            err.contains("a3-ultragpu-8g has GPUDirect (rdma), but fleet `nogd` gets none"),
            !expect_gib,
            "{fleet}: {err}"
        );
        let _ = flightdeck(&home, &["job", "stop", &name]);
    }
}

/// GKE review M7: a rank whose pod cannot be scheduled says why in `job show` and
/// `fleet status`: the pod's reason and kube-scheduler's FailedScheduling event.
#[test]
fn a_waiting_rank_says_why_in_job_status() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, home, _f) = applied(tmp.path());
    // 16 GPUs a rank: no 8-GPU node fits it.
    let job = tmp.path().join("big.yaml");
    std::fs::write(
        &job,
        "type: task\nname: big\nfleet: a3u\nnodes: 1\ngpus_per_node: 16\ncommands: [\"sleep 30\"]\n",
    )
    .unwrap();
    let out = flightdeck(
        &home,
        &["job", "run", "--detach", "--no-preflight", job.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut o = String::new();
    for _ in 0..40 {
        let out = flightdeck(&home, &["job", "show", "big"]);
        o = text(&out.stdout) + &text(&out.stderr);
        if o.contains("waits") {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        o.contains("rank 0 (pod ")
            && o.contains("waits: Unschedulable: 0/3 nodes are available")
            && o.contains("FailedScheduling: 0/3 nodes are available"),
        "{o}"
    );
    let out = flightdeck(&home, &["fleet", "status", "a3u"]);
    let s = text(&out.stdout);
    assert!(
        s.contains("waits: Unschedulable") && s.contains("FailedScheduling"),
        "{s}"
    );
    let _ = flightdeck(&home, &["job", "stop", "big"]);
}

/// GKE review M3: the GPUDirect plugin and RxDM versions are the cluster's installer
/// DaemonSets' (kube-system), else the manifests' current pair, and `fleet status` shows
/// them.
#[test]
fn plugin_versions_come_from_the_installer_daemonsets() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        images: images(tmp.path()),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = fleet_file(tmp.path(), &d, "");
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = flightdeck(&home, &["fleet", "status", "a3u"]);
    let o = text(&out.stdout);
    assert!(
        o.contains(
            "GPUDirect tcpxo: plugin v1.0.15, RxDM v1.0.21 (the manifests' current; no installer DaemonSet)"
        ),
        "{o}"
    );
    // The installers as gpudirect-tcpxo/nccl-tcpxo-installer.yaml and
    // gpudirect-rdma/nccl-rdma-installer.yaml run them: the plugin in an init container.
    let installer = |name: &str, image: &str| {
        serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "labels": {"k8s-app": name}},
            "spec": {"selector": {"matchLabels": {"k8s-app": name}},
                "template": {"metadata": {"labels": {"k8s-app": name}},
                    "spec": {"initContainers": [{"name": "nccl-plugin-installer", "image": image}],
                             "containers": [{"name": "pause", "image": "gcr.io/google-containers/pause:2.0"}]}}}})
    };
    d.add_daemonset(installer(
        "nccl-tcpxo-installer",
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
    ));
    d.add_daemonset(installer(
        "nccl-rdma-installer",
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.0.6",
    ));
    let out = flightdeck(&home, &["fleet", "status", "a3u"]);
    let o = text(&out.stdout);
    assert!(
        o.contains(
            "GPUDirect tcpxo: plugin v1.0.15, RxDM v1.0.21 (DaemonSet kube-system/nccl-tcpxo-installer)"
        ),
        "{o}"
    );
    assert!(
        o.contains("GPUDirect rdma: plugin v1.0.6 (DaemonSet kube-system/nccl-rdma-installer)"),
        "{o}"
    );
    assert!(!o.contains("GPUDirect tcpx:"), "no TCPX installer: {o}");
    // Gke review M3: an NCCL test runs the image of the plugin the installer installed
    // (the gIB diagnostic image of its tag), not the recipe's pinned one.
    let out = flightdeck(&home, &["nccl", "run", "a3u", "--test", "all_gather", "--json"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the cluster's rdma installer runs us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.0.6: the test pods run us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.0.6")
            && err.contains("(us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.0.6) for run"),
        "{err}"
    );
}

/// GKE without GPUDirect (`gpudirect: none`, G2/A2 or plain pools): a two-node job runs
/// both ranks to their end with no NCCL profile and no GPUDirect networks.
#[test]
fn a_two_node_job_without_gpudirect_runs_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        images: images(tmp.path()),
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.path().join("plain.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: plain\nnetwork:\n  gpudirect: none\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-flex]\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let job = tmp.path().join("two.yaml");
    std::fs::write(
        &job,
        "type: task\nname: two\nfleet: plain\nnodes: 2\ngpus_per_node: 8\ncommands: [\"echo rank $NODE_RANK of $NNODES net=${NCCL_NET:-default}\"]\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let logs = text(&flightdeck(&home, &["job", "logs", "two"]).stdout);
    assert!(
        logs.contains("rank 0 of 2 net=default") && logs.contains("rank 1 of 2 net=default"),
        "{logs}"
    );
    let js = d
        .jobsets()
        .into_iter()
        .find(|j| j["metadata"]["labels"]["flightdeck-role"] == "job")
        .unwrap();
    let pod = &js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    assert!(
        pod["metadata"]["annotations"]["networking.gke.io/interfaces"].is_null(),
        "no GPUDirect networks: {pod}"
    );
}

/// Hostile review 3 C1: what runs is what was applied. An edit of the fleet file after
/// `fleet apply` (a teammate, a `git pull`) changes neither the debug pods' image nor
/// their namespace at the next command: the command says the file changed and runs what
/// the state recorded; `fleet plan` shows the edit as a change, and `fleet apply` makes it.
#[test]
fn an_edit_after_apply_runs_nothing_until_it_is_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home, f) = applied(tmp.path());
    let clean = std::fs::read_to_string(&f).unwrap();
    std::fs::write(
        &f,
        clean.replace(
            "  debug_image: ubuntu:24.04\n",
            "  debug_image: evil/steal@sha256:0000\n  namespace: kube-system\n",
        ),
    )
    .unwrap();

    // A command runs what was applied, and says the file changed.
    let busy = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["exec", "a3u", "--", "sleep 60"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("two running debug pods", || debug_pods(&d).len() == 2);
    for p in d
        .pods()
        .iter()
        .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "debug")
    {
        assert_eq!(p["metadata"]["namespace"], "default", "{p}");
        assert_eq!(p["spec"]["containers"][0]["image"], "ubuntu:24.04", "{p}");
    }
    unsafe { libc::kill(busy.id() as i32, libc::SIGINT) };
    let out = busy.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "changed since it was applied (gke.debug_image, gke.namespace); running what was applied"
        ),
        "{err}"
    );
    assert!(!d
        .requests()
        .iter()
        .any(|r| r.contains("/namespaces/kube-system/")));

    // Named by its file, the applied fleet is still what was applied.
    let out = flightdeck(&home, &["exec", f.to_str().unwrap(), "--", "exit 0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("running what was applied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!d
        .requests()
        .iter()
        .any(|r| r.contains("/namespaces/kube-system/")));

    // The plan shows the edit; apply makes it; then nothing is left to change.
    let out = flightdeck(&home, &["fleet", "plan", f.to_str().unwrap()]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(o.contains("update  gke-fleet"), "{o}");
    assert!(
        o.contains("changed since apply: gke.debug_image: ubuntu:24.04 → evil/steal@sha256:0000"),
        "{o}"
    );
    assert!(
        o.contains("changed since apply: gke.namespace: (not set) → kube-system"),
        "{o}"
    );
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = flightdeck(&home, &["fleet", "plan", f.to_str().unwrap()]);
    let o = text(&out.stdout);
    assert!(
        o.contains("keep    gke-fleet") && !o.contains("changed since apply"),
        "{o}"
    );
    let out = flightdeck(&home, &["exec", "a3u", "--", "exit 0"]);
    assert!(
        !text(&out.stderr).contains("changed since"),
        "{}",
        text(&out.stderr)
    );
    assert!(d
        .requests()
        .iter()
        .any(|r| r == "POST /api/v1/namespaces/kube-system/pods"));
}
