//! The pre-flight before an NCCL run or a job on a fleet with a GPUDirect profile: on
//! every node, every interface the profile's environment names exists and is up (data
//! NICs with the MTU their VPCs are made with), the plugin files the profile loads exist
//! (`NCCL_NET=gIB` is never set without gIB), and the receive-datapath manager runs
//! where the flavour needs one. A failed check names node, check and fix.
//!
//! Pure: [`script`] makes the check script from the environment lines a run will set,
//! [`parse`] reads its output; `remote` runs it ([`check_nodes`]).

use crate::cloud::gcp::layout::DATA_MTU;
use crate::exec::{self, Transport};
use crate::fleet::NodeTarget;
use crate::nccl::GpuDirect;
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

/// The values of the environment lines' `export K='V'` (or `K=V`) for `key`.
fn env_value(lines: &[String], key: &str) -> Option<String> {
    lines.iter().rev().find_map(|l| {
        let l = l.trim().strip_prefix("export ").unwrap_or(l.trim());
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        Some(v.trim_matches(|c| c == '\'' || c == '"').to_string())
    })
}

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
/// (interfaces with the MTU wanted, if any), plugin files, whether an RxDM must run,
/// whether RDMA devices must be there.
pub struct Wants {
    pub interfaces: Vec<(String, Option<u32>)>,
    pub files: Vec<String>,
    pub rxdm: Option<&'static str>,
    pub aperture: bool,
    pub rdma_devices: bool,
}

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
                Some(want) => format!(
                    "elif [ \"$mtu\" != {want} ]; then m fail interface {q} \"mtu $mtu, expected {want}\";"
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
    }
    s
}

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
        if check.detail.starts_with("mtu") {
            return format!(
                "create the data VPCs with MTU {DATA_MTU} (fleet apply does), or edit the profile's interface names"
            );
        }
        return "the profile names an interface this node lacks: check the machine type's NICs and image, or pass --profile none / edit the profile".into();
    }
    match (check.name.split(' ').next().unwrap_or(""), flavour) {
        ("file", _) | ("rxdm", _) | ("aperture", _) => format!("run {boot} to install and start it"),
        ("rdma", _) => "the node has no MRDMA NICs: create it with the RoCE VPC (fleet apply does) and the nccl-gib/ibverbs packages (fleet bootstrap)".into(),
        _ => format!("run {boot}"),
    }
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
    transport: Transport,
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
    let out = exec::collect_with_input(transport, jobs).await;
    let mut failures = vec![];
    for (n, (code, stdout, stderr)) in nodes.iter().zip(out) {
        let checks = parse(&stdout);
        let failed: Vec<Check> = checks.into_iter().filter(|c| !c.ok).collect();
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
        };
        let out = crate::bootstrap::tests::sh_stdin(&script(&w));
        let checks = parse(&String::from_utf8_lossy(&out.stdout));
        let by = |n: &str| checks.iter().filter(|c| c.name == n).cloned().collect::<Vec<_>>();
        // lo is "unknown" in operstate: accepted as up; its MTU is not 1.
        assert!(by("interface lo")[0].ok, "{checks:?}");
        assert!(!by("interface lo")[1].ok && by("interface lo")[1].detail.contains("expected 1"));
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
}
