//! The bootstrap steps of each GPUDirect flavour, following the tools that run these
//! machines in production, each step naming its source. The snapshots read:
//! dstackai/dstack 511c318c, skypilot-org/skypilot 791e52d0 (skypilot-nightly
//! 1.0.0.dev20261027), GoogleCloudPlatform/cluster-toolkit 10470803 ("CTK"),
//! GoogleCloudPlatform/slurm-gcp 13fd92b6 (CTK's Slurm prologs).
//!
//! | flavour | image (cloud::gcp::layout)            | steps |
//! |---------|---------------------------------------|-------|
//! | TCPX    | Container-Optimized OS (dstack, SkyPilot) | GPU driver, exec remount, RxDM, iptables, plugin, exec remount, nccl-tests image |
//! | TCPXO   | Ubuntu 24.04 accelerator (CTK a3mega)  | docker, NVIDIA container toolkit, apt repos, dmabuf import-helper, aperture udev rule, plugin + NCCL, RxDM, nccl-tests |
//! | RDMA    | Ubuntu 22.04 accelerator (CTK a3ultra/a4high) | apt repos, nccl-gib + ibverbs-utils, ld.so.conf, memlock, nccl-tests |
//!
//! TCPX runs on COS because the Ubuntu route of CTK's A3 High blueprint needs a
//! `linux-gcp-tcpx` kernel from a private PPA whose credentials Google hands out: on COS
//! there is nothing on the host but docker, so nccl-tests come from the TCPX plugin
//! image (`/third_party/nccl-tests-mpi/build`), as SkyPilot's TCPX example runs them.

use super::Step;
use crate::nccl::GpuDirect;

/// TCPX images (dstack pins none: `:latest`, pulled with `--pull=always`).
pub const TCPX_RXDM_IMAGE: &str = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd";
pub const TCPX_PLUGIN_IMAGE: &str = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx";
/// Where the TCPX plugin image keeps nccl-tests built with MPI.
pub const TCPX_NCCL_TESTS: &str = "/third_party/nccl-tests-mpi/build";
/// TCPXO images, as slurm-gcp's `receive-data-path-manager-mega` pins them.
pub const TCPXO_PLUGIN_IMAGE: &str =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17";
pub const TCPXO_RXDM_IMAGE: &str = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23";
/// The RxDM container's name (dstack, SkyPilot; slurm-gcp adds the job id).
pub const RXDM_CONTAINER: &str = "receive-datapath-manager";
/// Where the bootstrap builds nccl-tests on Ubuntu nodes (one of the places `nccl run` looks).
pub const NCCL_TESTS_DIR: &str = "/opt/nccl-tests";

const CTK_A3MEGA: &str =
    "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml";

fn step(name: &'static str, what: &'static str, source: &'static str, check: &str, action: &str) -> Step {
    Step {
        name,
        what,
        source,
        check: check.trim().to_string(),
        action: action.trim().to_string(),
    }
}

/// A mount point that is mounted and allows exec (COS mounts /var noexec).
fn exec_mounted(dir: &str) -> String {
    format!(
        "o=$(awk '$2==\"{dir}\" {{o=$4}} END {{print o}}' /proc/mounts)\n\
         [ -n \"$o\" ] && ! echo \",$o,\" | grep -q ',noexec,'"
    )
}

/// The RxDM container runs.
fn container_running(name: &str) -> String {
    format!("[ \"$(docker inspect -f '{{{{.State.Running}}}}' {name} 2>/dev/null)\" = true ]")
}

/// The steps of a flavour, in the order a node runs them.
pub fn steps(flavour: GpuDirect) -> Vec<Step> {
    match flavour {
        GpuDirect::None => vec![],
        GpuDirect::Tcpx => tcpx(),
        GpuDirect::Tcpxo => tcpxo(),
        GpuDirect::Rdma => rdma(),
    }
}

fn tcpx() -> Vec<Step> {
    let both = "dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py; \
                skypilot-org/skypilot sky/provision/gcp/constants.py (GPU_DIRECT_TCPX_USER_DATA)";
    vec![
        step(
            "gpu-driver",
            "NVIDIA driver from COS's GPU extension, loaded",
            both,
            "[ -e /dev/nvidia0 ] && [ -e /var/lib/nvidia/bin/nvidia-smi ]",
            "cos-extensions install gpu -- --version=latest",
        ),
        step(
            "nvidia-exec",
            "/var/lib/nvidia remounted exec (COS mounts /var noexec)",
            both,
            &exec_mounted("/var/lib/nvidia"),
            "mount --bind /var/lib/nvidia /var/lib/nvidia\nmount -o remount,exec /var/lib/nvidia",
        ),
        step(
            "rxdm",
            "the receive-datapath manager (tcpgpudmarxd) container, running",
            both,
            &container_running(RXDM_CONTAINER),
            &format!(
                "docker rm -f {RXDM_CONTAINER} >/dev/null 2>&1 || true\n\
                 docker run --detach --pull=always --name {RXDM_CONTAINER} --privileged \\\n\
                 \x20 --cap-add=NET_ADMIN --network=host \\\n\
                 \x20 --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \\\n\
                 \x20 --device /dev/nvidia0:/dev/nvidia0 --device /dev/nvidia1:/dev/nvidia1 \\\n\
                 \x20 --device /dev/nvidia2:/dev/nvidia2 --device /dev/nvidia3:/dev/nvidia3 \\\n\
                 \x20 --device /dev/nvidia4:/dev/nvidia4 --device /dev/nvidia5:/dev/nvidia5 \\\n\
                 \x20 --device /dev/nvidia6:/dev/nvidia6 --device /dev/nvidia7:/dev/nvidia7 \\\n\
                 \x20 --device /dev/nvidia-uvm:/dev/nvidia-uvm --device /dev/nvidiactl:/dev/nvidiactl \\\n\
                 \x20 --env LD_LIBRARY_PATH=/usr/local/nvidia/lib64 \\\n\
                 \x20 --volume /run/tcpx:/run/tcpx \\\n\
                 \x20 --entrypoint /tcpgpudmarxd/build/app/tcpgpudmarxd \\\n\
                 \x20 {TCPX_RXDM_IMAGE} \\\n\
                 \x20 --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path \"/run/tcpx\" --setup_param \"--verbose 128 2 0\""
            ),
        ),
        step(
            "firewall",
            "iptables accepts the TCP data connections",
            both,
            "iptables -C INPUT -p tcp -m tcp -j ACCEPT",
            "iptables -I INPUT -p tcp -m tcp -j ACCEPT",
        ),
        step(
            "nccl-plugin",
            "NCCL and the GPUDirect-TCPX net plugin in /var/lib/tcpx/lib64",
            both,
            "[ -e /var/lib/tcpx/lib64/libnccl-net.so ] && [ -e /var/lib/tcpx/lib64/libnccl.so.2 ]",
            &format!("docker run --rm -v /var/lib:/var/lib {TCPX_PLUGIN_IMAGE} install --install-nccl"),
        ),
        step(
            "tcpx-exec",
            "/var/lib/tcpx remounted exec",
            both,
            &exec_mounted("/var/lib/tcpx"),
            "mount --bind /var/lib/tcpx /var/lib/tcpx\nmount -o remount,exec /var/lib/tcpx",
        ),
        step(
            "nccl-tests",
            "nccl-tests: the TCPX plugin image, which ships them built with MPI",
            "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/nccl_tcpx_gcpvm_h100.yaml; \
             GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-highgpu-8g (plugin image ships /third_party/nccl-tests-mpi/build)",
            &format!("docker image inspect {TCPX_PLUGIN_IMAGE} >/dev/null"),
            &format!("docker pull {TCPX_PLUGIN_IMAGE}"),
        ),
    ]
}

/// Done when Google's Artifact Registry apt transport is installed and the `ar+https://`
/// repository `list` is configured.
fn ar_repo_check(list: &str) -> String {
    format!("dpkg -s apt-transport-artifact-registry >/dev/null 2>&1 && [ -f /etc/apt/sources.list.d/{list}.list ]")
}

fn tcpxo() -> Vec<Step> {
    let repo_check = ar_repo_check("gpudirect-tcpxo");
    vec![
        step(
            "docker",
            "docker, as CTK's startup-script installs it",
            "GoogleCloudPlatform/cluster-toolkit modules/scripts/startup-script/files/install_docker.yml",
            "command -v docker >/dev/null && docker info >/dev/null 2>&1",
            "curl -fsSL https://get.docker.com -o /tmp/get-docker.sh\nsh /tmp/get-docker.sh\nsystemctl enable --now docker",
        ),
        step(
            "container-toolkit",
            "NVIDIA container toolkit (docker run --gpus), 1.17.7-1 pinned out",
            CTK_A3MEGA,
            "command -v nvidia-ctk >/dev/null",
            r#"mkdir -p /etc/apt/preferences.d /usr/share/keyrings
cat > /etc/apt/preferences.d/block-broken-nvidia-container <<'EOF'
Package: nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1
Pin: version 1.17.7-1
Pin-Priority: 100
EOF
curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor --yes -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
  | sed 's#deb https://#deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://#g' \
  > /etc/apt/sources.list.d/nvidia-container-toolkit.list
apt-get update
apt-get install -y nvidia-container-toolkit
systemctl restart docker"#,
        ),
        step(
            "apt-repos",
            "Google's Artifact Registry apt transport and the gpudirect-tcpxo repository",
            CTK_A3MEGA,
            &repo_check,
            r#"mkdir -p /etc/apt/sources.list.d
echo 'deb http://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main' > /etc/apt/sources.list.d/artifact-registry.list
apt-get update
apt-get install -y apt-transport-artifact-registry dkms
echo 'deb [arch=all trusted=yes] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main' > /etc/apt/sources.list.d/gpudirect-tcpxo.list
apt-get update"#,
        ),
        step(
            "import-helper",
            "the dmabuf import-helper kernel module (DKMS), built and loaded",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml (install_dmabuf.yml); \
             dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py",
            "[ -e /dev/dmabuf_import_helper ]",
            r#"if ! dkms status -m dmabuf-import-helper -v 1.1 2>/dev/null | grep -q installed; then
  d=$(mktemp -d)
  cd "$d"
  apt-get download dmabuf-import-helper
  dpkg-deb -x ./*.deb .
  rm -rf /usr/src/dmabuf-import-helper-1.1
  mv ./usr/src/dmabuf-import-helper-1.1 /usr/src/
  # Kernels from 6.13 want the namespace quoted (CTK patches it for Ubuntu 24.04's 6.17).
  case "$(uname -r)" in
    [0-5].*|6.[0-9].*|6.1[0-2].*) ;;
    *) sed -i 's/MODULE_IMPORT_NS(DMA_BUF)/MODULE_IMPORT_NS("DMA_BUF")/' /usr/src/dmabuf-import-helper-1.1/import-helper.c ;;
  esac
  dkms status -m dmabuf-import-helper -v 1.1 | grep -q added || dkms add -m dmabuf-import-helper -v 1.1
  dkms build -m dmabuf-import-helper -v 1.1
  dkms install -m dmabuf-import-helper -v 1.1
fi
mkdir -p /etc/modules-load.d
echo import-helper > /etc/modules-load.d/import-helper.conf
modprobe import-helper"#,
        ),
        step(
            "aperture-devices",
            "the udev rule that binds the TCPXO NICs' apertures under /dev/aperture_devices",
            CTK_A3MEGA,
            "grep -q '0x1ae0' /etc/udev/rules.d/00-a3-megagpu.rules",
            r#"mkdir -p /etc/udev/rules.d
cat > /etc/udev/rules.d/00-a3-megagpu.rules <<'EOF'
ACTION=="add", SUBSYSTEM=="pci", ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084", TAG+="systemd", \
    RUN+="/usr/bin/mkdir --mode=0755 -p /dev/aperture_devices", \
    RUN+="/usr/bin/systemd-mount --type=none --options=bind --collect %S/%p /dev/aperture_devices/%k", \
    RUN+="/usr/bin/bash -c '/usr/bin/chmod 0666 /dev/aperture_devices/%k/resource*'"
EOF
chmod 0644 /etc/udev/rules.d/00-a3-megagpu.rules
udevadm control --reload-rules
udevadm trigger --subsystem-match=pci --action=add
update-initramfs -u -k all"#,
        ),
        step(
            "nccl-plugin",
            "NCCL, the FasTrak net plugin and nccl-env-profile.sh in /var/lib/tcpxo/lib64",
            "GoogleCloudPlatform/slurm-gcp tools/prologs-epilogs/receive-data-path-manager-mega; \
             dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py",
            "[ -e /var/lib/tcpxo/lib64/libnccl-net.so ] && grep -q aperture_devices /var/lib/tcpxo/lib64/nccl-env-profile.sh",
            &format!(
                r#"if command -v gcloud >/dev/null; then gcloud auth configure-docker --quiet us-docker.pkg.dev >/dev/null 2>&1 || true; fi
rm -rf /var/lib/tcpxo/lib64
docker run --rm --name nccl-installer --network=host -v /var/lib:/var/lib {TCPXO_PLUGIN_IMAGE} install --install-nccl
# The profile assumes eth0..eth8; on Ubuntu the job's variables name the NICs (slurm-gcp).
cat >> /var/lib/tcpxo/lib64/nccl-env-profile.sh <<'EOF'
export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices
export LD_LIBRARY_PATH=/var/lib/tcpxo/lib64:${{LD_LIBRARY_PATH}}
EOF"#
            ),
        ),
        step(
            "rxdm",
            "the FasTrak receive-datapath manager container, running and initialised",
            "GoogleCloudPlatform/slurm-gcp tools/prologs-epilogs/receive-data-path-manager-mega; \
             dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py",
            &container_running(RXDM_CONTAINER),
            &format!(
                r#"modprobe import-helper
docker rm -f {RXDM_CONTAINER} >/dev/null 2>&1 || true
docker run --detach --pull=always --restart=unless-stopped --name {RXDM_CONTAINER} \
  --cap-add=NET_ADMIN --network=host --privileged --gpus all \
  --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \
  --volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper \
  --env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu \
  {TCPXO_RXDM_IMAGE} \
  --num_hops=2 --num_nics=8 --uid= --alsologtostderr
i=0
until docker container logs {RXDM_CONTAINER} 2>&1 | grep -q "Buffer manager initialization complete"; do
  i=$((i + 1))
  if [ "$i" -gt 60 ]; then docker logs --tail 10 {RXDM_CONTAINER}; echo "RxDM did not initialise in 120 s" >&2; exit 1; fi
  sleep 2
done"#
            ),
        ),
        nccl_tests_build(),
    ]
}

fn rdma() -> Vec<Step> {
    let repo_check = ar_repo_check("gpudirect-gib");
    let sources = "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml; \
                   GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml";
    vec![
        step(
            "apt-repos",
            "Google's Artifact Registry apt transport and the gpudirect-gib repository",
            sources,
            &repo_check,
            r#"mkdir -p /etc/apt/trusted.gpg.d /etc/apt/sources.list.d
curl -fsSL https://us-apt.pkg.dev/doc/repo-signing-key.gpg | gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/artifact-registry.gpg
curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg | gpg --dearmor --yes -o /etc/apt/trusted.gpg.d/cloud-google.gpg
echo 'deb http://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main' > /etc/apt/sources.list.d/artifact-registry.list
apt-get update
apt-get install -y apt-transport-artifact-registry
echo 'deb ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main' > /etc/apt/sources.list.d/gpudirect-gib.list
apt-get update"#,
        ),
        step(
            "nccl-gib",
            "the gIB NCCL plugin (held) and ibverbs-utils",
            sources,
            "dpkg -s nccl-gib >/dev/null 2>&1 && dpkg -s ibverbs-utils >/dev/null 2>&1 && [ -f /usr/local/gib/scripts/set_nccl_env.sh ]",
            "apt-get install -y nccl-gib ibverbs-utils\napt-mark hold nccl-gib",
        ),
        step(
            "ld-so-conf",
            "/usr/local/gib/lib64 first for the dynamic linker",
            sources,
            "grep -qx /usr/local/gib/lib64 /etc/ld.so.conf.d/000_nccl-gib.conf",
            "mkdir -p /etc/ld.so.conf.d\necho /usr/local/gib/lib64 > /etc/ld.so.conf.d/000_nccl-gib.conf\nldconfig",
        ),
        step(
            "memlock",
            "unlimited memlock (RDMA registers GPU memory) and the HPC image's other limits",
            sources,
            "grep -q '^\\* - memlock unlimited' /etc/security/limits.d/99-unlimited.conf",
            r#"mkdir -p /etc/security/limits.d
cat > /etc/security/limits.d/99-unlimited.conf <<'EOF'
* - memlock unlimited
* - nproc unlimited
* - stack unlimited
* - nofile 1048576
* - cpu unlimited
* - rtprio unlimited
EOF"#,
        ),
        step(
            "nccl-env",
            "gIB's NCCL environment for login shells",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml",
            "[ -f /etc/profile.d/nccl-gib.sh ]",
            r#"mkdir -p /etc/profile.d
cat > /etc/profile.d/nccl-gib.sh <<'EOF'
# Load NCCL/gIB environment
if [ -f "/usr/local/gib/scripts/set_nccl_env.sh" ]; then
  . /usr/local/gib/scripts/set_nccl_env.sh
fi

# Ensure /usr/local/gib/lib64 is in LD_LIBRARY_PATH
if [ -d "/usr/local/gib/lib64" ]; then
  export LD_LIBRARY_PATH="/usr/local/gib/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
fi
EOF
chmod 0644 /etc/profile.d/nccl-gib.sh"#,
        ),
        nccl_tests_build(),
    ]
}

/// nccl-tests built on the node with MPI, against NCCL from NVIDIA's CUDA repository
/// (CTK's install_nccl.yml installs libnccl2/libnccl-dev from it; its blueprints build
/// nccl-tests with `MPI=1 CC=mpicc CXX=mpicxx make -j`).
fn nccl_tests_build() -> Step {
    step(
        "nccl-tests",
        "nccl-tests built with MPI in /opt/nccl-tests (CUDA toolkit, NCCL headers and Open MPI from apt)",
        "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/nccl-tests/build-nccl-tests.sh; \
         GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml (install_nccl.yml, CUDA repo)",
        &format!("[ -x {NCCL_TESTS_DIR}/build/all_reduce_perf ] && [ -x {NCCL_TESTS_DIR}/build/all_gather_perf ]"),
        &format!(
            r#"if [ ! -x /usr/local/cuda/bin/nvcc ] || ! [ -e /usr/include/nccl.h ]; then
  . /etc/os-release
  dist="ubuntu$(echo "$VERSION_ID" | tr -d .)"
  curl -fsSL -o /tmp/cuda-keyring.deb "https://developer.download.nvidia.com/compute/cuda/repos/$dist/x86_64/cuda-keyring_1.1-1_all.deb"
  dpkg -i /tmp/cuda-keyring.deb
  apt-get update
  [ -x /usr/local/cuda/bin/nvcc ] || apt-get install -y cuda-toolkit-12-8
  apt-get install -y libnccl2 libnccl-dev
fi
apt-get install -y git make g++ openmpi-bin libopenmpi-dev
[ -d {NCCL_TESTS_DIR}/.git ] || git clone --depth 1 https://github.com/NVIDIA/nccl-tests.git {NCCL_TESTS_DIR}
make -C {NCCL_TESTS_DIR} -j "$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr"#
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcpx_follows_dstack_and_skypilot_in_order() {
        let names: Vec<&str> = steps(GpuDirect::Tcpx).iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "gpu-driver",
                "nvidia-exec",
                "rxdm",
                "firewall",
                "nccl-plugin",
                "tcpx-exec",
                "nccl-tests"
            ]
        );
        let s = crate::bootstrap::script(GpuDirect::Tcpx);
        for piece in [
            "cos-extensions install gpu -- --version=latest",
            "--gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path \"/run/tcpx\"",
            "iptables -I INPUT -p tcp -m tcp -j ACCEPT",
            "nccl-plugin-gpudirecttcpx install --install-nccl",
            "mount -o remount,exec /var/lib/tcpx",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
    }

    #[test]
    fn tcpxo_and_rdma_carry_the_reference_pieces() {
        let s = crate::bootstrap::script(GpuDirect::Tcpxo);
        for piece in [
            "gpudirect-tcpxo-apt main",
            "dmabuf-import-helper",
            "/dev/aperture_devices",
            "--num_hops=2 --num_nics=8",
            "install --install-nccl",
            "Buffer manager initialization complete",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
        let s = crate::bootstrap::script(GpuDirect::Rdma);
        for piece in [
            "apt-transport-artifact-registry",
            "gpudirect-gib-apt main",
            "apt-get install -y nccl-gib ibverbs-utils",
            "/etc/ld.so.conf.d/000_nccl-gib.conf",
            "* - memlock unlimited",
            "set_nccl_env.sh",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
    }
}
