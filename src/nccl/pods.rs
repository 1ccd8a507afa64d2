//! The pod launcher: nccl-tests on a GKE fleet, as Google's GKE GPUDirect guides run
//! them. One test pod per node (the flavour's image, its network annotations and GPUs:
//! [`crate::cloud::gke::nccl::recipe`]), then the image's own run script detached on the
//! first pod, naming every pod; its nccl-tests output is followed and judged like a VM
//! run's (same parser, chart, verdict and history), and the pods are removed when the
//! run has been followed to its end ([`PodLauncher::cleanup`]).
//!
//! The images' scripts set their flavour's NCCL environment themselves; flightdeck adds
//! only environment lines the operator edited (which start from the GKE profile,
//! [`super::profile::pod_env`], never a VM's).

use super::history;
use super::launcher::{Progress, RunLauncher, Start, Started};
use super::remote;
use super::runner::{self, RunSpec};
use super::{profile, GpuDirect};
use crate::cloud::gke::exec::{pod_phase, wait_running};
use crate::cloud::gke::nccl::{
    delete_run_pods, machine, pod_name, recipe, rxdm_parts, shared_memory, RUN_LABEL,
};
use crate::cloud::gke::{self, object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::RunRecord;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// The test pods' container.
pub const CONTAINER: &str = "nccl";
/// How long test pods may take to run (a multi-GB image pull).
const POD_START: Duration = Duration::from_secs(600);

/// The [`RunLauncher`] of GKE fleets: test pods per node.
pub struct PodLauncher;

impl RunLauncher for PodLauncher {
    fn start<'a>(
        &'a self,
        state_dir: &'a Path,
        s: &'a Start,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, anyhow::Result<Started>> {
        Box::pin(async move { start(state_dir, s, progress).await.map_err(anyhow::Error::msg) })
    }

    /// The recorded nodes, each reached in the test pod the run ran in.
    fn heads(&self, run: &RunRecord, fleet_nodes: &[NodeTarget]) -> Vec<NodeTarget> {
        run.nodes
            .iter()
            .filter_map(|rn| {
                let mut n = fleet_nodes.iter().find(|n| n.index == rn.node).cloned()?;
                if let (Some(k), Some(pod)) = (n.kube_mut(), &rn.pod) {
                    k.pod = Some(pod.clone());
                    k.container = Some(CONTAINER.into());
                }
                Some(n)
            })
            .collect()
    }

    fn leaves(&self) -> Option<&'static str> {
        Some("its pods")
    }

    /// Remove the run's test pods, when its head is one.
    fn cleanup<'a>(
        &'a self,
        reach: &'a Reach,
        id: &'a str,
        heads: &'a [NodeTarget],
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            let Some(k) = heads.first().and_then(|n| n.kube()).filter(|k| k.pod.is_some()) else {
                return Ok(None);
            };
            match delete_run_pods(reach.kube(), k, id).await {
                Ok(n) => Ok(Some(format!("removed {}", crate::words::plural(n, "test pod")))),
                Err(e) => Err(format!(
                    "the run's test pods were not removed ({e}); `flightdeck fleet delete` or `fleet gc` removes them"
                )),
            }
        })
    }
}

/// Test pod `rank` of run `run` on `node`: it starts the image's SSH daemon (the run
/// script reaches the other pods through it, as mpirun does) and waits.
pub fn test_pod(fleet: &str, run: &str, rank: usize, node: &KubeNode, flavour: GpuDirect, gpus: u32) -> Pod {
    let r = recipe(flavour);
    let mut annotations = serde_json::Map::new();
    if let Some(i) = r.interfaces {
        annotations.insert("networking.gke.io/default-interface".into(), "eth0".into());
        annotations.insert("networking.gke.io/interfaces".into(), i.into());
    }
    let mut volumes: Vec<serde_json::Value> = r
        .mounts
        .iter()
        .enumerate()
        .map(|(i, (host, _))| serde_json::json!({"name": format!("host-{i}"), "hostPath": {"path": host}}))
        .collect();
    let mut mounts: Vec<serde_json::Value> = r
        .mounts
        .iter()
        .enumerate()
        .map(|(i, (_, at))| serde_json::json!({"name": format!("host-{i}"), "mountPath": at}))
        .collect();
    let (shm, shm_mount) = shared_memory(r.shm_size);
    volumes.push(shm);
    mounts.push(shm_mount);
    let mut init = vec![];
    if let Some((sidecar, (key, devices), vols)) = rxdm_parts(&r) {
        annotations.insert(key, devices.into());
        init.push(sidecar);
        volumes.extend(vols);
        // NCCL's plugin talks to the daemon over its socket directory.
        mounts.push(serde_json::json!({"name": "rxdm-uds", "mountPath": "/run/tcpx"}));
    }
    // The TCPXO image's SSH daemon (port 222, which its hostfiles name) is started as
    // gpudirect-tcpxo/nccl-test.yaml starts it; the gIB image's entry script starts its own.
    let args = if flavour == GpuDirect::Tcpxo {
        "service ssh restart; exec sleep infinity"
    } else {
        "if [ -x /scripts/container_entry.sh ]; then /scripts/container_entry.sh daemon & fi; exec sleep infinity"
    };
    let v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run, rank),
            "namespace": node.namespace,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                FLEET_LABEL: fleet,
                ROLE_LABEL: "nccl",
                RUN_LABEL: object_name(run, 63),
            },
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node.node,
            "hostNetwork": r.host_network,
            "dnsPolicy": if r.host_network { "ClusterFirstWithHostNet" } else { "ClusterFirst" },
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "tolerations": [{"operator": "Exists"}],
            "volumes": volumes,
            "initContainers": init,
            "containers": [{
                "name": CONTAINER,
                "image": r.image,
                "securityContext": {"privileged": true},
                "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
                "command": ["/bin/bash", "-c"],
                "args": [args],
                "resources": {"limits": {gke::GPU_RESOURCE: gpus.to_string()}},
                "volumeMounts": mounts,
            }],
        },
    });
    serde_json::from_value(v).expect("a test pod is a Pod")
}

/// Where GKE's TCPXO installer puts the plugin and its `nccl-env-profile.sh` in a pod
/// (the driver directory, mounted at /usr/local/nvidia): the manifest's `NCCL_LIB_DIR`.
const TCPXO_LIB_DIR: &str = "/usr/local/nvidia/lib64";

/// Whether the flavour's run script can run `spec` on nodes of `gpus` GPUs: TCPXO's
/// (demo-run-nccl-test-tcpxo-via-mpi.sh) steps sizes by 2 and passes no data type, and
/// its hostfiles (gen_hostfiles.sh) are for 1, 2, 4 or 8 ranks a node.
pub fn script_takes(spec: &RunSpec, flavour: GpuDirect, gpus: u32) -> Result<(), String> {
    if flavour != GpuDirect::Tcpxo {
        return Ok(());
    }
    let why = if spec.step_factor != 2 {
        format!("steps sizes by 2, not {}", spec.step_factor)
    } else if spec.dtype != "float" {
        format!("runs float only, not {}", spec.dtype)
    } else if ![1, 2, 4, 8].contains(&gpus) {
        format!("runs 1, 2, 4 or 8 GPUs a node, not {gpus}")
    } else {
        return Ok(());
    };
    Err(format!("the TCPXO image's run script {why}"))
}

/// The head pod's script: the flavour's run script across every pod (by address).
pub fn head_script(spec: &RunSpec, flavour: GpuDirect, hosts: &[String], gpus: u32) -> String {
    let mut s = String::from("#!/bin/bash\n# written by flightdeck: nccl-tests on GKE through the image's own run script\nset -u\n");
    for line in spec.env.iter().flatten() {
        let _ = writeln!(s, "{line}");
    }
    let test = spec.collective.trim_end_matches("_perf");
    let list = hosts.join(" ");
    match flavour {
        // As gpudirect-tcpxo/nccl-test.yaml's allgather.sh: accept every pod's SSH host
        // key (port 222), write the hostfiles mpirun reads, then the image's driver with
        // the variables it reads (demo-run-nccl-test-tcpxo-via-mpi.sh: BENCHMARK, NHOSTS,
        // NCCL_LIB_DIR, LD_LIBRARY_PATH; DATA_MIN, DATA_MAX, GPU_PER_NODE, RUN_ITERS,
        // WARMUP_ITERS). It steps sizes by 2 ([`script_takes`]).
        GpuDirect::Tcpxo => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let quoted: Vec<String> = hosts.iter().map(|h| crate::shellenv::quote(h)).collect();
            let quoted = quoted.join(" ");
            let _ = writeln!(s, "init_ssh.sh {quoted}");
            let _ = writeln!(s, "gen_hostfiles.sh {quoted}");
            let _ = writeln!(
                s,
                "BENCHMARK={test}_perf NHOSTS={n} NCCL_LIB_DIR={lib} LD_LIBRARY_PATH=\"${{LD_LIBRARY_PATH:-{lib}}}\" \
                 DATA_MIN={b} DATA_MAX={e} GPU_PER_NODE={gpus} RUN_ITERS={it} WARMUP_ITERS={w} exec demo-run-nccl-test-tcpxo-via-mpi.sh",
                n = hosts.len(),
                lib = TCPXO_LIB_DIR,
                b = spec.min_bytes,
                e = spec.max_bytes,
                it = spec.iters,
                w = spec.warmup,
            );
        }
        GpuDirect::Tcpx => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/scripts"))
            );
            let _ = writeln!(
                s,
                "exec run-nccl.sh {test}_perf \"${{LD_LIBRARY_PATH:-}}\" {gpus} eth1,eth2,eth3,eth4 {b} {e} {n} {list}",
                b = spec.min_bytes,
                e = spec.max_bytes,
                n = hosts.len()
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "{}",
                crate::shellenv::export("PATH", crate::shellenv::Value::Prepend("/usr/local/gib/scripts"))
            );
            let _ = writeln!(
                s,
                "exec run_nccl_tests.sh -t {test} -b {b} -e {e} -f {f} -g {gpus} -w {w} -n {it} {list}",
                b = spec.min_bytes,
                e = spec.max_bytes,
                f = spec.step_factor,
                w = spec.warmup,
                it = spec.iters
            );
        }
    }
    s
}

/// Create the run's test pods on `nodes` and wait until they all run; the pods as nodes
/// (head first) and the machine type GKE labels the first node with.
pub async fn create_pods(
    clients: &Clients,
    fleet: &str,
    run: &str,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    gpus: u32,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(Vec<NodeTarget>, Vec<String>), String> {
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("not a GKE fleet's nodes")?;
    let client = clients.get(&first.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, &first.namespace);
    progress(format!(
        "creating {} ({}) for run {run}",
        crate::words::plural(nodes.len(), "test pod"),
        recipe(flavour).image
    ));
    let mut made = vec![];
    for (rank, n) in nodes.iter().enumerate() {
        let k = n.kube().ok_or_else(|| format!("{}: not a GKE node", n.name))?;
        let mut pod = test_pod(fleet, run, rank, k, flavour, gpus);
        gke::stamp_owner_meta(&clients.owner(), &mut pod.metadata);
        if let Err(e) = api.create(&PostParams::default(), &pod).await {
            let _ = delete_run_pods(clients, &first, run).await;
            return Err(format!(
                "creating test pod {}: {}",
                pod_name(run, rank),
                gke::cluster::why(&e)
            ));
        }
        made.push(pod_name(run, rank));
    }
    let mut ips = vec![];
    for name in &made {
        if let Err(e) = wait_running(&api, name, POD_START).await {
            let _ = delete_run_pods(clients, &first, run).await;
            return Err(e);
        }
        let p = api.get(name).await.map_err(|e| gke::cluster::why(&e))?;
        let ip = p
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .ok_or_else(|| format!("pod {name} runs without an address ({})", pod_phase(&p).0))?;
        ips.push(ip);
    }
    progress(format!("test pods running: {}", ips.join(" ")));
    let pods = nodes
        .iter()
        .zip(&made)
        .map(|(n, name)| {
            let mut t = n.clone();
            if let Some(k) = t.kube_mut() {
                k.pod = Some(name.clone());
                k.container = Some(CONTAINER.into());
            }
            t
        })
        .collect();
    Ok((pods, ips))
}

/// Start an nccl-tests run on the GKE nodes of `s`: the test pods, the head's script
/// (detached in the head pod, as a VM run's is on its head node), the record in the
/// state store and the history entry. Pods need no pre-flight and no node-to-node SSH
/// (the image brings its own): `s.preflight`, `s.node_ssh` and `s.mpirun` are the node
/// launcher's.
pub async fn start(state_dir: &Path, s: &Start, progress: Progress<'_>) -> Result<Started, String> {
    let (fleet, nodes, spec) = (s.fleet.as_str(), s.nodes.as_slice(), &s.spec);
    let clients = s.reach.kube();
    spec.check().map_err(|e| e.to_string())?;
    let first = nodes
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or("no GKE nodes selected")?;
    let (machine_type, node_gpus) = machine(clients, &first).await?;
    let gpus = spec.gpus.map(u64::from).unwrap_or(node_gpus).max(1) as u32;
    script_takes(spec, spec.profile, gpus)?;
    let machine = s
        .machine
        .clone()
        .or_else(|| machine_type.map(|m| (m, "the node's GKE label".to_string())));
    let id = runner::new_id(&spec.collective, crate::store::now_unix());
    let (pods, ips) = create_pods(clients, fleet, &id, nodes, spec.profile, gpus, progress).await?;
    let script = head_script(spec, spec.profile, &ips, gpus);
    let (command, input) = runner::launch_command(&id, &script, false);
    let head = pods[0].clone();
    let out = crate::exec::collect_with_input(s.reach.clone(), vec![(head.clone(), command, input)]).await;
    let (code, stdout, stderr) = out
        .into_iter()
        .next()
        .unwrap_or((-1, String::new(), String::new()));
    let pid = stdout
        .trim()
        .strip_prefix("started ")
        .and_then(|p| p.parse().ok());
    if code != 0 || pid.is_none() {
        let _ = delete_run_pods(clients, &first, &id).await;
        return Err(format!(
            "the run could not start in {}: {} {}",
            pod_name(&id, 0),
            stdout.trim(),
            stderr.trim()
        ));
    }
    let mut saved = remote::saved_run(
        &id,
        fleet,
        spec,
        &pods,
        machine.as_ref().map(|(m, f)| (m.clone(), f.as_str())),
        s.purpose.clone(),
    );
    // Unedited, the head pod got no lines from flightdeck: the image's script set the
    // GKE profile of the flavour, never a VM's.
    saved.spec.env = spec.env.clone().unwrap_or_else(|| profile::pod_env(spec.profile));
    let (dir, f, rid, h, entry) = (
        state_dir.to_path_buf(),
        fleet.to_string(),
        id.clone(),
        head.clone(),
        saved.clone(),
    );
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        remote::record_run(&dir, &f, &rid, &[(h, pid)])?;
        history::save(&dir, &entry)?;
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("{e:#}"))?;
    progress(format!(
        "run {id} started in {} on {}",
        pod_name(&id, 0),
        crate::words::plural(nodes.len(), "node")
    ));
    Ok(Started {
        id,
        heads: vec![head],
        saved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            collective: "all_gather".into(),
            min_bytes: 1024,
            max_bytes: 8 << 30,
            step_factor: 2,
            gpus: Some(8),
            iters: 20,
            warmup: 5,
            dtype: "float".into(),
            engine: crate::nccl::runner::Engine::NcclTests,
            profile: GpuDirect::Rdma,
            nccl_tests_dir: None,
            env: None,
        }
    }

    #[test]
    fn rdma_runs_the_gib_script_across_the_pods() {
        let s = head_script(
            &spec(),
            GpuDirect::Rdma,
            &["10.1.0.5".into(), "10.1.0.6".into()],
            8,
        );
        assert!(s.contains("exec run_nccl_tests.sh -t all_gather -b 1024 -e 8589934592 -f 2 -g 8 -w 5 -n 20 10.1.0.5 10.1.0.6"), "{s}");
        assert!(
            s.contains("export PATH='/usr/local/gib/scripts'\"${PATH:+:$PATH}\""),
            "{s}"
        );
        let t = head_script(&spec(), GpuDirect::Tcpxo, &["a".into(), "b".into()], 8);
        assert!(t.contains("BENCHMARK=all_gather_perf NHOSTS=2"), "{t}");
    }

    #[test]
    fn test_pods_follow_the_guides() {
        let node = KubeNode::for_tests("gke-a3u-1");
        let v = serde_json::to_value(test_pod("a3u", "ag-1", 0, &node, GpuDirect::Rdma, 8)).unwrap();
        assert_eq!(v["spec"]["nodeName"], "gke-a3u-1");
        assert_eq!(v["spec"]["hostNetwork"], false);
        assert!(v["metadata"]["annotations"]["networking.gke.io/interfaces"]
            .as_str()
            .unwrap()
            .contains("rdma-7"));
        assert_eq!(
            v["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "8"
        );
        let x = serde_json::to_value(test_pod("a3m", "ag-1", 1, &node, GpuDirect::Tcpxo, 8)).unwrap();
        assert!(x["metadata"]["annotations"]["networking.gke.io/interfaces"]
            .as_str()
            .unwrap()
            .contains("vpc8"));
        let rxdm = &x["spec"]["initContainers"][0];
        assert_eq!(rxdm["name"], "tcpxo-daemon");
        assert_eq!(rxdm["restartPolicy"], "Always", "a native sidecar");
        assert!(
            x["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"]
                .as_str()
                .unwrap()
                .contains("/dev/nvidia7")
        );
        assert_eq!(x["metadata"]["name"], "fd-nccl-ag-1-1");
    }

    /// Google's TCPXO scripts (tests/fixtures/reference/nccl-plugin-gpudirect-tcpxo).
    fn tcpxo_script(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference/nccl-plugin-gpudirect-tcpxo/tcpxo_scripts")
            .join(name)
    }

    const DEMO_RUN: &str = "demo-run-nccl-test-tcpxo-via-mpi.sh";

    fn tcpxo_spec() -> RunSpec {
        RunSpec {
            profile: GpuDirect::Tcpxo,
            ..spec()
        }
    }

    /// The variables a script reads: `: "${X:?...}"` (it must be set) and
    /// `X="${X:-...}"` (a default).
    fn script_reads(text: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        for l in text.lines().map(str::trim) {
            if let Some(r) = l.strip_prefix(": \"${") {
                if let Some((n, _)) = r.split_once(":?") {
                    names.insert(n.to_string());
                }
            } else if let Some((n, r)) = l.split_once("=\"${") {
                if r.starts_with(&format!("{n}:-")) {
                    names.insert(n.to_string());
                }
            }
        }
        names
    }

    /// The TCPXO head script gives the image's driver exactly the variables it reads
    /// (not MIN_BYTES, MAX_BYTES, FACTOR, GPUS_PER_NODE, HOSTS, which it ignores), and
    /// runs init_ssh.sh and gen_hostfiles.sh with the pods first, as the manifest's
    /// allgather.sh does.
    #[test]
    fn tcpxo_head_sets_what_the_image_script_reads() {
        let reads = script_reads(&std::fs::read_to_string(tcpxo_script(DEMO_RUN)).unwrap());
        for n in [
            "NCCL_LIB_DIR",
            "BENCHMARK",
            "NHOSTS",
            "DATA_MIN",
            "DATA_MAX",
            "GPU_PER_NODE",
        ] {
            assert!(reads.contains(n), "{n} not found in {reads:?}");
        }
        let s = head_script(
            &tcpxo_spec(),
            GpuDirect::Tcpxo,
            &["10.1.0.5".into(), "10.1.0.6".into()],
            8,
        );
        let line = s.lines().find(|l| l.contains(DEMO_RUN)).unwrap();
        let (assigns, run) = line.split_once(" exec ").unwrap();
        assert_eq!(run, DEMO_RUN);
        let set: std::collections::BTreeSet<String> = assigns
            .split_whitespace()
            .map(|w| {
                w.split_once('=')
                    .unwrap_or_else(|| panic!("{w}: no assignment"))
                    .0
                    .to_string()
            })
            .collect();
        assert_eq!(set, reads, "{line}");
        let lines: Vec<&str> = s.lines().collect();
        let at = |p: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(p))
                .unwrap_or_else(|| panic!("no {p} in {s}"))
        };
        assert_eq!(lines[at("init_ssh.sh ")], "init_ssh.sh '10.1.0.5' '10.1.0.6'");
        assert_eq!(
            lines[at("gen_hostfiles.sh ")],
            "gen_hostfiles.sh '10.1.0.5' '10.1.0.6'"
        );
        assert!(at("init_ssh.sh ") < at("gen_hostfiles.sh ") && at("gen_hostfiles.sh ") < at("BENCHMARK="));
    }

    /// The TCPXO head script under bash against Google's own init_ssh.sh,
    /// gen_hostfiles.sh and demo-run-nccl-test-tcpxo-via-mpi.sh (byte-for-byte copies),
    /// with `ssh`, `mpirun` and `tee` stand-ins that record what they get: mpirun finds
    /// the hostfile naming both pods and runs the sizes, iterations and GPUs asked for.
    #[test]
    fn tcpxo_head_script_runs_googles_scripts() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (scripts, bin, rec) = (
            tmp.path().join("scripts"),
            tmp.path().join("bin"),
            tmp.path().join("rec"),
        );
        for d in [&scripts, &bin, &rec] {
            std::fs::create_dir(d).unwrap();
        }
        let exe = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["init_ssh.sh", "gen_hostfiles.sh", DEMO_RUN] {
            std::fs::copy(tcpxo_script(f), scripts.join(f)).unwrap();
            exe(&scripts.join(f));
        }
        for (name, body) in [
            ("ssh", "echo \"$*\" >> \"$REC/ssh\"\n"),
            (
                "mpirun",
                "printf '%s\\n' \"$@\" > \"$REC/mpirun\"\n\
                 while [ $# -gt 0 ]; do if [ \"$1\" = --hostfile ]; then cat \"$2\" > \"$REC/hostfile\"; fi; shift; done\n",
            ),
            ("tee", "exec cat\n"),
        ] {
            std::fs::write(bin.join(name), format!("#!/bin/bash\n{body}")).unwrap();
            exe(&bin.join(name));
        }
        let head = tmp.path().join("head.sh");
        let hosts = ["10.1.0.5".to_string(), "10.1.0.6".to_string()];
        std::fs::write(&head, head_script(&tcpxo_spec(), GpuDirect::Tcpxo, &hosts, 8)).unwrap();
        let out = std::process::Command::new("bash")
            .arg(&head)
            .env(
                "PATH",
                format!("{}:{}:/usr/bin:/bin", scripts.display(), bin.display()),
            )
            .env("REC", &rec)
            // As the test pod's container sets it.
            .env("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let read = |f: &str| {
            std::fs::read_to_string(rec.join(f))
                .unwrap_or_else(|_| panic!("{f} not run or no hostfile: {err}"))
        };
        assert_eq!(
            read("ssh"),
            "-o StrictHostKeyChecking=no -p 222 10.1.0.5 echo Hello from 10.1.0.5\n\
             -o StrictHostKeyChecking=no -p 222 10.1.0.6 echo Hello from 10.1.0.6\n"
        );
        assert_eq!(
            read("hostfile"),
            "10.1.0.5 port=222 slots=8\n10.1.0.6 port=222 slots=8\n"
        );
        let argv: Vec<String> = read("mpirun").lines().map(String::from).collect();
        let has = |pair: &[&str]| argv.windows(pair.len()).any(|w| w == pair);
        let hostfile = scripts.join("hostfiles2/hostfile8").display().to_string();
        for pair in [
            &["-np", "16"][..],
            &["--hostfile", &hostfile],
            &["-x", "NCCL_LIB_DIR=/usr/local/nvidia/lib64"],
            &[
                "all_gather_perf",
                "-b",
                "1024",
                "-e",
                "8589934592",
                "-f",
                "2",
                "-g",
                "1",
            ],
            &["-w", "5", "--iters", "20"],
        ] {
            assert!(has(pair), "mpirun got no {pair:?}: {argv:?}");
        }
    }

    #[test]
    fn tcpxo_runs_only_what_the_image_script_takes() {
        let ok = tcpxo_spec();
        assert_eq!(script_takes(&ok, GpuDirect::Tcpxo, 8), Ok(()));
        let f3 = RunSpec {
            step_factor: 3,
            ..tcpxo_spec()
        };
        assert!(script_takes(&f3, GpuDirect::Tcpxo, 8)
            .unwrap_err()
            .contains("steps sizes by 2, not 3"));
        assert_eq!(script_takes(&f3, GpuDirect::Rdma, 8), Ok(()));
        assert!(script_takes(&ok, GpuDirect::Tcpxo, 3)
            .unwrap_err()
            .contains("not 3"));
        let half = RunSpec {
            dtype: "half".into(),
            ..tcpxo_spec()
        };
        assert!(script_takes(&half, GpuDirect::Tcpxo, 8)
            .unwrap_err()
            .contains("float only"));
    }

    #[test]
    fn tcpxo_pods_start_the_images_ssh_daemon() {
        let node = KubeNode::for_tests("gke-a3m-1");
        let x = serde_json::to_value(test_pod("a3m", "ag-1", 0, &node, GpuDirect::Tcpxo, 8)).unwrap();
        assert!(x["spec"]["containers"][0]["args"][0]
            .as_str()
            .unwrap()
            .starts_with("service ssh restart;"));
    }

    /// Every reference manifest with a /dev/shm gives it a memory volume named
    /// `shared-memory` (gpudirect-rdma 250Gi, gpudirect-tcpxo 1Gi); without one NCCL's
    /// shared-memory transport gets the runtime's 64 MiB.
    #[test]
    fn test_pods_mount_memory_at_dev_shm() {
        let node = KubeNode::for_tests("gke-a3-1");
        for (flavour, size) in [
            (GpuDirect::Rdma, Some("250Gi")),
            (GpuDirect::Tcpxo, Some("1Gi")),
            (GpuDirect::Tcpx, None),
            (GpuDirect::None, None),
        ] {
            let v = serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8)).unwrap();
            let mount = v["spec"]["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == "/dev/shm")
                .unwrap_or_else(|| panic!("{flavour:?}: nothing at /dev/shm"))
                .clone();
            assert_eq!(mount["name"], "shared-memory");
            let vol = v["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == "shared-memory")
                .unwrap()
                .clone();
            assert_eq!(vol["emptyDir"]["medium"], "Memory", "{flavour:?}");
            assert_eq!(vol["emptyDir"]["sizeLimit"].as_str(), size, "{flavour:?}");
        }
    }

    /// The paths every `devices.gke.io/container.*` annotation of the pods in the
    /// reference manifests of `dir` (tests/fixtures/reference/container-engine-accelerators)
    /// lists, one list per annotation.
    fn manifest_devices(dir: &str) -> Vec<Vec<String>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference/container-engine-accelerators")
            .join(dir);
        let mut lists = vec![];
        for f in std::fs::read_dir(&root).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
                let Some(a) = v["metadata"]["annotations"].as_mapping() else {
                    continue;
                };
                for (k, list) in a {
                    if !k.as_str().unwrap().starts_with("devices.gke.io/container.") {
                        continue;
                    }
                    let list: Vec<serde_yaml::Value> = serde_yaml::from_str(list.as_str().unwrap()).unwrap();
                    lists.push(
                        list.iter()
                            .map(|d| d["path"].as_str().unwrap().to_string())
                            .collect(),
                    );
                }
            }
        }
        lists
    }

    /// The paths a test pod's RxDM devices annotation lists.
    fn pod_devices(flavour: GpuDirect) -> Vec<String> {
        let node = KubeNode::for_tests("gke-a3-1");
        let v = serde_json::to_value(test_pod("a3", "ag-1", 0, &node, flavour, 8)).unwrap();
        let daemon = v["spec"]["initContainers"][0]["name"]
            .as_str()
            .unwrap()
            .to_string();
        let list = v["metadata"]["annotations"][format!("devices.gke.io/container.{daemon}")]
            .as_str()
            .unwrap_or_else(|| panic!("{flavour:?}: no devices annotation for {daemon}"));
        let list: Vec<serde_yaml::Value> = serde_yaml::from_str(list).unwrap();
        list.iter()
            .map(|d| d["path"].as_str().unwrap().to_string())
            .collect()
    }

    /// GKE's device injector fails a container whose listed device the node lacks: a TCPX
    /// (A3 High) pod lists only what GKE's TCPX manifests list (no dmabuf import helper),
    /// a TCPXO (A3 Mega) pod what GKE's TCPXO manifest lists.
    #[test]
    fn rxdm_devices_are_the_manifests_of_the_flavour() {
        let tcpx = manifest_devices("gpudirect-tcpx");
        assert!(!tcpx.is_empty());
        let named: std::collections::BTreeSet<&String> = tcpx.iter().flatten().collect();
        for d in pod_devices(GpuDirect::Tcpx) {
            assert!(
                named.contains(&d),
                "TCPX pods list {d}, which no TCPX manifest names"
            );
        }
        let tcpxo = manifest_devices("gpudirect-tcpxo");
        assert!(!tcpxo.is_empty());
        for list in &tcpxo {
            assert_eq!(&pod_devices(GpuDirect::Tcpxo), list);
        }
        assert!(tcpxo[0].iter().any(|d| d == "/dev/dmabuf_import_helper"));
    }
}
