//! The Kubernetes side of NCCL on GKE, as Google's GKE GPUDirect guides give it: each
//! flavour's recipe (image, network annotations, host mounts, RxDM sidecar) that NCCL
//! test pods and job pods alike are made from, and the plain calls on a run's test pods
//! (their names, removing them, the machine type of a node). The run itself (test pods
//! per node, the image's run script on the first) is [`crate::nccl::pods`].
//!
//! Per flavour (GKE docs "Maximize GPU network bandwidth", gpudirect-tcpx/-tcpxo/-rdma):
//! * RDMA (A3 Ultra, A4; gIB): `nccl-plugin-gib-diagnostic`, the RDMA networks as
//!   `networking.gke.io/interfaces`, `/usr/local/gib/scripts/run_nccl_tests.sh -t
//!   all_gather -b 1K -e 8G HOST...`.
//! * TCPXO (A3 Mega): `nccl-plugin-gpudirecttcpx-dev`, the pods' SSH daemon started
//!   (`service ssh restart`), then on the first `/scripts/init_ssh.sh HOST...`,
//!   `/scripts/gen_hostfiles.sh HOST...` and `/scripts/demo-run-nccl-test-tcpxo-via-mpi.sh`
//!   (BENCHMARK, NHOSTS, NCCL_LIB_DIR, DATA_MIN, DATA_MAX, GPU_PER_NODE...).
//! * TCPX (A3 High): `nccl-plugin-gpudirecttcpx-dev` v3, the pods' SSH daemon started,
//!   then on the first, as the guide's `nccl-configmap` `allgather.sh`:
//!   `/scripts/init_ssh.sh HOST...`, `gen_hostfiles.sh HOST...` in `/scripts`, and
//!   `/scripts/run-nccl.sh BENCHMARK LD_LIBRARY_PATH GPUS IFNAMES MIN MAX NHOSTS`.

use super::{object_name, Clients, KubeNode};
use crate::nccl::GpuDirect;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};

/// The label naming the run a test pod belongs to.
pub const RUN_LABEL: &str = "flightdeck-run";

/// What the GKE guides give each flavour.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub image: &'static str,
    pub host_network: bool,
    /// `networking.gke.io/interfaces` (multi-network pods), when the flavour uses it.
    pub interfaces: Option<&'static str>,
    /// Host paths mounted into the pod: (host, container).
    pub mounts: &'static [(&'static str, &'static str)],
    /// The receive-datapath manager the TCPX/TCPXO guides run beside NCCL.
    pub rxdm: Option<Rxdm>,
    /// The `sizeLimit` of the memory volume at `/dev/shm` the flavour's manifest sets
    /// (RDMA 250Gi, TCPXO 1Gi); none where it sets none (TCPX's manifests mount no
    /// `/dev/shm`; flightdeck mounts one all the same, bounded by the node's memory).
    pub shm_size: Option<&'static str>,
}

/// The memory-backed volume the GKE manifests mount at `/dev/shm` (`shared-memory`,
/// `emptyDir: {medium: Memory}`): without it NCCL's shared-memory transport, and a
/// job's data loaders, get the container runtime's 64 MiB default.
pub const SHM_VOLUME: &str = "shared-memory";

/// The `/dev/shm` volume of at most `size` (a Kubernetes quantity) and its mount.
pub fn shared_memory(size: Option<&str>) -> (serde_json::Value, serde_json::Value) {
    let mut dir = serde_json::json!({"medium": "Memory"});
    if let Some(s) = size {
        dir["sizeLimit"] = s.into();
    }
    (
        serde_json::json!({"name": SHM_VOLUME, "emptyDir": dir}),
        serde_json::json!({"name": SHM_VOLUME, "mountPath": "/dev/shm"}),
    )
}

/// The RxDM sidecar of a TCPX/TCPXO pod (run as a native sidecar, an init container
/// that keeps running, so a job's pod still completes when its main container does).
#[derive(Debug, Clone, PartialEq)]
pub struct Rxdm {
    pub name: &'static str,
    pub image: &'static str,
    pub command: &'static str,
    /// The node's devices GKE's device injector gives it (`devices.gke.io/container.NAME`):
    /// a listed path the node lacks fails the container's creation.
    pub devices: &'static [&'static str],
    /// The capabilities the guides give it, instead of `privileged` (a namespace that
    /// enforces PodSecurity baseline rejects privileged pods).
    pub capabilities: &'static [&'static str],
}

/// The GPU devices a TCPX daemon gets, as gpudirect-tcpx/nccl-test-latest.yaml lists
/// them: A3 High nodes have no dmabuf import helper.
const TCPX_DEVICES: &[&str] = &[
    "/dev/nvidia0",
    "/dev/nvidia1",
    "/dev/nvidia2",
    "/dev/nvidia3",
    "/dev/nvidia4",
    "/dev/nvidia5",
    "/dev/nvidia6",
    "/dev/nvidia7",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
];

/// The devices a TCPXO daemon gets, as gpudirect-tcpxo/nccl-test-latest.yaml lists them:
/// the GPUs and A3 Mega's dmabuf import helper.
const TCPXO_DEVICES: &[&str] = &[
    "/dev/nvidia0",
    "/dev/nvidia1",
    "/dev/nvidia2",
    "/dev/nvidia3",
    "/dev/nvidia4",
    "/dev/nvidia5",
    "/dev/nvidia6",
    "/dev/nvidia7",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/dmabuf_import_helper",
];

const TCPXO_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"vpc1"},{"interfaceName":"eth2","network":"vpc2"},{"interfaceName":"eth3","network":"vpc3"},{"interfaceName":"eth4","network":"vpc4"},{"interfaceName":"eth5","network":"vpc5"},{"interfaceName":"eth6","network":"vpc6"},{"interfaceName":"eth7","network":"vpc7"},{"interfaceName":"eth8","network":"vpc8"}]"#;
const TCPX_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth1","network":"vpc1"},{"interfaceName":"eth2","network":"vpc2"},{"interfaceName":"eth3","network":"vpc3"},{"interfaceName":"eth4","network":"vpc4"}]"#;

// gpudirect-rdma/nccl-test.yaml: no `gvnic-1` at eth1 since May 2025 ("not needed by NCCL
// tests"); the RDMA networks stay at eth2..eth9.
const RDMA_INTERFACES: &str = r#"[{"interfaceName":"eth0","network":"default"},{"interfaceName":"eth2","network":"rdma-0"},{"interfaceName":"eth3","network":"rdma-1"},{"interfaceName":"eth4","network":"rdma-2"},{"interfaceName":"eth5","network":"rdma-3"},{"interfaceName":"eth6","network":"rdma-4"},{"interfaceName":"eth7","network":"rdma-5"},{"interfaceName":"eth8","network":"rdma-6"},{"interfaceName":"eth9","network":"rdma-7"}]"#;

/// How many GPU-NIC networks a flavour's pods attach (TCPX 4, TCPXO 8, RDMA 8), and the
/// `eth` number of the first (RDMA's start at eth2, as GKE's manifest names them).
pub fn data_networks(flavour: GpuDirect) -> Option<(usize, usize)> {
    match flavour {
        GpuDirect::Tcpx => Some((4, 1)),
        GpuDirect::Tcpxo => Some((8, 1)),
        GpuDirect::Rdma => Some((8, 2)),
        GpuDirect::None => None,
    }
}

/// `networking.gke.io/interfaces` for a flavour's pods on the GPU-NIC `networks` the
/// fleet file names (`gke.networks`, the cluster's Network objects in NIC order), else
/// the guides' (vpc1.., rdma-0..): eth0 on `default`, the GPU NICs from the flavour's
/// first `eth`. An error where the count is not the flavour's.
pub fn interfaces(flavour: GpuDirect, networks: Option<&[String]>) -> Result<Option<String>, String> {
    let Some(names) = networks else {
        return Ok(recipe(flavour).interfaces.map(str::to_string));
    };
    let Some((count, first)) = data_networks(flavour) else {
        return Ok(None);
    };
    if names.len() != count {
        return Err(format!(
            "gke.networks names {} network(s); {flavour:?} pods attach {count}",
            names.len()
        ));
    }
    let mut list = vec![serde_json::json!({"interfaceName": "eth0", "network": "default"})];
    for (i, n) in names.iter().enumerate() {
        list.push(serde_json::json!({"interfaceName": format!("eth{}", first + i), "network": n}));
    }
    Ok(Some(serde_json::Value::Array(list).to_string()))
}

/// The plugin image of the cluster's GPUDirect installer for `flavour` (its DaemonSet in
/// kube-system among `daemonsets`), when it has one.
pub fn installer_image(flavour: GpuDirect, daemonsets: &[serde_json::Value]) -> Option<String> {
    let (name, ..) = super::view::INSTALLERS
        .iter()
        .find(|(_, f, ..)| *f == flavour.name())?;
    let ds = daemonsets.iter().find(|d| d["metadata"]["name"] == *name)?;
    super::view::installer_plugin_image(ds).map(str::to_string)
}

/// The label every flightdeck pod with an RxDM sidecar carries (TCPX, TCPXO): one RxDM
/// per node, whichever workload brought it.
pub const RXDM_LABEL: &str = "flightdeck-rxdm";

/// One RxDM per node across every flightdeck workload, as GKE's TCPXO guide puts a
/// `tcpxo: daemon` anti-affinity on every RxDM pod "to avoid duplicate scheduling"
/// (gpudirect-tcpxo/nccl-test-latest.yaml): the pod template (`pod`, with `metadata` and
/// `spec`) gets [`RXDM_LABEL`] and a required anti-affinity on it by hostname, beside its
/// own workload's. Two workloads of fewer than 8 GPUs would otherwise put two RxDMs on
/// one node (gke review L2). A pinned pod (`nodeName`) passes the scheduler by, so this
/// holds only for the pods the scheduler places.
pub fn one_rxdm_per_node(pod: &mut serde_json::Value) {
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = serde_json::json!({});
    }
    pod["metadata"]["labels"][RXDM_LABEL] = "true".into();
    let term = serde_json::json!({"labelSelector": {"matchLabels": {RXDM_LABEL: "true"}}, "topologyKey": "kubernetes.io/hostname"});
    let terms =
        &mut pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    match terms {
        serde_json::Value::Array(v) => v.push(term),
        _ => *terms = serde_json::json!([term]),
    }
}

/// The DaemonSets of kube-system, where GKE's GPUDirect installers run, as JSON; `None`
/// (said in the log) when they cannot be listed. `fleet status`, NCCL test pods and job
/// pre-flights read the installers from here.
pub async fn kube_system_daemonsets(client: kube::Client) -> Option<Vec<serde_json::Value>> {
    let api: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> = kube::Api::namespaced(client, "kube-system");
    match api.list(&kube::api::ListParams::default()).await {
        Ok(l) => Some(
            l.items
                .iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .collect(),
        ),
        Err(e) => {
            tracing::info!("kube-system DaemonSets: {}", super::cluster::why(&e));
            None
        }
    }
}

/// What to tell the operator when the cluster runs no installer DaemonSet of `flavour`
/// (`daemonsets`: kube-system's): without it no node has the plugin, the profile's
/// `source` finds nothing, and NCCL falls back to sockets over eth0 without a word (gke
/// review M4). `None` when the installer is there, or for no GPUDirect. A warning, not a
/// refusal: a cluster may put the plugin on its nodes by other means.
pub fn missing_installer(flavour: GpuDirect, daemonsets: &[serde_json::Value]) -> Option<String> {
    let (name, ..) = super::view::INSTALLERS
        .iter()
        .find(|(_, f, ..)| *f == flavour.name())?;
    if daemonsets.iter().any(|d| d["metadata"]["name"] == *name) {
        return None;
    }
    Some(format!(
        "warning: the cluster runs no {name} DaemonSet in kube-system: the nodes may have no GPUDirect-{} plugin, and NCCL would then fall back to sockets over eth0 (install it as GKE's GPUDirect guide does, or give the workload no GPUDirect profile)",
        flavour.name()
    ))
}

/// The test pods' image as the cluster's installer decides it (`objects`: the run's
/// JobSet or pods, changed in place): the plugin the installer put on the nodes must be
/// the one NCCL in the image was built with (gpudirect-tcpxo/README.md couples them).
/// TCPX and TCPXO run the installer's own image, as the guides' test pods do; RDMA runs
/// the gIB diagnostic image of the installer's tag (published with the plugin's
/// versions). What changed, and what could not follow, as notes for the operator.
pub fn follow_installer(
    objects: &mut [serde_json::Value],
    flavour: GpuDirect,
    daemonsets: &[serde_json::Value],
) -> Vec<String> {
    let r = recipe(flavour);
    let Some(installed) = installer_image(flavour, daemonsets) else {
        return vec![];
    };
    let tag = |i: &str| i.rsplit_once(':').map(|(_, t)| t.to_string()).unwrap_or_default();
    let want = match flavour {
        GpuDirect::Tcpx | GpuDirect::Tcpxo => installed.clone(),
        GpuDirect::Rdma => match r.image.rsplit_once(':') {
            Some((repo, _)) if !tag(&installed).is_empty() => format!("{repo}:{}", tag(&installed)),
            _ => return vec![],
        },
        GpuDirect::None => return vec![],
    };
    if want == r.image {
        return vec![];
    }
    fn swap(v: &mut serde_json::Value, from: &str, to: &str) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "image" && x.as_str() == Some(from) {
                        *x = to.into();
                    } else {
                        swap(x, from, to);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| swap(x, from, to)),
            _ => {}
        }
    }
    for o in objects.iter_mut() {
        swap(o, r.image, &want);
    }
    let mut notes = vec![format!(
        "the cluster's {} installer runs {installed}: the test pods run {want} (not {})",
        flavour.name(),
        r.image
    )];
    if let Some(x) = &r.rxdm {
        notes.push(format!(
            "the RxDM sidecar stays {}: flightdeck knows no RxDM paired with plugin {} (nccl-plugin-gpudirect-tcpxo's README pairs them); if it fails to start, the installer and the RxDM differ",
            x.image,
            tag(&installed)
        ));
    }
    notes
}

pub fn recipe(flavour: GpuDirect) -> Recipe {
    match flavour {
        GpuDirect::Rdma => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1",
            host_network: false,
            interfaces: Some(RDMA_INTERFACES),
            mounts: &[
                ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
                ("/home/kubernetes/bin/gib", "/usr/local/gib"),
            ],
            rxdm: None,
            shm_size: Some("250Gi"),
        },
        GpuDirect::Tcpxo => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15",
            host_network: false,
            interfaces: Some(TCPXO_INTERFACES),
            // gpudirect-tcpxo/nccl-test-latest.yaml: the aperture devices FasTrak's LLCM
            // uses (NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY) come from the host.
            mounts: &[
                ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
                ("/dev/aperture_devices", "/dev/aperture_devices"),
            ],
            rxdm: Some(Rxdm {
                name: "tcpxo-daemon",
                image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
                command: "set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh; /fts/entrypoint_rxdm_container.sh --num_hops=2",
                devices: TCPXO_DEVICES,
                // gpudirect-tcpxo/nccl-test-latest.yaml: `privileged: true` commented out.
                capabilities: &["NET_ADMIN", "NET_BIND_SERVICE"],
            }),
            shm_size: Some("1Gi"),
        },
        GpuDirect::Tcpx => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
            host_network: false,
            interfaces: Some(TCPX_INTERFACES),
            // GKE's TCPX installer (gpudirect-tcpx/nccl-tcpx-installer.yaml) copies the
            // plugin into the driver's directory, /home/kubernetes/bin/nvidia/lib64: no
            // other host directory holds it.
            mounts: &[("/home/kubernetes/bin/nvidia", "/usr/local/nvidia")],
            rxdm: Some(Rxdm {
                name: "tcpx-daemon",
                image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
                command: "/tcpgpudmarxd/build/app/tcpgpudmarxd --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx --setup_param \"--verbose 128 2 0\"",
                devices: TCPX_DEVICES,
                // gpudirect-tcpx/nccl-test-latest.yaml.
                capabilities: &["NET_ADMIN"],
            }),
            shm_size: None,
        },
        // No GPUDirect: the gIB diagnostic image still carries nccl-tests and mpirun.
        GpuDirect::None => Recipe {
            image: "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.1.1",
            host_network: true,
            interfaces: None,
            mounts: &[("/home/kubernetes/bin/nvidia", "/usr/local/nvidia")],
            rxdm: None,
            shm_size: None,
        },
    }
}

/// The RxDM sidecar as a native sidecar (an init container with `restartPolicy:
/// Always`), its devices annotation, and the volumes it needs (the node's /sys and
/// /proc/sys, the driver).
pub fn rxdm_parts(r: &Recipe) -> Option<(serde_json::Value, (String, String), Vec<serde_json::Value>)> {
    let x = r.rxdm.as_ref()?;
    let sidecar = serde_json::json!({
        "name": x.name,
        "image": x.image,
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c", x.command],
        "securityContext": {"capabilities": {"add": x.capabilities}},
        "env": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
        "volumeMounts": [
            {"name": "rxdm-nvidia", "mountPath": "/usr/local/nvidia"},
            {"name": "rxdm-sys", "mountPath": "/hostsysfs"},
            {"name": "rxdm-proc-sys", "mountPath": "/hostprocsysfs"},
            {"name": "rxdm-uds", "mountPath": "/run/tcpx"},
        ],
    });
    let volumes = vec![
        serde_json::json!({"name": "rxdm-nvidia", "hostPath": {"path": "/home/kubernetes/bin/nvidia"}}),
        serde_json::json!({"name": "rxdm-sys", "hostPath": {"path": "/sys"}}),
        serde_json::json!({"name": "rxdm-proc-sys", "hostPath": {"path": "/proc/sys"}}),
        serde_json::json!({"name": "rxdm-uds", "emptyDir": {}}),
    ];
    let devices: String = x.devices.iter().map(|d| format!("- path: {d}\n")).collect();
    Some((
        sidecar,
        (format!("devices.gke.io/container.{}", x.name), devices),
        volumes,
    ))
}

/// A test pod's name.
pub fn pod_name(run: &str, rank: usize) -> String {
    object_name(&format!("fd-nccl-{run}-{rank}"), 63)
}

/// Remove run `run`'s test pods; how many there were.
pub async fn delete_run_pods(clients: &Clients, node: &KubeNode, run: &str) -> Result<usize, String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, &node.namespace);
    let list = api
        .list(&ListParams::default().labels(&format!("{RUN_LABEL}={}", object_name(run, 63))))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    let n = list.items.len();
    for p in list.items {
        if let Some(name) = p.metadata.name {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if super::cluster::not_found(&e) => {}
                Err(e) => return Err(format!("deleting {name}: {}", super::cluster::why(&e))),
            }
        }
    }
    Ok(n)
}

/// The machine type GKE labels the node with (`node.kubernetes.io/instance-type`) and
/// the GPUs it offers.
pub async fn machine(clients: &Clients, node: &KubeNode) -> Result<(Option<String>, u64), String> {
    let client = clients.get(&node.cluster).await?;
    let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let n = api
        .get(&node.node)
        .await
        .map_err(|e| format!("node {}: {}", node.node, super::cluster::why(&e)))?;
    let gpus = super::view::gpus_allocatable(&n);
    Ok((
        n.metadata
            .labels
            .and_then(|l| l.get(super::view::INSTANCE_TYPE_LABEL).cloned()),
        gpus,
    ))
}

#[cfg(test)]
mod installer_tests {
    use super::*;

    #[test]
    fn rxdm_pods_keep_one_per_node_beside_their_own_rule() {
        let mut pod = serde_json::json!({"metadata": {"labels": {"flightdeck-job": "j"}}, "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"flightdeck-job": "j"}}, "topologyKey": "kubernetes.io/hostname"}
        ]}}}});
        one_rxdm_per_node(&mut pod);
        assert_eq!(pod["metadata"]["labels"][RXDM_LABEL], "true");
        let terms = pod["spec"]["affinity"]["podAntiAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .unwrap();
        assert_eq!(terms.len(), 2);
        assert_eq!(terms[1]["labelSelector"]["matchLabels"][RXDM_LABEL], "true");
    }

    #[test]
    fn a_missing_installer_is_named_and_a_present_one_is_not() {
        let ds = |name: &str| serde_json::json!({"metadata": {"name": name}});
        let w = missing_installer(GpuDirect::Tcpxo, &[ds("nccl-rdma-installer")]).unwrap();
        assert!(
            w.contains("no nccl-tcpxo-installer DaemonSet") && w.contains("sockets"),
            "{w}"
        );
        assert_eq!(
            missing_installer(GpuDirect::Tcpxo, &[ds("nccl-tcpxo-installer")]),
            None
        );
        assert_eq!(missing_installer(GpuDirect::None, &[]), None);
    }
}

#[cfg(test)]
mod tests {
    /// Gke review M3: the test pods run what the cluster's installer installed, not the
    /// recipe's pinned tag.
    #[test]
    fn test_pods_follow_the_clusters_installer() {
        let installer = |name: &str, image: &str| {
            serde_json::json!({"metadata": {"name": name, "namespace": "kube-system"},
                "spec": {"template": {"spec": {"initContainers": [{"name": "nccl-plugin-installer", "image": image}],
                    "containers": [{"name": "pause", "image": "gcr.io/google-containers/pause:2.0"}]}}}})
        };
        let older = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8-1";
        let ds = [
            installer("nccl-tcpxo-installer", older),
            installer(
                "nccl-rdma-installer",
                "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.0.6",
            ),
        ];
        let pod = |image: &str| {
            serde_json::json!({"spec": {"template": {"spec": {"initContainers": [{"name": "tcpxo-daemon", "image": recipe(GpuDirect::Tcpxo).rxdm.unwrap().image}],
                "containers": [{"name": "test", "image": image}]}}}})
        };
        let mut objects = vec![pod(recipe(GpuDirect::Tcpxo).image)];
        let notes = follow_installer(&mut objects, GpuDirect::Tcpxo, &ds);
        let spec = &objects[0]["spec"]["template"]["spec"];
        assert_eq!(spec["containers"][0]["image"], older);
        assert_eq!(
            spec["initContainers"][0]["image"],
            recipe(GpuDirect::Tcpxo).rxdm.unwrap().image
        );
        assert!(notes.len() == 2 && notes[1].contains("v1.0.8-1"), "{notes:?}");
        // RDMA: the diagnostic image of the installer's tag.
        let mut objects = vec![pod(recipe(GpuDirect::Rdma).image)];
        follow_installer(&mut objects, GpuDirect::Rdma, &ds);
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic:v1.0.6"
        );
        // No installer, or the recipe's own: nothing changes.
        let mut objects = vec![pod(recipe(GpuDirect::Tcpx).image)];
        assert!(follow_installer(&mut objects, GpuDirect::Tcpx, &ds).is_empty());
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            recipe(GpuDirect::Tcpx).image
        );
        let current = [installer("nccl-tcpxo-installer", recipe(GpuDirect::Tcpxo).image)];
        assert!(follow_installer(
            &mut [pod(recipe(GpuDirect::Tcpxo).image)],
            GpuDirect::Tcpxo,
            &current
        )
        .is_empty());
    }

    use super::*;

    /// The interfaces of each flavour as GKE's current manifest gives them
    /// (tests/fixtures/reference/container-engine-accelerators): RDMA's dropped
    /// `gvnic-1` in May 2025, and a cluster without that Network rejected the pods.
    #[test]
    fn default_networks_follow_the_current_manifests() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/reference/container-engine-accelerators"
        );
        for (flavour, file) in [
            (GpuDirect::Rdma, "gpudirect-rdma/nccl-test.yaml"),
            (GpuDirect::Tcpxo, "gpudirect-tcpxo/nccl-test-latest.yaml"),
            (GpuDirect::Tcpx, "gpudirect-tcpx/nccl-test-latest.yaml"),
        ] {
            let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            // The first pod's annotation: a block scalar from `[` to `]`.
            let after = text
                .split_once("networking.gke.io/interfaces: |")
                .unwrap_or_else(|| panic!("{file}: no interfaces annotation"))
                .1;
            let annotation = &after[..after.find(']').unwrap() + 1];
            let want: serde_json::Value = serde_json::from_str(annotation).unwrap();
            let got: serde_json::Value = serde_json::from_str(recipe(flavour).interfaces.unwrap()).unwrap();
            assert_eq!(got, want, "{flavour:?}");
            let named = interfaces(flavour, None).unwrap().unwrap();
            assert_eq!(serde_json::from_str::<serde_json::Value>(&named).unwrap(), want);
        }
        let names: Vec<String> = (0..8).map(|i| format!("a4-rdma-{i}")).collect();
        let i = interfaces(GpuDirect::Rdma, Some(&names)).unwrap().unwrap();
        assert!(
            i.contains(r#"{"interfaceName":"eth2","network":"a4-rdma-0"}"#),
            "{i}"
        );
        assert!(
            i.contains(r#"{"interfaceName":"eth9","network":"a4-rdma-7"}"#),
            "{i}"
        );
        assert_eq!(
            interfaces(GpuDirect::Tcpx, Some(&names)).unwrap_err(),
            "gke.networks names 8 network(s); Tcpx pods attach 4"
        );
    }
}
