//! GKE's NRI device injector and the device paths a GKE GPU node has.

use serde_json::Value;

/// The device paths a node of `machine_type` with `gpus` GPUs has once GKE's installers
/// ran: the NVIDIA driver installer's `/dev/nvidia0..N-1`, `/dev/nvidiactl` and
/// `/dev/nvidia-uvm` (container-engine-accelerators
/// nvidia-driver-installer/cos/daemonset-preloaded.yaml); on A3 Mega also what the
/// TCPXO installer's `pre-installation` init container makes
/// (container-engine-accelerators gpudirect-tcpxo/nccl-tcpxo-installer.yaml: `modprobe
/// import-helper` gives `/dev/dmabuf_import_helper`, and the per-NIC bind mounts under
/// `/dev/aperture_devices`). A3 High (TCPX) loads no import helper.
pub fn defaults(machine_type: &str, gpus: u32) -> Vec<String> {
    let mut d: Vec<String> = (0..gpus).map(|i| format!("/dev/nvidia{i}")).collect();
    if gpus > 0 {
        d.push("/dev/nvidiactl".into());
        d.push("/dev/nvidia-uvm".into());
    }
    if machine_type.starts_with("a3-megagpu") {
        d.push("/dev/aperture_devices".into());
        d.push("/dev/dmabuf_import_helper".into());
    }
    d
}

/// The device paths a container's annotation asks for, as GKE's NRI device injector
/// reads them (container-engine-accelerators nri_device_injector/nri_device_injector.go,
/// getDevices): `devices.gke.io/container.<name>` first, else `devices.gke.io/pod`,
/// else `devices.gke.io`; the value a YAML list of `- path: ...` entries. An annotation
/// that is no such list fails the container ("invalid device annotation").
pub fn requested(pod: &Value, container: &str) -> Result<Vec<String>, String> {
    let ann = &pod["metadata"]["annotations"];
    let keys = [
        format!("devices.gke.io/container.{container}"),
        "devices.gke.io/pod".to_string(),
        "devices.gke.io".to_string(),
    ];
    let Some((key, value)) = keys
        .iter()
        .find_map(|k| ann[k.as_str()].as_str().map(|v| (k.clone(), v.to_string())))
    else {
        return Ok(vec![]);
    };
    let list: Vec<Value> = serde_yaml::from_str::<Option<Vec<Value>>>(&value)
        .map_err(|e| format!("invalid device annotation {key:?}: {e}"))?
        .unwrap_or_default();
    list.iter()
        .map(|d| {
            d["path"]
                .as_str()
                .map(String::from)
                .ok_or_else(|| format!("invalid device annotation {key:?}: an entry without a path"))
        })
        .collect()
}

/// Whether the injector can inject the container's devices on a node that has `have`:
/// it `lstat`s each path (toNRIDevice), and a missing one fails CreateContainer, which
/// the kubelet reports as the container waiting with `CreateContainerError`.
pub fn check(pod: &Value, container: &str, have: &[String]) -> Result<(), String> {
    for p in requested(pod, container)? {
        let there = have.iter().any(|h| *h == p || p.starts_with(&format!("{h}/")));
        if !there {
            return Err(format!(
                "failed to create containerd container: NRI plugin \"10-device_injector_nri\" failed: lstat {p}: no such file or directory"
            ));
        }
    }
    Ok(())
}
