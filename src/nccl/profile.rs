//! Which GPUDirect profile `auto` picks for a fleet, for NCCL runs and training jobs
//! alike: the fleet file's `network.gpudirect` when it names a flavour (`none` means
//! none), else the flavour of the machine type (the catalog's facts, else its name).

use super::GpuDirect;
use crate::fleet::FleetSpec;

/// Why `auto` picked what it picked, for the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The fleet file's `network.gpudirect`.
    FleetNetwork,
    /// The flavour of the machine type.
    MachineType,
    /// Nothing said: NCCL's defaults.
    Unknown,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::FleetNetwork => "fleet network.gpudirect",
            Source::MachineType => "machine type",
            Source::Unknown => "machine type unknown",
        }
    }
}

/// The GPUDirect flavour of a machine type: the embedded catalog's, else what its name
/// says (a machine type the catalog does not list yet).
pub fn machine_flavour(machine_type: &str) -> GpuDirect {
    crate::catalog::Catalog::embedded()
        .offers()
        .iter()
        .find(|o| o.machine_type == machine_type)
        .map_or_else(|| GpuDirect::for_machine_type(machine_type), |o| o.gpudirect)
}

/// The profile `auto` picks: the fleet file's `network.gpudirect` when it is not `auto`,
/// else the flavour of `machine_type` (given, else the fleet's first instance type).
pub fn auto_profile(spec: Option<&FleetSpec>, machine_type: Option<&str>) -> (GpuDirect, Source) {
    if let Some(p) = spec.and_then(|s| s.network.as_ref()).and_then(|n| n.gpudirect) {
        return (p, Source::FleetNetwork);
    }
    let machine = machine_type
        .map(str::to_string)
        .or_else(|| first_instance_type(spec));
    match machine {
        Some(m) => (machine_flavour(&m), Source::MachineType),
        None => (GpuDirect::None, Source::Unknown),
    }
}

/// The fleet file's first instance type.
pub fn first_instance_type(spec: Option<&FleetSpec>) -> Option<String> {
    spec?.instance_types.as_ref()?.first().cloned()
}

/// A fleet's machine type (`given`, else its file's first instance type) and the profile
/// `auto` picks for it ([`auto_profile`]), with where that came from: what the doctor,
/// the cockpit's NCCL dialog and `nccl run` all start from.
pub fn machine_and_profile(
    spec: Option<&FleetSpec>,
    given: Option<String>,
) -> (Option<String>, GpuDirect, Source) {
    let machine_type = given.or_else(|| first_instance_type(spec));
    let (profile, source) = auto_profile(spec, machine_type.as_deref());
    (machine_type, profile, source)
}

/// What a fleet tells a job or a run: the profile `auto` picks ([`auto_profile`]) and
/// the GPU model (for its peak rate), from the fleet file's `resources.gpu`, else the
/// catalog's facts about its first instance type.
pub fn fleet_facts(spec: Option<&FleetSpec>) -> (GpuDirect, Option<String>) {
    let (profile, _) = auto_profile(spec, None);
    let gpu = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.gpu.as_ref())
        .and_then(|g| g.names.first().cloned())
        .or_else(|| {
            let mt = first_instance_type(spec)?;
            crate::catalog::Catalog::embedded()
                .offers()
                .iter()
                .find(|o| o.machine_type == mt)
                .map(|o| o.gpu.clone())
        });
    (profile, gpu)
}

/// A GKE fleet's machine type: its nodes' (GKE's `node.kubernetes.io/instance-type`
/// label), else its node pools' in the GKE API (a pool at zero nodes); with where it
/// came from.
pub async fn gke_machine_type(
    clients: &crate::cloud::gke::Clients,
    spec: &FleetSpec,
) -> Option<(String, &'static str)> {
    use crate::cloud::gke::{backend::Target, view};
    let t = Target::from_gke(spec.gke.as_ref()?);
    if let Ok(nodes) = t.nodes(clients).await {
        let from_node = nodes.iter().find_map(|n| {
            n.metadata
                .labels
                .as_ref()?
                .get(view::INSTANCE_TYPE_LABEL)
                .filter(|m| !m.is_empty())
                .cloned()
        });
        if let Some(m) = from_node {
            return Some((m, "the nodes' machine type"));
        }
    }
    let pools = t.cluster.node_pools().await?.ok()?;
    pools
        .iter()
        .filter(|p| t.wants_pool(p))
        .find_map(|p| p.config.machine_type.clone())
        .map(|m| (m, "the node pool's machine type"))
}

/// The profile `auto` picks on a GKE fleet ([`auto_profile`] with the machine type of
/// its nodes or pools, [`gke_machine_type`]), the machine type, and a warning when the
/// fleet gets no GPUDirect though its machine type has it (or its machine type is not
/// known).
pub async fn gke_auto_profile(
    clients: &crate::cloud::gke::Clients,
    spec: &FleetSpec,
) -> (GpuDirect, Source, Option<String>, Option<String>) {
    let machine = gke_machine_type(clients, spec).await;
    let (profile, source) = auto_profile(Some(spec), machine.as_ref().map(|(m, _)| m.as_str()));
    let warning = match &machine {
        Some((m, _)) if profile == GpuDirect::None && machine_flavour(m) != GpuDirect::None => Some(format!(
            "warning: {m} has GPUDirect ({}), but fleet `{}` gets none (its network.gpudirect says none): NCCL goes over the pods' default network only",
            machine_flavour(m).name(),
            spec.name.as_deref().unwrap_or("?")
        )),
        None if profile == GpuDirect::None && source == Source::Unknown => Some(format!(
            "warning: fleet `{}`'s machine type is unknown (no node, no node pool of the GKE API): no GPUDirect; set network.gpudirect in its file",
            spec.name.as_deref().unwrap_or("?")
        )),
        _ => None,
    };
    (profile, source, machine.map(|(m, _)| m), warning)
}

/// The NCCL environment lines of `flavour` for a run or job on a fleet of `family`: the
/// one place that tells a VM's profile from a pod's. VMs and hosts get the profile of
/// Google's VM guides ([`super::runner::profile_env`]: Ubuntu NIC names, plugins under
/// `/var/lib/tcpxo` and `/usr/local/gib`); GKE pods get the profile of GKE's guides
/// ([`pod_env`]: the pod's `eth*` names, the driver and plugins where GKE mounts them).
pub fn env_lines(family: crate::fleet::BackendKind, flavour: GpuDirect) -> Vec<String> {
    use crate::fleet::BackendKind;
    match family {
        BackendKind::Local | BackendKind::Ssh | BackendKind::Gcp => super::runner::profile_env(flavour),
        BackendKind::Gke => pod_env(flavour),
    }
}

/// Where GKE mounts the node's NVIDIA driver libraries in a GPU container (the GKE
/// manifests' `LD_LIBRARY_PATH`, tests/fixtures/reference/container-engine-accelerators).
pub const POD_DRIVER_LIB_DIR: &str = "/usr/local/nvidia/lib64";

/// The NCCL environment of a GKE pod, as GKE's GPUDirect guides and manifests give it
/// (tests/fixtures/reference/container-engine-accelerators): the driver's libraries at
/// `/usr/local/nvidia/lib64` first in `LD_LIBRARY_PATH`, then per flavour
/// * RDMA: gIB's `set_nccl_env.sh` from `/usr/local/gib` (gpudirect-rdma/nccl-test.yaml);
/// * TCPXO: the installer's `nccl-env-profile.sh` beside the driver libraries and the
///   aperture devices (gpudirect-tcpxo/nccl-test*.yaml);
/// * TCPX: the plugin beside the driver's libraries (where GKE's installer copies it),
///   the pod's `eth0` as control NIC and `eth1..eth4` as data NICs, the values of
///   gpudirect-tcpx/nccl-config.yaml.
pub fn pod_env(flavour: GpuDirect) -> Vec<String> {
    use crate::shellenv::{export, source, Value};
    let mut v = vec![];
    match flavour {
        GpuDirect::None => {}
        GpuDirect::Rdma => v.push(source(super::runner::RDMA_ENV_SCRIPT)),
        GpuDirect::Tcpxo => {
            // Google's profile ends the shell without it (its line 13,
            // `: "${NCCL_LIB_DIR:?Must set NCCL_LIB_DIR}"`, whatever `set -u` says); the
            // guide sets it to where the installer put the profile
            // (gpudirect-tcpxo/README.md: `NCCL_LIB_DIR="/usr/local/nvidia/lib64"`).
            v.push(export("NCCL_LIB_DIR", Value::Literal(POD_DRIVER_LIB_DIR)));
            v.push(source(&format!("{POD_DRIVER_LIB_DIR}/nccl-env-profile.sh")));
            v.push(export(
                "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY",
                Value::Literal("/dev/aperture_devices"),
            ));
        }
        GpuDirect::Tcpx => {
            for (k, val) in [
                ("NCCL_SOCKET_IFNAME", "eth0"),
                ("NCCL_ALGO", "Ring,Tree"),
                ("NCCL_PROTO", "Simple"),
                ("NCCL_CROSS_NIC", "0"),
                ("NCCL_NET_GDR_LEVEL", "PIX"),
                ("NCCL_P2P_PXN_LEVEL", "0"),
                ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth4"),
                ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
                ("NCCL_DYNAMIC_CHUNK_SIZE", "524288"),
                ("NCCL_P2P_NET_CHUNKSIZE", "524288"),
                ("NCCL_P2P_PCI_CHUNKSIZE", "524288"),
                ("NCCL_P2P_NVL_CHUNKSIZE", "1048576"),
                ("NCCL_BUFFSIZE", "4194304"),
                ("NCCL_NSOCKS_PERTHREAD", "4"),
                ("NCCL_SOCKET_NTHREADS", "1"),
                (
                    "NCCL_GPUDIRECTTCPX_TX_BINDINGS",
                    "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
                ),
                (
                    "NCCL_GPUDIRECTTCPX_RX_BINDINGS",
                    "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
                ),
                ("NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS", "500000"),
                ("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", "/run/tcpx"),
            ] {
                v.push(export(k, Value::Literal(val)));
            }
            // No directory of its own: GKE's TCPX installer copies the plugin into the
            // driver's (gpudirect-tcpx/nccl-tcpx-installer.yaml), which the pods mount at
            // /usr/local/nvidia and the guide's pods and run-nccl.sh put on
            // LD_LIBRARY_PATH (gpudirect-tcpx/nccl-test-latest.yaml, nccl-config.yaml):
            // the last line below.
        }
    }
    // Last, after a sourced profile too: the driver stays first whatever it set.
    v.push(export("LD_LIBRARY_PATH", Value::Prepend(POD_DRIVER_LIB_DIR)));
    v
}

#[cfg(test)]
mod tests {

    /// A GKE pod's profile and a VM's are different values for every GPUDirect flavour,
    /// and the pod's names nothing only a VM has (Ubuntu NIC names, `/var/lib/tcpxo`).
    #[test]
    fn pods_and_vms_get_their_own_profiles() {
        use crate::fleet::BackendKind;
        for flavour in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let vm = env_lines(BackendKind::Gcp, flavour);
            let pod = env_lines(BackendKind::Gke, flavour);
            assert_ne!(vm, pod, "{flavour:?}");
            let text = pod.join("\n");
            for vm_only in ["enp", "/var/lib/tcpxo", "gIB'"] {
                assert!(
                    !text.contains(vm_only),
                    "{flavour:?} pod env names {vm_only}: {text}"
                );
            }
            let last = pod.last().expect("lines");
            assert!(
                last.contains("LD_LIBRARY_PATH='/usr/local/nvidia/lib64'"),
                "{last}"
            );
            assert!(!text.contains("LD_LIBRARY_PATH=/"), "a literal path list: {text}");
        }
        assert_eq!(
            env_lines(BackendKind::Ssh, GpuDirect::Rdma),
            super::super::runner::profile_env(GpuDirect::Rdma)
        );
        assert_eq!(env_lines(BackendKind::Gke, GpuDirect::None).len(), 1);
    }

    /// A TCPX pod finds the plugin where the guide's pods do: in the driver's directory
    /// (gpudirect-tcpx/nccl-test-latest.yaml mounts the node's
    /// /home/kubernetes/bin/nvidia/lib64 there; run-nccl.sh appends it), the only library
    /// directory of its LD_LIBRARY_PATH; never /usr/local/tcpx/lib64, which no pod mounts.
    #[test]
    fn tcpx_pods_find_the_plugin_in_the_drivers_directory() {
        let text = pod_env(GpuDirect::Tcpx).join("\n");
        assert!(!text.contains("/usr/local/tcpx"), "{text}");
        let lib: Vec<&str> = text.lines().filter(|l| l.contains("LD_LIBRARY_PATH")).collect();
        assert_eq!(lib.len(), 1, "{text}");
        assert!(lib[0].contains("'/usr/local/nvidia/lib64'"), "{text}");
    }

    use super::*;

    fn fleet(extra: &str) -> FleetSpec {
        let text = format!(
            "type: fleet\nname: lab\nnodes: 2\ninstance_types: [a3-megagpu-8g]\nbackends: [gcp]\nregions: [us-central1]\n{extra}"
        );
        crate::fleet::parse(std::path::Path::new("lab.yaml"), &text)
            .expect("a valid fleet file")
            .spec
    }

    #[test]
    fn explicit_gpudirect_wins_over_the_machine_type() {
        let auto = fleet("");
        assert_eq!(
            auto_profile(Some(&auto), None),
            (GpuDirect::Tcpxo, Source::MachineType)
        );
        // Validation refuses a flavour the machine type lacks; the choice itself still
        // puts an explicit flavour first.
        let mut rdma = fleet("");
        rdma.network = Some(crate::fleet::spec::Network {
            gpudirect: Some(GpuDirect::Rdma),
            ..Default::default()
        });
        assert_eq!(
            auto_profile(Some(&rdma), None),
            (GpuDirect::Rdma, Source::FleetNetwork)
        );
        let none = fleet("network:\n  gpudirect: none\n");
        assert_eq!(
            auto_profile(Some(&none), Some("a3-highgpu-8g")),
            (GpuDirect::None, Source::FleetNetwork),
            "none means none, whatever the machine type"
        );
        // A machine type given (e.g. --machine-type) is used when the fleet says auto.
        assert_eq!(
            auto_profile(Some(&auto), Some("a3-highgpu-8g")),
            (GpuDirect::Tcpx, Source::MachineType)
        );
        assert_eq!(auto_profile(None, None), (GpuDirect::None, Source::Unknown));
        assert_eq!(fleet_facts(Some(&rdma)).0, GpuDirect::Rdma);
        assert!(fleet_facts(Some(&auto)).1.is_some(), "the GPU from the catalog");
    }
}
