//! What makes NCCL fail at init on a node, before a byte moves: settings that name
//! interfaces, HCAs or GPUs the node does not have (judged with the `nccl-env` check,
//! where they are read), and the resources NCCL needs at init (the `nccl-init` check):
//! room in /dev/shm for the node's GPUs, and locked memory where RDMA devices are.
//!
//! Each rule follows what NCCL (NVIDIA/nccl) does with the value:
//! - `NCCL_SOCKET_IFNAME` (`src/misc/socket.cc`, `ncclFindInterfaces`): interfaces with an
//!   address whose names start with an entry (`=`: equal to one; `^`: all but those).
//!   None found ends init with `Bootstrap : no socket interface found` (`bootstrap.cc`).
//! - `NCCL_IB_HCA` (`src/transport/net_ib.cc`, `ncclIbInit`; `matchIfList` in
//!   `src/misc/utils.cc`): devices whose names start with an entry, on the entry's port
//!   when it names one. None found: `NET/IB : No device found.`, and NCCL takes the next
//!   network (sockets), or fails when `NCCL_NET=IB` asked for it.
//! - `NCCL_NET` (`src/plugin/net.cc`): a network that is not there ends init with
//!   `Failed to initialize any NET plugin` (2.27 on, seen with 2.28.9 on an H200 with
//!   `NCCL_NET=IB` and no RDMA device), `Error: network IB not found.` before.
//! - `CUDA_VISIBLE_DEVICES` (CUDA's rule): the GPUs listed, up to the first index the node
//!   does not have; none at all and every CUDA call fails with `no CUDA-capable device`.
//! - /dev/shm: NCCL's SHM transport and its proxy map files there (`src/misc/shmutils.cc`,
//!   `ncclShmOpen`); too small and init fails with `Error while creating shared memory
//!   segment /dev/shm/nccl-...`. NVIDIA's guidance for containers is `--shm-size=1g` on an
//!   8-GPU machine, so 128 MiB a GPU is asked for (Docker's default is 64 MiB).
//! - memlock: NCCL's IB transport registers its buffers (`ibv_reg_mr`); with the default
//!   limit it fails with `Cannot allocate memory`. RDMA needs it unlimited (the
//!   pre-flight's rule: root, or `ulimit -l unlimited`).

use super::net::{self, Nic, RdmaPort};
use super::{script, Facts, Finding, Outcome};

/// /dev/shm wanted per GPU on the node (1 GiB for 8, NVIDIA's `--shm-size=1g`).
pub const SHM_PER_GPU: u64 = 128 << 20;

/// What a setting on the node does to NCCL's init, when it names something the node lacks:
/// the outcome and the sentence that says so. `None`: the setting is not one of these, or
/// the node has what it names.
pub fn setting(key: &str, value: &str, f: &Facts) -> Option<(Outcome, String)> {
    match key {
        "NCCL_SOCKET_IFNAME" => socket_ifname(value, &f.nics),
        "NCCL_IB_HCA" => ib_hca(value, &f.rdma_ports),
        "NCCL_NET" if value.eq_ignore_ascii_case("ib") && f.rdma_ports.is_empty() && f.rdma_devices == 0 => Some((
            Outcome::Fail,
            "asks for NCCL's IB network and the node has no RDMA device: NCCL ends init with `Failed to initialize any NET plugin` (2.27 on; `Error: network IB not found.` before)"
                .into(),
        )),
        "CUDA_VISIBLE_DEVICES" => visible_devices(value, f),
        _ => None,
    }
}

fn names(list: impl Iterator<Item = String>) -> String {
    let v: Vec<String> = list.collect();
    if v.is_empty() {
        "none".into()
    } else {
        super::shorten(&v, 8)
    }
}

fn socket_ifname(value: &str, nics: &[Nic]) -> Option<(Outcome, String)> {
    // NCCL reads one character as unset (`ncclFindInterfaces`: `strlen > 1`).
    if value.len() <= 1 || nics.is_empty() {
        return None;
    }
    let named: Vec<&Nic> = nics
        .iter()
        .filter(|n| net::nccl_if_match(value, &n.name))
        .collect();
    let outcome = |why: String| {
        Some((
            Outcome::Fail,
            format!("{why}: NCCL ends init with `Bootstrap : no socket interface found`"),
        ))
    };
    if named.is_empty() {
        let all = names(nics.iter().map(|n| n.name.clone()));
        return outcome(format!("names no interface of the node (it has {all})"));
    }
    // Where no address could be read at all (no `ip` on the node), only names are judged.
    let addresses_known = nics.iter().any(|n| n.addr.is_some());
    if addresses_known && named.iter().all(|n| n.addr.is_none()) {
        let with_addr = names(nics.iter().filter(|n| n.addr.is_some()).map(|n| n.name.clone()));
        let without: Vec<String> = named.iter().map(|n| n.name.clone()).collect();
        return outcome(format!(
            "names only {} without an address (interfaces with one: {with_addr})",
            without.join(", ")
        ));
    }
    None
}

/// `NCCL_IB_HCA`'s entries as NCCL reads them: `^` (all but) and `=` (exact) before the
/// list, each entry `name[:port]`.
fn hca_match(list: &str, device: &str, port: &str) -> bool {
    let (not, list) = match list.strip_prefix('^') {
        Some(l) => (true, l),
        None => (false, list),
    };
    let (exact, list) = match list.strip_prefix('=') {
        Some(l) => (true, l),
        None => (false, list),
    };
    let hit = list.split(',').filter(|e| !e.is_empty()).any(|e| {
        let (name, want_port) = match e.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (e, None),
        };
        let name_ok = if exact {
            device == name
        } else {
            device.starts_with(name)
        };
        name_ok && want_port.is_none_or(|p| p == port)
    });
    hit != not
}

fn ib_hca(value: &str, ports: &[RdmaPort]) -> Option<(Outcome, String)> {
    if ports.is_empty() || value.is_empty() {
        // No RDMA device: NCCL's IB transport is not in play (the rdma check says what
        // a flavour that needs one lacks).
        return None;
    }
    let have = names(ports.iter().map(|p| format!("{}:{}", p.device, p.port)));
    if !ports.iter().any(|p| hca_match(value, &p.device, &p.port)) {
        return Some((
            Outcome::Fail,
            format!(
                "names no HCA of the node (it has {have}): NCCL finds no IB device (`NET/IB : No device found.`) and falls back to sockets, or ends init when NCCL_NET=IB"
            ),
        ));
    }
    if value.starts_with('^') {
        return None;
    }
    let list = value.trim_start_matches('=');
    let exact = value.starts_with('=');
    let missing: Vec<&str> = list
        .split(',')
        .filter(|e| !e.is_empty())
        .filter(|e| {
            let one = if exact { format!("={e}") } else { e.to_string() };
            !ports.iter().any(|p| hca_match(&one, &p.device, &p.port))
        })
        .collect();
    (!missing.is_empty()).then(|| {
        (
            Outcome::Warn,
            format!(
                "names {} the node lacks (it has {have}): NCCL runs on fewer NICs than it was told",
                missing.join(", ")
            ),
        )
    })
}

fn visible_devices(value: &str, f: &Facts) -> Option<(Outcome, String)> {
    let count = f.gpus.len();
    if count == 0 {
        return None;
    }
    let mut seen = 0usize;
    let mut bad = None;
    for e in value.split(',').map(str::trim) {
        let ok = match e.parse::<i64>() {
            Ok(i) => i >= 0 && (i as u64) < count as u64,
            // A UUID (`GPU-...`, `MIG-...`), in full or as a unique prefix.
            Err(_) => {
                let known = f.gpus.iter().any(|g| !g.uuid.is_empty() && g.uuid.starts_with(e));
                known || f.gpus.iter().all(|g| g.uuid.is_empty())
            }
        };
        if !ok {
            bad = Some(e.to_string());
            break;
        }
        seen += 1;
    }
    let bad = bad?;
    let gpus = format!("the node has {count} GPU{}", if count == 1 { "" } else { "s" });
    if seen == 0 {
        Some((
            Outcome::Fail,
            format!("starts with {bad:?}, which is no GPU of the node ({gpus}): CUDA sees no GPU and NCCL fails with `no CUDA-capable device is detected`"),
        ))
    } else {
        Some((
            Outcome::Warn,
            format!("names {bad:?}, which is no GPU of the node ({gpus}): CUDA ignores it and every GPU listed after it, so processes see {seen}"),
        ))
    }
}

/// The `nccl-res` section's script: /dev/shm's size and room (KiB), or why there is
/// none; the session's locked-memory limit; the user's id.
pub const SCRIPT: &str =
    "if [ ! -d /dev/shm ]; then echo 'shm missing'; elif [ ! -w /dev/shm ]; then echo 'shm unwritable'; \
     else df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print \"shm \" $2 \" \" $4 }'; fi; \
     echo \"memlock $(ulimit -l 2>/dev/null)\"; echo \"uid $(id -u)\"; e nccl-res 0;";

/// What the `nccl-res` section says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// /dev/shm: `Some((size, available))` in bytes; `None` when it did not say.
    pub shm: Option<(u64, u64)>,
    /// `missing` or `unwritable`, when /dev/shm is not there to use.
    pub shm_problem: Option<String>,
    /// `unlimited`, or KiB.
    pub memlock: Option<String>,
    pub root: bool,
}

pub fn parse_resources(text: &str) -> Resources {
    let mut r = Resources::default();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["shm", p @ ("missing" | "unwritable")] => r.shm_problem = Some(p.to_string()),
            ["shm", size, avail] => {
                if let (Ok(s), Ok(a)) = (size.parse::<u64>(), avail.parse::<u64>()) {
                    r.shm = Some((s << 10, a << 10));
                }
            }
            ["memlock", v] => r.memlock = Some(v.to_string()),
            ["uid", "0"] => r.root = true,
            _ => {}
        }
    }
    r
}

fn mib(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else {
        format!("{} MiB", b >> 20)
    }
}

/// The `nccl-init` check: /dev/shm for the node's GPUs, locked memory for its RDMA.
pub fn judge_resources(node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let text = s.get("nccl-res").unwrap_or("");
    let evidence: Vec<String> = text.lines().map(str::to_string).collect();
    if s.status("nccl-res").is_none() {
        return Finding::new("nccl-init", node, Outcome::Fail, "the check did not report").evidence(evidence);
    }
    let r = parse_resources(text);
    let gpus = f.gpus.len() as u64;
    let mut fail = vec![];
    let mut warn = vec![];
    let mut fixes = vec![];
    let need = SHM_PER_GPU * gpus.max(1);
    match (&r.shm_problem, r.shm) {
        (Some(p), _) => {
            fail.push(format!(
                "/dev/shm {p}: NCCL cannot create its shared memory segments and ends init"
            ));
            fixes.push(format!(
                "mount a tmpfs of {} or more at /dev/shm (`docker run --shm-size`, a Memory emptyDir on Kubernetes)",
                mib(need)
            ));
        }
        (None, Some((size, _))) if gpus >= 2 && size < need => {
            fail.push(format!(
                "/dev/shm is {} for {gpus} GPUs, {} wanted: NCCL's SHM transport fails with `Error while creating shared memory segment`",
                mib(size),
                mib(need)
            ));
            fixes.push(format!(
                "give /dev/shm {} or more (`docker run --shm-size={}`, `mount -o remount,size={} /dev/shm`, a Memory emptyDir on Kubernetes)",
                mib(need),
                need >> 20 << 20,
                need >> 20 << 20
            ));
        }
        (None, Some((_, avail))) if gpus >= 2 && avail < need => {
            warn.push(format!(
                "/dev/shm has {} free for {gpus} GPUs, {} wanted: something else fills it",
                mib(avail),
                mib(need)
            ));
            fixes.push("free /dev/shm (`ls -la /dev/shm`: segments left by processes that died)".into());
        }
        _ => {}
    }
    let rdma = !f.rdma_ports.is_empty() || f.rdma_devices > 0;
    if rdma && !r.root {
        if let Some(l) = r.memlock.as_deref().filter(|l| *l != "unlimited") {
            fail.push(format!(
                "ulimit -l is {l} KiB with RDMA devices: NCCL's IB transport cannot register its buffers (`ibv_reg_mr`: Cannot allocate memory)"
            ));
            fixes.push("set `* - memlock unlimited` in /etc/security/limits.conf (`--ulimit memlock=-1` for a container), then log in again".into());
        }
    }
    let (outcome, what) = if !fail.is_empty() {
        (Outcome::Fail, super::shorten(&fail, 2))
    } else if !warn.is_empty() {
        (Outcome::Warn, super::shorten(&warn, 2))
    } else {
        let shm = r.shm.map_or("/dev/shm not measured".to_string(), |(s, _)| {
            format!("/dev/shm {}", mib(s))
        });
        let memlock = if rdma {
            format!(
                ", memlock {}",
                if r.root {
                    "root"
                } else {
                    r.memlock.as_deref().unwrap_or("?")
                }
            )
        } else {
            String::new()
        };
        (Outcome::Pass, format!("{shm}{memlock}"))
    };
    let mut finding = Finding::new("nccl-init", node, outcome, what).evidence(evidence);
    if !fixes.is_empty() {
        finding = finding.fix(fixes.join("; "));
    }
    finding
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, addr: Option<&str>) -> Nic {
        Nic {
            name: name.into(),
            state: "up".into(),
            mtu: Some(1500),
            speed: None,
            numa: None,
            addr: addr.map(str::to_string),
            subnets: vec![],
            bridge: false,
        }
    }

    fn port(d: &str, p: &str) -> RdmaPort {
        RdmaPort {
            device: d.into(),
            port: p.into(),
            state: "4:ACTIVE".into(),
            phys_state: "5:LinkUp".into(),
            netdev: None,
            numa: None,
        }
    }

    #[test]
    fn settings_that_name_what_the_node_lacks() {
        let mut f = Facts {
            nics: vec![
                nic("lo", Some("127.0.0.1")),
                nic("eth0", Some("10.0.0.2")),
                nic("eth1", None),
            ],
            ..Facts::default()
        };
        assert!(setting("NCCL_SOCKET_IFNAME", "eth0", &f).is_none());
        assert!(setting("NCCL_SOCKET_IFNAME", "^docker,lo", &f).is_none());
        assert!(
            setting("NCCL_SOCKET_IFNAME", "e", &f).is_none(),
            "one character is unset"
        );
        let (o, w) = setting("NCCL_SOCKET_IFNAME", "eth9", &f).unwrap();
        assert_eq!(o, Outcome::Fail);
        assert!(
            w.contains("Bootstrap : no socket interface found") && w.contains("lo, eth0"),
            "{w}"
        );
        let (_, w) = setting("NCCL_SOCKET_IFNAME", "=eth1", &f).unwrap();
        assert!(w.starts_with("names only eth1 without an address"), "{w}");
        // No address read at all (no `ip` on the node): names alone are judged.
        let blind = Facts {
            nics: vec![nic("lo", None), nic("eth0", None)],
            ..Facts::default()
        };
        assert!(setting("NCCL_SOCKET_IFNAME", "eth0", &blind).is_none());
        let (_, w) = setting("NCCL_SOCKET_IFNAME", "eth9", &blind).unwrap();
        assert!(
            w.starts_with("names no interface of the node (it has lo, eth0)"),
            "{w}"
        );
        assert!(
            setting("NCCL_SOCKET_IFNAME", "^eth,lo", &f).is_some(),
            "excludes every one"
        );

        assert!(
            setting("NCCL_IB_HCA", "mlx5_0", &f).is_none(),
            "no RDMA device: not in play"
        );
        let (o, _) = setting("NCCL_NET", "IB", &f).unwrap();
        assert_eq!(o, Outcome::Fail);
        assert!(setting("NCCL_NET", "Socket", &f).is_none());
        f.rdma_ports = (0..2).map(|i| port(&format!("mlx5_{i}"), "1")).collect();
        assert!(setting("NCCL_NET", "IB", &f).is_none());
        for ok in ["mlx5", "mlx5_0:1,mlx5_1:1", "=mlx5_1", "^mlx5_0", "mlx5_1:1"] {
            assert!(setting("NCCL_IB_HCA", ok, &f).is_none(), "{ok}");
        }
        let (o, w) = setting("NCCL_IB_HCA", "mlx5_9", &f).unwrap();
        assert_eq!(o, Outcome::Fail);
        assert!(
            w.contains("mlx5_0:1, mlx5_1:1") && w.contains("No device found"),
            "{w}"
        );
        assert_eq!(
            setting("NCCL_IB_HCA", "mlx5_0:2", &f).unwrap().0,
            Outcome::Fail,
            "no port 2"
        );
        assert_eq!(setting("NCCL_IB_HCA", "^mlx5", &f).unwrap().0, Outcome::Fail);
        let (o, w) = setting("NCCL_IB_HCA", "=mlx5_0,mlx5_7", &f).unwrap();
        assert_eq!(o, Outcome::Warn);
        assert!(w.starts_with("names mlx5_7 the node lacks"), "{w}");

        assert!(
            setting("CUDA_VISIBLE_DEVICES", "3", &f).is_none(),
            "GPUs unknown: not judged"
        );
        f.gpus = (0..2)
            .map(|i| super::super::gpu::Gpu {
                index: i,
                uuid: format!("GPU-{i}aaa"),
                ..Default::default()
            })
            .collect();
        assert!(setting("CUDA_VISIBLE_DEVICES", "1,0", &f).is_none());
        assert!(setting("CUDA_VISIBLE_DEVICES", "GPU-1a", &f).is_none());
        let (o, w) = setting("CUDA_VISIBLE_DEVICES", "3", &f).unwrap();
        assert_eq!(o, Outcome::Fail);
        assert!(w.contains("no CUDA-capable device"), "{w}");
        let (o, w) = setting("CUDA_VISIBLE_DEVICES", "0,5,1", &f).unwrap();
        assert_eq!(o, Outcome::Warn);
        assert!(w.contains("processes see 1"), "{w}");
    }

    fn sections(res: &str) -> script::Sections {
        script::parse(&format!(
            "{m} begin nccl-res\n{res}\n{m} end nccl-res 0\n",
            m = script::MARK
        ))
    }

    #[test]
    fn shm_and_memlock_for_the_nodes_gpus_and_rdma() {
        let mut f = Facts {
            gpus: (0..8)
                .map(|i| super::super::gpu::Gpu {
                    index: i,
                    ..Default::default()
                })
                .collect(),
            ..Facts::default()
        };
        let healthy = sections("shm 8388608 8388000\nmemlock 8192\nuid 1000");
        let r = judge_resources("n0", &f, &healthy);
        assert_eq!((r.outcome, r.what.as_str()), (Outcome::Pass, "/dev/shm 8 GiB"));

        // Docker's default.
        let r = judge_resources("n0", &f, &sections("shm 65536 65536\nmemlock 8192\nuid 1000"));
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(
            r.what.starts_with("/dev/shm is 64 MiB for 8 GPUs, 1 GiB wanted"),
            "{}",
            r.what
        );
        assert!(r.fix.contains("--shm-size=1073741824"), "{:?}", r.fix);
        let r = judge_resources("n0", &f, &sections("shm 2097152 10240\nmemlock 8192\nuid 1000"));
        assert_eq!(r.outcome, Outcome::Warn, "{}", r.what);
        let r = judge_resources("n0", &f, &sections("shm missing\nmemlock 8192\nuid 1000"));
        assert_eq!(r.outcome, Outcome::Fail);
        // One GPU: no SHM transport between GPUs.
        f.gpus.truncate(1);
        let r = judge_resources("n0", &f, &sections("shm 65536 65536\nmemlock 8192\nuid 1000"));
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.what);

        // RDMA devices: memlock must be unlimited, unless root.
        f.rdma_ports = vec![port("mlx5_0", "1")];
        let r = judge_resources("n0", &f, &healthy);
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(r.what.contains("ulimit -l is 8192 KiB"), "{}", r.what);
        let r = judge_resources("n0", &f, &sections("shm 8388608 8388000\nmemlock 8192\nuid 0"));
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.what);
        let r = judge_resources(
            "n0",
            &f,
            &sections("shm 8388608 8388000\nmemlock unlimited\nuid 1000"),
        );
        assert_eq!(r.outcome, Outcome::Pass);
        assert!(r.what.ends_with("memlock unlimited"), "{}", r.what);
    }
}
