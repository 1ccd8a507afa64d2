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

#[allow(dead_code)]
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
    for l in ["flightdeck-job", "flightdeck-fleet", "flightdeck-role"] {
        assert_eq!(
            sec["metadata"]["labels"][l], set["metadata"]["labels"][l],
            "{l}: {sec}"
        );
    }
    let log = rank0_log(&d, "tok");
    assert!(
        log.contains(&format!("token={token} port=29123 debug=TRACE left=none")),
        "{log}"
    );
}
