//! Issue 27's "Done when", one test per GPUDirect flavour: on a DWS flex-start pool that
//! starts at zero nodes behind a Kueue queue with a ProvisioningRequest check, a 2-node
//! job and a 2-node NCCL test made by flightdeck are admitted through a
//! ProvisioningRequest, land on two nodes the cluster autoscaler grew, pass GKE's device
//! injector and run to their end; they are the objects `--dry-run` prints; a debug pod
//! made while the nodes are up keeps none of them from scaling down.
//!
//! The NCCL tests run the image's own scripts where a copy is kept
//! (tests/fixtures/reference, PROVENANCE.md): TCPXO Google's init_ssh.sh, gen_hostfiles.sh
//! and demo-run-nccl-test-tcpxo-via-mpi.sh; TCPX the guide's run-nccl.sh from its
//! ConfigMap. Only binaries are stand-ins: ssh, mpirun and the perf binary (which
//! replays a recorded 2-node all_gather), and `service` (the image's sshd start, which
//! must not touch this machine's). RDMA's gIB image script is a stand-in replaying the
//! same recording (no copy of it is public).

mod support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::k8s_double::{KubeDouble, NodeSpec, Options, PoolSpec, Provisioning};
use support::{flightdeck, text};

const RECORDED: &str = "tests/fixtures/nccl/gke-b200-2node-all_gather.txt";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn put(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let f = dir.join(name);
    std::fs::write(&f, body).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The flavour's NCCL image as the double runs it (a directory first on its PATH), the
/// recordings under `rec`.
fn image(flavour: &str, dir: &Path, rec: &Path) -> (String, PathBuf) {
    let img = dir.join(format!("image-{flavour}"));
    std::fs::create_dir_all(&img).unwrap();
    let replay = format!(
        "while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.05; done < '{}'\n",
        repo(RECORDED).display()
    );
    if flavour == "rdma" {
        put(
            &img,
            "run_nccl_tests.sh",
            &format!(
                "#!/bin/sh\n# DOUBLE of the gIB image's run_nccl_tests.sh\necho \"$*\" > '{}/run'\n{replay}",
                rec.display()
            ),
        );
        return (
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin".into(),
            img,
        );
    }
    let scripts = repo("tests/fixtures/reference/nccl-plugin-gpudirect-tcpxo/tcpxo_scripts");
    let mut google = vec!["init_ssh.sh", "gen_hostfiles.sh"];
    if flavour == "tcpxo" {
        google.extend([
            "demo-run-nccl-test-tcpxo-via-mpi.sh",
            "demo_mpi_entry_with_config_profile.sh",
        ]);
    } else {
        // The image's own /scripts/run-nccl.sh (the plugin repository's scripts/, which its
        // Dockerfile copies to /scripts), not the guide's ConfigMap copy: flightdeck creates
        // no ConfigMap, so the image's is what runs (gke review L4).
        put(
            &img,
            "run-nccl.sh",
            &std::fs::read_to_string(repo(
                "tests/fixtures/reference/nccl-plugin-gpudirecttcpx/scripts/run-nccl.sh",
            ))
            .unwrap(),
        );
        // STAND-IN for the image's unix_client_prefix_selection.sh, sourced by run-nccl.sh:
        // the RxDM socket directory it picks when the RxDM's rx_rule_manager is there.
        put(
            &img,
            "unix_client_prefix_selection.sh",
            "UNIX_CLIENT_PREFIX=/run/tcpx\n",
        );
    }
    for f in google {
        put(&img, f, &std::fs::read_to_string(scripts.join(f)).unwrap());
    }
    let r = rec.display();
    put(
        &img,
        "service",
        &format!("#!/bin/sh\necho \"$*\" >> '{r}/service'\n"),
    );
    put(&img, "ssh", &format!("#!/bin/bash\n# DOUBLE of ssh: init_ssh.sh's host-key round\necho \"$*\" >> '{r}/ssh'\nshift 5; \"$@\"\n"));
    // Open MPI's mpirun as the image's script calls it: options, then rank 0's program.
    // The hostfile must give as many slots as -np asks; a `-x NAME` must be set.
    put(
        &img,
        "mpirun",
        &format!(
            r#"#!/bin/bash
# DOUBLE of Open MPI's mpirun
printf '%s\n' "$@" > '{r}/mpirun'
while [ $# -gt 0 ]; do
  case "$1" in
    --mca) shift 3 ;;
    -np) np=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    -x) n=${{2%%=*}}; if [[ "$2" != *=* && -z "${{!n+x}}" ]]; then echo "Warning: could not find environment variable \"$n\"" >&2; echo "unset $n" >> '{r}/mpirun-unset'; fi; shift 2 ;;
    --allow-run-as-root) shift ;;
    -*) echo "mpirun: unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
done
[ -f "$hostfile" ] || {{ echo "mpirun: no hostfile ${{hostfile:-}}" >&2; exit 1; }}
slots=$(awk -F'slots=' '{{s += $2}} END {{print s}}' "$hostfile")
[ "$slots" = "$np" ] || {{ echo "mpirun: -np $np, the hostfile has $slots slots" >&2; exit 1; }}
cp "$hostfile" '{r}/hostfile'
[ "$1" = taskset ] && shift 3
case "$1" in
  */demo_mpi_entry_with_config_profile.sh) command -v "$(basename "$1")" >/dev/null || exit 127; shift ;;
esac
exec "$(basename "$1")" "${{@:2}}"
"#
        ),
    );
    put(
        &img,
        "all_gather_perf",
        &format!("#!/bin/sh\n# DOUBLE of nccl-tests' all_gather_perf\necho \"$*\" > '{r}/perf'\n{replay}"),
    );
    let prefix = format!("us-docker.pkg.dev/gce-ai-infra/gpudirect-{flavour}/nccl-plugin");
    (prefix, img)
}

/// What was seen of the double while a run went on: every flightdeck pod (role, node,
/// phases, container waits) and every node (its pool).
#[derive(Default)]
struct Seen {
    pods: BTreeMap<String, (String, String, BTreeSet<String>, BTreeSet<String>)>,
    nodes: BTreeMap<String, String>,
}

fn look(d: &KubeDouble, seen: &Mutex<Seen>) {
    let (pods, nodes) = (d.pods(), d.nodes());
    let mut s = seen.lock().unwrap();
    for n in nodes {
        let pool = n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
            .as_str()
            .unwrap_or("");
        s.nodes
            .insert(n["metadata"]["name"].as_str().unwrap().into(), pool.into());
    }
    for p in pods {
        let role = p["metadata"]["labels"]["flightdeck-role"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if role.is_empty() {
            continue;
        }
        let e = s
            .pods
            .entry(p["metadata"]["name"].as_str().unwrap().into())
            .or_default();
        e.0 = role;
        if let Some(n) = p["spec"]["nodeName"].as_str() {
            e.1 = n.into();
        }
        e.2.insert(p["status"]["phase"].as_str().unwrap_or("").into());
        for which in ["initContainerStatuses", "containerStatuses"] {
            for c in p["status"][which].as_array().into_iter().flatten() {
                if let Some(r) = c["state"]["waiting"]["reason"].as_str() {
                    e.3.insert(r.into());
                }
            }
        }
    }
}

/// Run flightdeck with `args` to its end while watching the double.
fn watched(d: &KubeDouble, seen: &Mutex<Seen>, home: &Path, args: &[&str]) -> std::process::Output {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                look(d, seen);
                std::thread::sleep(Duration::from_millis(25));
            }
        });
        let out = flightdeck(home, args);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        out
    })
}

/// `role`'s pods: two, on two distinct nodes of `pool` (grown from zero), every one
/// Running at some point and none waiting in CreateContainerError; their nodes.
fn two_nodes_of(seen: &Mutex<Seen>, role: &str, pool: &str) -> BTreeSet<String> {
    let s = seen.lock().unwrap();
    let pods: Vec<_> = s.pods.iter().filter(|(_, p)| p.0 == role).collect();
    assert_eq!(pods.len(), 2, "{role} pods: {:?}", s.pods);
    let nodes: BTreeSet<String> = pods.iter().map(|(_, p)| p.1.clone()).collect();
    assert_eq!(nodes.len(), 2, "{role} pods on two nodes: {pods:?}");
    for n in &nodes {
        assert_eq!(
            s.nodes.get(n).map(String::as_str),
            Some(pool),
            "{n}: {:?}",
            s.nodes
        );
    }
    for (name, p) in pods {
        assert!(
            p.2.contains("Running") || p.2.contains("Succeeded"),
            "{name} never ran: {p:?}"
        );
        assert!(!p.3.contains("CreateContainerError"), "{name}: {p:?}");
    }
    nodes
}

/// `nccl run dws` of a 2-node all_gather through the double (fleet `dws`): sizes and
/// iterations none of the image scripts default to, so that a variable they do not read
/// under the name given falls back to their default and fails the checks; `--wait`, so
/// that a double that never admits fails the test instead of hanging it.
const TWO_NODE_TEST: [&str; 19] = [
    "nccl",
    "run",
    "dws",
    "--node-count",
    "2",
    "-g",
    "8",
    "--test",
    "all_gather",
    "-b",
    "1M",
    "-e",
    "1G",
    "-n",
    "7",
    "-w",
    "3",
    "--wait",
    "120",
];

/// A home under `tmp` where fleet `dws` is applied: DWS flex-start (2 h) on `pool` behind
/// the `dws-queue` Kueue queue, GPUDirect `flavour`.
fn apply_dws_fleet(d: &KubeDouble, tmp: &Path, flavour: &str, pool: &str) -> PathBuf {
    let home = tmp.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let f = tmp.join("dws.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: dws\nflex_start: 2h\nnetwork:\n  gpudirect: {flavour}\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [{pool}]\n  queue: dws-queue\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    home
}

/// The nodes' filesystem as the double mounts it into pods' hostPath volumes
/// (`Options::node_roots`), laid out where GKE's installer DaemonSets put their files on
/// a GPU node: the driver's directory `/home/kubernetes/bin/nvidia/lib64`, and per
/// flavour the TCPXO installer's real `nccl-env-profile.sh` beside it
/// (gpudirect-tcpxo/README.md: the profile is in `${NCCL_LIB_DIR}`, the driver's
/// directory as pods mount it) and the aperture devices' directory; gIB's
/// `/home/kubernetes/bin/gib` with the stand-in of its `set_nccl_env.sh` (not public).
fn gpu_node_root(flavour: &str, tmp: &Path) -> PathBuf {
    let roots = tmp.join("node-roots");
    let root = roots.join("default");
    let lib = root.join("home/kubernetes/bin/nvidia/lib64");
    std::fs::create_dir_all(&lib).unwrap();
    let reference =
        |p: &str| std::fs::read_to_string(repo(&format!("tests/fixtures/reference/{p}"))).unwrap();
    match flavour {
        "tcpxo" => {
            std::fs::write(
                lib.join("nccl-env-profile.sh"),
                reference("nccl-plugin-gpudirect-tcpxo/tcpxo_scripts/nccl-env-profile.sh"),
            )
            .unwrap();
            std::fs::create_dir_all(root.join("dev/aperture_devices")).unwrap();
        }
        "rdma" => {
            let scripts = root.join("home/kubernetes/bin/gib/scripts");
            std::fs::create_dir_all(&scripts).unwrap();
            std::fs::write(
                scripts.join("set_nccl_env.sh"),
                reference("stand-in/set_nccl_env.sh"),
            )
            .unwrap();
        }
        _ => {}
    }
    roots
}

/// An object as created, as `--dry-run` printed it: the server's fields gone, what
/// Kueue changes when it admits a JobSet undone (`suspend`, and the ProvisioningRequest
/// annotations its admission check adds to the pod template: kueue
/// pkg/controller/admissionchecks/provisioning, PodSetUpdates), the generated name (and
/// the run id in it) as NAME, an NCCL test's run id as RUN.
fn as_printed(obj: &Value, name: &str) -> Value {
    let mut o = obj.clone();
    for k in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
        o["metadata"].as_object_mut().unwrap().remove(k);
    }
    o.as_object_mut().unwrap().remove("status");
    if !o["spec"]["suspend"].is_null() {
        o["spec"]["suspend"] = true.into();
    }
    for rj in o["spec"]["replicatedJobs"].as_array_mut().into_iter().flatten() {
        if let Some(a) = rj["template"]["spec"]["template"]["metadata"]["annotations"].as_object_mut() {
            a.retain(|k, _| !k.starts_with("autoscaling.x-k8s.io/"));
        }
    }
    let mut text = o.to_string().replace(name, "NAME");
    if let Some(run) = obj["metadata"]["labels"]["flightdeck-run"].as_str() {
        text = text.replace(run, "RUN");
    }
    serde_json::from_str(&text).unwrap()
}

fn yaml_docs(s: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(s)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The common run of every flavour (see the module's doc); `machine` and `accelerator`
/// are the flavour's A3 machine; the recordings' directory is given back (in the
/// temporary directory, given back too) for the flavour's own checks.
fn done_when(flavour: &str, machine: &str, accelerator: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_path_buf();
    let rec = tmp.join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let pool = format!("{flavour}-dws");
    let d = KubeDouble::start(Options {
        // The cluster's CPU pool only: the GPU pool starts at zero.
        nodes: vec![NodeSpec {
            name: "gke-default-0".into(),
            pool: "default-pool".into(),
            machine_type: "e2-standard-8".into(),
            accelerator: String::new(),
            gpus: 0,
            provisioning: Provisioning::Standard,
            internal_ip: "10.0.0.2".into(),
        }],
        images: vec![image(flavour, &tmp, &rec)],
        queues: vec![("dws-queue".into(), true)],
        admit_after: Duration::from_millis(200),
        pools: vec![PoolSpec {
            name: pool.clone(),
            machine_type: machine.into(),
            accelerator: accelerator.into(),
            gpus: 8,
            provisioning: Provisioning::FlexStart,
            min_nodes: 0,
            max_nodes: 4,
            taints: vec![],
            queued: true,
        }],
        scale_up_after: Duration::from_millis(300),
        scale_down_after: Some(Duration::from_secs(4)),
        booking_time: Some(Duration::from_secs(5)),
        node_roots: Some(gpu_node_root(flavour, &tmp)),
        ..Options::default()
    });
    let home = apply_dws_fleet(&d, &tmp, flavour, &pool);
    let seen = Mutex::new(Seen::default());

    // (a) A 2-node job, as its dry run printed it, to its end.
    let job = tmp.join("train.yaml");
    std::fs::write(
        &job,
        "type: task\nname: train\nfleet: dws\nnodes: 2\ngpus_per_node: 8\ncommands:\n  - echo rank $NODE_RANK of $NNODES tuner=${NCCL_TUNER_PLUGIN:-none}\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = yaml_docs(&text(&out.stdout));
    let out = watched(&d, &seen, &home, &["job", "run", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let out = flightdeck(&home, &["job", "show", "train", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(v["state"], "succeeded", "{v}{err}");
    let logs = text(&flightdeck(&home, &["job", "logs", "train"]).stdout);
    assert!(
        logs.contains("rank 0 of 2") && logs.contains("rank 1 of 2"),
        "{logs}"
    );
    // TCPXO: the job's commands ran after Google's profile, sourced from where the
    // installer put it on the node (gke review C1: without NCCL_LIB_DIR its line 13 ended
    // the shell before the commands).
    if flavour == "tcpxo" {
        assert_eq!(logs.matches("tuner=libnccl-tuner.so").count(), 2, "{logs}");
    }
    two_nodes_of(&seen, "job", &pool);
    let js = d.jobsets();
    let created = js
        .iter()
        .find(|j| j["metadata"]["labels"]["flightdeck-role"] == "job")
        .unwrap();
    let printed_js = printed
        .iter()
        .find(|o| o["kind"] == "JobSet")
        .expect("a JobSet printed");
    assert_eq!(
        as_printed(created, created["metadata"]["name"].as_str().unwrap()),
        as_printed(printed_js, printed_js["metadata"]["name"].as_str().unwrap()),
        "the job's JobSet is its dry run's"
    );

    // (b) A 2-node NCCL test, as its dry run printed it, to its parsed busbw table.
    let nccl = TWO_NODE_TEST;
    let out = flightdeck(&home, &[&nccl[..], &["--dry-run"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = yaml_docs(&text(&out.stdout));
    assert_eq!(printed.len(), 1, "one JobSet");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([&nccl[..], &["--json"]].concat())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut made, mut exec) = (None, None);
    while run.try_wait().unwrap().is_none() {
        look(&d, &seen);
        if let Some(j) = d
            .jobsets()
            .into_iter()
            .find(|j| j["metadata"]["labels"]["flightdeck-role"] == "nccl")
        {
            made = Some(j);
        }
        // For (c): a command in a debug pod on each node while the test runs there.
        let running = seen
            .lock()
            .unwrap()
            .pods
            .values()
            .filter(|p| p.0 == "nccl" && p.2.contains("Running"))
            .count();
        if exec.is_none() && running == 2 {
            // The fleet was applied at zero nodes: `exec FLEET` asks the cluster for
            // the nodes it has now.
            exec = Some(support::spawn_flightdeck(
                &home,
                &["exec", "dws", "--", "sleep 60"],
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let out = run.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 24, "{doc}");
    let nccl_nodes = two_nodes_of(&seen, "nccl", &pool);
    let made = made.expect("the NCCL JobSet was seen");
    let name = |o: &Value| o["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(
        as_printed(&made, &name(&made)),
        as_printed(&printed[0], &name(&printed[0]))
    );

    // Kueue admitted both through a ProvisioningRequest that went Provisioned.
    let prs = d.provisioning_requests();
    assert_eq!(prs.len(), 2, "{prs:?}");
    for pr in &prs {
        assert!(
            pr["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Provisioned" && c["status"] == "True"),
            "{pr}"
        );
    }
    let failed: Vec<Value> = d
        .events()
        .into_iter()
        .filter(|e| e["reason"] == "Failed")
        .collect();
    assert!(failed.is_empty(), "no container failed to start: {failed:?}");

    // (c) The debug pods on the test's nodes keep none of them once the test is done.
    let mut exec = exec.expect("the test's pods ran");
    let end = Instant::now() + Duration::from_secs(60);
    let mut debug_seen = BTreeSet::new();
    loop {
        for p in d.pods() {
            if p["metadata"]["labels"]["flightdeck-role"] == "debug" {
                debug_seen.insert(p["spec"]["nodeName"].as_str().unwrap_or("").to_string());
            }
        }
        let blocked = d.scale_down_blocked();
        assert!(blocked.is_empty(), "a pod keeps a node: {blocked:?}");
        let removed: BTreeSet<String> = d.removed_nodes().into_iter().map(|(n, _)| n).collect();
        if nccl_nodes.is_subset(&removed) {
            break;
        }
        assert!(
            Instant::now() < end,
            "nodes {nccl_nodes:?} not removed: {removed:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = exec.kill();
    let said = text(&exec.wait_with_output().unwrap().stderr);
    assert!(
        nccl_nodes.is_subset(&debug_seen),
        "a debug pod on each node: {debug_seen:?} {said}"
    );
    (dir, rec)
}

fn recorded(rec: &Path, what: &str) -> String {
    std::fs::read_to_string(rec.join(what)).unwrap_or_else(|_| panic!("nothing ran {what}"))
}

/// The pods' sshd started; every pod's host key accepted on port 222 by init_ssh.sh;
/// mpirun given the hostfile of both pods; the perf binary `perf_args`.
fn ran_the_images_scripts(rec: &Path, perf_args: &str) -> String {
    assert!(recorded(rec, "service").contains("ssh restart"));
    let ssh = recorded(rec, "ssh");
    let hosts: BTreeSet<&str> = ssh.lines().filter_map(|l| l.split_whitespace().nth(4)).collect();
    assert_eq!(hosts.len(), 2, "{ssh}");
    assert!(
        ssh.lines()
            .all(|l| l.starts_with("-o StrictHostKeyChecking=no -p 222 10.100.0.")),
        "{ssh}"
    );
    let hostfile = recorded(rec, "hostfile");
    for h in hosts {
        assert!(hostfile.contains(&format!("{h} port=222 slots=8")), "{hostfile}");
    }
    let perf = recorded(rec, "perf");
    assert_eq!(perf.trim_end(), perf_args);
    recorded(rec, "mpirun")
}

#[test]
fn rdma_on_a3_ultra_at_zero_nodes() {
    let (_tmp, rec) = done_when("rdma", "a3-ultragpu-8g", "nvidia-h200-141gb");
    let run = recorded(&rec, "run");
    assert!(
        run.starts_with("-t all_gather -b 1048576 -e 1073741824 -f 2 -g 8 -w 3 -n 7 10.100.0."),
        "{run}"
    );
}

/// A4 (B200) takes A3 Ultra's RDMA path on GKE: the same recipe, the gIB image's script.
/// (What only a real A4 pool can show: gIB's `set_nccl_env.sh` on B200, which the guides'
/// A4 charts follow with their own tuner and interfaces; not public.)
#[test]
fn rdma_on_a4_at_zero_nodes() {
    let (_tmp, rec) = done_when("rdma", "a4-highgpu-8g", "nvidia-b200");
    let run = recorded(&rec, "run");
    assert!(
        run.starts_with("-t all_gather -b 1048576 -e 1073741824 -f 2 -g 8 -w 3 -n 7 10.100.0."),
        "{run}"
    );
}

#[test]
fn tcpxo_on_a3_mega_at_zero_nodes() {
    let (_tmp, rec) = done_when("tcpxo", "a3-megagpu-8g", "nvidia-h100-mega-80gb");
    let mpirun = ran_the_images_scripts(&rec, "-b 1048576 -e 1073741824 -f 2 -g 1 -w 3 --iters 7");
    for x in [
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices",
        "NCCL_LIB_DIR=/usr/local/nvidia/lib64",
    ] {
        assert!(mpirun.lines().any(|l| l == x), "mpirun got no -x {x}: {mpirun}");
    }
}

#[test]
fn tcpx_on_a3_high_at_zero_nodes() {
    let (_tmp, rec) = done_when("tcpx", "a3-highgpu-8g", "nvidia-h100-80gb");
    // The image's run-nccl.sh runs its own 5 warm-up and 20 timed iterations (the run
    // said so: `-n 7 -w 3` are not used).
    let mpirun = ran_the_images_scripts(&rec, "-b 1048576 -e 1073741824 -f 2 -g 1 -w 5 --iters 20");
    for x in [
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4",
        "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=/run/tcpx",
        "LD_LIBRARY_PATH",
    ] {
        assert!(mpirun.lines().any(|l| l == x), "mpirun got no -x {x}: {mpirun}");
    }
}

/// NCCL test pods attach the Networks the fleet file's `gke.networks` names, as job pods.
#[test]
fn nccl_test_pods_attach_the_fleet_files_networks() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let nets: Vec<String> = (0..8).map(|i| format!("team-vpc-{i}")).collect();
    let f = tmp.path().join("a3m.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: a3m\nnetwork:\n  gpudirect: tcpxo\ngke:\n  context: gone\n  kubeconfig: {}\n  node_pools: [a3m-pool]\n  networks: [{}]\n",
            tmp.path().join("no-such-kubeconfig").display(),
            nets.join(", ")
        ),
    )
    .unwrap();
    let out = flightdeck(
        &home,
        &[
            "nccl",
            "run",
            f.to_str().unwrap(),
            "--dry-run",
            "--node-count",
            "2",
            "-g",
            "8",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let js = yaml_docs(&text(&out.stdout)).remove(0);
    let ifaces = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
        ["networking.gke.io/interfaces"]
        .as_str()
        .unwrap()
        .to_string();
    for (i, n) in nets.iter().enumerate() {
        let want = format!("{{\"interfaceName\":\"eth{}\",\"network\":\"{n}\"}}", i + 1);
        assert!(ifaces.contains(&want), "{want} not in {ifaces}");
    }
}

/// Gke review H1: a fleet applied while its DWS pool had two nodes, which the autoscaler
/// removed since (DWS and Spot pools empty after every job). `job run` and `nccl run`
/// take the nodes the cluster has now, not the ones recorded at apply: the job is queued,
/// the pool grows from zero, and both run to their end. (Before, the job's start asked
/// the API for the first recorded node and failed on its 404.)
#[test]
fn runs_and_jobs_use_the_live_pool_once_the_recorded_nodes_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_path_buf();
    let rec = tmp.join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    let pool = "rdma-dws";
    let gpu_node = |name: &str, ip: &str| NodeSpec {
        name: name.into(),
        pool: pool.into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::FlexStart,
        internal_ip: ip.into(),
    };
    let d = KubeDouble::start(Options {
        nodes: vec![
            NodeSpec {
                name: "gke-default-0".into(),
                pool: "default-pool".into(),
                machine_type: "e2-standard-8".into(),
                accelerator: String::new(),
                gpus: 0,
                provisioning: Provisioning::Standard,
                internal_ip: "10.0.0.2".into(),
            },
            gpu_node("gke-rdma-dws-early-0", "10.0.0.20"),
            gpu_node("gke-rdma-dws-early-1", "10.0.0.21"),
        ],
        images: vec![image("rdma", &tmp, &rec)],
        queues: vec![("dws-queue".into(), true)],
        admit_after: Duration::from_millis(200),
        pools: vec![PoolSpec {
            name: pool.into(),
            machine_type: "a3-ultragpu-8g".into(),
            accelerator: "nvidia-h200-141gb".into(),
            gpus: 8,
            provisioning: Provisioning::FlexStart,
            min_nodes: 0,
            max_nodes: 8,
            taints: vec![],
            queued: true,
        }],
        scale_up_after: Duration::from_millis(300),
        scale_down_after: Some(Duration::from_secs(1)),
        booking_time: Some(Duration::from_secs(30)),
        node_roots: Some(gpu_node_root("rdma", &tmp)),
        ..Options::default()
    });
    let home = apply_dws_fleet(&d, &tmp, "rdma", pool);
    let state = text(&flightdeck(&home, &["fleet", "list", "--json"]).stdout);
    assert!(
        state.contains("gke-rdma-dws-early-1"),
        "the apply recorded the pool's nodes: {state}"
    );
    // The autoscaler removes both (unneeded for a second).
    let end = Instant::now() + Duration::from_secs(30);
    while d
        .removed_nodes()
        .iter()
        .filter(|(n, _)| n.contains("-early-"))
        .count()
        < 2
    {
        assert!(Instant::now() < end, "not scaled down: {:?}", d.removed_nodes());
        std::thread::sleep(Duration::from_millis(100));
    }

    let job = tmp.join("train.yaml");
    std::fs::write(
        &job,
        "type: task\nname: train\nfleet: dws\nnodes: 2\ngpus_per_node: 8\ncommands:\n  - echo rank $NODE_RANK of $NNODES\n",
    )
    .unwrap();
    let out = flightdeck(&home, &["job", "run", job.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&flightdeck(&home, &["job", "show", "train", "--json"]).stdout)
        .unwrap_or_default();
    assert_eq!(v["state"], "succeeded", "{v}{err}");

    let out = flightdeck(&home, &[&TWO_NODE_TEST[..], &["--json"]].concat());
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 24, "{doc}");
    assert!(!err.contains("early"), "no recorded node was used: {err}");

    // One node: one test pod, the image's script given one host.
    let out = flightdeck(
        &home,
        &[
            "nccl",
            "run",
            "dws",
            "--node-count",
            "1",
            "-g",
            "8",
            "--test",
            "all_gather",
            "--json",
            "--wait",
            "120",
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("of 1 test pod "), "{err}");
    let run = recorded(&rec, "run");
    assert_eq!(run.matches("10.100.0.").count(), 1, "one host: {run}");
}
