//! The pre-flight before an NCCL run or a job on a fleet with a GPUDirect profile: on
//! every node, every interface the profile's environment names exists and is up (data
//! NICs with an MTU GPUDirect VPCs are made with, the same on every node), the plugin
//! files the profile loads exist (`NCCL_NET=gIB` is never set without gIB), the run's
//! own environment loads under bash with `set -u` in a session like the run's, and the
//! dynamic loader then finds the net plugin (and the tuner the profile names) with every
//! library they need; the receive-datapath manager runs and has initialised where the
//! flavour needs one, the dmabuf import helper is loaded (TCPXO), the RDMA ports are
//! ACTIVE and the session may lock memory without limit (RDMA). A failed check names
//! node, check, what was found and the fix.
//!
//! Pure: [`script`] makes the check script from the environment lines a run will set,
//! [`parse`] reads its output; `remote` runs it ([`check_nodes`]).

use crate::cloud::gcp::layout::DATA_MTU;

/// The largest data NIC MTU accepted: Cluster Toolkit's GPU VPCs (modules/network/
/// multivpc, default 8896); dstack, SkyPilot and `fleet apply` make them at [`DATA_MTU`].
pub const DATA_MTU_MAX: u32 = 8896;
use crate::exec::{self};
use crate::fleet::NodeTarget;
use crate::nccl::GpuDirect;
use crate::reach::Reach;
use std::fmt::Write as _;

const MARK: &str = "@@fd-preflight";

/// One check's result on one node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// `interface enp6s0`, `file /var/lib/tcpxo/lib64/libnccl-net.so`, `rxdm`.
    pub name: String,
    pub ok: bool,
    /// What was found (`down`, `mtu 1460, expected 8244`, `missing`).
    pub detail: String,
}

use crate::shellenv::exported_value as env_value;

/// Interface names of a NCCL variable's value: `eth1,eth2`, `=eth0` (exact match) and
/// `^docker` (exclusions) as NCCL reads them; exclusions name nothing to check.
fn ifnames(value: &str) -> Vec<String> {
    if value.starts_with('^') {
        return vec![];
    }
    value
        .trim_start_matches('=')
        .split(',')
        .map(|s| s.split(':').next().unwrap_or("").trim().to_string())
        .filter(|s| !s.is_empty() && !s.contains('$'))
        .collect()
}

/// What the pre-flight checks for `flavour` given the run's environment lines:
/// (interfaces with the least MTU wanted, if any), plugin files, whether an RxDM must run
/// (and say it has initialised), whether RDMA devices must be there.
pub struct Wants {
    pub interfaces: Vec<(String, Option<u32>)>,
    pub files: Vec<String>,
    pub rxdm: Option<&'static str>,
    pub aperture: bool,
    pub rdma_devices: bool,
    /// The run's environment lines, run under bash as the run runs them, then the loader
    /// asked for the plugins they name; `None`: not checked.
    pub run_env: Option<Vec<String>>,
    /// The RxDM's log must say "Buffer manager initialization complete" (TCPXO).
    pub rxdm_ready: bool,
    /// /dev/dmabuf_import_helper (TCPXO).
    pub import_helper: bool,
    /// `ulimit -l` unlimited in this session unless root (RDMA registers memory).
    pub memlock: bool,
}

/// The line the TCPXO RxDM prints once it serves (slurm-gcp's prolog waits for it).
pub const RXDM_READY: &str = "Buffer manager initialization complete";

/// What a run with these environment lines needs on a node.
pub fn wants(flavour: GpuDirect, env: &[String]) -> Wants {
    let mut interfaces: Vec<(String, Option<u32>)> = vec![];
    let mut add = |names: Vec<String>, mtu: Option<u32>| {
        for n in names {
            match interfaces.iter_mut().find(|(have, _)| *have == n) {
                Some(i) => i.1 = i.1.or(mtu),
                None => interfaces.push((n, mtu)),
            }
        }
    };
    let data_key = match flavour {
        GpuDirect::Tcpx => Some("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"),
        GpuDirect::Tcpxo => Some("NCCL_FASTRAK_IFNAME"),
        _ => None,
    };
    if let Some(k) = data_key {
        add(
            env_value(env, k).map(|v| ifnames(&v)).unwrap_or_default(),
            Some(DATA_MTU),
        );
    }
    for k in [
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "NCCL_GPUDIRECTTCPX_CTRL_DEV",
        "NCCL_FASTRAK_CTRL_DEV",
    ] {
        add(env_value(env, k).map(|v| ifnames(&v)).unwrap_or_default(), None);
    }
    let net = env_value(env, "NCCL_NET");
    let mut files = vec![];
    match flavour {
        GpuDirect::Tcpx => files.push("/var/lib/tcpx/lib64/libnccl-net.so".to_string()),
        GpuDirect::Tcpxo => {
            files.push("/var/lib/tcpxo/lib64/libnccl-net.so".to_string());
            files.push("/var/lib/tcpxo/lib64/nccl-env-profile.sh".to_string());
        }
        GpuDirect::Rdma => {
            files.push("/usr/local/gib/scripts/set_nccl_env.sh".to_string());
        }
        GpuDirect::None => {}
    }
    if net.as_deref() == Some("gIB") || flavour == GpuDirect::Rdma {
        files.push("/usr/local/gib/lib64/libnccl-net.so".to_string());
    }
    files.dedup();
    Wants {
        interfaces,
        files,
        rxdm: matches!(flavour, GpuDirect::Tcpx | GpuDirect::Tcpxo).then_some(super::steps::RXDM_CONTAINER),
        aperture: flavour == GpuDirect::Tcpxo,
        rdma_devices: flavour == GpuDirect::Rdma,
        run_env: (flavour != GpuDirect::None).then(|| env.to_vec()),
        rxdm_ready: flavour == GpuDirect::Tcpxo,
        import_helper: flavour == GpuDirect::Tcpxo,
        memlock: flavour == GpuDirect::Rdma,
    }
}

/// The check script (POSIX sh, as the login user; reads /sys and the process list).
pub fn script(w: &Wants) -> String {
    let mut s = String::from("#!/bin/sh\n# flightdeck pre-flight: GPUDirect pieces of this node\n");
    let _ = writeln!(s, "m() {{ echo \"{MARK} $*\"; }}");
    for (name, mtu) in &w.interfaces {
        let q = crate::detach::quote(name);
        let _ = writeln!(
            s,
            "d=/sys/class/net/{q}; if [ ! -e \"$d\" ]; then m fail interface {q} missing; \
             else st=$(cat \"$d/operstate\" 2>/dev/null); mtu=$(cat \"$d/mtu\" 2>/dev/null); \
             if [ \"$st\" != up ] && [ \"$st\" != unknown ]; then m fail interface {q} \"$st\"; {mtu_check} \
             else m ok interface {q} \"mtu $mtu\"; fi; fi",
            mtu_check = match mtu {
                Some(least) => format!(
                    "elif ! [ \"$mtu\" -ge {least} ] 2>/dev/null || [ \"$mtu\" -gt {most} ]; then m fail interface {q} \"mtu $mtu, expected {least} to {most}\";",
                    most = DATA_MTU_MAX.max(*least)
                ),
                None => String::new(),
            }
        );
    }
    for f in &w.files {
        let q = crate::detach::quote(f);
        let _ = writeln!(
            s,
            "if [ -e {q} ]; then m ok file {q} present; else m fail file {q} missing; fi"
        );
    }
    if let Some(c) = w.rxdm {
        let inspect = format!("docker inspect -f '{{{{.State.Running}}}}' {c} 2>/dev/null");
        let _ = writeln!(
            s,
            "r=$({inspect} || sudo -n {inspect}); if [ \"$r\" = true ]; then m ok rxdm - container {c} runs; \
             else m fail rxdm - container {c} is not running; fi"
        );
    }
    if w.aperture {
        s.push_str(
            "if [ -n \"$(ls -A /dev/aperture_devices 2>/dev/null)\" ]; then m ok aperture - /dev/aperture_devices; \
             else m fail aperture - /dev/aperture_devices missing or empty; fi\n",
        );
    }
    if w.rdma_devices {
        s.push_str(
            "n=$(ls /sys/class/infiniband 2>/dev/null | wc -l); if [ \"$n\" -ge 1 ]; then m ok rdma - \"$n RDMA devices\"; \
             else m fail rdma - no RDMA devices in /sys/class/infiniband; fi\n",
        );
        // Every port of every device ACTIVE (the doctor's rdma check reads the same files).
        s.push_str(
            "if [ \"$n\" -ge 1 ]; then bad=; for f in /sys/class/infiniband/*/ports/*/state; do [ -e \"$f\" ] || continue; \
             st=$(cat \"$f\" 2>/dev/null); case \"$st\" in *ACTIVE*) ;; *) d=${f#/sys/class/infiniband/}; bad=\"$bad ${d%%/*} port $(basename \"$(dirname \"$f\")\") ${st:-unreadable};\" ;; esac; done; \
             if [ -z \"$bad\" ]; then m ok rdma-ports - all ACTIVE; else m fail rdma-ports - \"not ACTIVE:$bad\"; fi; fi\n",
        );
    }
    if w.import_helper {
        s.push_str(
            "if [ -e /dev/dmabuf_import_helper ]; then m ok import-helper - /dev/dmabuf_import_helper; \
             else m fail import-helper - \"/dev/dmabuf_import_helper missing (the import-helper module is not loaded)\"; fi\n",
        );
    }
    if let (Some(c), true) = (w.rxdm, w.rxdm_ready) {
        // Only what the container logged since its current start: with
        // `--restart=unless-stopped` the log keeps an earlier start's ready line, so a
        // crashed RxDM that restarts and has not initialised would pass (gpudirect
        // review N8).
        let since = format!("docker inspect -f '{{{{.State.StartedAt}}}}' {c} 2>/dev/null");
        let logs = format!("docker logs --since \"$rs\" {c} 2>&1");
        let _ = writeln!(
            s,
            "rs=$({since} || sudo -n {since}); [ -n \"$rs\" ] || rs=0\n\
             if {{ {logs} || sudo -n {logs}; }} | grep -q '{RXDM_READY}'; then m ok rxdm-ready - \"its log since its start at $rs says {RXDM_READY}\"; \
             else m fail rxdm-ready - \"container {c}'s log since its start at $rs does not say {RXDM_READY} (restarting, or not initialised)\"; fi"
        );
    }
    if w.memlock {
        s.push_str(
            "l=$(ulimit -l 2>/dev/null); if [ \"$(id -u)\" = 0 ]; then m ok memlock - \"root (CAP_IPC_LOCK): no limit applies\"; \
             elif [ \"$l\" = unlimited ]; then m ok memlock - unlimited; \
             else m fail memlock - \"ulimit -l is $l KiB in this session, RDMA needs unlimited\"; fi\n",
        );
    }
    if let Some(env) = &w.run_env {
        s.push_str(&run_env_check(env));
    }
    s
}

/// The check of the run's own environment: its lines under bash with `set -u`, as the
/// run's script has them (in a session of the same connection, as the run), then the
/// dynamic loader's search for the net plugin (`NCCL_NET_PLUGIN`, else `libnccl-net.so`)
/// and the tuner the environment names (`NCCL_TUNER_PLUGIN`), as NCCL's
/// src/plugin/net.cc and tuner.cc open them (`libnccl-net-NAME.so`, then NAME), and `ldd`
/// of what it finds. On Container-Optimized OS the loader's part runs where the plugin
/// is loaded: in the run's own container (the TCPX plugin image, its mounts and the
/// run's library path; bootstrap::cos), whose Ubuntu userland provides the C++ runtime
/// the plugin needs, not COS's (gpudirect review N4: the host's `ldd` judged it by the
/// host's libraries). POSIX sh outside, bash inside (the doctor runs this part of its
/// script under sh).
fn run_env_check(env: &[String]) -> String {
    let mut inner = String::from("m() { echo \"@@fd-preflight $*\"; }\n");
    inner.push_str(crate::shellenv::HEADER);
    for l in env {
        inner.push_str(l);
        inner.push('\n');
    }
    inner.push_str("m ok env - \"the run's environment loads under bash with set -u\"\n");
    let names: Vec<String> = ["LD_LIBRARY_PATH", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    let image = super::steps::pinned_image_word(super::steps::TCPX_PLUGIN_IMAGE);
    inner.push_str(&super::cos::container_lines(&names, &image));
    let loader = format!("m() {{ echo \"@@fd-preflight $*\"; }}\nLIBS=${{LD_LIBRARY_PATH:-}}\n{LOADER}");
    inner.push_str(&format!(
        "if [ -n \"$FD_IN\" ]; then\n\
         FD_IN=${{FD_IN/docker run /docker run -i }}\n\
         $FD_IN bash -s {doc}\
         rc=$?; [ \"$rc\" = 0 ] || m fail loader - \"the run's container did not run the loader check (exit $rc)\"\n\
         else\n{loader}fi\n",
        doc = crate::detach::heredoc("LOADER", &loader),
    ));
    format!(
        "if command -v bash >/dev/null 2>&1; then\n\
         fd_err=$(mktemp 2>/dev/null) || fd_err=/dev/null\n\
         bash -s 2>\"$fd_err\" {doc}\
         rc=$?\n\
         if [ \"$rc\" -ne 0 ]; then m fail env - \"the run's environment stops under bash with set -u (exit $rc): $(tail -n 1 \"$fd_err\" | tr -d '\\000-\\037')\"; fi\n\
         [ \"$fd_err\" = /dev/null ] || rm -f \"$fd_err\"\n\
         else m fail env - \"bash not found: the run's scripts and Google's profiles need bash\"; fi\n",
        doc = crate::detach::heredoc("ENV", &inner)
    )
}

/// The loader's search and `ldd` of the net plugin and the tuner (bash; `LIBS` the
/// library path, `m` the marker): see [`run_env_check`].
const LOADER: &str = r#"fd_find() {
  local n=$1 d
  local IFS=:
  for d in $LIBS; do
    if [ -n "$d" ] && [ -e "$d/$n" ]; then echo "$d/$n"; return 0; fi
  done
  case "$n" in */*) [ -e "$n" ] && { echo "$n"; return 0; } ;; esac
  { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | awk -v n="$n" '$1 == n { print $NF; found = 1; exit } END { exit !found }' && return 0
  for d in /lib /usr/lib /lib64 /usr/lib64 /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
    if [ -e "$d/$n" ]; then echo "$d/$n"; return 0; fi
  done
  return 1
}
fd_load() {
  local kind=$1 p= out name
  shift
  for name in "$@"; do p=$(fd_find "$name") && break; p=; done
  if [ -z "$p" ]; then
    m fail loader "$1" "not found by the loader (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}, then the linker cache)"
    return
  fi
  if ! command -v ldd >/dev/null 2>&1; then m ok loader "$1" "$p (ldd not on this node: its own libraries not checked)"; return; fi
  if ! out=$(LD_LIBRARY_PATH=$LIBS ldd "$p" 2>&1); then
    m fail loader "$1" "$p cannot be loaded: $(printf '%s' "$out" | head -n 1)"
  elif printf '%s
' "$out" | grep -q 'not found'; then
    m fail loader "$1" "$p needs $(printf '%s
' "$out" | awk '/not found/ { printf "%s ", $1 }')(not found)"
  else
    m ok loader "$1" "$kind $p"
  fi
}
NP=${NCCL_NET_PLUGIN:-}
case "$NP" in
  none) m ok loader libnccl-net.so "NCCL_NET_PLUGIN=none: NCCL's own transports" ;;
  '') fd_load net libnccl-net.so ;;
  *) fd_load net "libnccl-net-$NP.so" "$NP" ;;
esac
TP=${NCCL_TUNER_PLUGIN:-}
case "$TP" in
  ''|none) ;;
  *) fd_load tuner "libnccl-tuner-$TP.so" "$TP" ;;
esac
"#;

/// The checks a script's output reports.
pub fn parse(out: &str) -> Vec<Check> {
    out.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(MARK)?.strip_prefix(' ')?;
            let mut p = rest.splitn(4, ' ');
            let ok = match p.next()? {
                "ok" => true,
                "fail" => false,
                _ => return None,
            };
            let kind = p.next()?;
            let what = p.next()?;
            let detail = p.next().unwrap_or("").to_string();
            let name = if what == "-" {
                kind.to_string()
            } else {
                format!("{kind} {what}")
            };
            Some(Check { name, ok, detail })
        })
        .collect()
}

/// How to fix a failed check.
pub fn fix(flavour: GpuDirect, check: &Check) -> String {
    let boot = "`flightdeck fleet bootstrap FLEET`";
    if check.name.starts_with("interface") {
        if check.detail.contains("differs between nodes") {
            return "give every node's NIC the MTU of its VPC (a NIC set by hand differs), or recreate the node in the fleet's VPCs".into();
        }
        if check.detail.starts_with("mtu") {
            return format!(
                "make the data VPCs' MTU {DATA_MTU} (fleet apply does; Cluster Toolkit's {DATA_MTU_MAX} is accepted too), or edit the profile's interface names"
            );
        }
        return "the profile names an interface this node lacks: check the machine type's NICs and image, or pass --profile none / edit the profile".into();
    }
    match (check.name.split(' ').next().unwrap_or(""), flavour) {
        ("file", _) | ("rxdm", _) | ("aperture", _) => format!("run {boot} to install and start it"),
        ("rdma", _) => "the node has no MRDMA NICs: create it with the RoCE VPC (fleet apply does) and the nccl-gib/ibverbs packages (fleet bootstrap)".into(),
        ("rdma-ports", _) => "a port that is not ACTIVE carries no RDMA traffic: check the NIC's link (`ibv_devinfo`), then reboot or recreate the node".into(),
        ("import-helper", _) => format!("run {boot} (it builds and loads the dmabuf import-helper module; after a kernel update it is built again)"),
        ("rxdm-ready", _) => format!("the RxDM runs but has not initialised: read `docker logs receive-datapath-manager`, then run {boot} to restart it"),
        ("memlock", _) => "the bootstrap's limits apply to sessions opened after it: close flightdeck's connections to the node (`flightdeck mux stop`, and quit the cockpit) so the next run opens a new session".into(),
        ("env", _) => "the run's environment lines fail under bash (see what was found): edit the profile, or run the bootstrap again if a profile it sources is damaged".into(),
        ("loader", _) => format!("the net plugin must be on the run's LD_LIBRARY_PATH or in the linker cache with its libraries: run {boot}, or fix LD_LIBRARY_PATH in the profile"),
        _ => format!("run {boot}"),
    }
}

/// The data NICs whose MTU is not the same on every node (each within the accepted
/// range, so no node failed on its own): a check failed for each node off the MTU most
/// nodes have, naming both. Packets above the smaller MTU are dropped between them.
pub fn mtu_mismatches<'a>(
    w: &Wants,
    nodes: impl Iterator<Item = (&'a str, &'a [Check])>,
) -> Vec<(String, Check)> {
    use std::collections::BTreeMap;
    let data: Vec<&str> = w
        .interfaces
        .iter()
        .filter(|(_, m)| m.is_some())
        .map(|(n, _)| n.as_str())
        .collect();
    // interface -> mtu -> nodes
    let mut seen: BTreeMap<&str, BTreeMap<String, Vec<&str>>> = BTreeMap::new();
    for (node, checks) in nodes {
        for c in checks.iter().filter(|c| c.ok) {
            let Some(nic) = c.name.strip_prefix("interface ") else {
                continue;
            };
            let Some(mtu) = c.detail.strip_prefix("mtu ") else {
                continue;
            };
            if let Some(nic) = data.iter().find(|d| **d == nic) {
                seen.entry(nic)
                    .or_default()
                    .entry(mtu.to_string())
                    .or_default()
                    .push(node);
            }
        }
    }
    let mut out = vec![];
    for (nic, by_mtu) in seen {
        if by_mtu.len() < 2 {
            continue;
        }
        let (common, _) = by_mtu
            .iter()
            .max_by_key(|(mtu, ns)| (ns.len(), std::cmp::Reverse((*mtu).clone())))
            .expect("two MTUs");
        for (mtu, ns) in by_mtu.iter().filter(|(m, _)| *m != common) {
            for node in ns {
                out.push((
                    node.to_string(),
                    Check {
                        name: format!("interface {nic}"),
                        ok: false,
                        detail: format!("mtu {mtu} differs between nodes: most have {common}"),
                    },
                ));
            }
        }
    }
    out
}

/// A node's failed checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    pub node: String,
    pub checks: Vec<Check>,
    /// The node could not run the checks (unreachable), and why.
    pub error: Option<String>,
}

/// The error text for failed nodes: node, check, what was found, fix.
pub fn report(flavour: GpuDirect, failures: &[NodeFailure]) -> String {
    let mut s = format!(
        "pre-flight for GPUDirect-{} failed on {}; nothing was started (--no-preflight skips it):",
        flavour.name(),
        crate::words::plural(failures.len(), "node")
    );
    for f in failures {
        if let Some(e) = &f.error {
            let _ = write!(s, "\n  {}: could not check: {e}", f.node);
        }
        for c in &f.checks {
            let _ = write!(
                s,
                "\n  {}: {}: {}; fix: {}",
                f.node,
                c.name,
                c.detail,
                fix(flavour, c)
            );
        }
    }
    s
}

/// Run the pre-flight of `flavour` with the run's `env` lines on `nodes`, saying so on
/// `progress`. `Ok` when every check passes on every node (or the flavour needs none),
/// else the report.
pub async fn check_nodes(
    reach: Reach,
    nodes: &[NodeTarget],
    flavour: GpuDirect,
    env: &[String],
    progress: &(dyn Fn(String) + Sync),
) -> Result<(), String> {
    if flavour == GpuDirect::None {
        return Ok(());
    }
    progress(format!(
        "pre-flight: GPUDirect-{} pieces on {}",
        flavour.name(),
        crate::words::plural(nodes.len(), "node")
    ));
    let text = script(&wants(flavour, env));
    let jobs: Vec<(NodeTarget, String, Vec<u8>)> = nodes
        .iter()
        .map(|n| (n.clone(), "sh -s".to_string(), text.as_bytes().to_vec()))
        .collect();
    let out = exec::collect_with_input(reach, jobs).await;
    let mut failures = vec![];
    let parsed: Vec<(i32, Vec<Check>, String)> = out
        .into_iter()
        .map(|(code, stdout, stderr)| (code, parse(&stdout), stderr))
        .collect();
    let differ = mtu_mismatches(
        &wants(flavour, env),
        nodes
            .iter()
            .zip(&parsed)
            .map(|(n, p)| (n.name.as_str(), p.1.as_slice())),
    );
    for (n, (code, checks, stderr)) in nodes.iter().zip(parsed) {
        let mut failed: Vec<Check> = checks.into_iter().filter(|c| !c.ok).collect();
        failed.extend(
            differ
                .iter()
                .filter(|(node, _)| *node == n.name)
                .map(|(_, c)| c.clone()),
        );
        let error = (code != 0).then(|| format!("exit {code}: {}", stderr.trim()));
        if !failed.is_empty() || error.is_some() {
            failures.push(NodeFailure {
                node: n.name.clone(),
                checks: failed,
                error,
            });
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(report(flavour, &failures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nccl::runner::profile_env;

    #[test]
    fn what_each_flavour_checks_comes_from_its_environment() {
        let w = wants(GpuDirect::Tcpxo, &profile_env(GpuDirect::Tcpxo));
        let data: Vec<&str> = w
            .interfaces
            .iter()
            .filter(|(_, m)| *m == Some(DATA_MTU))
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(data.len(), 8, "{:?}", w.interfaces);
        assert!(w.interfaces.iter().any(|(n, m)| n == "enp0s12" && m.is_none()));
        assert!(w
            .files
            .contains(&"/var/lib/tcpxo/lib64/libnccl-net.so".to_string()));
        assert!(w.rxdm.is_some() && w.aperture);

        let w = wants(GpuDirect::Rdma, &profile_env(GpuDirect::Rdma));
        assert!(w
            .files
            .contains(&"/usr/local/gib/lib64/libnccl-net.so".to_string()));
        assert!(w.rdma_devices && w.rxdm.is_none());

        // An edited environment is what is checked.
        let w = wants(
            GpuDirect::Tcpx,
            &[
                "export NCCL_GPUDIRECTTCPX_SOCKET_IFNAME='eth1,eth2'".into(),
                "NCCL_SOCKET_IFNAME=eth0".into(),
            ],
        );
        assert_eq!(
            w.interfaces,
            vec![
                ("eth1".into(), Some(DATA_MTU)),
                ("eth2".into(), Some(DATA_MTU)),
                ("eth0".into(), None)
            ]
        );
        assert_eq!(ifnames("^docker,lo"), Vec::<String>::new());
        assert_eq!(ifnames("=eth0"), vec!["eth0"]);
    }

    #[test]
    fn the_script_runs_against_this_machine_and_reports_each_check() {
        let w = Wants {
            interfaces: vec![
                ("lo".into(), None),
                ("fd-no-such-nic".into(), Some(8244)),
                ("lo".into(), Some(1)),
            ],
            files: vec!["/".into(), "/fd/no/such/file".into()],
            rxdm: Some("fd-no-such-container-xyz"),
            aperture: false,
            rdma_devices: false,
            run_env: None,
            rxdm_ready: false,
            import_helper: false,
            memlock: false,
        };
        let out = crate::bootstrap::tests::sh_stdin(&script(&w));
        let checks = parse(&String::from_utf8_lossy(&out.stdout));
        let by = |n: &str| checks.iter().filter(|c| c.name == n).cloned().collect::<Vec<_>>();
        // lo is "unknown" in operstate: accepted as up; its MTU is not 1.
        assert!(by("interface lo")[0].ok, "{checks:?}");
        assert!(
            !by("interface lo")[1].ok && by("interface lo")[1].detail.ends_with("expected 1 to 8896"),
            "{checks:?}"
        );
        assert_eq!(by("interface fd-no-such-nic")[0].detail, "missing");
        assert!(by("file /")[0].ok);
        assert!(!by("file /fd/no/such/file")[0].ok);
        assert!(!by("rxdm")[0].ok);
        let failures = vec![NodeFailure {
            node: "a3-0".into(),
            checks: checks.into_iter().filter(|c| !c.ok).collect(),
            error: None,
        }];
        let r = report(GpuDirect::Tcpxo, &failures);
        assert!(r.contains("a3-0: rxdm: container fd-no-such-container-xyz is not running; fix: run `flightdeck fleet bootstrap FLEET`"), "{r}");
        assert!(r.contains("a3-0: interface fd-no-such-nic: missing; fix:"), "{r}");
    }

    /// A real shared object to stand in for a plugin: this machine's libm.
    fn some_shared_object() -> std::path::PathBuf {
        [
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/usr/lib/x86_64-linux-gnu/libm.so.6",
            "/lib64/libm.so.6",
            "/usr/lib64/libm.so.6",
        ]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("libm.so.6")
    }

    fn run_env_checks(env: Vec<String>, extra: &[(&str, &str)]) -> Vec<Check> {
        let w = Wants {
            interfaces: vec![],
            files: vec![],
            rxdm: None,
            aperture: false,
            rdma_devices: false,
            run_env: Some(env),
            rxdm_ready: false,
            import_helper: false,
            memlock: false,
        };
        // Under dash (the doctor runs this part of its script under sh), without
        // LD_LIBRARY_PATH, as in a fresh SSH exec session.
        use std::io::Write;
        let mut child = std::process::Command::new("dash")
            .arg("-s")
            .env_remove("LD_LIBRARY_PATH")
            .envs(extra.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script(&w).as_bytes())
            .unwrap();
        parse(&String::from_utf8_lossy(
            &child.wait_with_output().unwrap().stdout,
        ))
    }

    /// The run's own environment, sourced as the run sources it: a profile that reads an
    /// unset LD_LIBRARY_PATH and uses `[[` loads, and the loader then finds the plugin it
    /// put first; a profile that stops is named with its own words; a plugin the loader
    /// cannot find is named with the path searched.
    #[test]
    fn the_runs_environment_is_loaded_and_the_loader_asked_for_the_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib64");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::copy(some_shared_object(), lib.join("libnccl-net.so")).unwrap();
        let profile = dir.path().join("profile.sh");
        std::fs::write(
            &profile,
            ": \"${NCCL_LIB_DIR:?Must set NCCL_LIB_DIR}\"\nif [[ a =~ ^a$ ]]; then export FROM=profile; fi\nexport LD_LIBRARY_PATH=\"${NCCL_LIB_DIR}:${LD_LIBRARY_PATH}\"\n",
        )
        .unwrap();
        use crate::shellenv::{export, source, Value};
        let lib_s = lib.to_str().unwrap();
        let env = vec![
            export("NCCL_LIB_DIR", Value::Literal(lib_s)),
            source(profile.to_str().unwrap()),
            export("LD_LIBRARY_PATH", Value::Prepend(lib_s)),
        ];
        let checks = run_env_checks(env.clone(), &[]);
        let by = |cs: &[Check], n: &str| cs.iter().find(|c| c.name == n).cloned();
        assert!(by(&checks, "env").unwrap().ok, "{checks:?}");
        let l = by(&checks, "loader libnccl-net.so").unwrap();
        assert!(l.ok && l.detail.ends_with("/lib64/libnccl-net.so"), "{checks:?}");

        // Without the `set +u` around it (as a script written by hand would source it),
        // the profile stops on the unset LD_LIBRARY_PATH: named, with bash's own words.
        let bare = vec![
            export("NCCL_LIB_DIR", Value::Literal(lib_s)),
            format!(". {}", profile.display()),
        ];
        let checks = run_env_checks(bare, &[]);
        let e = by(&checks, "env").unwrap();
        assert!(
            !e.ok && e.detail.contains("LD_LIBRARY_PATH: unbound variable"),
            "{checks:?}"
        );

        // A plugin the loader cannot find, and one that is not a shared object.
        let checks = run_env_checks(vec![export("NCCL_NET_PLUGIN", Value::Literal("fdnosuch"))], &[]);
        let l = by(&checks, "loader libnccl-net-fdnosuch.so").unwrap();
        assert!(
            !l.ok && l.detail.starts_with("not found by the loader"),
            "{checks:?}"
        );
        std::fs::write(lib.join("libnccl-tuner.so"), "not an ELF file").unwrap();
        let checks = run_env_checks(
            vec![
                export("LD_LIBRARY_PATH", Value::Prepend(lib_s)),
                export("NCCL_TUNER_PLUGIN", Value::Literal("libnccl-tuner.so")),
            ],
            &[],
        );
        assert!(by(&checks, "loader libnccl-net.so").unwrap().ok, "{checks:?}");
        let t = by(&checks, "loader libnccl-tuner-libnccl-tuner.so.so").unwrap();
        assert!(!t.ok && t.detail.contains("cannot be loaded"), "{checks:?}");
        let fixed = fix(GpuDirect::Tcpxo, &t);
        assert!(fixed.contains("LD_LIBRARY_PATH"), "{fixed}");
    }

    /// Data NICs within the accepted range on each node but not the same on all: the odd
    /// node is named with both MTUs.
    #[test]
    fn an_mtu_that_differs_between_nodes_fails_the_odd_node() {
        let w = wants(GpuDirect::Tcpx, &profile_env(GpuDirect::Tcpx));
        let ok = |nic: &str, mtu: u32| Check {
            name: format!("interface {nic}"),
            ok: true,
            detail: format!("mtu {mtu}"),
        };
        let a = [ok("eth1", 8244), ok("eth0", 1460)];
        let b = [ok("eth1", 8244), ok("eth0", 8896)];
        let c = [ok("eth1", 8896), ok("eth0", 1460)];
        let found = mtu_mismatches(&w, [("a", &a[..]), ("b", &b[..]), ("c", &c[..])].into_iter());
        assert_eq!(found.len(), 1, "the control NIC is not a data NIC: {found:?}");
        assert_eq!(found[0].0, "c");
        assert_eq!(
            found[0].1.detail,
            "mtu 8896 differs between nodes: most have 8244"
        );
        assert!(fix(GpuDirect::Tcpx, &found[0].1).starts_with("give every node's NIC"));
    }
}
