//! Work on Container-Optimized OS nodes (GPUDirect-TCPX on A3 High / Edge): COS has no
//! nccl-tests, MPI or Python on the host, so NCCL runs and jobs run in a container with
//! the mounts, devices and environment the references give TCPX containers: SkyPilot's
//! `GPU_DIRECT_TCPX_SPECIFIC_OPTIONS` (sky/provision/gcp/constants.py) and dstack's
//! instance mounts for a3-highgpu-8g (src/dstack/_internal/server/services/backends/
//! provisioning.py). The node scripts decide on the node (`/etc/os-release` says
//! `ID=cos`), so an SSH fleet of existing COS VMs is handled too.
//!
//! Pure: shell text.

use std::fmt::Write as _;

/// The entrypoint a container runs its command through (see [`container_lines`]).
pub const ENTRYPOINT: &str = "--entrypoint=/usr/bin/env";

/// The shell test for a COS node.
pub const IS_COS: &str = "grep -qs '^ID=cos$' /etc/os-release";

/// Where the TCPX plugin image keeps nccl-tests built with MPI (SkyPilot's TCPX example).
pub const IMAGE_NCCL_TESTS: &str = super::steps::TCPX_NCCL_TESTS;

/// The docker options of a TCPX container, as SkyPilot gives them (its NCCL variables
/// come from the profile, passed by name).
fn options() -> String {
    let mut o = String::from(
        "--network=host --cap-add=IPC_LOCK --userns=host \
         --volume /run/tcpx:/run/tcpx \
         --volume /var/lib/nvidia/lib64:/usr/local/nvidia/lib64 \
         --volume /var/lib/tcpx/lib64:/usr/local/tcpx/lib64 \
         --volume /var/lib/nvidia/bin:/usr/local/nvidia/bin \
         --shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864",
    );
    for d in 0..8 {
        let _ = write!(o, " --device /dev/nvidia{d}:/dev/nvidia{d}");
    }
    o.push_str(" --device /dev/nvidia-uvm:/dev/nvidia-uvm --device /dev/nvidiactl:/dev/nvidiactl");
    o
}

/// Shell lines that, on a COS node, set `FD_IN` to the `docker run` that wraps the
/// command the script then `exec`s (`exec $FD_IN cmd ...`), with the login's home and
/// the current directory mounted at the same paths (paths without spaces), and each of `env` passed from the
/// script's environment; and `FD_AGENT`, the same container for mpirun's daemons on the
/// other nodes (their variables travel through mpirun's `-x`). Elsewhere both are empty.
/// `image_word` is a shell word (quoted, or a `"$VAR"`).
///
/// Both override the image's ENTRYPOINT with [`ENTRYPOINT`]: the TCPX plugin image's own
/// (`/scripts/container_entry.sh`, google/nccl-plugin-gpudirecttcpx's Dockerfile) takes
/// its first argument as a subcommand and prints a usage text, exiting 0, for any other,
/// so a command given after the image would never run. Every reference that runs a
/// command in that image overrides it (SkyPilot's `--entrypoint=/bin/bash`, GKE's
/// `command:`); `env` runs the words after the image as they are, and survives the
/// unquoted `$FD_IN`'s word splitting (an empty `--entrypoint ""` would not).
pub fn container_lines(env: &[String], image_word: &str) -> String {
    let mut envs = String::new();
    for k in env {
        let _ = write!(envs, " --env {k}");
    }
    let o = options();
    format!(
        "FD_IN=; FD_AGENT=\n\
         if {IS_COS}; then\n\
         \x20 # COS: nothing but docker on the host; run in a container (SkyPilot's TCPX options).\n\
         \x20 PATH=\"$PATH:/var/lib/nvidia/bin\"\n\
         \x20 FD_IMAGE={image_word}\n\
         \x20 FD_PWD=; [ \"$PWD\" = \"$HOME\" ] || FD_PWD=\"--volume $PWD:$PWD\"\n\
         \x20 FD_IN=\"docker run --rm --name fd-$(basename \"$PWD\")-$$ {o} --volume $HOME:$HOME $FD_PWD --env HOME --workdir $PWD{envs} {ENTRYPOINT} $FD_IMAGE\"\n\
         \x20 FD_AGENT=\"docker run --rm {o} --volume $HOME:$HOME --env HOME {ENTRYPOINT} $FD_IMAGE orted\"\n\
         fi\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_carries_skypilots_options_and_is_set_only_on_cos() {
        let lines = container_lines(&["NCCL_NET".into(), "LD_LIBRARY_PATH".into()], "'img:1'");
        for piece in [
            "--volume /var/lib/tcpx/lib64:/usr/local/tcpx/lib64",
            "--volume /run/tcpx:/run/tcpx",
            "--device /dev/nvidia7:/dev/nvidia7",
            "--ulimit memlock=-1",
            "--env NCCL_NET --env LD_LIBRARY_PATH --entrypoint=/usr/bin/env $FD_IMAGE",
            "--entrypoint=/usr/bin/env $FD_IMAGE orted",
        ] {
            assert!(lines.contains(piece), "{piece}: {lines}");
        }
        // Not COS here: both stay empty.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{lines}echo \"[$FD_IN][$FD_AGENT]\""))
            .output()
            .unwrap();
        let here_is_cos =
            std::fs::read_to_string("/etc/os-release").is_ok_and(|t| t.lines().any(|l| l == "ID=cos"));
        if !here_is_cos {
            assert_eq!(String::from_utf8_lossy(&out.stdout), "[][]\n");
        }
    }
}
