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

use super::gpu::Gpu;
use super::net::{self, Nic, RdmaPort};

/// How bad a finding of this module is: the doctor's outcome it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Warn,
    Fail,
}

/// What the node has that these rules read: its NICs, RDMA ports and GPUs (the
/// doctor's `Facts`).
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pub nics: &'a [Nic],
    pub rdma_ports: &'a [RdmaPort],
    pub rdma_devices: usize,
    pub gpus: &'a [Gpu],
}

/// /dev/shm wanted per GPU on the node (1 GiB for 8, NVIDIA's `--shm-size=1g`).
pub const SHM_PER_GPU: u64 = 128 << 20;

/// What a setting on the node does to NCCL's init, when it names something the node lacks:
/// the outcome and the sentence that says so. `None`: the setting is not one of these, or
/// the node has what it names.
pub fn setting(key: &str, value: &str, f: Node) -> Option<(Severity, String)> {
    match key {
        "NCCL_SOCKET_IFNAME" => socket_ifname(value, f.nics),
        "NCCL_IB_HCA" => ib_hca(value, f.rdma_ports),
        "NCCL_NET" if value.eq_ignore_ascii_case("ib") && f.rdma_ports.is_empty() && f.rdma_devices == 0 => Some((
            Severity::Fail,
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
        crate::words::shorten(&v, 8)
    }
}

fn socket_ifname(value: &str, nics: &[Nic]) -> Option<(Severity, String)> {
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
            Severity::Fail,
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
/// list, each entry `name[:port]` ([`net::nccl_list_match`]).
fn hca_match(list: &str, device: &str, port: &str) -> bool {
    net::nccl_list_match(list, device, Some(port))
}

fn ib_hca(value: &str, ports: &[RdmaPort]) -> Option<(Severity, String)> {
    if ports.is_empty() || value.is_empty() {
        // No RDMA device: NCCL's IB transport is not in play (the rdma check says what
        // a flavour that needs one lacks).
        return None;
    }
    let have = names(ports.iter().map(|p| format!("{}:{}", p.device, p.port)));
    if !ports.iter().any(|p| hca_match(value, &p.device, &p.port)) {
        return Some((
            Severity::Fail,
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
            Severity::Warn,
            format!(
                "names {} the node lacks (it has {have}): NCCL runs on fewer NICs than it was told",
                missing.join(", ")
            ),
        )
    })
}

fn visible_devices(value: &str, f: Node) -> Option<(Severity, String)> {
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
            Severity::Fail,
            format!("starts with {bad:?}, which is no GPU of the node ({gpus}): CUDA sees no GPU and NCCL fails with `no CUDA-capable device is detected`"),
        ))
    } else {
        Some((
            Severity::Warn,
            format!("names {bad:?}, which is no GPU of the node ({gpus}): CUDA ignores it and every GPU listed after it, so processes see {seen}"),
        ))
    }
}

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

/// What the `nccl-init` check finds: failures, warnings, the fixes, and what a pass
/// says. Its section is `nccl-res` (`text`); `gpus` and `rdma` from the node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    pub fail: Vec<String>,
    pub warn: Vec<String>,
    pub fixes: Vec<String>,
    pub pass: String,
}

/// Judge /dev/shm for the node's GPUs and locked memory for its RDMA devices.
pub fn judge_resources(text: &str, gpus: usize, rdma: bool) -> Judged {
    let r = parse_resources(text);
    let gpus = gpus as u64;
    let mut j = Judged::default();
    let need = SHM_PER_GPU * gpus.max(1);
    match (&r.shm_problem, r.shm) {
        (Some(p), _) => {
            j.fail.push(format!(
                "/dev/shm {p}: NCCL cannot create its shared memory segments and ends init"
            ));
            j.fixes.push(format!(
                "mount a tmpfs of {} or more at /dev/shm (`docker run --shm-size`, a Memory emptyDir on Kubernetes)",
                mib(need)
            ));
        }
        (None, Some((size, _))) if gpus >= 2 && size < need => {
            j.fail.push(format!(
                "/dev/shm is {} for {gpus} GPUs, {} wanted: NCCL's SHM transport fails with `Error while creating shared memory segment`",
                mib(size),
                mib(need)
            ));
            j.fixes.push(format!(
                "give /dev/shm {} or more (`docker run --shm-size={need}`, `mount -o remount,size={need} /dev/shm`, a Memory emptyDir on Kubernetes)",
                mib(need),
            ));
        }
        (None, Some((_, avail))) if gpus >= 2 && avail < need => {
            j.warn.push(format!(
                "/dev/shm has {} free for {gpus} GPUs, {} wanted: something else fills it",
                mib(avail),
                mib(need)
            ));
            j.fixes
                .push("free /dev/shm (`ls -la /dev/shm`: segments left by processes that died)".into());
        }
        _ => {}
    }
    if rdma && !r.root {
        if let Some(l) = r.memlock.as_deref().filter(|l| *l != "unlimited") {
            j.fail.push(format!(
                "ulimit -l is {l} KiB with RDMA devices: NCCL's IB transport cannot register its buffers (`ibv_reg_mr`: Cannot allocate memory)"
            ));
            j.fixes.push("set `* - memlock unlimited` in /etc/security/limits.conf (`--ulimit memlock=-1` for a container), then log in again".into());
        }
    }
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
    j.pass = format!("{shm}{memlock}");
    j
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

    /// What a node has, owned, to lend as a [`Node`].
    #[derive(Default)]
    struct Has {
        nics: Vec<Nic>,
        rdma_ports: Vec<RdmaPort>,
        gpus: Vec<Gpu>,
    }

    impl Has {
        fn node(&self) -> Node<'_> {
            Node {
                nics: &self.nics,
                rdma_ports: &self.rdma_ports,
                rdma_devices: self.rdma_ports.len(),
                gpus: &self.gpus,
            }
        }
    }

    #[test]
    fn settings_that_name_what_the_node_lacks() {
        let mut f = Has {
            nics: vec![
                nic("lo", Some("127.0.0.1")),
                nic("eth0", Some("10.0.0.2")),
                nic("eth1", None),
            ],
            ..Has::default()
        };
        let set = |k: &str, v: &str, f: &Has| setting(k, v, f.node());
        assert!(set("NCCL_SOCKET_IFNAME", "eth0", &f).is_none());
        assert!(set("NCCL_SOCKET_IFNAME", "^docker,lo", &f).is_none());
        assert!(
            set("NCCL_SOCKET_IFNAME", "e", &f).is_none(),
            "one character is unset"
        );
        let (o, w) = set("NCCL_SOCKET_IFNAME", "eth9", &f).unwrap();
        assert_eq!(o, Severity::Fail);
        assert!(
            w.contains("Bootstrap : no socket interface found") && w.contains("it has lo, eth0, eth1"),
            "{w}"
        );
        let (_, w) = set("NCCL_SOCKET_IFNAME", "=eth1", &f).unwrap();
        assert!(w.starts_with("names only eth1 without an address"), "{w}");
        // No address read at all (no `ip` on the node): names alone are judged.
        let blind = Has {
            nics: vec![nic("lo", None), nic("eth0", None)],
            ..Has::default()
        };
        assert!(set("NCCL_SOCKET_IFNAME", "eth0", &blind).is_none());
        let (_, w) = set("NCCL_SOCKET_IFNAME", "eth9", &blind).unwrap();
        assert!(
            w.starts_with("names no interface of the node (it has lo, eth0)"),
            "{w}"
        );
        assert!(
            set("NCCL_SOCKET_IFNAME", "^eth,lo", &f).is_some(),
            "excludes every one"
        );

        assert!(
            set("NCCL_IB_HCA", "mlx5_0", &f).is_none(),
            "no RDMA device: not in play"
        );
        let (o, w) = set("NCCL_NET", "IB", &f).unwrap();
        assert_eq!(o, Severity::Fail);
        assert!(w.contains("`Failed to initialize any NET plugin`"), "{w}");
        assert!(set("NCCL_NET", "Socket", &f).is_none());
        f.rdma_ports = (0..2).map(|i| port(&format!("mlx5_{i}"), "1")).collect();
        assert!(set("NCCL_NET", "IB", &f).is_none());
        for ok in ["mlx5", "mlx5_0:1,mlx5_1:1", "=mlx5_1", "^mlx5_0", "mlx5_1:1"] {
            assert!(set("NCCL_IB_HCA", ok, &f).is_none(), "{ok}");
        }
        let (o, w) = set("NCCL_IB_HCA", "mlx5_9", &f).unwrap();
        assert_eq!(o, Severity::Fail);
        assert!(
            w.contains("mlx5_0:1, mlx5_1:1") && w.contains("No device found"),
            "{w}"
        );
        assert_eq!(
            set("NCCL_IB_HCA", "mlx5_0:2", &f).unwrap().0,
            Severity::Fail,
            "no port 2"
        );
        assert_eq!(set("NCCL_IB_HCA", "^mlx5", &f).unwrap().0, Severity::Fail);
        let (o, w) = set("NCCL_IB_HCA", "=mlx5_0,mlx5_7", &f).unwrap();
        assert_eq!(o, Severity::Warn);
        assert!(w.starts_with("names mlx5_7 the node lacks"), "{w}");

        assert!(
            set("CUDA_VISIBLE_DEVICES", "3", &f).is_none(),
            "GPUs unknown: not judged"
        );
        f.gpus = (0..2)
            .map(|i| Gpu {
                index: i,
                uuid: format!("GPU-{i}aaa"),
                ..Default::default()
            })
            .collect();
        assert!(set("CUDA_VISIBLE_DEVICES", "1,0", &f).is_none());
        assert!(set("CUDA_VISIBLE_DEVICES", "GPU-1a", &f).is_none());
        let (o, w) = set("CUDA_VISIBLE_DEVICES", "3", &f).unwrap();
        assert_eq!(o, Severity::Fail);
        assert!(w.contains("no CUDA-capable device"), "{w}");
        let (o, w) = set("CUDA_VISIBLE_DEVICES", "0,5,1", &f).unwrap();
        assert_eq!(o, Severity::Warn);
        assert!(w.contains("processes see 1"), "{w}");
    }

    #[test]
    fn shm_and_memlock_for_the_nodes_gpus_and_rdma() {
        let healthy = "shm 8388608 8388000\nmemlock 8192\nuid 1000";
        let j = judge_resources(healthy, 8, false);
        assert!(j.fail.is_empty() && j.warn.is_empty());
        assert_eq!(j.pass, "/dev/shm 8 GiB");
        // Docker's default.
        let j = judge_resources("shm 65536 65536\nmemlock 8192\nuid 1000", 8, false);
        assert!(
            j.fail[0].starts_with("/dev/shm is 64 MiB for 8 GPUs, 1 GiB wanted"),
            "{:?}",
            j.fail
        );
        assert!(j.fixes[0].contains("--shm-size=1073741824"), "{:?}", j.fixes);
        let j = judge_resources("shm 2097152 10240\nmemlock 8192\nuid 1000", 8, false);
        assert!(j.fail.is_empty() && j.warn.len() == 1, "{j:?}");
        let j = judge_resources("shm missing\nmemlock 8192\nuid 1000", 8, false);
        assert_eq!(j.fail.len(), 1);
        // One GPU: no SHM transport between GPUs (NCCL ran on 1x H200 with 16 MiB).
        let j = judge_resources("shm 65536 65536\nmemlock 8192\nuid 1000", 1, false);
        assert!(j.fail.is_empty() && j.warn.is_empty(), "{j:?}");
        // RDMA devices: memlock must be unlimited, unless root.
        let j = judge_resources(healthy, 8, true);
        assert!(j.fail[0].contains("ulimit -l is 8192 KiB"), "{:?}", j.fail);
        let j = judge_resources("shm 8388608 8388000\nmemlock 8192\nuid 0", 8, true);
        assert!(j.fail.is_empty(), "{j:?}");
        let j = judge_resources("shm 8388608 8388000\nmemlock unlimited\nuid 1000", 8, true);
        assert!(
            j.fail.is_empty() && j.pass.ends_with("memlock unlimited"),
            "{j:?}"
        );
    }
}
