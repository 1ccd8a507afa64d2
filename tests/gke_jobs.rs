//! Jobs on a GKE fleet against the DOUBLE of a GKE cluster's Kubernetes API
//! (tests/support/k8s_double.rs): what a job file carries into its JobSet (its env as a
//! Secret, volumes, a service account, Kueue topology, resources) and that the pods see
//! it.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::k8s_double::{KubeDouble, NodeSpec, Options, Provisioning};
use support::{flightdeck, text};

fn nodes() -> Vec<NodeSpec> {
    let n = |name: &str, ip: &str| NodeSpec {
        name: name.into(),
        pool: "a3u-flex".into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::FlexStart,
        internal_ip: ip.into(),
    };
    vec![n("gke-a3u-flex-0", "10.0.0.10"), n("gke-a3u-flex-1", "10.0.0.11")]
}

/// A double with the flex-start pool, a home and the fleet applied (`extra`: more of
/// the fleet file's `gke` block).
fn setup(tmp: &Path, extra: &str) -> (KubeDouble, PathBuf) {
    let d = KubeDouble::start(Options {
        nodes: nodes(),
        ..Options::default()
    });
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.join("a3u.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: a3u\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-flex]\n  debug_image: ubuntu:24.04\n{extra}",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (d, home)
}

/// Run job file `body` (name `name`) detached; its stderr.
fn run(tmp: &Path, home: &Path, name: &str, body: &str) -> std::process::Output {
    let job = tmp.join(format!("{name}.yaml"));
    std::fs::write(&job, format!("type: task\nname: {name}\nfleet: a3u\n{body}")).unwrap();
    flightdeck(home, &["job", "run", "--detach", job.to_str().unwrap()])
}

fn jobset(d: &KubeDouble, name: &str) -> serde_json::Value {
    let sets = d.jobsets();
    sets.iter()
        .find(|s| {
            s["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(name))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no JobSet for {name}: {sets:?}"))
}

fn pod_template(set: &serde_json::Value) -> &serde_json::Value {
    &set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
}

/// The log of rank 0's pod of job `name` once it has ended (within 20 s).
fn rank0_log(d: &KubeDouble, name: &str) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let pod = d.pods().into_iter().find(|p| {
            p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"]
                .as_str()
                .is_some_and(|n| n.starts_with(name))
                && p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
        });
        if let Some(p) = &pod {
            if matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
                return d.pod_log("default", p["metadata"]["name"].as_str().unwrap());
            }
        }
        assert!(Instant::now() < end, "rank 0 of {name} did not end: {pod:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Hostile review D5: a GKE job's env (tokens) was written into the pod's command line
/// (`export HF_TOKEN='…'` in `bash -c`), readable by anyone who may `get` pods and in
/// the node's `ps`. Now it is a Secret owned by the JobSet, the pod gets it by envFrom,
/// and nothing of its values is in the JobSet; the job's commands still see it, over the
/// profile's values.
#[test]
fn a_gke_jobs_env_travels_in_a_secret_not_the_pod_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    let token = "hf_SUPERSECRET_0123456789";
    let out = run(
        tmp.path(),
        &home,
        "tok",
        &format!("gpus_per_node: 8\nenv:\n  - HF_TOKEN={token}\n  - MASTER_PORT=29123\n  - NCCL_DEBUG=TRACE\ncommands:\n  - echo \"token=$HF_TOKEN port=$MASTER_PORT debug=$NCCL_DEBUG left=${{FLIGHTDECK_ENV_HF_TOKEN:-none}}\"\n"),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let set = jobset(&d, "tok");
    let posted = set.to_string();
    for value in [token, "29123", "TRACE"] {
        assert!(
            !posted.contains(value),
            "the JobSet carries the env value {value}:\n{posted}"
        );
    }
    let secrets = d.secrets();
    assert_eq!(secrets.len(), 1, "{secrets:?}");
    let sec = &secrets[0];
    assert_eq!(
        sec["metadata"]["ownerReferences"][0]["uid"], set["metadata"]["uid"],
        "{sec}"
    );
    assert_eq!(sec["metadata"]["ownerReferences"][0]["kind"], "JobSet");
    // Hostile review 3, L4: the owner labels too, as `job run --dry-run` prints them.
    for l in [
        "flightdeck-job",
        "flightdeck-fleet",
        "flightdeck-role",
        "flightdeck-owner",
        "flightdeck-state",
    ] {
        assert_eq!(
            sec["metadata"]["labels"][l], set["metadata"]["labels"][l],
            "{l}: {sec}"
        );
    }
    // The dry run prints the Secret with the labels the created one has, and no `spec`.
    let out = flightdeck(
        &home,
        &[
            "job",
            "run",
            "--dry-run",
            tmp.path().join("tok.yaml").to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text(&out.stdout))
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let dry = printed
        .iter()
        .find(|o| o["kind"] == "Secret")
        .expect("the dry run prints the Secret");
    assert!(dry.get("spec").is_none(), "{dry:?}");
    let keys = |labels: Vec<String>| {
        let mut k = labels;
        k.sort();
        k
    };
    let dry_keys = keys(
        dry["metadata"]["labels"]
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap().to_string())
            .collect(),
    );
    let created_keys = keys(
        sec["metadata"]["labels"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect(),
    );
    assert_eq!(dry_keys, created_keys);
    assert!(!text(&out.stdout).contains(token));
    let log = rank0_log(&d, "tok");
    assert!(
        log.contains(&format!("token={token} port=29123 debug=TRACE left=none")),
        "{log}"
    );
}

/// POST `obj` to the double at `path` (a raw request, as a cluster's API takes it).
fn post(d: &KubeDouble, path: &str, obj: serde_json::Value) {
    let body = serde_json::to_vec(&obj).unwrap();
    let addr = d.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(s, "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", support::k8s_double::TOKEN, body.len()).unwrap();
    s.write_all(&body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
}

/// Gke review M9: a job file carries data and credentials on GKE: Cloud Storage buckets
/// through GCS FUSE (the pod annotation and the CSI ephemeral volume), a
/// PersistentVolumeClaim, the Workload Identity KSA, and a key of an existing Secret
/// (the seed's HF token), which the pod reads and the JobSet does not hold. Before,
/// `volumes:` were ignored and a Secret reference did not parse.
#[test]
fn a_gke_job_mounts_buckets_and_claims_and_reads_an_existing_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    let token = "hf_FROMSECRET_42";
    post(
        &d,
        "/api/v1/namespaces/default/secrets",
        serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"}, "stringData": {"token": token}}),
    );
    let out = run(
        tmp.path(),
        &home,
        "data",
        "gpus_per_node: 8\nservice_account: trainer-ksa\nenv:\n  HF_TOKEN: {secret: hf, key: token}\n  PLAIN: 1\nvolumes:\n  - gcs: my-datasets\n    path: /data\n    read_only: true\n    mount_options: implicit-dirs\n  - pvc: ckpt-claim\n    path: /ckpt\ncommands:\n  - echo \"hf=$HF_TOKEN plain=$PLAIN\"\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let set = jobset(&d, "data");
    assert!(!set.to_string().contains(token), "{set}");
    let pod = pod_template(&set);
    assert_eq!(
        pod["metadata"]["annotations"]["gke-gcsfuse/volumes"], "true",
        "{pod}"
    );
    assert_eq!(pod["spec"]["serviceAccountName"], "trainer-ksa");
    let vols = pod["spec"]["volumes"].as_array().unwrap();
    let gcs = vols
        .iter()
        .find(|v| v["csi"]["driver"] == "gcsfuse.csi.storage.gke.io")
        .unwrap_or_else(|| panic!("no GCS FUSE volume: {vols:?}"));
    assert_eq!(gcs["csi"]["volumeAttributes"]["bucketName"], "my-datasets");
    assert_eq!(gcs["csi"]["volumeAttributes"]["mountOptions"], "implicit-dirs");
    assert_eq!(gcs["csi"]["readOnly"], true);
    let pvc = vols
        .iter()
        .find(|v| v["persistentVolumeClaim"]["claimName"] == "ckpt-claim")
        .unwrap_or_else(|| panic!("no claim: {vols:?}"));
    let mounts = pod["spec"]["containers"][0]["volumeMounts"].as_array().unwrap();
    for (vol, at) in [(gcs, "/data"), (pvc, "/ckpt")] {
        assert!(
            mounts
                .iter()
                .any(|m| m["name"] == vol["name"] && m["mountPath"] == at),
            "{at}: {mounts:?}"
        );
    }
    let log = rank0_log(&d, "data");
    assert!(log.contains(&format!("hf={token} plain=1")), "{log}");
}

/// What cannot work is refused before anything is made, at its place in the job file:
/// dstack's volumes on GKE, GKE's volumes and Secrets on an SSH fleet.
#[test]
fn what_a_fleet_cannot_run_is_refused_at_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    let out = run(
        tmp.path(),
        &home,
        "dsv",
        "gpus_per_node: 8\nvolumes:\n  - name: my-dstack-vol\n    path: /data\ncommands: [\"true\"]\n",
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("dsv.yaml:6:5: volumes.0: a dstack volume") && err.contains("on GKE give `gcs: BUCKET`"),
        "{err}"
    );
    assert!(d.jobsets().is_empty());
    // An SSH fleet (this machine) refuses a bucket and a Secret's key.
    let f = tmp.path().join("local.yaml");
    std::fs::write(&f, "type: fleet\nname: here\nbackends: [local]\n").unwrap();
    let job = tmp.path().join("ssh.yaml");
    std::fs::write(
        &job,
        "type: task\nname: ssh\nfleet: here\nenv:\n  T: {secret: hf, key: token}\nvolumes:\n  - gcs: my-datasets\n    path: /data\ncommands: [\"true\"]\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = flightdeck(&home, &["job", "run", "--detach", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("ssh.yaml:5:3: env.T: a Secret's key"), "{err}");
    assert!(
        err.contains("ssh.yaml:7:5: volumes.0: a Cloud Storage volume"),
        "{err}"
    );
}

/// Gke review M11: the networks a job's pods attach come from the fleet file
/// (`gke.networks`), and by default follow Google's current RDMA manifest, which
/// dropped `gvnic-1` (a cluster without that Network rejected the pods). A wrong count
/// is refused at its line.
#[test]
fn job_pods_attach_the_networks_the_fleet_file_names() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    let out = run(
        tmp.path(),
        &home,
        "dflt",
        "gpus_per_node: 8\nnccl_profile: rdma\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = pod_template(&jobset(&d, "dflt"))["metadata"]["annotations"]["networking.gke.io/interfaces"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !a.contains("gvnic-1") && a.contains(r#"{"interfaceName":"eth2","network":"rdma-0"}"#),
        "{a}"
    );
    drop(d);
    let nets: Vec<String> = (0..8).map(|i| format!("a4-rdma-{i}")).collect();
    let tmp2 = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp2.path(), &format!("  networks: [{}]\n", nets.join(", ")));
    let out = run(
        tmp2.path(),
        &home,
        "named",
        "gpus_per_node: 8\nnccl_profile: rdma\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = pod_template(&jobset(&d, "named"))["metadata"]["annotations"]["networking.gke.io/interfaces"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        a.contains(r#"{"interfaceName":"eth2","network":"a4-rdma-0"}"#)
            && a.contains(r#"{"interfaceName":"eth9","network":"a4-rdma-7"}"#)
            && !a.contains("\"rdma-0\""),
        "{a}"
    );
    let f = tmp2.path().join("bad.yaml");
    std::fs::write(
        &f,
        format!("type: fleet\nname: bad\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  networks: [rdma-0, Rdma_1]\n", d.kubeconfig.display()),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "validate", f.to_str().unwrap()]);
    let err = text(&out.stderr) + &text(&out.stdout);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("bad.yaml:8:3: gke.networks: 2 network(s) named; the Rdma pods attach 8"),
        "{err}"
    );
    assert!(
        err.contains("gke.networks.1: `Rdma_1` is not a Network name"),
        "{err}"
    );
}

/// Gke review L9, L1, L7: job pods ask for CPU and memory (the job's `resources`, else
/// a floor: BestEffort pods are evicted first), `max_duration` is the Job's
/// activeDeadlineSeconds, a finished JobSet has a TTL, and the TCPXO RxDM sidecar has
/// the capabilities GKE's manifest gives it, not `privileged` (which PodSecurity
/// baseline rejects).
#[test]
fn job_pods_ask_for_resources_end_at_max_duration_and_run_rxdm_unprivileged() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    let out = run(
        tmp.path(),
        &home,
        "res",
        "gpus_per_node: 8\nnccl_profile: tcpxo\nmax_duration: 2h\nresources:\n  gpu: H200:8\n  cpu: 16..\n  memory: 64GB..\n  shm_size: 32GB\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let set = jobset(&d, "res");
    assert!(
        set["spec"]["ttlSecondsAfterFinished"]
            .as_u64()
            .is_some_and(|t| t > 0),
        "{set}"
    );
    assert_eq!(
        set["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"],
        7200
    );
    let pod = &pod_template(&set)["spec"];
    assert_eq!(
        pod["containers"][0]["resources"]["requests"],
        serde_json::json!({"cpu": "16", "memory": "65536Mi"})
    );
    let shm = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "shared-memory")
        .unwrap();
    assert_eq!(shm["emptyDir"]["sizeLimit"], "32768Mi");
    let rxdm = &pod["initContainers"][0];
    assert_eq!(rxdm["name"], "tcpxo-daemon");
    assert!(rxdm["securityContext"]["privileged"].is_null(), "{rxdm}");
    assert_eq!(
        rxdm["securityContext"]["capabilities"]["add"],
        serde_json::json!(["NET_ADMIN", "NET_BIND_SERVICE"])
    );
    let out = run(
        tmp.path(),
        &home,
        "plain",
        "gpus_per_node: 8\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let set = jobset(&d, "plain");
    let req = &pod_template(&set)["spec"]["containers"][0]["resources"]["requests"];
    assert!(req["cpu"].is_string() && req["memory"].is_string(), "{req}");
    assert!(set["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"].is_null());
}

/// Gke review M10: Kueue Topology Aware Scheduling, asked for on the pod template as
/// cluster-toolkit's A4 JobSet does: the fleet's level for its jobs, a job file's over
/// it; a wrong one refused at its line.
#[test]
fn jobs_ask_kueue_for_a_topology() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(
        tmp.path(),
        "  queue: lq\n  topology:\n    preferred: cloud.google.com/gce-topology-block\n",
    );
    let out = run(
        tmp.path(),
        &home,
        "fleettas",
        "gpus_per_node: 8\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = pod_template(&jobset(&d, "fleettas"))["metadata"]["annotations"].clone();
    assert_eq!(
        a["kueue.x-k8s.io/podset-preferred-topology"], "cloud.google.com/gce-topology-block",
        "{a}"
    );
    let out = run(
        tmp.path(),
        &home,
        "jobtas",
        "gpus_per_node: 8\ntopology:\n  required: cloud.google.com/gce-topology-subblock\ncommands: [\"true\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a = pod_template(&jobset(&d, "jobtas"))["metadata"]["annotations"].clone();
    assert_eq!(
        a["kueue.x-k8s.io/podset-required-topology"], "cloud.google.com/gce-topology-subblock",
        "{a}"
    );
    assert!(a["kueue.x-k8s.io/podset-preferred-topology"].is_null(), "{a}");
    let out = run(
        tmp.path(),
        &home,
        "badtas",
        "topology:\n  preferred: a\n  required: b\ncommands: [\"true\"]\n",
    );
    let err = text(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("badtas.yaml:4:1: topology: give `preferred: LEVEL` or `required: LEVEL`"),
        "{err}"
    );
    // Without a Kueue queue nothing reads the annotation: refused, not silently ignored.
    let tmp2 = tempfile::tempdir().unwrap();
    let (d2, home2) = setup(tmp2.path(), "");
    let out = run(
        tmp2.path(),
        &home2,
        "noqueue",
        "gpus_per_node: 8\ntopology:\n  preferred: cloud.google.com/gce-topology-block\ncommands: [\"true\"]\n",
    );
    let err = text(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "noqueue.yaml: `topology:` is Kueue's Topology Aware Scheduling and needs a Kueue queue"
            ),
        "{err}"
    );
    assert!(d2.jobsets().is_empty(), "{:?}", d2.jobsets());
}

/// Gke review L2: two TCPXO jobs of 4 GPUs each, on a pool of two 8-GPU nodes, get a node
/// each: every flightdeck pod with an RxDM sidecar keeps off a node that already has one
/// (GKE's TCPXO guide's `tcpxo: daemon` anti-affinity), whichever workload it belongs to.
/// Without it the scheduler put both on the first node, with two RxDMs.
#[test]
fn two_small_tcpxo_jobs_keep_one_rxdm_per_node() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, home) = setup(tmp.path(), "");
    for name in ["small-a", "small-b"] {
        let out = run(
            tmp.path(),
            &home,
            name,
            "nodes: 1\ngpus_per_node: 4\nnccl_profile: tcpxo\ncommands: [\"sleep 5\"]\n",
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let end = Instant::now() + Duration::from_secs(20);
    let nodes = loop {
        let nodes: Vec<String> = d
            .pods()
            .iter()
            .filter(|p| p["metadata"]["labels"]["flightdeck-role"] == "job")
            .filter_map(|p| {
                p["spec"]["nodeName"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map(String::from)
            })
            .collect();
        if nodes.len() == 2 || Instant::now() > end {
            break nodes;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(nodes.len(), 2, "both jobs placed: {nodes:?}");
    assert_ne!(nodes[0], nodes[1], "two RxDMs on one node: {nodes:?}");
}
