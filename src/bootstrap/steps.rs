//! The bootstrap steps of each GPUDirect flavour, following the tools that run these
//! machines in production, each step naming its source. The snapshots read:
//! dstackai/dstack 511c318c, skypilot-org/skypilot 791e52d0 (skypilot-nightly
//! 1.0.0.dev20261027), GoogleCloudPlatform/cluster-toolkit 10470803 ("CTK"),
//! GoogleCloudPlatform/slurm-gcp 13fd92b6 (CTK's Slurm prologs).
//!
//! | flavour | image (cloud::gcp::layout)            | steps |
//! |---------|---------------------------------------|-------|
//! | TCPX    | Container-Optimized OS (dstack, SkyPilot) | GPU driver, exec remount, RxDM, iptables on the data NICs, plugin, exec remount, nccl-tests image |
//! | TCPXO   | Ubuntu 24.04 accelerator (CTK a3mega)  | docker, NVIDIA container toolkit, apt repos, dmabuf import-helper, aperture udev rule, plugin + NCCL, RxDM, nccl-tests |
//! | RDMA    | Ubuntu 22.04 accelerator (CTK a3ultra/a4high) | apt repos, nccl-gib + ibverbs-utils, ld.so.conf, memlock, nccl-tests |
//!
//! TCPX runs on COS because the Ubuntu route of CTK's A3 High blueprint needs a
//! `linux-gcp-tcpx` kernel from a private PPA whose credentials Google hands out: on COS
//! there is nothing on the host but docker, so nccl-tests come from the TCPX plugin
//! image (`/third_party/nccl-tests-mpi/build`), as SkyPilot's TCPX example runs them.
//!
//! What a node takes from outside, and how it is checked (SECURITY.md, "What a node
//! trusts, and why", says the same for operators):
//! - apt repositories only with `signed-by=` a keyring of [`APT_KEYS`]: each key file is
//!   downloaded into a private temporary directory (`mktemp -d`), its fingerprints
//!   checked, and only the expected keys exported into `/etc/apt/keyrings/NAME.gpg`
//!   ([`HELPERS`] `fd_keyring`); no `trusted=yes`, nothing in `trusted.gpg.d`;
//! - container images of [`IMAGES`] by the tag a reference pins, then by digest: the
//!   first pull's digest is recorded in [`DIGESTS`] and the image run by it; a later pull
//!   whose digest differs is refused (`fd_image`: trust on first use, as known_hosts);
//! - nccl-tests at [`NCCL_TESTS_COMMIT`], cloned and built in a temporary directory as an
//!   unprivileged user, moved into [`NCCL_TESTS_DIR`] only when built;
//! - no `curl | sh`, no fixed names in /tmp.

use crate::nccl::GpuDirect;
use crate::shellenv::{self, Value};

/// One step of a flavour's bootstrap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Short name, unique within the flavour: `rxdm`, `nccl-plugin`.
    pub name: &'static str,
    /// What it does, for the operator.
    pub what: &'static str,
    /// The references it follows: repository and path.
    pub source: &'static str,
    /// Shell that exits 0 when the step is done.
    pub check: String,
    /// Shell that does the step (runs under `set -e`).
    pub action: String,
}

/// An apt repository's signing key as flightdeck expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AptKey {
    /// The keyring's name: `/etc/apt/keyrings/NAME.gpg`.
    pub keyring: &'static str,
    /// Where the key file is downloaded from (`$dist` is expanded on the node).
    pub url: &'static str,
    /// The primary keys' fingerprints the keyring is made of: every one must be in the
    /// downloaded file, and nothing else goes into the keyring.
    pub fingerprints: &'static [&'static str],
    /// Where the fingerprints were found.
    pub source: &'static str,
}

/// Every apt key a bootstrap imports, with where its fingerprint was found.
///
/// | keyring | key file | fingerprints | found in |
/// |---|---|---|---|
/// | docker | download.docker.com/linux/ubuntu/gpg | 9DC8 5822 9FC7 DD38 854A E2D8 8D81 803C 0EBF CD88 | docs.docker.com (Install Docker Engine on Ubuntu) |
/// | cuda | developer.download.nvidia.com/compute/cuda/repos/$dist/x86_64/3bf863cc.pub | EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC | the key file's name is its short id; NVIDIA's CUDA repository key (2022) |
/// | nvidia-container-toolkit | nvidia.github.io/libnvidia-container/gpgkey | C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0 | NVIDIA/libnvidia-container issue #280 |
/// | google-cloud | packages.cloud.google.com/apt/doc/apt-key.gpg | A362 B822 F6DE DC65 2817 EA46 B53D C80D 13ED EF05 (Rapture Automatic Signing Key, 2022-03-07); 35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3 (Artifact Registry Repository Signer, 2021-05-04) | kubernetes/release issue #3102 (2023); Google rotates this set: a new key makes the step fail until the table is updated |
/// | artifact-registry | us-apt.pkg.dev/doc/repo-signing-key.gpg | 35BA A0B3 3E9E B396 F59C A838 C0BA 5CE6 DC63 15A3 | inferred: the Artifact Registry Repository Signer of the row above; Google prints no fingerprint beside this URL |
pub const APT_KEYS: [AptKey; 5] = [
    DOCKER_KEY,
    CUDA_KEY,
    CONTAINER_TOOLKIT_KEY,
    GOOGLE_CLOUD_KEY,
    ARTIFACT_REGISTRY_KEY,
];

pub const DOCKER_KEY: AptKey = AptKey {
    keyring: "docker",
    url: "https://download.docker.com/linux/ubuntu/gpg",
    fingerprints: &["9DC858229FC7DD38854AE2D88D81803C0EBFCD88"],
    source: "docs.docker.com/engine/install/ubuntu (the key's fingerprint, printed there)",
};
pub const CUDA_KEY: AptKey = AptKey {
    keyring: "cuda",
    url: "https://developer.download.nvidia.com/compute/cuda/repos/$dist/x86_64/3bf863cc.pub",
    fingerprints: &["EB693B3035CD5710E231E123A4B469963BF863CC"],
    source: "developer.download.nvidia.com/compute/cuda/repos/$dist/x86_64/3bf863cc.pub (NVIDIA's CUDA repository key, used with signed-by instead of the cuda-keyring .deb)",
};
pub const CONTAINER_TOOLKIT_KEY: AptKey = AptKey {
    keyring: "nvidia-container-toolkit",
    url: "https://nvidia.github.io/libnvidia-container/gpgkey",
    fingerprints: &["C95B321B61E88C1809C4F759DDCAE044F796ECB0"],
    source: "github.com/NVIDIA/libnvidia-container issue #280",
};
pub const GOOGLE_CLOUD_KEY: AptKey = AptKey {
    keyring: "google-cloud",
    url: "https://packages.cloud.google.com/apt/doc/apt-key.gpg",
    fingerprints: &[
        "A362B822F6DEDC652817EA46B53DC80D13EDEF05",
        "35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3",
    ],
    source: "github.com/kubernetes/release issue #3102 (2023; Google rotates the keys of this file)",
};
pub const ARTIFACT_REGISTRY_KEY: AptKey = AptKey {
    keyring: "artifact-registry",
    url: "https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
    fingerprints: &["35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3"],
    source: "inferred, not printed by Google beside this URL: the Artifact Registry Repository Signer of packages.cloud.google.com's apt-key.gpg (kubernetes/release issue #3102)",
};

impl AptKey {
    /// The keyring's path on the node.
    pub fn path(&self) -> String {
        format!("/etc/apt/keyrings/{}.gpg", self.keyring)
    }

    /// The line that makes the keyring (fails naming the URL and a missing fingerprint).
    fn import(&self) -> String {
        format!(
            "fd_keyring {} \"{}\" {}",
            self.path(),
            self.url,
            self.fingerprints.join(" ")
        )
    }

    /// The shell test that the keyring holds exactly the expected keys.
    fn holds(&self) -> String {
        format!("fd_keyring_ok {} {}", self.path(), self.fingerprints.join(" "))
    }

    /// `[signed-by=...]`'s option.
    fn signed_by(&self) -> String {
        format!("signed-by={}", self.path())
    }
}

/// A container image a bootstrap pulls: the tag a reference pins, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedImage {
    pub image: &'static str,
    pub source: &'static str,
}

/// Every image a bootstrap pulls. Google publishes no digests for them (no reference
/// repository pins one), so they are pinned by tag here and by digest on each node at
/// its first pull ([`DIGESTS`], trust on first use).
///
/// | image | tag | pinned by |
/// |---|---|---|
/// | gpudirect-tcpx/tcpgpudmarxd-dev (TCPX RxDM) | v2.0.12 | slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager; container-engine-accelerators gpudirect-tcpx/nccl-test-latest.yaml |
/// | gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev (TCPX plugin, NCCL, nccl-tests) | v3.1.9-2.19.4-12.0 | slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager |
/// | gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev (TCPXO plugin, NCCL, profile) | v1.0.17 | slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager-mega |
/// | gpudirect-tcpxo/tcpgpudmarxd-dev (TCPXO RxDM) | v1.0.23 | slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager-mega |
pub const IMAGES: [PinnedImage; 4] = [
    PinnedImage {
        image: TCPX_RXDM_IMAGE,
        source: "GoogleCloudPlatform/slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager",
    },
    PinnedImage {
        image: TCPX_PLUGIN_IMAGE,
        source: "GoogleCloudPlatform/slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager",
    },
    PinnedImage {
        image: TCPXO_PLUGIN_IMAGE,
        source: "GoogleCloudPlatform/slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager-mega",
    },
    PinnedImage {
        image: TCPXO_RXDM_IMAGE,
        source: "GoogleCloudPlatform/slurm-gcp 13fd92b6 tools/prologs-epilogs/receive-data-path-manager-mega",
    },
];

/// TCPX images, as slurm-gcp's `receive-data-path-manager` pins them (dstack and
/// SkyPilot pull `:latest`).
pub const TCPX_RXDM_IMAGE: &str = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12";
pub const TCPX_PLUGIN_IMAGE: &str =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0";
/// Where the TCPX plugin image keeps nccl-tests built with MPI.
pub const TCPX_NCCL_TESTS: &str = "/third_party/nccl-tests-mpi/build";
/// TCPXO images, as slurm-gcp's `receive-data-path-manager-mega` pins them.
pub const TCPXO_PLUGIN_IMAGE: &str =
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17";
pub const TCPXO_RXDM_IMAGE: &str = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.23";
/// The RxDM container's name (dstack, SkyPilot; slurm-gcp adds the job id).
pub const RXDM_CONTAINER: &str = "receive-datapath-manager";
/// Where a node records the digest of each image at its first pull: `IMAGE DIGEST-REF`
/// lines, root's, 0644 in a 0755 directory.
pub const DIGESTS: &str = "/var/lib/flightdeck/images.digests";
/// Where the bootstrap builds nccl-tests on Ubuntu nodes (one of the places `nccl run` looks).
pub const NCCL_TESTS_DIR: &str = "/opt/nccl-tests";
/// The nccl-tests commit built: NVIDIA/nccl-tests tag v2.19.6 (2026-07-09).
pub const NCCL_TESTS_COMMIT: &str = "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432";
/// Where it is cloned from.
pub const NCCL_TESTS_REPO: &str = "https://github.com/NVIDIA/nccl-tests.git";
/// The file in [`NCCL_TESTS_DIR`] that names the commit it was built from.
pub const NCCL_TESTS_STAMP: &str = "/opt/nccl-tests/.flightdeck-commit";
/// The TCPX data NICs on COS (the control NIC, eth0, keeps COS's firewall).
pub const TCPX_DATA_NICS: [&str; 4] = ["eth1", "eth2", "eth3", "eth4"];

/// A shell word that is, on a node, the digest reference the bootstrap recorded for
/// `image` in [`DIGESTS`], or `image` itself where none is recorded (for the commands
/// that run an image after the bootstrap, as `bootstrap::cos` does).
pub fn pinned_image_word(image: &str) -> String {
    pinned_image_word_in(image, DIGESTS)
}

fn pinned_image_word_in(image: &str, file: &str) -> String {
    let (q, f) = (shellenv::quote(image), shellenv::quote(file));
    format!(
        "\"$(fd_d=; [ -r {f} ] && fd_d=$(awk -v i={q} '$1 == i {{ d = $2 }} END {{ print d }}' {f}); echo \"${{fd_d:-{image}}}\")\""
    )
}

/// The shell functions the steps use, defined once at the top of the script (bash).
pub const HELPERS: &str = r#"FD_DIGESTS=/var/lib/flightdeck/images.digests
# fd_tmpdir VAR: a private temporary directory (mktemp -d, 0700) in VAR, removed when
# the step's subshell exits, whichever way.
FD_TMPDIRS=()
fd_cleanup() {
  local t
  for t in "${FD_TMPDIRS[@]+"${FD_TMPDIRS[@]}"}"; do
    if [ -d "$t/gnupg" ] && command -v gpgconf >/dev/null 2>&1; then gpgconf --homedir "$t/gnupg" --kill all >/dev/null 2>&1 || true; fi
    rm -rf -- "$t"
  done
}
fd_tmpdir() {
  local t
  t=$(mktemp -d) || return 1
  FD_TMPDIRS+=("$t")
  trap fd_cleanup EXIT
  printf -v "$1" '%s' "$t"
}
# fd_fingerprints HOMEDIR FILE: the primary keys' fingerprints in an OpenPGP key file.
fd_fingerprints() {
  GNUPGHOME=$1 gpg --batch --show-keys --with-colons "$2" 2>/dev/null \
    | awk -F: '$1 == "pub" { p = 1; next } $1 == "fpr" && p { print $10 } { p = 0 }'
}
# fd_keyring KEYRING URL FPR...: download the key file at URL into a private temporary
# directory, check that it holds every key named, import it into a throwaway GNUPGHOME
# and write KEYRING (for apt's signed-by) of exactly those keys. Fails naming the URL
# and the fingerprint missing, leaving KEYRING as it was.
fd_keyring() {
  local keyring=$1 url=$2 d fpr have
  shift 2
  if ! command -v gpg >/dev/null 2>&1; then
    echo "flightdeck: gpg is needed to check the apt key $url and is not on this node (apt-get install gnupg)" >&2
    return 1
  fi
  fd_tmpdir d || return 1
  if ! curl -fsSL --retry 3 -o "$d/key" "$url"; then
    echo "flightdeck: could not download the apt key $url" >&2
    return 1
  fi
  mkdir -m 0700 "$d/gnupg" || return 1
  have=$(fd_fingerprints "$d/gnupg" "$d/key")
  for fpr in "$@"; do
    if ! grep -qx "$fpr" <<<"$have"; then
      echo "flightdeck: the key file at $url lacks the expected key $fpr (it holds: $(echo ${have:-no key})); refused, $keyring left as it was" >&2
      return 1
    fi
  done
  GNUPGHOME="$d/gnupg" gpg --batch --quiet --import "$d/key" || return 1
  GNUPGHOME="$d/gnupg" gpg --batch --export "$@" > "$d/keyring.gpg" || return 1
  have=$(fd_fingerprints "$d/gnupg" "$d/keyring.gpg")
  if [ "$(sort <<<"$have")" != "$(printf '%s\n' "$@" | sort)" ]; then
    echo "flightdeck: the keyring made from $url holds $(echo ${have:-no key}), expected $*" >&2
    return 1
  fi
  install -d -m 0755 "$(dirname "$keyring")" || return 1
  install -m 0644 "$d/keyring.gpg" "$keyring"
}
# fd_keyring_ok KEYRING FPR...: KEYRING holds exactly these keys.
fd_keyring_ok() {
  local keyring=$1 d have
  shift
  [ -s "$keyring" ] || return 1
  d=$(mktemp -d) || return 1
  have=$(fd_fingerprints "$d" "$keyring")
  rm -rf -- "$d"
  [ "$(sort <<<"$have")" = "$(printf '%s\n' "$@" | sort)" ]
}
# fd_recorded IMAGE: the digest reference recorded for IMAGE at its first pull, if any.
fd_recorded() {
  [ -r "$FD_DIGESTS" ] || return 0
  awk -v i="$1" '$1 == i { d = $2 } END { if (d != "") print d }' "$FD_DIGESTS"
}
# fd_image IMAGE: pull IMAGE (repository:tag) and print the digest reference to run it
# by (repository@sha256:...). The first pull's digest is recorded (trust on first use,
# as ssh's known_hosts); a later pull that brings another digest is refused, the
# image's tag put back on the recorded one.
fd_image() {
  local image=$1 repo now recorded
  repo=${image%:*}
  if ! docker pull --quiet "$image" >/dev/null; then
    echo "flightdeck: could not pull $image" >&2
    return 1
  fi
  now=$(docker image inspect --format '{{index .RepoDigests 0}}' "$image") || return 1
  if ! [[ $now == "$repo@sha256:"* && ${#now} -eq $((${#repo} + 72)) && ${now#*@sha256:} =~ ^[0-9a-f]{64}$ ]]; then
    echo "flightdeck: $image has no digest of its repository (docker says: ${now:-nothing})" >&2
    return 1
  fi
  recorded=$(fd_recorded "$image")
  if [ -z "$recorded" ]; then
    install -d -m 0755 "$(dirname "$FD_DIGESTS")" || return 1
    printf '%s %s\n' "$image" "$now" >> "$FD_DIGESTS" || return 1
    chmod 0644 "$FD_DIGESTS"
    echo "flightdeck: first pull of $image: recorded $now in $FD_DIGESTS" >&2
  elif [ "$recorded" != "$now" ]; then
    if docker image inspect "$recorded" >/dev/null 2>&1; then docker tag "$recorded" "$image" >/dev/null 2>&1 || true
    else docker rmi "$image" >/dev/null 2>&1 || true; fi
    echo "flightdeck: refused $image: its digest changed since this node first pulled it (recorded $recorded, now $now). To accept the new image, delete its line from $FD_DIGESTS and bootstrap again." >&2
    return 1
  fi
  printf '%s\n' "$now"
}
# fd_pinned IMAGE: IMAGE's digest is recorded and that image is on the node.
fd_pinned() {
  local recorded
  recorded=$(fd_recorded "$1")
  [ -n "$recorded" ] && docker image inspect "$recorded" >/dev/null 2>&1
}
# fd_unprivileged CMD...: run CMD as nobody where the node can (runuser, else setpriv),
# else as root.
fd_unprivileged() {
  if id -u nobody >/dev/null 2>&1 && command -v runuser >/dev/null 2>&1; then
    runuser -u nobody -- "$@"
  elif id -u nobody >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1; then
    setpriv --reuid="$(id -u nobody)" --regid="$(id -g nobody)" --clear-groups -- "$@"
  else
    "$@"
  fi
}
"#;

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

/// A TCPX firewall rule: TCP accepted on one data NIC (`iptables -I INPUT -i ethN -p tcp
/// -j ACCEPT`), never on every interface as dstack and SkyPilot open it.
fn tcpx_firewall_rule(nic: &str) -> String {
    format!("INPUT -i {nic} -p tcp -j ACCEPT")
}

/// The private address ranges (RFC 1918) TCP is accepted from on the control NIC, eth0:
/// NCCL's bootstrap (`NCCL_SOCKET_IFNAME=eth0`) and mpirun's daemons connect between the
/// nodes there, from the VPC's internal addresses; nothing from a public address.
pub const TCPX_CONTROL_SOURCES: [&str; 3] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];

fn tcpx_control_rule(source: &str) -> String {
    format!("INPUT -i eth0 -s {source} -p tcp -j ACCEPT")
}

/// The rule an earlier flightdeck (and dstack, SkyPilot) inserted: every TCP port on every
/// interface, the external one too.
const OPEN_ALL_TCP: &str = "INPUT -p tcp -m tcp -j ACCEPT";

fn tcpx() -> Vec<Step> {
    let both = "dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py; \
                skypilot-org/skypilot sky/provision/gcp/constants.py (GPU_DIRECT_TCPX_USER_DATA); \
                GoogleCloudPlatform/slurm-gcp tools/prologs-epilogs/receive-data-path-manager (the image tags)";
    let nics = TCPX_DATA_NICS.join(" ");
    let rule = tcpx_firewall_rule("\"$nic\"");
    let sources = TCPX_CONTROL_SOURCES.join(" ");
    let control = tcpx_control_rule("\"$src\"");
    let firewall_check = format!(
        "for nic in {nics}; do iptables -C {rule} || exit 1; done\n\
         for src in {sources}; do iptables -C {control} || exit 1; done\n\
         ! iptables -C {OPEN_ALL_TCP}"
    );
    let firewall_action = format!(
        "# The rule that opened every TCP port on every interface (an earlier bootstrap's) goes.\n\
         while iptables -C {OPEN_ALL_TCP} 2>/dev/null; do iptables -D {OPEN_ALL_TCP}; done\n\
         for nic in {nics}; do\n\
         \x20 iptables -C {rule} 2>/dev/null || iptables -I {rule}\n\
         done\n\
         # eth0: NCCL's bootstrap and mpirun between the nodes, from private addresses only.\n\
         for src in {sources}; do\n\
         \x20 iptables -C {control} 2>/dev/null || iptables -I {control}\n\
         done"
    );
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
            "the receive-datapath manager (tcpgpudmarxd) container, by digest, running",
            both,
            &container_running(RXDM_CONTAINER),
            &format!(
                "img=$(fd_image {TCPX_RXDM_IMAGE})\n\
                 docker rm -f {RXDM_CONTAINER} >/dev/null 2>&1 || true\n\
                 docker run --detach --name {RXDM_CONTAINER} --privileged \\\n\
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
                 \x20 \"$img\" \\\n\
                 \x20 --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path \"/run/tcpx\" --setup_param \"--verbose 128 2 0\""
            ),
        ),
        step(
            "firewall",
            "iptables accepts TCP on the data NICs eth1..eth4, and on eth0 from private addresses only",
            both,
            &firewall_check,
            &firewall_action,
        ),
        step(
            "nccl-plugin",
            "NCCL and the GPUDirect-TCPX net plugin in /var/lib/tcpx/lib64",
            both,
            "[ -e /var/lib/tcpx/lib64/libnccl-net.so ] && [ -e /var/lib/tcpx/lib64/libnccl.so.2 ]",
            &format!(
                "img=$(fd_image {TCPX_PLUGIN_IMAGE})\n\
                 docker run --rm -v /var/lib:/var/lib \"$img\" install --install-nccl"
            ),
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
            "nccl-tests: the TCPX plugin image, which ships them built with MPI, by digest",
            "skypilot-org/skypilot examples/gcp_gpu_direct_tcpx/nccl_tcpx_gcpvm_h100.yaml; \
             GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-highgpu-8g (plugin image ships /third_party/nccl-tests-mpi/build)",
            &format!("fd_pinned {TCPX_PLUGIN_IMAGE}"),
            &format!("fd_image {TCPX_PLUGIN_IMAGE} >/dev/null"),
        ),
    ]
}

/// Google's apt keys and the Artifact Registry apt transport (from
/// packages.cloud.google.com), then the `ar+https://` repository `repo` in `list`, each
/// repository `signed-by` its keyring: the step's (check, action).
fn google_repos(list: &str, options: &str, repo: &str, extra: &str) -> (String, String) {
    let (g, ar) = (GOOGLE_CLOUD_KEY, ARTIFACT_REGISTRY_KEY);
    let file = format!("/etc/apt/sources.list.d/{list}.list");
    let check = [
        "dpkg -s apt-transport-artifact-registry >/dev/null 2>&1".to_string(),
        format!("grep -qs '{}' {file}", ar.signed_by()),
        format!("! grep -qs 'trusted=yes' {file}"),
        format!(
            "grep -qs '{}' /etc/apt/sources.list.d/artifact-registry.list",
            g.signed_by()
        ),
        g.holds(),
        ar.holds(),
    ]
    .join(" &&\n");
    let action = format!(
        "# What an earlier bootstrap wrote: an unsigned repository, keys trusted for every repository.\n\
         rm -f {file} /etc/apt/trusted.gpg.d/artifact-registry.gpg /etc/apt/trusted.gpg.d/cloud-google.gpg\n\
         {g_import}\n\
         {ar_import}\n\
         mkdir -p /etc/apt/sources.list.d\n\
         echo 'deb [{g_signed}] http://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main' > /etc/apt/sources.list.d/artifact-registry.list\n\
         apt-get update\n\
         apt-get install -y apt-transport-artifact-registry{extra}\n\
         echo 'deb [{options}{ar_signed}] ar+https://us-apt.pkg.dev/projects/gce-ai-infra {repo} main' > {file}\n\
         apt-get update",
        g_import = g.import(),
        ar_import = ar.import(),
        g_signed = g.signed_by(),
        ar_signed = ar.signed_by(),
    );
    (check, action)
}

/// The lines the bootstrap appends to Google's TCPXO `nccl-env-profile.sh`.
pub fn tcpxo_profile_lines() -> String {
    [
        "# Added by flightdeck's bootstrap: the aperture devices' folder, and the plugin first",
        "# for the loader. Google's LD_LIBRARY_PATH line above leaves an empty entry (the",
        "# current directory) when LD_LIBRARY_PATH was unset: it goes.",
        &shellenv::export(
            "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY",
            Value::Literal("/dev/aperture_devices"),
        ),
        "if [ -n \"${LD_LIBRARY_PATH:-}\" ]; then LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}; fi",
        &shellenv::export("LD_LIBRARY_PATH", Value::Prepend("/var/lib/tcpxo/lib64")),
    ]
    .join("\n")
}

fn tcpxo() -> Vec<Step> {
    let (repo_check, repo_action) =
        google_repos("gpudirect-tcpxo", "arch=all ", "gpudirect-tcpxo-apt", " dkms");
    let ctk = CONTAINER_TOOLKIT_KEY;
    vec![
        step(
            "docker",
            "Docker Engine from Docker's apt repository, signed-by its checked key",
            "docs.docker.com/engine/install/ubuntu (apt repository); \
             GoogleCloudPlatform/cluster-toolkit modules/scripts/startup-script/files/install_docker.yml",
            "command -v docker >/dev/null && docker info >/dev/null 2>&1",
            &format!(
                r#"{import}
. /etc/os-release
codename=${{UBUNTU_CODENAME:-${{VERSION_CODENAME:-}}}}
if [ -z "$codename" ]; then echo "flightdeck: /etc/os-release names no release codename" >&2; exit 1; fi
mkdir -p /etc/apt/sources.list.d
echo "deb [arch=amd64 {signed}] https://download.docker.com/linux/ubuntu $codename stable" > /etc/apt/sources.list.d/docker.list
apt-get update
apt-get install -y docker-ce docker-ce-cli containerd.io
systemctl enable --now docker"#,
                import = DOCKER_KEY.import(),
                signed = DOCKER_KEY.signed_by(),
            ),
        ),
        step(
            "container-toolkit",
            "NVIDIA container toolkit (docker run --gpus), 1.17.7-1 pinned out",
            CTK_A3MEGA,
            &format!(
                "command -v nvidia-ctk >/dev/null &&\n\
                 grep -qs '{}' /etc/apt/sources.list.d/nvidia-container-toolkit.list",
                ctk.signed_by()
            ),
            &format!(
                r#"mkdir -p /etc/apt/preferences.d /etc/apt/sources.list.d
cat > /etc/apt/preferences.d/block-broken-nvidia-container <<'EOF'
Package: nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1
Pin: version 1.17.7-1
Pin-Priority: 100
EOF
{import}
# NVIDIA's stable/deb/nvidia-container-toolkit.list, with signed-by ($(ARCH) is apt's).
echo 'deb [{signed}] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /' > /etc/apt/sources.list.d/nvidia-container-toolkit.list
apt-get update
apt-get install -y nvidia-container-toolkit
systemctl restart docker"#,
                import = ctk.import(),
                signed = ctk.signed_by(),
            ),
        ),
        step(
            "apt-repos",
            "Google's apt keys, the Artifact Registry apt transport and the gpudirect-tcpxo repository, signed-by",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml (install_dmabuf.yml); \
             GoogleCloudPlatform/slurm-gcp ansible/roles/gcsfuse/tasks/os/debian.yml (Google's apt key)",
            &repo_check,
            &repo_action,
        ),
        step(
            "import-helper",
            "the dmabuf import-helper kernel module (DKMS, against the running kernel's headers), built and loaded",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml (install_dmabuf.yml); \
             GoogleCloudPlatform/slurm-gcp ansible/roles/kernel/tasks/os/debian.yml (linux-headers-$(uname -r), linux-headers-gcp); \
             dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py",
            "[ -e /dev/dmabuf_import_helper ]",
            r#"if ! dkms status -m dmabuf-import-helper -v 1.1 2>/dev/null | grep -q installed; then
  apt-get install -y "linux-headers-$(uname -r)"
  case "$(uname -r)" in *-gcp) apt-get install -y linux-headers-gcp ;; esac
  fd_tmpdir d
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
img=$(fd_image {TCPXO_PLUGIN_IMAGE})
rm -rf /var/lib/tcpxo/lib64
docker run --rm --name nccl-installer --network=host -v /var/lib:/var/lib "$img" install --install-nccl
# The profile assumes eth0..eth8; on Ubuntu the job's variables name the NICs (slurm-gcp).
cat >> /var/lib/tcpxo/lib64/nccl-env-profile.sh <<'EOF'
{lines}
EOF"#,
                lines = tcpxo_profile_lines()
            ),
        ),
        step(
            "rxdm",
            "the FasTrak receive-datapath manager container, by digest, running and initialised",
            "GoogleCloudPlatform/slurm-gcp tools/prologs-epilogs/receive-data-path-manager-mega; \
             dstackai/dstack src/dstack/_internal/core/backends/gcp/features/tcpx.py",
            &container_running(RXDM_CONTAINER),
            &format!(
                r#"modprobe import-helper
img=$(fd_image {TCPXO_RXDM_IMAGE})
docker rm -f {RXDM_CONTAINER} >/dev/null 2>&1 || true
docker run --detach --restart=unless-stopped --name {RXDM_CONTAINER} \
  --cap-add=NET_ADMIN --network=host --privileged --gpus all \
  --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \
  --volume /dev/dmabuf_import_helper:/dev/dmabuf_import_helper \
  --env LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu \
  "$img" \
  --num_hops=2
i=0
until docker container logs {RXDM_CONTAINER} 2>&1 | grep -q "Buffer manager initialization complete"; do
  i=$((i + 1))
  if [ "$i" -gt 60 ]; then docker logs --tail 10 {RXDM_CONTAINER}; echo "RxDM did not initialise in 120 s" >&2; exit 1; fi
  sleep 2
done"#
            ),
        ),
        // FasTrak opens sockets per flow, peer and channel: Ubuntu's 1024 open files per
        // SSH session run out at scale (gpudirect review N3). Google's mpi_entry.sh
        // raises it for each rank (`ulimit -n 1048576`), CTK's image for every login.
        limits_step(
            "nofile",
            "1048576 open files for every login (FasTrak's sockets), the HPC image's limits",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml (99-unlimited.conf); \
             google/nccl-plugin-gpudirect-tcpxo tcpxo_scripts/mpi_entry.sh (ulimit -n 1048576)",
            "nofile 1048576",
        ),
        nccl_tests_build(),
    ]
}

/// The limits Cluster Toolkit's A3 Mega, A3 Ultra and A4 images give every login
/// (`/etc/security/limits.d/99-unlimited.conf`, read by pam_limits at each SSH session).
const UNLIMITED_CONF: &str = "* - memlock unlimited
* - nproc unlimited
* - stack unlimited
* - nofile 1048576
* - cpu unlimited
* - rtprio unlimited
";

/// The step that writes [`UNLIMITED_CONF`], checked by its line `* - LINE`.
fn limits_step(name: &'static str, what: &'static str, sources: &'static str, line: &str) -> Step {
    step(
        name,
        what,
        sources,
        &format!(
            "grep -q '^\\* - {line}' /etc/security/limits.d/99-unlimited.conf"
        ),
        &format!(
            "mkdir -p /etc/security/limits.d\ncat > /etc/security/limits.d/99-unlimited.conf <<'EOF'\n{UNLIMITED_CONF}EOF"
        ),
    )
}

/// The text of /etc/profile.d/nccl-gib.sh: gIB's environment for login shells (bash
/// ones: Google's set_nccl_env.sh is bash).
pub fn gib_login_profile() -> String {
    [
        "# gIB's NCCL environment (flightdeck's bootstrap). set_nccl_env.sh is bash: other",
        "# shells skip it.",
        "if [ -n \"${BASH_VERSION:-}\" ] && [ -f /usr/local/gib/scripts/set_nccl_env.sh ]; then",
        "  . /usr/local/gib/scripts/set_nccl_env.sh",
        "fi",
        "if [ -d /usr/local/gib/lib64 ]; then",
        &format!("  {}", gib_ld_line()),
        "fi",
    ]
    .join("\n")
}

fn gib_ld_line() -> String {
    shellenv::export("LD_LIBRARY_PATH", Value::Prepend("/usr/local/gib/lib64"))
}

fn rdma() -> Vec<Step> {
    let sources = "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml; \
                   GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml";
    let (repo_check, repo_action) = google_repos("gpudirect-gib", "", "gpudirect-gib-apt", "");
    vec![
        step(
            "apt-repos",
            "Google's apt keys, the Artifact Registry apt transport and the gpudirect-gib repository, signed-by",
            sources,
            &repo_check,
            &repo_action,
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
        limits_step(
            "memlock",
            "unlimited memlock (RDMA registers GPU memory) and the HPC image's other limits",
            sources,
            "memlock unlimited",
        ),
        step(
            "nccl-env",
            "gIB's NCCL environment for login shells",
            "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml",
            &format!(
                "grep -qxF {} /etc/profile.d/nccl-gib.sh",
                shellenv::quote(&format!("  {}", gib_ld_line()))
            ),
            &format!(
                "mkdir -p /etc/profile.d\ncat > /etc/profile.d/nccl-gib.sh <<'EOF'\n{}\nEOF\nchmod 0644 /etc/profile.d/nccl-gib.sh",
                gib_login_profile()
            ),
        ),
        nccl_tests_build(),
    ]
}

/// nccl-tests at [`NCCL_TESTS_COMMIT`], built on the node with MPI against NCCL from
/// NVIDIA's CUDA repository (CTK's install_nccl.yml installs libnccl2/libnccl-dev from it;
/// its blueprints build nccl-tests with `MPI=1 CC=mpicc CXX=mpicxx make -j`): cloned,
/// checked and built in a private temporary directory as `nobody` where the node has
/// runuser or setpriv, then moved into [`NCCL_TESTS_DIR`], root's, only when built. A
/// clone or build cut short leaves nothing there, and the next run starts afresh.
fn nccl_tests_build() -> Step {
    let cuda = CUDA_KEY;
    step(
        "nccl-tests",
        "nccl-tests v2.19.6 built with MPI in /opt/nccl-tests (CUDA toolkit, NCCL headers and Open MPI from apt)",
        "GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a3-megagpu-8g/nccl-tests/build-nccl-tests.sh; \
         GoogleCloudPlatform/cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml (install_nccl.yml, CUDA repo); \
         NVIDIA/nccl-tests tag v2.19.6 (a0b82b22)",
        &format!(
            "[ -x {NCCL_TESTS_DIR}/build/all_reduce_perf ] && [ -x {NCCL_TESTS_DIR}/build/all_gather_perf ] &&\n\
             grep -qsx {NCCL_TESTS_COMMIT} {NCCL_TESTS_STAMP}"
        ),
        &format!(
            r#"if [ ! -x /usr/local/cuda/bin/nvcc ] || ! [ -e /usr/include/nccl.h ]; then
  . /etc/os-release
  dist="ubuntu$(echo "$VERSION_ID" | tr -d .)"
  repo="developer.download.nvidia.com/compute/cuda/repos/$dist/x86_64"
  if configured=$(grep -rlsF "$repo" /etc/apt/sources.list /etc/apt/sources.list.d | grep -vx /etc/apt/sources.list.d/cuda.list); then
    echo "flightdeck: NVIDIA's CUDA repository is configured already ($(echo $configured)): using it"
  else
    {import}
    echo "deb [{signed}] https://$repo/ /" > /etc/apt/sources.list.d/cuda.list
  fi
  apt-get update
  [ -x /usr/local/cuda/bin/nvcc ] || apt-get install -y cuda-toolkit-12-8
  apt-get install -y libnccl2 libnccl-dev
fi
apt-get install -y git make g++ openmpi-bin libopenmpi-dev
# Cloned, checked and built by nobody in a private directory; moved into place once built.
fd_tmpdir d
chmod 0711 "$d"
src="$d/nccl-tests"
install -d -m 0755 "$src"
if id -u nobody >/dev/null 2>&1; then chown nobody "$src"; fi
fd_unprivileged git clone --quiet {NCCL_TESTS_REPO} "$src"
fd_unprivileged git -C "$src" checkout --quiet --detach {NCCL_TESTS_COMMIT}
head=$(fd_unprivileged git -C "$src" rev-parse HEAD)
if [ "$head" != {NCCL_TESTS_COMMIT} ]; then
  echo "flightdeck: nccl-tests: HEAD is $head after checking out {NCCL_TESTS_COMMIT}: refused" >&2
  exit 1
fi
fd_unprivileged make -C "$src" -j "$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr
echo {NCCL_TESTS_COMMIT} > "$src/.flightdeck-commit"
chown -R root:root "$src"
rm -rf {NCCL_TESTS_DIR}.partial
mv "$src" {NCCL_TESTS_DIR}.partial
rm -rf {NCCL_TESTS_DIR}
mv {NCCL_TESTS_DIR}.partial {NCCL_TESTS_DIR}"#,
            import = cuda.import(),
            signed = cuda.signed_by(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn all_scripts() -> Vec<(GpuDirect, String)> {
        [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma]
            .into_iter()
            .map(|f| (f, crate::bootstrap::script(f)))
            .collect()
    }

    /// Run `script` under bash with PATH = `bin` first, then the system's; stdout, stderr
    /// and the exit code.
    fn bash(script: &str, bin: &Path, envs: &[(&str, &str)]) -> (i32, String, String) {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(script)
            .env("PATH", format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", bin.display()))
            .envs(envs.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn write_exe(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

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
            "for nic in eth1 eth2 eth3 eth4; do",
            "iptables -C INPUT -i \"$nic\" -p tcp -j ACCEPT 2>/dev/null || iptables -I INPUT -i \"$nic\" -p tcp -j ACCEPT",
            "img=$(fd_image us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12)",
            "docker run --rm -v /var/lib:/var/lib \"$img\" install --install-nccl",
            "mount -o remount,exec /var/lib/tcpx",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
        // The rule that opened every port on every NIC is only ever checked and deleted.
        for l in s.lines().filter(|l| l.contains("-p tcp -m tcp")) {
            assert!(!l.contains("iptables -I"), "{l}");
        }
    }

    #[test]
    fn tcpxo_and_rdma_carry_the_reference_pieces() {
        let s = crate::bootstrap::script(GpuDirect::Tcpxo);
        for piece in [
            "gpudirect-tcpxo-apt main",
            "dmabuf-import-helper",
            "apt-get install -y \"linux-headers-$(uname -r)\"",
            "/dev/aperture_devices",
            "\"$img\" \\\n  --num_hops=2\ni=0",
            "install --install-nccl",
            "Buffer manager initialization complete",
            "fd_keyring /etc/apt/keyrings/google-cloud.gpg \"https://packages.cloud.google.com/apt/doc/apt-key.gpg\" A362B822F6DEDC652817EA46B53DC80D13EDEF05 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3",
            "deb [arch=all signed-by=/etc/apt/keyrings/artifact-registry.gpg] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-tcpxo-apt main",
            "export LD_LIBRARY_PATH='/var/lib/tcpxo/lib64'\"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
        let headers = s.find("linux-headers-$(uname -r)").unwrap();
        assert!(
            headers < s.find("dkms build").unwrap(),
            "headers before the DKMS build"
        );
        let s = crate::bootstrap::script(GpuDirect::Rdma);
        for piece in [
            "apt-transport-artifact-registry",
            "deb [signed-by=/etc/apt/keyrings/artifact-registry.gpg] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main",
            "apt-get install -y nccl-gib ibverbs-utils",
            "/etc/ld.so.conf.d/000_nccl-gib.conf",
            "* - memlock unlimited",
            "set_nccl_env.sh",
            "  export LD_LIBRARY_PATH='/usr/local/gib/lib64'\"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\"",
        ] {
            assert!(s.contains(piece), "{piece}");
        }
    }

    /// Hostile review D10, D11, D14: nothing fetched to a fixed name, piped to a shell,
    /// unsigned, unpinned or at a moving head.
    #[test]
    fn nothing_is_fetched_unpinned_unsigned_or_to_a_fixed_name() {
        for (f, s) in all_scripts() {
            for bad in [
                "/tmp/",
                "| sh",
                "|sh",
                "get.docker.com",
                ":latest",
                "--pull",
                "--depth 1",
                "gpg --dearmor",
            ] {
                assert!(!s.contains(bad), "{f:?}: {bad}");
            }
            // curl is called in one place: fd_keyring, into its private directory.
            assert_eq!(s.matches("curl ").count(), 1, "{f:?}");
            assert!(s.contains("curl -fsSL --retry 3 -o \"$d/key\" \"$url\""));
            for l in s.lines() {
                if l.contains("mktemp") {
                    assert!(l.contains("mktemp -d"), "{f:?}: {l}");
                }
                // Every repository line: signed-by a keyring of APT_KEYS, never trusted.
                if let Some(at) = l.find("deb ") {
                    let line = &l[at..];
                    if line.contains("http") {
                        assert!(
                            APT_KEYS
                                .iter()
                                .any(|k| line.contains(&format!("[{}", k.signed_by()))
                                    || line.contains(&format!(" {}]", k.signed_by()))),
                            "{f:?}: {l}"
                        );
                        assert!(!line.contains("trusted=yes"), "{f:?}: {l}");
                    }
                }
                if l.contains("trusted.gpg.d") {
                    assert!(
                        l.trim_start().starts_with("rm -f ") || l.trim_start().starts_with('#'),
                        "{f:?}: {l}"
                    );
                }
            }
            // Images run by the digest fd_image gives, never by a name.
            let lines: Vec<&str> = s.lines().collect();
            for (i, l) in lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains("docker run") && !l.starts_with('#'))
            {
                let mut cmd = l.to_string();
                let mut j = i;
                while lines[j].ends_with('\\') {
                    j += 1;
                    cmd.push_str(lines[j]);
                }
                assert!(
                    cmd.contains("\"$img\"") && !cmd.contains("pkg.dev"),
                    "{f:?}: {cmd}"
                );
            }
            for img in IMAGES {
                let (repo, tag) = img.image.rsplit_once(':').unwrap();
                assert!(tag.starts_with('v') && !repo.contains(':'), "{img:?}");
            }
            for l in s.lines().filter(|l| l.contains("us-docker.pkg.dev/")) {
                assert!(
                    IMAGES.iter().any(|i| l.contains(&format!("fd_image {}", i.image))
                        || l.contains(&format!("fd_pinned {}", i.image))),
                    "{f:?}: an image not pulled through fd_image: {l}"
                );
            }
            if f != GpuDirect::Tcpx {
                for piece in [
                    format!("checkout --quiet --detach {NCCL_TESTS_COMMIT}"),
                    format!("if [ \"$head\" != {NCCL_TESTS_COMMIT} ]; then"),
                    "fd_unprivileged make -C \"$src\"".to_string(),
                    "mv /opt/nccl-tests.partial /opt/nccl-tests".to_string(),
                ] {
                    assert!(s.contains(&piece), "{f:?}: {piece}");
                }
            }
        }
    }

    /// The key table: 40 hex digits each, and every key is used.
    #[test]
    fn every_apt_key_has_full_fingerprints_and_is_used() {
        let all: String = all_scripts().into_iter().map(|(_, s)| s).collect();
        for k in APT_KEYS {
            assert!(!k.fingerprints.is_empty() && !k.source.is_empty());
            for f in k.fingerprints {
                assert!(
                    f.len() == 40
                        && f.chars()
                            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()),
                    "{f}"
                );
            }
            assert!(all.contains(&k.import()), "{} unused", k.keyring);
        }
    }

    /// Generate `n` signing keys with the real gpg in `home`; their fingerprints.
    fn real_keys(home: &Path, names: &[&str]) -> Vec<String> {
        let mut fprs = vec![];
        for n in names {
            let ok = std::process::Command::new("gpg")
                .args(["--batch", "--quiet", "--passphrase", "", "--quick-gen-key"])
                .arg(format!("{n} <{n}@example.invalid>"))
                .args(["ed25519", "sign", "never"])
                .env("GNUPGHOME", home)
                .output()
                .unwrap();
            assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
        }
        let out = std::process::Command::new("gpg")
            .args(["--batch", "--with-colons", "--list-keys"])
            .env("GNUPGHOME", home)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut after_pub = false;
        for l in text.lines() {
            let f: Vec<&str> = l.split(':').collect();
            if f[0] == "fpr" && after_pub {
                fprs.push(f[9].to_string());
            }
            after_pub = f[0] == "pub";
        }
        fprs
    }

    /// fd_keyring with the real gpg: a key file holding two keys makes a keyring of the
    /// one asked for; a file without the expected key is refused, naming the URL and the
    /// fingerprint, and leaves nothing; the temporary directories are gone after.
    #[test]
    fn fd_keyring_keeps_only_the_expected_keys_and_refuses_a_wrong_file() {
        if std::process::Command::new("gpg")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("SKIPPED: no gpg");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (home, bin, tmp, out) = (d.join("gnupg"), d.join("bin"), d.join("tmp"), d.join("keyrings"));
        for p in [&home, &bin, &tmp] {
            std::fs::create_dir_all(p).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let fprs = real_keys(&home, &["wanted", "other"]);
        assert_eq!(fprs.len(), 2);
        let served = d.join("served.asc");
        let export = std::process::Command::new("gpg")
            .args(["--batch", "--armor", "--export"])
            .env("GNUPGHOME", &home)
            .output()
            .unwrap();
        std::fs::write(&served, &export.stdout).unwrap();
        let _ = std::process::Command::new("gpgconf")
            .args(["--kill", "all"])
            .env("GNUPGHOME", &home)
            .output();
        // A curl double that serves the exported keys for any URL (-o FILE URL).
        write_exe(
            &bin.join("curl"),
            &format!(
                "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && o=$2; shift; done\ncp '{}' \"$o\"\n",
                served.display()
            ),
        );
        let keyring = out.join("wanted.gpg");
        let script = format!(
            "set -u\n{HELPERS}\nfd_keyring {} https://keys.example.invalid/key {}\n",
            keyring.display(),
            fprs[0]
        );
        let tmpdir = tmp.to_str().unwrap();
        let (code, _, err) = bash(&script, &bin, &[("TMPDIR", tmpdir)]);
        assert_eq!(code, 0, "{err}");
        let mode = std::fs::metadata(&keyring).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        // The keyring holds the wanted key only, as gpg itself reads it.
        let check = format!(
            "set -u\n{HELPERS}\nfd_keyring_ok {k} {a} && echo only-wanted\nfd_keyring_ok {k} {a} {b} || echo not-both\n",
            k = keyring.display(),
            a = fprs[0],
            b = fprs[1]
        );
        let (code, stdout, err) = bash(&check, &bin, &[("TMPDIR", tmpdir)]);
        assert_eq!((code, stdout.as_str()), (0, "only-wanted\nnot-both\n"), "{err}");

        let wrong = "0123456789ABCDEF0123456789ABCDEF01234567";
        let bad = out.join("bad.gpg");
        let script = format!(
            "set -u\n{HELPERS}\nfd_keyring {} https://keys.example.invalid/key {wrong}\n",
            bad.display()
        );
        let (code, _, err) = bash(&script, &bin, &[("TMPDIR", tmpdir)]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(&format!(
                "the key file at https://keys.example.invalid/key lacks the expected key {wrong}"
            )),
            "{err}"
        );
        assert!(!bad.exists());
        assert_eq!(
            std::fs::read_dir(&tmp).unwrap().count(),
            0,
            "temporary directories left"
        );
    }

    /// fd_image with a docker double: the first pull's digest is recorded and printed;
    /// the same digest again is fine; another is refused, naming image, both digests and
    /// how to accept it, and the tag goes back to the recorded image.
    #[test]
    fn fd_image_records_the_first_digest_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let bin = d.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let hex = |c: char| c.to_string().repeat(64);
        std::fs::write(d.join("serving"), hex('a')).unwrap();
        write_exe(
            &bin.join("docker"),
            &format!(
                "#!/bin/sh\necho \"docker $*\" >> '{d}/log'\ncase \"$1\" in\n\
                 pull) exit 0 ;;\n\
                 image) if [ \"$2\" = inspect ] && [ \"$3\" = --format ]; then echo \"${{5%:*}}@sha256:$(cat '{d}/serving')\"; fi ;;\n\
                 esac\n",
                d = d.display()
            ),
        );
        let digests = d.join("fd/images.digests");
        let img = "registry.example/x/y-dev:v1.2";
        let script = format!(
            "set -u\n{HELPERS}\nFD_DIGESTS={}\nfd_image {img}\n",
            digests.display()
        );
        let (code, out, err) = bash(&script, &bin, &[]);
        assert_eq!(
            (code, out.trim()),
            (
                0,
                format!("registry.example/x/y-dev@sha256:{}", hex('a')).as_str()
            ),
            "{err}"
        );
        assert!(
            err.contains("first pull of registry.example/x/y-dev:v1.2: recorded"),
            "{err}"
        );
        let line = format!("{img} registry.example/x/y-dev@sha256:{}\n", hex('a'));
        assert_eq!(std::fs::read_to_string(&digests).unwrap(), line);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&digests).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let (code, out, _) = bash(&script, &bin, &[]);
        assert_eq!((code, out.trim().ends_with(&hex('a'))), (0, true));
        // The tag moved.
        std::fs::write(d.join("serving"), hex('b')).unwrap();
        let (code, out, err) = bash(&script, &bin, &[]);
        assert_eq!((code, out.as_str()), (1, ""), "{err}");
        assert!(
            err.contains(&format!(
                "refused {img}: its digest changed since this node first pulled it (recorded registry.example/x/y-dev@sha256:{a}, now registry.example/x/y-dev@sha256:{b}). To accept the new image, delete its line from {f} and bootstrap again.",
                a = hex('a'),
                b = hex('b'),
                f = digests.display()
            )),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&digests).unwrap(),
            line,
            "the record stays"
        );
        // Not a digest of the image's repository: refused too.
        std::fs::write(d.join("serving"), "zz").unwrap();
        let (code, _, err) = bash(&script, &bin, &[]);
        assert_eq!(code, 1);
        assert!(err.contains("has no digest of its repository"), "{err}");
    }

    #[test]
    fn the_pinned_word_is_the_recorded_digest_or_the_tag() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("images.digests");
        let img = "us-docker.pkg.dev/a/b:v1";
        let word = pinned_image_word_in(img, f.to_str().unwrap());
        let run = || {
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("set -u; printf '%s' {word}"))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(run(), img);
        std::fs::write(
            &f,
            format!("other:v1 x@sha256:1\n{img} us-docker.pkg.dev/a/b@sha256:2\n"),
        )
        .unwrap();
        assert_eq!(run(), "us-docker.pkg.dev/a/b@sha256:2");
        assert!(pinned_image_word(img).contains(DIGESTS));
    }
}
