//! What flightdeck creates on GKE, against Google's own manifests.
//!
//! * `nccl run --dry-run` and `job run --dry-run` print the objects a run creates
//!   (`kubectl --dry-run=client -o yaml` style) from fleet and job files alone, with no
//!   cluster; a real run against the Kubernetes double creates exactly those objects.
//! * NCCL tests on a fleet whose nodes the operator does not pick go through the
//!   scheduler: an indexed JobSet with the pool's affinity, the Kueue queue and DWS's
//!   annotation (review H4), run to their end on the double.
//! * Golden manifests: the pod templates flightdeck prints, compared aspect by aspect
//!   (images, the commands' key lines, env, volumes and mounts, device and network
//!   annotations, resources, securityContext) with the guides' manifests kept byte for
//!   byte in tests/fixtures/reference (container-engine-accelerators' TCPX, TCPXO and
//!   RDMA NCCL tests; cluster-toolkit's A4 NCCL JobSet). Every difference is on an
//!   allow-list with its reason (and in docs/DESIGN.md, "GKE manifests against the
//!   guides: intended differences"); any other difference fails.

mod support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::k8s_double::{KubeDouble, NodeSpec, Options, PoolSpec, Provisioning};
use support::{flightdeck, text};

fn reference(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(path)
}

/// A YAML mapping read as kubectl's YAML reader (go-yaml v2 through sigs.k8s.io/yaml,
/// non-strict) reads it: a key given twice keeps its last value. gpudirect-rdma's
/// nccl-test.yaml gives its container `resources` twice.
struct Loose(Value);

impl<'de> serde::Deserialize<'de> for Loose {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Loose, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("YAML")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Loose, E> {
                Ok(Loose(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Loose, E> {
                Ok(Loose(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Loose, E> {
                Ok(Loose(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Loose, E> {
                Ok(Loose(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Loose, E> {
                Ok(Loose(v.into()))
            }
            fn visit_unit<E>(self) -> Result<Loose, E> {
                Ok(Loose(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Loose, E> {
                Ok(Loose(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Loose, A::Error> {
                let mut v = vec![];
                while let Some(Loose(x)) = a.next_element()? {
                    v.push(x);
                }
                Ok(Loose(Value::Array(v)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Loose, A::Error> {
                let mut m = serde_json::Map::new();
                while let Some((Loose(k), Loose(v))) = a.next_entry()? {
                    let k = match k {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    m.insert(k, v);
                }
                Ok(Loose(Value::Object(m)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Every YAML document of `text`.
fn docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| {
            let Loose(v) = serde::Deserialize::deserialize(d).expect("YAML");
            v
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The first object of `kind` in a reference manifest.
fn reference_object(path: &str, kind: &str) -> Value {
    let text = std::fs::read_to_string(reference(path)).unwrap();
    docs(&text)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {path}"))
}

/// The pod template of a Pod or a JobSet (its first replicated job's).
fn pod_of(obj: &Value) -> Value {
    match obj["kind"].as_str() {
        Some("Pod") => obj.clone(),
        Some("JobSet") => obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"].clone(),
        k => panic!("not a Pod or JobSet: {k:?}"),
    }
}

/// A container's role: the GPU container (`main`), the RxDM daemon (`rxdm`), or its name.
fn role(c: &Value) -> String {
    let name = c["name"].as_str().unwrap_or_default();
    if !c["resources"]["limits"]["nvidia.com/gpu"].is_null() {
        "main".into()
    } else if name.ends_with("-daemon") {
        "rxdm".into()
    } else {
        name.to_string()
    }
}

/// The statements of a command that name a program flightdeck or the guide relies on:
/// scripts (`*.sh`), `source`, `service`, the RxDM binary; each as its program and its
/// `--flag value` pairs.
fn key_lines(c: &Value) -> Vec<String> {
    let mut words: Vec<String> = vec![];
    for part in ["command", "args"] {
        for w in c[part].as_array().into_iter().flatten() {
            words.push(w.as_str().unwrap_or_default().to_string());
        }
    }
    // `sh -c SCRIPT`: the script's statements.
    let shells = ["/bin/bash", "/bin/sh", "bash", "sh", "-c"];
    let start = words.iter().take_while(|w| shells.contains(&w.as_str())).count();
    let text = words[start..].join(" ");
    let mut out = vec![];
    for stmt in text.split(['\n', ';', '&', '|']) {
        let mut toks: Vec<&str> = stmt.split_whitespace().collect();
        // Shell keywords and `exec` before the program.
        while toks
            .first()
            .is_some_and(|t| ["then", "do", "else", "exec"].contains(t))
        {
            toks.remove(0);
        }
        let Some(first) = toks.first() else { continue };
        let program = match *first {
            // `.` is `source`; quotes are the shell's.
            "source" | "." => toks.get(1).map(|t| format!("source {}", t.trim_matches('\''))),
            "service" => toks.get(1).map(|t| format!("service {t}")),
            f if f.ends_with(".sh") || f.ends_with("tcpgpudmarxd") => Some(f.to_string()),
            _ => None,
        };
        let Some(program) = program else { continue };
        out.push(format!("runs {program}"));
        let mut i = 1;
        while i < toks.len() {
            let t = toks[i];
            if t.starts_with("--") {
                match toks.get(i + 1) {
                    Some(v)
                        if !t.contains('=')
                            && !v.starts_with('-')
                            && !v.starts_with('\\')
                            && !v.starts_with('"') =>
                    {
                        out.push(format!("flag {t}={v}"));
                        i += 1;
                    }
                    _ => out.push(format!("flag {t}")),
                }
            }
            i += 1;
        }
    }
    out
}

/// A pod template as a set of comparable aspects.
fn aspects(pod: &Value) -> BTreeSet<String> {
    let mut a = BTreeSet::new();
    let spec = &pod["spec"];
    for (k, v) in pod["metadata"]["annotations"].as_object().into_iter().flatten() {
        let v = v.as_str().unwrap_or_default();
        if k == "networking.gke.io/interfaces" {
            let list: Vec<Value> = serde_json::from_str(v).unwrap();
            for i in list {
                a.insert(format!(
                    "annotation {k}: {}={}",
                    i["interfaceName"].as_str().unwrap(),
                    i["network"].as_str().unwrap()
                ));
            }
        } else if k.starts_with("devices.gke.io/container.") {
            for d in docs(v)
                .into_iter()
                .flat_map(|l| l.as_array().cloned().unwrap_or_default())
            {
                a.insert(format!(
                    "annotation devices.gke.io/container.<rxdm>: {}",
                    d["path"].as_str().unwrap()
                ));
            }
        } else if k.starts_with("networking.gke.io/") {
            a.insert(format!("annotation {k}: {v}"));
        }
    }
    if spec["hostNetwork"] == true {
        a.insert("hostNetwork".into());
    }
    let volumes: Vec<Value> = spec["volumes"].as_array().cloned().unwrap_or_default();
    let source = |name: &str| -> String {
        let v = volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"));
        if let Some(p) = v["hostPath"]["path"].as_str() {
            format!("hostPath {p}")
        } else if v["emptyDir"].is_object() || v.get("emptyDir").is_some() {
            let e = &v["emptyDir"];
            let mut s = "emptyDir".to_string();
            if let Some(m) = e["medium"].as_str() {
                s += &format!(" {m}");
            }
            if let Some(l) = e["sizeLimit"].as_str() {
                s += &format!(" {l}");
            }
            s
        } else if v["configMap"].is_object() {
            format!(
                "configMap {}",
                v["configMap"]["name"].as_str().unwrap_or_default()
            )
        } else {
            format!("other {v}")
        }
    };
    let containers = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["initContainers"].as_array().into_iter().flatten());
    for c in containers {
        let r = role(c);
        a.insert(format!("{r} image {}", c["image"].as_str().unwrap_or_default()));
        for e in c["env"].as_array().into_iter().flatten() {
            let val = match e["value"].as_str() {
                Some(v) => v.to_string(),
                None => format!("from {}", e["valueFrom"]),
            };
            a.insert(format!("{r} env {}={val}", e["name"].as_str().unwrap()));
        }
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            a.insert(format!(
                "{r} mount {} <- {}",
                m["mountPath"].as_str().unwrap(),
                source(m["name"].as_str().unwrap())
            ));
        }
        for kind in ["limits", "requests"] {
            for (k, v) in c["resources"][kind].as_object().into_iter().flatten() {
                let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                a.insert(format!("{r} {kind} {k}={v}"));
            }
        }
        let sc = &c["securityContext"];
        if sc["privileged"] == true {
            a.insert(format!("{r} privileged"));
        }
        for cap in sc["capabilities"]["add"].as_array().into_iter().flatten() {
            a.insert(format!("{r} capability {}", cap.as_str().unwrap()));
        }
        if c["restartPolicy"] == "Always" {
            a.insert(format!("{r} native sidecar"));
        }
        for l in key_lines(c) {
            a.insert(format!("{r} {l}"));
        }
    }
    a
}

/// A JobSet's scheduling and lifecycle as comparable aspects: the queue label, the
/// headless service, the pod template's tolerations, node selection and deadlines.
fn jobset_aspects(js: &Value) -> BTreeSet<String> {
    let mut a = BTreeSet::new();
    if !js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].is_null() {
        a.insert("label kueue.x-k8s.io/queue-name".to_string());
    }
    if js["spec"]["network"]["enableDNSHostnames"] == true {
        a.insert("network enableDNSHostnames".into());
    }
    if let Some(t) = js["spec"]["ttlSecondsAfterFinished"].as_u64() {
        a.insert(format!("ttlSecondsAfterFinished {t}"));
    }
    let pod = pod_of(js);
    for (k, _) in pod["metadata"]["annotations"].as_object().into_iter().flatten() {
        if k.starts_with("kueue.x-k8s.io/") {
            a.insert(format!("pod annotation {k}"));
        }
    }
    let spec = &pod["spec"];
    for t in spec["tolerations"].as_array().into_iter().flatten() {
        a.insert(format!(
            "toleration {} {}",
            t["key"].as_str().unwrap_or("*"),
            t["effect"].as_str().unwrap_or("*")
        ));
    }
    for (k, _) in spec["nodeSelector"].as_object().into_iter().flatten() {
        a.insert(format!("nodeSelector {k}"));
    }
    for term in spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for e in term["matchExpressions"].as_array().into_iter().flatten() {
            a.insert(format!("node affinity {}", e["key"].as_str().unwrap()));
        }
    }
    if !spec["affinity"]["podAntiAffinity"].is_null() {
        a.insert("pod anti-affinity".into());
    }
    for k in ["activeDeadlineSeconds", "setHostnameAsFQDN", "restartPolicy"] {
        if !spec[k].is_null() {
            a.insert(format!("{k} {}", spec[k]));
        }
    }
    a
}

/// [`compare`] for [`jobset_aspects`].
fn compare_jobsets(what: &str, ours_js: &Value, theirs_js: &Value, allowed: &[Allowed]) {
    check(
        what,
        &jobset_aspects(ours_js),
        &jobset_aspects(theirs_js),
        allowed,
    );
}

/// The JobSet-level differences from cluster-toolkit's A4 NCCL JobSet that flightdeck's
/// JobSets (NCCL tests and jobs) both have.
const JOBSET_LEVEL: [Allowed; 6] = [
    ours(
        "node affinity cloud.google.com/gke-nodepool",
        "the fleet's pools as a node affinity (`In`, several pools allowed) where cluster-toolkit names one pool in a nodeSelector",
    ),
    theirs("nodeSelector cloud.google.com/gke-nodepool", "as above"),
    ours(
        "pod anti-affinity",
        "one rank per node by a required anti-affinity on the hostname (see Jobs on GKE); cluster-toolkit leaves it to full-node GPU requests",
    ),
    theirs(
        "pod annotation kueue.x-k8s.io/podset-preferred-topology",
        "Kueue topology-aware scheduling needs a Topology and a TAS ResourceFlavor in the cluster, which flightdeck does not assume: only when the fleet's `gke.topology` or the job's `topology:` asks (tests/gke_jobs.rs)",
    ),
    theirs(
        "ttlSecondsAfterFinished ",
        "flightdeck removes its JobSets itself (a test's at its end; a job's by `job stop` or `fleet gc`), after reading their logs",
    ),
    theirs(
        "setHostnameAsFQDN ",
        "cluster-toolkit's script builds its peers' names from the FQDN; flightdeck's head addresses pods by IP, a job by MASTER_ADDR",
    ),
];

/// An intended difference: an aspect only flightdeck's pods have (`Ours`) or only the
/// guide's (`Theirs`), matched by prefix, and why.
#[derive(Debug, Clone, Copy)]
enum Side {
    Ours,
    Theirs,
}

#[derive(Clone, Copy)]
struct Allowed {
    side: Side,
    prefix: &'static str,
    why: &'static str,
}

const fn ours(prefix: &'static str, why: &'static str) -> Allowed {
    Allowed {
        side: Side::Ours,
        prefix,
        why,
    }
}

const fn theirs(prefix: &'static str, why: &'static str) -> Allowed {
    Allowed {
        side: Side::Theirs,
        prefix,
        why,
    }
}

/// Compare our pod template with the guide's: every aspect on one side only must be
/// allowed, and every allow-list entry must be used (the list stays true).
fn compare(what: &str, ours_pod: &Value, theirs_pod: &Value, allowed: &[Allowed]) {
    check(what, &aspects(ours_pod), &aspects(theirs_pod), allowed);
}

/// Every aspect on one side only must be allowed; every allow-list entry must be used.
fn check(what: &str, a: &BTreeSet<String>, b: &BTreeSet<String>, allowed: &[Allowed]) {
    let mut used = vec![false; allowed.len()];
    let mut bad = vec![];
    for (side, only) in [
        (Side::Ours, a.difference(b).collect::<Vec<_>>()),
        (Side::Theirs, b.difference(a).collect::<Vec<_>>()),
    ] {
        for x in only {
            let hit = allowed.iter().position(|e| {
                std::mem::discriminant(&e.side) == std::mem::discriminant(&side) && x.starts_with(e.prefix)
            });
            match hit {
                Some(i) => used[i] = true,
                None => bad.push(format!("{side:?} only: {x}")),
            }
        }
    }
    let stale: Vec<String> = allowed
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| format!("{:?} {} ({})", e.side, e.prefix, e.why))
        .collect();
    assert!(
        bad.is_empty() && stale.is_empty(),
        "{what}: differences not on the allow-list:\n  {}\nallow-list entries that match nothing:\n  {}",
        bad.join("\n  "),
        stale.join("\n  ")
    );
}

// The allow-lists: every intended difference, with its reason (docs/DESIGN.md, "GKE
// manifests against the guides: intended differences", says the same).

/// cluster-toolkit's A4 example pins the gIB image at v1.1.0; recipe() follows Google's
/// current RDMA manifest (v1.1.1), as it does the TCPXO and TCPX guides' tags.
const A4_EXAMPLE_IMAGE: [Allowed; 2] = [
    ours(
        "main image ",
        "recipe() takes the tags of Google's current manifests (gpudirect-rdma/nccl-test.yaml: gIB v1.1.1); a cluster's installer DaemonSet decides the plugin version the image must match (gpudirect-tcpxo/README.md)",
    ),
    theirs("main image ", "cluster-toolkit's example pins the older v1.1.0"),
];
const PRIVILEGED: Allowed = ours(
    "main privileged",
    "the test container is privileged, as cluster-toolkit's A4 NCCL JobSet runs it: it covers the TCPX guide's IPC_LOCK and lets the operator's panes and the doctor read the GPUs and NICs from the pod",
);
const SET_NCCL_ENV: Allowed = theirs(
    "main runs source /usr/local/gib/scripts/set_nccl_env.sh",
    "sourcing it in the container's own shell (which then only sleeps) sets nothing for the exec'd run: the gIB image's run_nccl_tests.sh, run by the head script, sets its environment itself",
);
const DRIVER_DIR: [Allowed; 4] = [
    ours(
        "main mount /usr/local/nvidia <- hostPath /home/kubernetes/bin/nvidia",
        "the whole driver directory (bin/ for nvidia-smi, lib64/ for libcuda and the TCPX/TCPXO plugin the installers copy there), as the RDMA guide mounts it",
    ),
    theirs(
        "main mount /usr/local/nvidia/lib64 <- hostPath /home/kubernetes/bin/nvidia/lib64",
        "the same files, mounted one level down (entry above)",
    ),
    ours(
        "rxdm mount /usr/local/nvidia <- hostPath /home/kubernetes/bin/nvidia",
        "the RxDM sidecar gets the driver directory as the test container does",
    ),
    theirs(
        "rxdm mount /usr/local/nvidia/lib64 <- hostPath /home/kubernetes/bin/nvidia/lib64",
        "the same files, one level down",
    ),
];
const SOCKET_DIR: [Allowed; 2] = [
    ours(
        "main mount /run/tcpx <- emptyDir",
        "the RxDM socket directory is shared between the sidecar and the test container through the pod's own emptyDir at /run/tcpx (where unix_client_prefix_selection.sh looks first), not a host directory other pods could reach",
    ),
    ours("rxdm mount /run/tcpx <- emptyDir", "the same socket directory, in the sidecar"),
];
const SIDECAR: [Allowed; 1] = [ours(
    "rxdm native sidecar",
    "RxDM runs as a native sidecar (init container, restartPolicy Always), so a JobSet's pod completes when its NCCL container does",
)];
const CONFIGMAP: [Allowed; 1] = [theirs(
    "main mount /configs <- configMap nccl-configmap",
    "the guide's ConfigMap carries allgather.sh and run-nccl.sh; flightdeck's head script does what allgather.sh does (init_ssh.sh, gen_hostfiles.sh) and calls the image's /scripts/run-nccl.sh with the same arguments (src/nccl/pods.rs runs it against the ConfigMap's copy)",
)];
const HEALTHCHECK: [Allowed; 5] = [
    theirs("gpu-healthcheck image ", "cluster-toolkit's GPU/ECC pre-check init container: flightdeck's doctor checks GPUs and ECC separately"),
    theirs("gpu-healthcheck env ", "the pre-check's (entry above)"),
    theirs("gpu-healthcheck mount ", "the pre-check's (entry above)"),
    theirs("gpu-healthcheck privileged", "the pre-check's (entry above)"),
    theirs("main env MY_NODE_NAME=", "read only by cluster-toolkit's own in-pod benchmark script"),
];
const OMPI_ROOT: [Allowed; 2] = [
    theirs("main env OMPI_ALLOW_RUN_AS_ROOT=1", "cluster-toolkit's script runs mpirun itself; flightdeck's runs the image's run script, which passes --allow-run-as-root"),
    theirs("main env OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "as above"),
];
const GPU_REQUESTS: Allowed = theirs(
    "main requests nvidia.com/gpu=",
    "for an extended resource Kubernetes sets requests to the limits when only limits are given: the same request",
);
const LD_PATH: Allowed = ours(
    "main env LD_LIBRARY_PATH=/usr/local/nvidia/lib64",
    "as every container-engine-accelerators NCCL test pod sets it (cluster-toolkit's script runs /sbin/ldconfig instead)",
);

/// A fleet file of a GKE cluster no one can reach (a kubeconfig that does not exist):
/// a dry run must not need it.
fn unreachable_fleet(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let f = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: {name}\ngke:\n  context: gone\n  kubeconfig: {}\n  node_pools: [{name}-pool]\n{extra}",
            dir.join("no-such-kubeconfig").display()
        ),
    )
    .unwrap();
    f
}

/// `job run --dry-run` of a 2-node, 8-GPU job whose `fleet:` names fleet file `a4.yaml`
/// beside it (an unreachable cluster; `fleet_extra` appended to the fleet file); it
/// succeeds.
fn train_dry_run(fleet_extra: &str) -> std::process::Output {
    let tmp = tempfile::tempdir().unwrap();
    let h = home(tmp.path());
    unreachable_fleet(tmp.path(), "a4", fleet_extra);
    let job = tmp.path().join("job.yaml");
    std::fs::write(
        &job,
        "type: task\nname: train\nfleet: a4.yaml\nnodes: 2\ngpus_per_node: 8\ncommands: [python train.py]\n",
    )
    .unwrap();
    let out = flightdeck(&h, &["job", "run", job.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

fn home(dir: &Path) -> PathBuf {
    let h = dir.join("home");
    std::fs::create_dir_all(&h).unwrap();
    h
}

/// `nccl run --dry-run` on fleet file `f` with `args`: the printed objects.
fn nccl_dry_run(home: &Path, f: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["nccl", "run", f.to_str().unwrap(), "--dry-run"];
    all.extend_from_slice(args);
    let out = flightdeck(home, &all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    assert!(o.starts_with("apiVersion: "), "apiVersion first:\n{o}");
    docs(&o)
}

#[test]
fn nccl_dry_run_needs_no_cluster_and_says_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let h = home(tmp.path());
    let f = unreachable_fleet(
        tmp.path(),
        "a4",
        "  queue: dws-local-queue\nnetwork:\n  gpudirect: rdma\nflex_start: 2h\n",
    );
    let objs = nccl_dry_run(&h, &f, &["--node-count", "2", "-g", "8", "--test", "all_gather"]);
    assert_eq!(objs.len(), 1);
    let js = &objs[0];
    assert_eq!(js["apiVersion"], "jobset.x-k8s.io/v1alpha2");
    assert_eq!(js["kind"], "JobSet");
    anti_affinity_selects_the_templates_own_labels(js);
    assert_eq!(
        js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
        "dws-local-queue"
    );
    assert_eq!(
        js["metadata"]["annotations"]["provreq.kueue.x-k8s.io/maxRunDurationSeconds"],
        "7200"
    );
    assert_eq!(js["spec"]["suspend"], true);
    let rj = &js["spec"]["replicatedJobs"][0]["template"]["spec"];
    assert_eq!(
        (rj["parallelism"].as_u64(), rj["completions"].as_u64()),
        (Some(2), Some(2))
    );
    let pod = &rj["template"]["spec"];
    assert!(pod["nodeName"].is_null(), "placed by the scheduler: {pod}");
    assert_eq!(pod["nodeSelector"]["cloud.google.com/gke-flex-start"], "true");
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        "a4-pool"
    );
    // What is missing is named, with the file.
    let out = flightdeck(&h, &["nccl", "run", f.to_str().unwrap(), "--dry-run", "-g", "8"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("has no nodes now") && err.contains("--node-count N") && err.contains("a4.yaml"),
        "{err}"
    );
    let out = flightdeck(
        &h,
        &[
            "nccl",
            "run",
            f.to_str().unwrap(),
            "--dry-run",
            "--node-count",
            "2",
        ],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("-g/--ngpus") && err.contains("--machine-type"),
        "{err}"
    );
    // The machine type says how many GPUs a node has.
    let objs = nccl_dry_run(&h, &f, &["--node-count", "2", "--machine-type", "a4-highgpu-8g"]);
    assert_eq!(
        pod_of(&objs[0])["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "8"
    );
    // A VM fleet has no Kubernetes objects to print.
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    let out = flightdeck(&h, &["nccl", "run", local.to_str().unwrap(), "--dry-run"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("GKE fleet"), "{}", text(&out.stderr));
}

#[test]
fn job_dry_run_needs_no_cluster_and_says_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let h = home(tmp.path());
    unreachable_fleet(tmp.path(), "a4", "  queue: a4\nnetwork:\n  gpudirect: rdma\n");
    let job = tmp.path().join("job.yaml");
    // `fleet:` names the fleet file, beside the job file.
    std::fs::write(
        &job,
        "type: task\nname: train\nfleet: a4.yaml\nnodes: 2\ngpus_per_node: 8\ncommands: [python train.py]\n",
    )
    .unwrap();
    let out = flightdeck(&h, &["job", "run", job.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    assert!(
        o.starts_with("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"),
        "{o}"
    );
    let js = &docs(&o)[0];
    assert_eq!(js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "a4");
    anti_affinity_selects_the_templates_own_labels(js);
    let pod = pod_of(js);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "8"
    );
    assert!(pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
        .as_str()
        .unwrap()
        .contains("rdma-7"));
    for (file, field) in [
        (
            "type: task\nname: train\nfleet: a4.yaml\nnodes: 2\ncommands: [x]\n",
            "gpus_per_node",
        ),
        (
            "type: task\nname: train\nfleet: a4.yaml\ngpus_per_node: 8\ncommands: [x]\n",
            "nodes:",
        ),
    ] {
        std::fs::write(&job, file).unwrap();
        let out = flightdeck(&h, &["job", "run", job.to_str().unwrap(), "--dry-run"]);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(field) && err.contains("job.yaml"), "{field}: {err}");
    }
}

/// Gke review L1: the one-rank-per-node anti-affinity selects labels the pod template
/// itself carries. Kueue's ProvisioningRequest PodTemplate is the JobSet's template as
/// written (kueue provisioning/controller.go), and the autoscaler sizes the booking from
/// it: a selector on `jobset.sigs.k8s.io/jobset-name`, which the JobSet controller adds
/// to the pods only, matches nothing there, and two ranks get packed on one node.
fn anti_affinity_selects_the_templates_own_labels(js: &Value) {
    let pod = pod_of(js);
    let terms = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!terms.is_empty(), "{pod}");
    for term in &terms {
        let want = term["labelSelector"]["matchLabels"].as_object().unwrap();
        assert!(!want.is_empty());
        for (k, v) in want {
            assert_eq!(&pod["metadata"]["labels"][k], v, "the template lacks {k}: {pod}");
        }
    }
}

fn a3u_nodes() -> Vec<NodeSpec> {
    let n = |name: &str, ip: &str| NodeSpec {
        name: name.into(),
        pool: "a3u-dws".into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::FlexStart,
        internal_ip: ip.into(),
    };
    vec![n("gke-a3u-dws-0", "10.0.0.10"), n("gke-a3u-dws-1", "10.0.0.11")]
}

/// The gIB image as the double runs it: its run script replays a recorded 2-node
/// all_gather on GKE (tests/fixtures/nccl/gke-b200-2node-all_gather.txt) and records
/// the hosts it was given.
fn gib_image(dir: &Path) -> Vec<(String, PathBuf)> {
    gib_image_at(dir, "0.01")
}

/// [`gib_image`], replaying a line every `pause` seconds.
fn gib_image_at(dir: &Path, pause: &str) -> Vec<(String, PathBuf)> {
    let gib = dir.join("image-gib");
    std::fs::create_dir_all(&gib).unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/gke-b200-2node-all_gather.txt");
    let script = gib.join("run_nccl_tests.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n# DOUBLE of the gIB image's run_nccl_tests.sh: replays a recorded real run\necho \"$*\" > '{}'\nwhile IFS= read -r l; do printf '%s\\n' \"$l\"; sleep {pause}; done < '{}'\n",
            dir.join("run-args").display(),
            fixture.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    vec![("us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/".into(), gib)]
}

/// `name`'s run id in `text` replaced by RUN, so two runs' objects compare.
fn without_run_ids(v: &Value) -> Value {
    let s = v.to_string();
    let re_like = |s: &str| -> String {
        // nccl-all-gather-<unix>-<hex>: the id's time and salt.
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("nccl-all-gather-") {
            out.push_str(&rest[..i]);
            out.push_str("nccl-all-gather-RUN");
            rest = &rest[i + "nccl-all-gather-".len()..];
            let skip = rest
                .find(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
                .unwrap_or(rest.len());
            rest = &rest[skip..];
        }
        out.push_str(rest);
        out
    };
    serde_json::from_str(&re_like(&s)).unwrap()
}

/// Review H4: a fleet with a Kueue queue runs its NCCL test through the scheduler. The
/// JobSet the run creates is the one `--dry-run` printed; Kueue admits it, the pods land
/// one per node, the head runs the image's script naming every pod, and the JobSet and
/// its pods are gone after the run.
#[test]
fn an_nccl_test_through_kueue_is_the_dry_runs_jobset() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: a3u_nodes(),
        images: gib_image(tmp.path()),
        queues: vec![("dws-queue".into(), true)],
        admit_after: Duration::from_millis(300),
        // GKE grows a queued-provisioning pool only for a ProvisioningRequest; its two
        // nodes are there from the start here.
        pools: vec![PoolSpec {
            name: "a3u-dws".into(),
            machine_type: "a3-ultragpu-8g".into(),
            accelerator: "nvidia-h200-141gb".into(),
            gpus: 8,
            provisioning: Provisioning::FlexStart,
            min_nodes: 0,
            max_nodes: 4,
            taints: vec![],
            queued: true,
        }],
        ..Options::default()
    });
    let h = home(tmp.path());
    let f = tmp.path().join("dws.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: dws\nflex_start: 2h\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-dws]\n  queue: dws-queue\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&h, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let args = ["--test", "all_gather", "-g", "8"];
    let mut dry = vec!["nccl", "run", "dws", "--dry-run"];
    dry.extend_from_slice(&args);
    let out = flightdeck(&h, &dry);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = docs(&text(&out.stdout));
    assert_eq!(printed.len(), 1, "one JobSet");
    assert!(
        d.jobsets().is_empty() && d.pods().is_empty(),
        "a dry run creates nothing"
    );

    // No -g: a recorded node of the pool says how many GPUs a node has.
    let run = ["nccl", "run", "dws", "--json", "--test", "all_gather"];
    // The run removes its JobSet at its end: it is read while the run goes on.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(run)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &h)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let made = loop {
        let js = d.jobsets();
        if !js.is_empty() || std::time::Instant::now() > deadline {
            break js;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("placed by the scheduler, Kueue queue dws-queue"),
        "{err}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 24, "{doc}");
    // Exactly the dry run's object (the run id aside).
    assert_eq!(made.len(), 1, "{err}");
    let mut created = made[0].clone();
    for k in ["uid", "resourceVersion", "creationTimestamp"] {
        created["metadata"].as_object_mut().unwrap().remove(k);
    }
    created.as_object_mut().unwrap().remove("status");
    created["spec"]["suspend"] = true.into(); // Kueue unsuspends it when it admits it
    assert_eq!(without_run_ids(&created), without_run_ids(&printed[0]));
    // The head named both pods, on two nodes.
    let hosts = std::fs::read_to_string(tmp.path().join("run-args")).unwrap();
    assert!(hosts.contains("10.100.0."), "pod addresses: {hosts}");
    assert!(err.contains("removed 2 test pods"), "{err}");
    assert!(
        d.pods()
            .iter()
            .all(|p| p["metadata"]["labels"]["flightdeck-role"] != "nccl"),
        "the test pods are gone"
    );
    let left: Vec<Value> = d
        .jobsets()
        .into_iter()
        .filter(|j| j["metadata"]["labels"]["flightdeck-role"] == "nccl")
        .collect();
    assert!(left.is_empty(), "the JobSet is gone: {left:?}");
}

/// A fleet applied with its pool at zero: `--node-count 2` is how many pods the scheduler
/// places; the run survives its terminal and `nccl attach` follows it in the pods it
/// recorded (ranks past the fleet's recorded nodes), then removes the JobSet.
#[test]
fn a_scheduled_run_on_a_pool_at_zero_is_attached_again() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: a3u_nodes(),
        images: gib_image_at(tmp.path(), "0.15"),
        // The pool has no node when the fleet is applied: the cluster autoscaler grows it
        // for the run's pending pods.
        pools: vec![PoolSpec {
            name: "a3u-zero".into(),
            machine_type: "a3-ultragpu-8g".into(),
            accelerator: "nvidia-h200-141gb".into(),
            gpus: 8,
            provisioning: Provisioning::Spot,
            min_nodes: 0,
            max_nodes: 4,
            taints: vec![],
            queued: false,
        }],
        scale_up_after: Duration::from_millis(300),
        ..Options::default()
    });
    let h = home(tmp.path());
    let f = tmp.path().join("zero.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: zero\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-zero]\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&h, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([
            "nccl",
            "run",
            "zero",
            "--node-count",
            "2",
            "-g",
            "8",
            "--test",
            "all_gather",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &h)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut seen = String::new();
    for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(" started in ") {
            break;
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(seen.contains("placed by the scheduler"), "{seen}");
    let out = flightdeck(&h, &["nccl", "attach", "--json"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{seen}{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), 24, "{doc}");
    assert!(
        d.jobsets().is_empty()
            && d.pods()
                .iter()
                .all(|p| p["metadata"]["labels"]["flightdeck-role"] != "nccl"),
        "the JobSet and its pods are gone after the run: {err}"
    );
}

/// Where the operator picks nodes (no queue), the pods stay pinned (`nodeName`).
#[test]
fn picked_nodes_keep_pinned_pods() {
    let tmp = tempfile::tempdir().unwrap();
    let d = KubeDouble::start(Options {
        nodes: a3u_nodes(),
        images: gib_image(tmp.path()),
        ..Options::default()
    });
    let h = home(tmp.path());
    let f = tmp.path().join("a3u.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: a3u\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-dws]\n",
            d.kubeconfig.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&h, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let objs = nccl_dry_run(&h, Path::new("a3u"), &["--nodes", "0,1", "-g", "8"]);
    assert_eq!(objs.len(), 2);
    assert_eq!(objs[0]["kind"], "Pod");
    assert_eq!(objs[0]["spec"]["nodeName"], "gke-a3u-dws-0");
    assert_eq!(objs[1]["spec"]["nodeName"], "gke-a3u-dws-1");
}

// ---- Golden manifests ----------------------------------------------------------

/// The pod template `nccl run --dry-run` prints for `flavour` on a fleet at zero.
fn our_test_pod(dir: &Path, flavour: &str) -> Value {
    let h = home(dir);
    let f = unreachable_fleet(dir, flavour, &format!("network:\n  gpudirect: {flavour}\n"));
    pod_of(&nccl_dry_run(&h, &f, &["--node-count", "2", "-g", "8", "--test", "all_gather"])[0])
}

#[test]
fn rdma_test_pods_against_the_gpudirect_rdma_guide() {
    let tmp = tempfile::tempdir().unwrap();
    let ours_pod = our_test_pod(tmp.path(), "rdma");
    let theirs_pod = reference_object(
        "container-engine-accelerators/gpudirect-rdma/nccl-test.yaml",
        "Pod",
    );
    compare(
        "RDMA test pod",
        &ours_pod,
        &theirs_pod,
        &[PRIVILEGED, SET_NCCL_ENV],
    );
}

#[test]
fn tcpxo_test_pods_against_the_gpudirect_tcpxo_guide() {
    let tmp = tempfile::tempdir().unwrap();
    let ours_pod = our_test_pod(tmp.path(), "tcpxo");
    let theirs_pod = reference_object(
        "container-engine-accelerators/gpudirect-tcpxo/nccl-test-latest.yaml",
        "Pod",
    );
    let mut allowed = vec![PRIVILEGED];
    allowed.extend(DRIVER_DIR);
    allowed.extend(SOCKET_DIR);
    allowed.extend(SIDECAR);
    allowed.extend([
        theirs("main runs /scripts/init_ssh.sh", "run by flightdeck's head script in the first pod (with every pod's address), not by the pod's command"),
        theirs("main runs /scripts/gen_hostfiles.sh", "as above"),
    ]);
    compare("TCPXO test pod", &ours_pod, &theirs_pod, &allowed);
}

#[test]
fn tcpx_test_pods_against_the_gpudirect_tcpx_guide() {
    let tmp = tempfile::tempdir().unwrap();
    let ours_pod = our_test_pod(tmp.path(), "tcpx");
    let theirs_pod = reference_object(
        "container-engine-accelerators/gpudirect-tcpx/nccl-test-latest.yaml",
        "Pod",
    );
    let mut allowed = vec![PRIVILEGED];
    allowed.extend(DRIVER_DIR);
    allowed.extend(SOCKET_DIR);
    allowed.extend(SIDECAR);
    allowed.extend(CONFIGMAP);
    allowed.extend([
        ours(
            "main mount /dev/shm <- emptyDir Memory",
            "every test pod mounts memory at /dev/shm (the TCPX guide mounts none: its pods get the runtime's 64 MiB), bounded by the node's memory",
        ),
        theirs("main capability IPC_LOCK", "covered by the privileged test container"),
        theirs("main mount /tmp <- hostPath /run/tcpx", "the socket directory is the pod's emptyDir at /run/tcpx (SOCKET_DIR)"),
        theirs("rxdm mount /run/tcpx <- hostPath /run/tcpx", "as above"),
    ]);
    compare("TCPX test pod", &ours_pod, &theirs_pod, &allowed);
}

#[test]
fn rdma_test_jobset_against_cluster_toolkits_a4_jobset() {
    let tmp = tempfile::tempdir().unwrap();
    let h = home(tmp.path());
    let f = unreachable_fleet(tmp.path(), "a4", "  queue: a4\nnetwork:\n  gpudirect: rdma\n");
    let ours_js = nccl_dry_run(&h, &f, &["--node-count", "2", "-g", "8", "--test", "all_gather"]).remove(0);
    let theirs_js = reference_object(
        "cluster-toolkit/examples/gke-a4/nccl-jobset-example.yaml",
        "JobSet",
    );
    let mut allowed = JOBSET_LEVEL.to_vec();
    allowed.extend([theirs(
        "activeDeadlineSeconds ",
        "a test's pods end when flightdeck removes them at the run's end",
    )]);
    compare_jobsets(
        "RDMA test JobSet vs cluster-toolkit A4 (JobSet)",
        &ours_js,
        &theirs_js,
        &allowed,
    );
    let ours_pod = pod_of(&ours_js);
    let theirs_pod = pod_of(&theirs_js);
    let mut allowed = vec![LD_PATH, SET_NCCL_ENV, GPU_REQUESTS];
    allowed.extend(A4_EXAMPLE_IMAGE);
    allowed.extend(HEALTHCHECK);
    allowed.extend(OMPI_ROOT);
    compare(
        "RDMA test JobSet vs cluster-toolkit A4",
        &ours_pod,
        &theirs_pod,
        &allowed,
    );
}

#[test]
fn rdma_job_jobset_against_cluster_toolkits_a4_jobset() {
    let out = train_dry_run("  queue: a4\nnetwork:\n  gpudirect: rdma\n");
    let ours_js = docs(&text(&out.stdout)).remove(0);
    let theirs_js = reference_object(
        "cluster-toolkit/examples/gke-a4/nccl-jobset-example.yaml",
        "JobSet",
    );
    let mut allowed = JOBSET_LEVEL.to_vec();
    allowed.extend([
        theirs(
            "activeDeadlineSeconds ",
            "a job runs as long as it runs (or its `max_duration`); `job stop` ends it",
        ),
        ours(
            "ttlSecondsAfterFinished ",
            "a finished job's JobSet stays a day (cluster-toolkit's NCCL test: 20 min) so that its status and logs can still be read",
        ),
    ]);
    compare_jobsets(
        "RDMA job JobSet vs cluster-toolkit A4 (JobSet)",
        &ours_js,
        &theirs_js,
        &allowed,
    );
    let ours_pod = pod_of(&ours_js);
    let theirs_pod = pod_of(&theirs_js);
    let mut allowed = vec![GPU_REQUESTS];
    allowed.extend(A4_EXAMPLE_IMAGE);
    allowed.extend(HEALTHCHECK);
    allowed.extend(OMPI_ROOT);
    allowed.extend([
        ours(
            "main requests cpu=",
            "job pods ask for CPU and memory (the job's resources, else 1 CPU and 4Gi) so they are not BestEffort, first to be evicted (gke-review L9)",
        ),
        ours("main requests memory=", "as above"),
        ours(
            "main env ",
            "a job's pods get torchrun's, dstack's and SkyPilot's variables (MASTER_ADDR through the JobSet's headless service, NODE_RANK from the completion index): the job's script reads them",
        ),
        ours(
            "main mount /dev/shm <- emptyDir Memory",
            "a job's /dev/shm is bounded by the node's memory, not 250Gi: a training job's data loaders use more than an NCCL test",
        ),
        theirs("main mount /dev/shm <- emptyDir Memory 250Gi", "as above"),
        theirs(
            "main privileged",
            "job containers run unprivileged: GPUs come from the device plugin, the RDMA NICs from GKE's multi-network (not verified on hardware here)",
        ),
        theirs("main runs /scripts/container_entry.sh", "cluster-toolkit's benchmark starts the image's sshd for its own mpirun; a job runs the job's commands"),
    ]);
    compare(
        "RDMA job JobSet vs cluster-toolkit A4",
        &ours_pod,
        &theirs_pod,
        &allowed,
    );
}

/// The dry run prints the networks the run attaches: the fleet file's `gke.networks`,
/// not the guides' defaults (both come from `jobs::jobset::job_jobset`).
#[test]
fn job_dry_run_attaches_the_fleet_files_networks() {
    let nets: Vec<String> = (0..8).map(|i| format!("team-rdma-{i}")).collect();
    let out = train_dry_run(&format!(
        "  networks: [{}]\nnetwork:\n  gpudirect: rdma\n",
        nets.join(", ")
    ));
    let set = docs(&text(&out.stdout)).remove(0);
    let ifaces = pod_of(&set)["metadata"]["annotations"]["networking.gke.io/interfaces"]
        .as_str()
        .unwrap()
        .to_string();
    for n in &nets {
        assert!(ifaces.contains(&format!("\"{n}\"")), "{n} not in {ifaces}");
    }
    assert!(!ifaces.contains("\"rdma-0\""), "{ifaces}");
}
