//! The doctor: every check an operator runs by hand before blaming NCCL, on every node at
//! once, with the cause named.
//!
//! One script per node ([`script`]) gathers the facts; [`judge_node`] turns a node's facts
//! into findings as soon as it answers; [`judge_fleet`] compares the nodes (versions,
//! GPU counts, MTUs, clocks) and [`net::analyse`] reads the reachability matrix. Each
//! finding has a check id ([`CHECKS`]), a node (or none for the fleet), an outcome, a
//! one-line summary, the evidence (the command's relevant output) and a fix. When one
//! finding follows from another (a NIC down makes its node unreachable on that NIC), it
//! says so ([`Finding::follows`]) and the summary leads with the cause.
//!
//! The GPUDirect checks are the pre-flight's ([`crate::bootstrap::preflight`]): one set
//! of definitions for both.

pub mod gpu;
pub mod nccl_init;
pub mod net;
pub mod run;
pub mod script;

use crate::bootstrap::preflight;
use crate::nccl::GpuDirect;
use std::collections::BTreeMap;

/// A check: its id (for `--only`), a one-line explanation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CheckDef {
    pub id: &'static str,
    /// Two letters heading its column in the cockpit's grid when the names do not fit
    /// (`?` there lists them); unique.
    pub short: &'static str,
    pub explain: &'static str,
}

/// Every check, in the order the view lists them.
pub const CHECKS: &[CheckDef] = &[
    CheckDef { id: "gpus", short: "gp", explain: "GPU count and model match the machine type (or the other nodes)" },
    CheckDef { id: "versions", short: "ve", explain: "driver, CUDA and NCCL versions and the NCCL plugin the same on every node" },
    CheckDef { id: "nvlink", short: "nv", explain: "NVLink matrix complete: every GPU pair on the same number of links, none inactive" },
    CheckDef { id: "ecc", short: "ec", explain: "no uncorrectable ECC errors, no pending page retirement or row remapping" },
    CheckDef { id: "xid", short: "xi", explain: "no Xid events in the kernel log since boot" },
    CheckDef { id: "clocks", short: "ck", explain: "GPU clocks not held down now (HW slowdown, thermal, power brake; warns on SW thermal and clock settings)" },
    CheckDef { id: "persistence", short: "pe", explain: "persistence mode on (else the driver re-initialises the GPUs per process)" },
    CheckDef { id: "procs", short: "pr", explain: "no process holds a GPU but the fleet's own flightdeck jobs and runs" },
    CheckDef { id: "nics", short: "ni", explain: "data NICs present, up, at their VPC's MTU, at the same speed as on the other nodes" },
    CheckDef { id: "rdma", short: "rd", explain: "RDMA ports active (what ibv_devinfo reports as PORT_ACTIVE)" },
    CheckDef { id: "gpudirect", short: "gd", explain: "the GPUDirect flavour's pieces: plugin, RxDM, devices (the pre-flight's checks)" },
    CheckDef { id: "nccl-env", short: "en", explain: "no NCCL variable on the node that turns a transport off, names an interface, HCA or GPU the node lacks, or overrides the profile" },
    CheckDef { id: "nccl-init", short: "in", explain: "what NCCL needs at init: /dev/shm for the node's GPUs (128 MiB a GPU), memlock unlimited where RDMA devices are" },
    CheckDef { id: "sysctl", short: "sy", explain: "TCP buffers large enough for NCCL's socket traffic (16 MiB or more)" },
    CheckDef { id: "numa", short: "nu", explain: "every NUMA node with GPUs has a data NIC of its own" },
    CheckDef { id: "clock", short: "tm", explain: "clock within 250 ms of the head node's" },
    CheckDef { id: "reach", short: "re", explain: "the nodes reach each other without loss or delay on the NICs NCCL uses (the data NICs, else the ones NCCL picks)" },
    CheckDef { id: "placement", short: "pl", explain: "compact placement applied to every instance (GCP, from the API)" },
];

/// What a line's findings count, in the same words on every line (a node's, the
/// fleet's, the summary): `3 checks passed, 12 skipped`, `1 failed, 1 warned, 2 passed`.
/// A count of none is left out, except the passes. The CLI and the cockpit's Doctor
/// view count alike.
pub fn tally(outcomes: impl Iterator<Item = Outcome>) -> String {
    let mut n = std::collections::BTreeMap::<Outcome, usize>::new();
    for o in outcomes {
        *n.entry(o).or_default() += 1;
    }
    let n = |o: Outcome| n.get(&o).copied().unwrap_or(0);
    let mut parts = vec![];
    for (o, word) in [(Outcome::Fail, "failed"), (Outcome::Warn, "warned")] {
        if n(o) > 0 {
            parts.push(format!("{} {word}", n(o)));
        }
    }
    parts.push(format!("{} passed", n(Outcome::Pass)));
    if n(Outcome::Skip) > 0 {
        parts.push(format!("{} skipped", n(Outcome::Skip)));
    }
    // "checks" once, after the first number: "1 check failed, 2 passed".
    let first = parts.remove(0);
    let (count, rest) = first.split_once(' ').unwrap_or((&first, ""));
    let noun = if count == "1" { "check" } else { "checks" };
    let mut out = format!("{count} {noun} {rest}");
    for p in parts {
        out.push_str(", ");
        out.push_str(&p);
    }
    out
}

pub fn check_def(id: &str) -> Option<&'static CheckDef> {
    CHECKS.iter().find(|c| c.id == id)
}

/// Worst last, so `max` is the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Skip,
    Warn,
    Fail,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Skip => "skip",
            Outcome::Warn => "warn",
            Outcome::Fail => "fail",
        }
    }
}

/// One check's result on one node (or the fleet).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    pub check: &'static str,
    /// The node, or `None` for a finding about the fleet.
    pub node: Option<String>,
    pub outcome: Outcome,
    /// One line: what was found.
    pub what: String,
    /// The relevant output of the command that found it.
    pub evidence: Vec<String>,
    /// What to do; empty when nothing is to be done.
    pub fix: String,
    /// The finding this one follows from (`node2 nics`), when it is a consequence.
    pub follows: Option<String>,
}

impl Finding {
    fn new(check: &'static str, node: &str, outcome: Outcome, what: impl Into<String>) -> Finding {
        Finding {
            check,
            node: Some(node.to_string()),
            outcome,
            what: what.into(),
            evidence: vec![],
            fix: String::new(),
            follows: None,
        }
    }
    /// A finding about the fleet, not one node.
    pub fn fleet(check: &'static str, outcome: Outcome, what: impl Into<String>) -> Finding {
        Finding {
            node: None,
            ..Finding::new(check, "", outcome, what)
        }
    }
    pub fn evidence(mut self, lines: impl IntoIterator<Item = impl Into<String>>) -> Finding {
        self.evidence.extend(lines.into_iter().map(Into::into));
        self
    }
    pub fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = fix.into();
        self
    }
    /// `node check`, or `check` for the fleet: how other findings refer to it.
    pub fn key(&self) -> String {
        match &self.node {
            Some(n) => format!("{n} {}", self.check),
            None => self.check.to_string(),
        }
    }
}

/// What the doctor knows of the fleet before it looks.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub machine_type: Option<String>,
    pub flavour: GpuDirect,
    /// The NCCL environment lines a run would set (the pre-flight's input).
    pub env: Vec<String>,
    pub nodes: usize,
    /// The checks to run (`--only`); empty for all.
    pub only: Vec<String>,
}

impl Context {
    pub fn wants(&self, check: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|c| c == check)
    }

    /// GPUs per node and the model's name as `nvidia-smi` prints part of it.
    fn expected_gpus(&self) -> Option<(u32, Option<&'static str>)> {
        let m = self.machine_type.as_deref()?;
        let count = crate::nccl::expect::gpus_per_node(m)?;
        let model = match crate::cloud::gcp::layout::base_type(m) {
            "a3-highgpu-8g" | "a3-megagpu-8g" | "a3-edgegpu-8g" => Some("H100"),
            "a3-ultragpu-8g" => Some("H200"),
            "a4-highgpu-8g" => Some("B200"),
            t if t.starts_with("a2-ultragpu") => Some("A100-SXM4-80GB"),
            t if t.starts_with("a2-") => Some("A100"),
            t if t.starts_with("g2-") => Some("L4"),
            _ => None,
        };
        Some((count, model))
    }

    /// `NCCL_SOCKET_IFNAME` as the profile's environment sets it.
    pub fn socket_ifname(&self) -> Option<String> {
        self.env.iter().find_map(|l| {
            let i = l.find("NCCL_SOCKET_IFNAME=")?;
            let v = l[i + "NCCL_SOCKET_IFNAME=".len()..].split_whitespace().next()?;
            let v = v.trim_matches(|c| c == '"' || c == '\'');
            (!v.is_empty() && !v.starts_with('$')).then(|| v.to_string())
        })
    }

    /// The MTUs a data NIC of the flavour may have, least to most, as the pre-flight
    /// accepts them: the VPCs fleet apply, dstack and SkyPilot make (8244 for TCPX and
    /// TCPXO, 8896 for RDMA) up to Cluster Toolkit's multivpc default, 8896. Which one a
    /// VPC has is its maker's choice; that every node's NIC has the same is the fleet
    /// check's (`judge_fleet`), so a correct NIC is never told to go lower.
    fn data_mtu(&self) -> Option<(u32, u32)> {
        use crate::bootstrap::preflight::DATA_MTU_MAX;
        use crate::cloud::gcp::layout::{DATA_MTU, RDMA_MTU};
        match self.flavour {
            GpuDirect::Tcpx | GpuDirect::Tcpxo => Some((DATA_MTU, DATA_MTU_MAX)),
            GpuDirect::Rdma => Some((RDMA_MTU, DATA_MTU_MAX.max(RDMA_MTU))),
            GpuDirect::None => None,
        }
    }

    /// The pre-flight script of the flavour, without its interface checks (the `nics`
    /// check covers every data NIC and its MTU).
    pub fn preflight_script(&self) -> Option<String> {
        if self.flavour == GpuDirect::None || !self.wants("gpudirect") {
            return None;
        }
        let mut w = preflight::wants(self.flavour, &self.env);
        w.interfaces.clear();
        Some(preflight::script(&w))
    }
}

/// What the operator asked the doctor for: the machine type and GPUDirect flavour the
/// nodes should have (else the fleet file's), and only some checks.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub machine_type: Option<String>,
    pub flavour: Option<GpuDirect>,
    pub only: Vec<String>,
}

/// The context of a fleet of backend family `family`: its machine type (asked, else the
/// fleet file's first instance type), its GPUDirect flavour (asked, else the fleet
/// file's `network.gpudirect`, else the machine type's) and that flavour's NCCL
/// environment as the family's nodes have it ([`crate::nccl::profile::env_lines`]);
/// whether it asks for compact placement.
pub fn context_for(
    state_dir: &std::path::Path,
    fleet_arg: &str,
    fleet: &str,
    family: crate::fleet::BackendKind,
    nodes: usize,
    asked: Asked,
) -> (Context, bool) {
    let spec = crate::nccl::remote::fleet_spec(state_dir, fleet_arg, fleet);
    let (machine_type, auto, _) =
        crate::nccl::profile::machine_and_profile(spec.as_ref(), asked.machine_type);
    let flavour = asked.flavour.unwrap_or(auto);
    let compact = spec.as_ref().and_then(|s| s.placement) == Some(crate::fleet::spec::Placement::Cluster);
    (
        Context {
            machine_type,
            flavour,
            env: crate::nccl::profile::env_lines(family, flavour),
            nodes,
            only: asked.only,
        },
        compact,
    )
}

/// A node's facts, read from its sections.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Facts {
    pub gpus: Vec<gpu::Gpu>,
    /// `nvidia-smi topo -m`, when it printed a matrix.
    pub topo: Option<gpu::Topo>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// `path version` of every NCCL library found.
    pub nccl: Vec<(String, String)>,
    /// `path sha256-prefix` of every NCCL net plugin found.
    pub plugins: Vec<(String, String)>,
    pub kernel: Option<String>,
    pub os: Option<String>,
    pub nics: Vec<net::Nic>,
    pub route: Option<String>,
    pub rdma_ports: Vec<net::RdmaPort>,
    pub rdma_devices: usize,
    /// The node's clock when the script started (ns since the epoch).
    pub time_ns: Option<i128>,
    /// The compute processes on the GPUs, when `nvidia-smi` listed them.
    pub procs: Option<Vec<gpu::GpuProcess>>,
    /// Tools the checks use that the node lacks (`ping`).
    pub missing: Vec<String>,
    /// The OS's `ID` and `ID_LIKE` (/etc/os-release), for the command that installs them.
    pub os_ids: Vec<String>,
    /// `NCCL_SOCKET_IFNAME` as the node's own environment or nccl.conf sets it.
    pub socket_ifname: Option<String>,
}

impl Facts {
    pub fn read(s: &script::Sections) -> Facts {
        let mut f = Facts::default();
        if s.status("gpus") == Some(0) {
            f.gpus = gpu::parse_query(s.get("gpus").unwrap_or(""));
        }
        f.topo = gpu::parse_topo(s.get("topo").unwrap_or(""));
        let (driver, cuda) = gpu::banner_versions(s.get("smi").unwrap_or(""));
        f.driver = driver.or_else(|| f.gpus.first().map(|g| g.driver.clone()));
        f.cuda = cuda;
        for l in s.get("versions").unwrap_or("").lines() {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            match k {
                "kernel" => f.kernel = Some(v.to_string()),
                "os" => f.os = Some(v.to_string()),
                "nccl" | "plugin" => {
                    let (path, ver) = v.rsplit_once(' ').unwrap_or((v, "unknown"));
                    let list = if k == "nccl" { &mut f.nccl } else { &mut f.plugins };
                    if !list.iter().any(|(p, _)| p == path) {
                        list.push((path.to_string(), ver.to_string()));
                    }
                }
                _ => {}
            }
        }
        f.nics = net::parse_nics(
            s.get("nics").unwrap_or(""),
            s.get("addrs").unwrap_or(""),
            s.get("routes").unwrap_or(""),
        );
        f.route = net::default_route(s.get("route").unwrap_or(""));
        (f.rdma_ports, f.rdma_devices) = net::parse_rdma(s.get("rdma").unwrap_or(""));
        f.time_ns = s.get("time").and_then(|t| t.trim().parse().ok());
        if s.status("procs") == Some(0) {
            f.procs = Some(gpu::parse_procs(s.get("procs").unwrap_or("")));
        }
        for l in s.get("tools").unwrap_or("").lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["osid", ids @ ..] => {
                    f.os_ids = ids.iter().map(|i| i.trim_matches('"').to_string()).collect()
                }
                [tool, "no"] => f.missing.push(tool.to_string()),
                _ => {}
            }
        }
        f.socket_ifname = s.get("nccl-env").unwrap_or("").lines().rev().find_map(|l| {
            let v = l.split_once(' ')?.1.trim().strip_prefix("NCCL_SOCKET_IFNAME=")?;
            Some(v.trim().trim_matches('"').to_string())
        });
        f
    }

    /// Whether the node has `tool`, as far as it said (a node that did not say has it).
    pub fn has(&self, tool: &str) -> bool {
        !self.missing.iter().any(|t| t == tool)
    }

    /// The NICs NCCL's traffic between nodes takes, which the fleet compares and the
    /// reach check probes, and why those. A GPUDirect flavour: its data NICs (its
    /// `NCCL_SOCKET_IFNAME` is the control NIC, for the bootstrap only). A profile of
    /// `none` (NCCL's socket transport carries the data): the ones `NCCL_SOCKET_IFNAME`
    /// names (the node's own setting, else the profile's), else the data NICs, else (one
    /// NIC) the ones NCCL itself picks on the node ([`net::nccl_socket_nics`]).
    pub fn probe_nics(&self, ctx: &Context) -> (Vec<&net::Nic>, String) {
        if ctx.flavour != GpuDirect::None {
            return (self.data_nics(), "the data NICs".to_string());
        }
        let ifname = self.socket_ifname.clone().or_else(|| ctx.socket_ifname());
        if let Some(list) = ifname.filter(|l| l.len() > 1) {
            return (
                net::nccl_socket_nics(&self.nics, Some(&list)),
                format!("NCCL_SOCKET_IFNAME={list}"),
            );
        }
        let data = self.data_nics();
        if !data.is_empty() {
            return (data, "the data NICs".to_string());
        }
        (
            net::nccl_socket_nics(&self.nics, None),
            "no data NIC: the NICs NCCL picks (ib*, else all but lo and docker*)".to_string(),
        )
    }

    /// The NICs that carry traffic between nodes, with the RDMA ports' netdevs.
    pub fn data_nics(&self) -> Vec<&net::Nic> {
        net::data_nics(&self.nics, self.route.as_deref())
    }

    /// The versions compared across nodes, by name.
    pub fn versions(&self) -> BTreeMap<&'static str, String> {
        let mut v = BTreeMap::new();
        if let Some(d) = &self.driver {
            v.insert("driver", d.clone());
        }
        if let Some(c) = &self.cuda {
            v.insert("CUDA", c.clone());
        }
        if !self.nccl.is_empty() {
            let mut n: Vec<String> = self.nccl.iter().map(|(p, v)| format!("{v} ({p})")).collect();
            n.sort();
            v.insert("NCCL", n.join(", "));
        }
        if !self.plugins.is_empty() {
            let mut n: Vec<String> = self
                .plugins
                .iter()
                .map(|(p, h)| format!("{p} sha256:{h}"))
                .collect();
            n.sort();
            v.insert("NCCL plugin", n.join(", "));
        }
        v
    }
}

const FIX_GPU_MISSING: &str = "a GPU is missing from the driver's view: look for Xid 79 (fallen off the bus) in the kernel log, reboot; replace the VM if it persists";

const FIX_RESET: &str =
    "drain the node and reset the GPU (`nvidia-smi -r -i N` with no process on it) or reboot; if it comes back, replace the VM (GCP: report the host as faulty, `gcloud compute instances report-host-as-faulty`)";

/// Judge one node from its sections. `exit` is the script's exit status and `error` why
/// it could not run, if it could not.
pub fn judge_node(
    ctx: &Context,
    node: &str,
    s: &script::Sections,
    exit: i32,
    error: Option<&str>,
) -> Vec<Finding> {
    if let Some(e) = error {
        return vec![Finding::new(
            "reach",
            node,
            Outcome::Fail,
            format!("could not run the checks: {e}"),
        )
        .fix(
            "check that the node is up and its sshd answers (`flightdeck exec FLEET --nodes NODE -- true`)",
        )];
    }
    judge_facts(ctx, node, s, &Facts::read(s), exit)
}

/// Judge a node that answered, from its sections and the facts read from them.
pub fn judge_facts(ctx: &Context, node: &str, s: &script::Sections, f: &Facts, exit: i32) -> Vec<Finding> {
    let mut out = vec![];
    let smi_missing = s.status("smi") == Some(127);
    let gpu_node = !smi_missing || ctx.expected_gpus().is_some();
    let skip_no_gpu =
        |check: &'static str| Finding::new(check, node, Outcome::Skip, "no nvidia-smi: not a GPU node");

    // GPUs.
    if ctx.wants("gpus") {
        out.push(if smi_missing {
            match ctx.expected_gpus() {
                Some((n, _)) => Finding::new("gpus", node, Outcome::Fail, format!("nvidia-smi not found, expected {n} GPUs"))
                    .fix("install the NVIDIA driver (`flightdeck fleet bootstrap FLEET` on GCP images)"),
                None => skip_no_gpu("gpus"),
            }
        } else if f.gpus.is_empty() {
            Finding::new("gpus", node, Outcome::Fail, "nvidia-smi lists no GPU")
                .evidence(s.get("gpus").unwrap_or("").lines().take(5))
                .fix("the driver does not see the GPUs: check `dmesg | grep NVRM`, reboot; replace the VM if it persists")
        } else {
            judge_gpus(ctx, node, f)
        });
    }
    let have_gpus = !f.gpus.is_empty();

    if ctx.wants("nvlink") {
        out.push(if !have_gpus {
            skip_no_gpu("nvlink")
        } else {
            judge_nvlink(ctx, node, s, f)
        });
    }
    if ctx.wants("ecc") {
        out.push(if !have_gpus {
            skip_no_gpu("ecc")
        } else {
            judge_ecc(node, f)
        });
    }
    if ctx.wants("xid") {
        out.push(if !gpu_node {
            skip_no_gpu("xid")
        } else {
            judge_xid(node, s)
        });
    }
    if ctx.wants("clocks") {
        out.push(if !have_gpus {
            skip_no_gpu("clocks")
        } else {
            judge_clocks(node, f)
        });
    }
    if ctx.wants("persistence") {
        out.push(if !have_gpus {
            skip_no_gpu("persistence")
        } else {
            let off: Vec<&gpu::Gpu> = f.gpus.iter().filter(|g| g.persistence == Some(false)).collect();
            if off.is_empty() {
                Finding::new("persistence", node, Outcome::Pass, "on for every GPU")
            } else {
                Finding::new(
                    "persistence",
                    node,
                    Outcome::Warn,
                    format!("off on {}", gpu_list(off.iter().map(|g| g.index))),
                )
                .evidence(off.iter().map(|g| g.line.clone()))
                .fix("run nvidia-persistenced (or `sudo nvidia-smi -pm 1`) so the driver keeps the GPUs initialised")
            }
        });
    }
    if ctx.wants("procs") {
        out.push(if !have_gpus {
            skip_no_gpu("procs")
        } else {
            judge_procs(node, f, s)
        });
    }
    if ctx.wants("nics") {
        out.push(judge_nics(ctx, node, f, s));
    }
    if ctx.wants("rdma") {
        out.push(judge_rdma(ctx, node, f, s));
    }
    if ctx.wants("gpudirect") {
        out.push(judge_gpudirect(ctx, node, s));
    }
    if ctx.wants("nccl-env") {
        out.push(judge_nccl_env(ctx, node, f, s));
    }
    if ctx.wants("nccl-init") {
        out.push(judge_nccl_init(node, f, s));
    }
    if ctx.wants("sysctl") {
        out.push(judge_sysctl(ctx, node, s));
    }
    if ctx.wants("numa") {
        out.push(judge_numa(node, f));
    }
    if exit != 0 && out.iter().all(|f| f.outcome == Outcome::Pass) {
        out.push(Finding::new(
            "reach",
            node,
            Outcome::Warn,
            format!("the check script ended with exit {exit}"),
        ));
    }
    out
}

/// The node checks that read a section of the node script.
fn checks_reading(section: &str) -> &'static [&'static str] {
    match section {
        "smi" => &["gpus"],
        "gpus" => &["gpus", "ecc", "clocks", "persistence", "procs"],
        "procs" => &["procs"],
        "topo" => &["nvlink", "numa"],
        "nvlink" => &["nvlink"],
        "xid" => &["xid"],
        "nics" | "addrs" | "route" | "routes" => &["nics", "numa"],
        "rdma" => &["rdma"],
        "sysctl" => &["sysctl"],
        "nccl-env" => &["nccl-env"],
        "nccl-res" => &["nccl-init"],
        "gpudirect" => &["gpudirect"],
        _ => &[],
    }
}

/// Say where a node's output was cut: in the evidence of each finding that read a cut
/// section (a pass becomes a warning: it was judged on part of the output), else in a
/// finding of its own.
pub fn note_cuts(node: &str, findings: &mut Vec<Finding>, cuts: &script::Cuts) {
    if cuts.is_empty() {
        return;
    }
    let mut said = false;
    for section in cuts.names() {
        for f in findings
            .iter_mut()
            .filter(|f| checks_reading(section).contains(&f.check))
        {
            if f.outcome == Outcome::Pass {
                f.outcome = Outcome::Warn;
                f.what = format!("{} (judged on output cut short)", f.what);
            }
            f.evidence.extend(cuts.of(section));
            said = true;
        }
    }
    if !said {
        findings.push(
            Finding::new("reach", node, Outcome::Warn, "its output was cut short")
                .evidence(cuts.lines())
                .fix(FIX_CUT),
        );
    }
}

const FIX_CUT: &str = "a command on the node prints without end (a runaway nvidia-smi): run it by hand (`flightdeck exec FLEET --nodes NODE -- 'nvidia-smi | head'`)";

/// A node whose output passed [`script::NODE_CAP`]: not the node script's output (it
/// cuts every section well below), so nothing of it is judged.
pub fn judge_flood(node: &str, cuts: &script::Cuts) -> Vec<Finding> {
    vec![Finding::new(
        "reach",
        node,
        Outcome::Fail,
        format!(
            "its output passed {} MiB, more than the checks print: nothing of it was judged",
            script::NODE_CAP / (1024 * 1024)
        ),
    )
    .evidence(cuts.lines())
    .fix("the node does not run the doctor's script as sent (a login command, a wrapper or a compromised node prints instead): check the node's sshd and shell set-up")]
}

fn gpu_list(idx: impl Iterator<Item = u32>) -> String {
    let v: Vec<String> = idx.map(|i| i.to_string()).collect();
    format!("GPU {}", v.join(","))
}

fn judge_gpus(ctx: &Context, node: &str, f: &Facts) -> Finding {
    let names: Vec<&str> = f.gpus.iter().map(|g| g.name.as_str()).collect();
    let model = names[0];
    let evidence: Vec<String> = f
        .gpus
        .iter()
        .map(|g| format!("GPU {}: {} ({})", g.index, g.name, g.bus_id))
        .collect();
    let n = f.gpus.len() as u32;
    if let Some((want, want_model)) = ctx.expected_gpus() {
        let m = ctx.machine_type.as_deref().unwrap_or("");
        if n != want {
            return Finding::new("gpus", node, Outcome::Fail, format!("{n} GPUs, {m} has {want}"))
                .evidence(evidence)
                .fix(FIX_GPU_MISSING);
        }
        if let Some(wm) = want_model {
            if let Some(bad) = names.iter().find(|n| !n.contains(wm)) {
                return Finding::new("gpus", node, Outcome::Fail, format!("{bad}, {m} has {wm}"))
                    .evidence(evidence)
                    .fix("the node is not the machine type the fleet says: check the fleet file");
            }
        }
    }
    if names.iter().any(|n| *n != model) {
        return Finding::new(
            "gpus",
            node,
            Outcome::Fail,
            "GPUs of different models on one node",
        )
        .evidence(evidence)
        .fix("check the node's hardware");
    }
    Finding::new("gpus", node, Outcome::Pass, format!("{n}× {model}")).evidence(evidence)
}

fn judge_nvlink(ctx: &Context, node: &str, s: &script::Sections, f: &Facts) -> Finding {
    let Some(topo) = &f.topo else {
        return Finding::new(
            "nvlink",
            node,
            Outcome::Warn,
            "`nvidia-smi topo -m` printed no matrix",
        )
        .evidence(s.get("topo").unwrap_or("").lines().take(5));
    };
    let mut evidence: Vec<String> = s
        .get("topo")
        .map(gpu::strip_ansi)
        .unwrap_or_default()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    if topo.gpus.len() < 2 {
        return Finding::new("nvlink", node, Outcome::Skip, "one GPU: no NVLink to check").evidence(evidence);
    }
    let mut best = 0;
    let mut pairs = vec![];
    for (i, row) in topo.links.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            if i < j {
                let n = gpu::nvlinks(v);
                best = best.max(n.unwrap_or(0));
                pairs.push((i, j, v.clone(), n));
            }
        }
    }
    let nvlink_machine = ctx
        .machine_type
        .as_deref()
        .map(|m| m.starts_with("a3-") || m.starts_with("a4-") || m.starts_with("a2-"))
        .unwrap_or(false);
    if best == 0 {
        return if nvlink_machine {
            Finding::new("nvlink", node, Outcome::Fail, "no NVLink between any GPUs")
                .evidence(evidence)
                .fix("the NVLink fabric is down: check that nvidia-fabricmanager runs (`systemctl status nvidia-fabricmanager`), reboot; replace the VM if it persists")
        } else {
            Finding::new(
                "nvlink",
                node,
                Outcome::Skip,
                "no NVLink on this machine (PCIe only)",
            )
            .evidence(evidence)
        };
    }
    let mut bad: Vec<String> = pairs
        .iter()
        .filter(|(_, _, _, n)| *n != Some(best))
        .map(|(i, j, v, _)| format!("GPU{i}-GPU{j} {v}"))
        .collect();
    let links = gpu::parse_nvlink(s.get("nvlink").unwrap_or(""));
    for (g, ls) in &links {
        for (n, speed) in ls {
            if speed.is_none() {
                bad.push(format!("{g} link {n} inactive"));
            }
        }
    }
    if bad.is_empty() {
        let link_count = links.first().map(|(_, l)| l.len()).unwrap_or(0);
        return Finding::new(
            "nvlink",
            node,
            Outcome::Pass,
            format!(
                "all {} GPU pairs NV{best}{}",
                pairs.len(),
                if link_count > 0 {
                    format!(", {link_count} links per GPU active")
                } else {
                    String::new()
                }
            ),
        )
        .evidence(evidence);
    }
    evidence.extend(links.iter().flat_map(|(g, ls)| {
        ls.iter()
            .filter(|(_, s)| s.is_none())
            .map(move |(n, _)| format!("{g}: Link {n}: <inactive>"))
    }));
    Finding::new(
        "nvlink",
        node,
        Outcome::Fail,
        format!("{} where the other pairs have NV{best}", shorten(&bad, 3)),
    )
    .evidence(evidence)
    .fix("an NVLink is down or degraded: NCCL falls back to slower paths. Reset the GPUs or reboot; replace the VM if it persists")
}

use crate::words::shorten;

fn judge_ecc(node: &str, f: &Facts) -> Finding {
    let mut fail = vec![];
    let mut warn = vec![];
    for g in &f.gpus {
        if g.ecc_volatile.unwrap_or(0) > 0 {
            fail.push(format!(
                "GPU {}: {} uncorrectable ECC errors since the driver loaded",
                g.index,
                g.ecc_volatile.unwrap_or(0)
            ));
        } else if g.ecc_aggregate.unwrap_or(0) > 0 {
            warn.push(format!(
                "GPU {}: {} uncorrectable ECC errors over its life",
                g.index,
                g.ecc_aggregate.unwrap_or(0)
            ));
        }
        if g.remap_failure == Some(true) {
            fail.push(format!("GPU {}: row remapping failed", g.index));
        }
        if g.remap_pending == Some(true) || g.retired_pending == Some(true) {
            fail.push(format!(
                "GPU {}: a row remap or page retirement waits for a GPU reset",
                g.index
            ));
        }
    }
    let lines: Vec<String> = f.gpus.iter().map(|g| g.line.clone()).collect();
    if !fail.is_empty() {
        return Finding::new("ecc", node, Outcome::Fail, shorten(&fail, 2))
            .evidence(lines)
            .fix(FIX_RESET);
    }
    if !warn.is_empty() {
        return Finding::new("ecc", node, Outcome::Warn, shorten(&warn, 2))
            .evidence(lines)
            .fix("none now; if the count grows, drain the node and replace the VM");
    }
    Finding::new(
        "ecc",
        node,
        Outcome::Pass,
        "no uncorrectable errors, nothing pending",
    )
    .evidence(lines)
}

fn judge_xid(node: &str, s: &script::Sections) -> Finding {
    let text = s.get("xid").unwrap_or("");
    if s.status("xid") != Some(0) {
        return Finding::new(
            "xid",
            node,
            Outcome::Skip,
            text.lines().next().unwrap_or("kernel log not read").to_string(),
        )
        .fix("allow the login user `sudo -n dmesg`, or set kernel.dmesg_restrict=0, to check Xid events");
    }
    let xids = gpu::parse_xids(text);
    if xids.is_empty() {
        return Finding::new("xid", node, Outcome::Pass, "no Xid since boot");
    }
    let mut codes: Vec<u32> = xids.iter().map(|x| x.code).collect();
    codes.sort();
    codes.dedup();
    let hard = codes.iter().any(|c| gpu::xid_meaning(*c).1);
    let words: Vec<String> = codes
        .iter()
        .map(|c| {
            let at: Vec<&str> = xids
                .iter()
                .filter(|x| x.code == *c)
                .map(|x| x.pci.as_str())
                .collect();
            format!("Xid {c} ({}) on {}", gpu::xid_meaning(*c).0, at.join(", "))
        })
        .collect();
    let last: Vec<String> = xids.iter().rev().take(10).rev().map(|x| x.line.clone()).collect();
    Finding::new(
        "xid",
        node,
        if hard { Outcome::Fail } else { Outcome::Warn },
        shorten(&words, 2),
    )
    .evidence(last)
    .fix(if hard {
        FIX_RESET
    } else {
        "application-side Xids: look at the job that ran then; nothing to do on the node unless they repeat"
    })
}

fn judge_clocks(node: &str, f: &Facts) -> Finding {
    let mut fail = vec![];
    let mut warn = vec![];
    for g in &f.gpus {
        if gpu::locked_low(g) {
            fail.push(format!(
                "GPU {}: busy at {} of {} MHz with no throttle reason: clocks locked",
                g.index,
                g.sm_mhz.unwrap_or(0),
                g.sm_max_mhz.unwrap_or(0)
            ));
            continue;
        }
        let Some(mask) = g.event_reasons else { continue };
        let r = gpu::reasons(mask);
        let words = r
            .iter()
            .filter(|w| **w != "idle")
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if mask & gpu::HARD_THROTTLE != 0 {
            fail.push(format!(
                "GPU {}: {words} ({} C, {} MHz)",
                g.index,
                g.temperature_c.unwrap_or(0),
                g.sm_mhz.unwrap_or(0)
            ));
        } else if mask & gpu::SOFT_THROTTLE != 0 {
            warn.push(format!(
                "GPU {}: {words} ({} of {} MHz)",
                g.index,
                g.sm_mhz.unwrap_or(0),
                g.sm_max_mhz.unwrap_or(0)
            ));
        }
    }
    let lines: Vec<String> = f.gpus.iter().map(|g| g.line.clone()).collect();
    if !fail.is_empty() {
        return Finding::new("clocks", node, Outcome::Fail, shorten(&fail, 2))
            .evidence(lines)
            .fix(if fail.iter().any(|f| f.contains("clocks locked")) {
                "`sudo nvidia-smi -rgc` (and `-rac`) resets locked GPU and application clocks"
            } else {
                "the GPU is held down by heat or its board: check `nvidia-smi -q -d PERFORMANCE,TEMPERATURE`; drain the node and report the host if it persists"
            });
    }
    if !warn.is_empty() {
        return Finding::new("clocks", node, Outcome::Warn, shorten(&warn, 2))
            .evidence(lines)
            .fix("clocks locked or capped by a setting: `sudo nvidia-smi -rgc` and `-rac` reset locked and application clocks; check the power limit (`nvidia-smi -q -d POWER`)");
    }
    Finding::new("clocks", node, Outcome::Pass, "no GPU held down").evidence(lines)
}

/// The command that installs `tool` on a node of OS ids `ids` (`ID` then `ID_LIKE` of
/// /etc/os-release).
pub fn install_command(tool: &str, ids: &[String]) -> String {
    let package = |family: &str| match (tool, family) {
        ("ping", "debian") => "iputils-ping",
        ("ping", _) => "iputils",
        ("timeout", _) => "coreutils",
        ("ps", "debian") | ("ps", "alpine") => "procps",
        ("ps", _) => "procps-ng",
        _ => tool,
    };
    for id in ids {
        let cmd = match id.as_str() {
            "debian" | "ubuntu" => format!("sudo apt-get install -y {}", package("debian")),
            "rhel" | "centos" | "fedora" | "rocky" | "almalinux" | "amzn" | "ol" => {
                format!("sudo dnf install -y {}", package("rhel"))
            }
            "sles" | "suse" | "opensuse" | "opensuse-leap" => format!("sudo zypper install -y {}", package("suse")),
            "alpine" => format!("sudo apk add {}", package("alpine")),
            "arch" => format!("sudo pacman -S --noconfirm {}", package("arch")),
            "cos" => {
                return format!("Container-Optimized OS has no package manager: run it in a toolbox (`toolbox apt-get install -y {}`)", package("debian"))
            }
            _ => continue,
        };
        return format!("install it: `{cmd}`");
    }
    format!("install {} with the node's package manager", package(""))
}

/// What else holds the node's GPUs: every compute process, the fleet's own flightdeck
/// work (a job or run still running) a warning with `job stop`, anything else a failure
/// with its kill command.
fn judge_procs(node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let Some(procs) = &f.procs else {
        let text = s.get("procs").unwrap_or("");
        return Finding::new(
            "procs",
            node,
            Outcome::Skip,
            format!(
                "not checked: `nvidia-smi --query-compute-apps` failed: {}",
                text.lines().next().unwrap_or("no output")
            ),
        );
    };
    if procs.is_empty() {
        return Finding::new("procs", node, Outcome::Pass, "no process on the GPUs");
    }
    let gpu_of = |uuid: &str| {
        f.gpus
            .iter()
            .find(|g| g.uuid == uuid)
            .map(|g| format!("GPU {}", g.index))
            .unwrap_or_else(|| uuid.to_string())
    };
    let line = |p: &gpu::GpuProcess| {
        format!(
            "{}: pid {} ({}, `{}`, {}, for {}){}",
            gpu_of(&p.gpu_uuid),
            p.pid,
            p.user.as_deref().unwrap_or("user unknown"),
            p.command.as_deref().unwrap_or("not in ps"),
            p.mem_mib
                .map(|m| format!("{m} MiB"))
                .unwrap_or("memory unknown".into()),
            p.age_s.map(gpu::age).unwrap_or("?".into()),
            p.owner
                .as_deref()
                .map(|o| format!(": flightdeck {o}"))
                .unwrap_or_default()
        )
    };
    let evidence: Vec<String> = procs.iter().map(line).collect();
    let stray: Vec<&gpu::GpuProcess> = procs.iter().filter(|p| p.owner.is_none()).collect();
    if !stray.is_empty() {
        let mut pids: Vec<String> = stray.iter().map(|p| p.pid.to_string()).collect();
        pids.dedup();
        let what: Vec<String> = stray.iter().map(|p| line(p)).collect();
        return Finding::new(
            "procs",
            node,
            Outcome::Fail,
            format!("held by a process not of a flightdeck job or run: {}", shorten(&what, 2)),
        )
        .evidence(evidence)
        .fix(format!(
            "a job here would share the GPUs (out of memory, half speed): end it if it is a leftover (`sudo kill {}`; `sudo kill -9` if it stays), or ask its owner",
            pids.join(" ")
        ));
    }
    let mut owners: Vec<&str> = procs.iter().filter_map(|p| p.owner.as_deref()).collect();
    owners.sort();
    owners.dedup();
    let stops: Vec<String> = owners
        .iter()
        .map(|o| match o.split_once(' ') {
            Some(("job", id)) => format!("`flightdeck job stop {id}`"),
            Some((_, id)) => format!("NCCL run {id} ends by itself"),
            None => o.to_string(),
        })
        .collect();
    Finding::new(
        "procs",
        node,
        Outcome::Warn,
        format!("in use by flightdeck {}", owners.join(", ")),
    )
    .evidence(evidence)
    .fix(format!(
        "another job or run here shares the GPUs with it: wait for it, or stop it ({})",
        stops.join(", ")
    ))
}

fn judge_nics(ctx: &Context, node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let data = f.data_nics();
    let evidence: Vec<String> = s.get("nics").unwrap_or("").lines().map(str::to_string).collect();
    if data.is_empty() {
        return if ctx.data_mtu().is_some() {
            Finding::new(
                "nics",
                node,
                Outcome::Fail,
                "no data NIC: only the control NIC is up",
            )
            .evidence(evidence)
            .fix("create the instance with the flavour's data VPCs (fleet apply does)")
        } else {
            Finding::new("nics", node, Outcome::Skip, "no data NIC besides the control NIC")
                .evidence(evidence)
        };
    }
    let mut bad = vec![];
    for n in &data {
        if n.state != "up" && n.state != "unknown" {
            bad.push(format!("{} {}", n.name, n.state));
        } else if let (Some((least, most)), Some(mtu)) = (ctx.data_mtu(), n.mtu) {
            if !(least..=most).contains(&mtu) {
                let want = if least == most {
                    least.to_string()
                } else {
                    format!("{least} to {most}")
                };
                bad.push(format!("{} MTU {mtu}, data VPCs have {want}", n.name));
            }
        }
    }
    if !bad.is_empty() {
        let fix = if bad.iter().any(|b| b.contains("MTU")) {
            "set the NIC's MTU to its VPC's (`gcloud compute networks describe VPC --format='value(mtu)'`, then `sudo ip link set NIC mtu M`); the VPC's MTU is set at its creation, which fleet apply does"
        } else {
            "bring the NIC up (`sudo ip link set NIC up`); if it stays down, the VM lost the NIC: recreate it"
        };
        return Finding::new("nics", node, Outcome::Fail, shorten(&bad, 3))
            .evidence(evidence)
            .fix(fix);
    }
    let names: Vec<String> = data
        .iter()
        .map(|n| {
            format!(
                "{} {}",
                n.name,
                n.mtu.map(|m| m.to_string()).unwrap_or("?".into())
            )
        })
        .collect();
    Finding::new(
        "nics",
        node,
        Outcome::Pass,
        format!("{} data NICs up: {}", data.len(), shorten(&names, 4)),
    )
    .evidence(evidence)
}

fn judge_rdma(ctx: &Context, node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let evidence: Vec<String> = s.get("rdma").unwrap_or("").lines().map(str::to_string).collect();
    if f.rdma_ports.is_empty() {
        if ctx.flavour == GpuDirect::Rdma {
            if f.rdma_devices > 0 {
                return Finding::new(
                    "rdma",
                    node,
                    Outcome::Warn,
                    format!("{} RDMA devices, no port state readable", f.rdma_devices),
                )
                .evidence(evidence);
            }
            return Finding::new("rdma", node, Outcome::Fail, "no RDMA device")
                .evidence(evidence)
                .fix("create the instance with the RoCE VPC's MRDMA NICs (fleet apply does) and install the ibverbs packages (fleet bootstrap)");
        }
        return Finding::new("rdma", node, Outcome::Skip, "no RDMA ports on this node");
    }
    let down: Vec<String> = f
        .rdma_ports
        .iter()
        .filter(|p| {
            !p.state.ends_with("ACTIVE") || (!p.phys_state.ends_with("LinkUp") && p.phys_state != "-")
        })
        .map(|p| format!("{} port {} {} {}", p.device, p.port, p.state, p.phys_state))
        .collect();
    // An ACTIVE port whose physical state could not be read (`-`) is not called down:
    // the kernel's ib sysfs has `phys_state` beside `state`, so its absence is said as
    // what it is.
    let unread: Vec<String> = f
        .rdma_ports
        .iter()
        .filter(|p| p.state.ends_with("ACTIVE") && p.phys_state == "-")
        .map(|p| format!("{} port {}", p.device, p.port))
        .collect();
    if down.is_empty() && !unread.is_empty() {
        Finding::new(
            "rdma",
            node,
            Outcome::Warn,
            format!("active, physical state unreadable: {}", shorten(&unread, 3)),
        )
        .evidence(evidence)
        .fix("read the ports with `ibv_devinfo`; /sys/class/infiniband/*/ports/*/phys_state is missing")
    } else if down.is_empty() {
        Finding::new(
            "rdma",
            node,
            Outcome::Pass,
            format!("{} ports active", f.rdma_ports.len()),
        )
        .evidence(evidence)
    } else {
        Finding::new(
            "rdma",
            node,
            Outcome::Fail,
            format!("not active: {}", shorten(&down, 3)),
        )
        .evidence(evidence)
        .fix("check `ibv_devinfo` and the NIC's link; a port that stays down needs the VM recreated")
    }
}

fn judge_gpudirect(ctx: &Context, node: &str, s: &script::Sections) -> Finding {
    if ctx.flavour == GpuDirect::None {
        return Finding::new(
            "gpudirect",
            node,
            Outcome::Skip,
            "the fleet has no GPUDirect flavour",
        );
    }
    let Some(checks) = script::gpudirect_checks(s) else {
        return Finding::new(
            "gpudirect",
            node,
            Outcome::Fail,
            "the GPUDirect checks did not report",
        );
    };
    let evidence: Vec<String> = checks
        .iter()
        .map(|c| format!("{} {}: {}", if c.ok { "ok  " } else { "FAIL" }, c.name, c.detail))
        .collect();
    let failed: Vec<&preflight::Check> = checks.iter().filter(|c| !c.ok).collect();
    if failed.is_empty() {
        return Finding::new(
            "gpudirect",
            node,
            Outcome::Pass,
            format!(
                "GPUDirect-{}: {} pieces in place",
                ctx.flavour.name(),
                checks.len()
            ),
        )
        .evidence(evidence);
    }
    let what: Vec<String> = failed
        .iter()
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    Finding::new("gpudirect", node, Outcome::Fail, shorten(&what, 2))
        .evidence(evidence)
        .fix(preflight::fix(ctx.flavour, failed[0]))
}

fn judge_nccl_env(ctx: &Context, node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let text = s.get("nccl-env").unwrap_or("");
    let mut fail = vec![];
    let mut warn = vec![];
    let mut lines = vec![];
    for l in text.lines() {
        // `env NCCL_X=1` or `/etc/nccl.conf NCCL_X=1`.
        let Some((source, kv)) = l.split_once(' ') else {
            continue;
        };
        let kv = kv.trim();
        if kv.starts_with('#') || kv.is_empty() {
            continue;
        }
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim().trim_matches('"'));
        lines.push(l.to_string());
        let from = if source == "env" {
            "the login environment".to_string()
        } else {
            source.to_string()
        };
        let off = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
        // A setting naming what the node lacks breaks NCCL's init whatever the profile.
        let node_has = nccl_init::Node {
            nics: &f.nics,
            rdma_ports: &f.rdma_ports,
            rdma_devices: f.rdma_devices,
            gpus: &f.gpus,
        };
        match nccl_init::setting(k, v, node_has) {
            Some((nccl_init::Severity::Fail, why)) => {
                fail.push(format!("{k}={v} in {from}: {why}"));
                continue;
            }
            Some((_, why)) => {
                warn.push(format!("{k}={v} in {from}: {why}"));
                continue;
            }
            None => {}
        }
        match k {
            "NCCL_P2P_DISABLE" | "NCCL_SHM_DISABLE" if off(v) => fail.push(format!(
                "{k}={v} in {from}: GPUs on a node talk through the network stack"
            )),
            "NCCL_IB_DISABLE" if off(v) && ctx.flavour == GpuDirect::Rdma => {
                fail.push(format!("{k}={v} in {from}: RDMA is off"))
            }
            "NCCL_NET" if v.eq_ignore_ascii_case("socket") && ctx.flavour != GpuDirect::None => {
                fail.push(format!("{k}={v} in {from}: GPUDirect is off"))
            }
            "NCCL_DEBUG" if v.eq_ignore_ascii_case("trace") => {
                warn.push(format!("{k}={v} in {from}: slows every collective"))
            }
            // Logging, and what NVIDIA's images set to describe themselves.
            "NCCL_DEBUG" | "NCCL_DEBUG_SUBSYS" | "NCCL_DEBUG_FILE" | "NCCL_VERSION" | "NCCL_HOME"
            | "NCCL_LIB_DIR" | "NCCL_INCLUDE_DIR" => {}
            // Not NCCL's; read only for the GPUs it names (above).
            "CUDA_VISIBLE_DEVICES" => {}
            _ => warn.push(format!(
                "{k}={v} in {from}: overrides what flightdeck's profile sets"
            )),
        }
    }
    if !fail.is_empty() {
        return Finding::new("nccl-env", node, Outcome::Fail, shorten(&fail, 2))
            .evidence(lines)
            .fix("remove the variable from the node's environment or nccl.conf, or make it name what the node has; flightdeck's profile sets what the flavour needs");
    }
    if !warn.is_empty() {
        return Finding::new("nccl-env", node, Outcome::Warn, shorten(&warn, 2))
            .evidence(lines)
            .fix("remove it unless you mean it: jobs and runs on this node read it");
    }
    Finding::new(
        "nccl-env",
        node,
        Outcome::Pass,
        "no NCCL variable set on the node",
    )
    .evidence(lines)
}

/// What NCCL needs at init on the node ([`nccl_init::judge_resources`]).
fn judge_nccl_init(node: &str, f: &Facts, s: &script::Sections) -> Finding {
    let text = s.get("nccl-res").unwrap_or("");
    let evidence: Vec<String> = text.lines().map(str::to_string).collect();
    if s.status("nccl-res").is_none() {
        return Finding::new("nccl-init", node, Outcome::Fail, "the check did not report").evidence(evidence);
    }
    let rdma = !f.rdma_ports.is_empty() || f.rdma_devices > 0;
    let j = nccl_init::judge_resources(text, f.gpus.len(), rdma);
    let (outcome, what) = if !j.fail.is_empty() {
        (Outcome::Fail, shorten(&j.fail, 2))
    } else if !j.warn.is_empty() {
        (Outcome::Warn, shorten(&j.warn, 2))
    } else {
        (Outcome::Pass, j.pass)
    };
    let finding = Finding::new("nccl-init", node, outcome, what).evidence(evidence);
    if j.fixes.is_empty() {
        finding
    } else {
        finding.fix(j.fixes.join("; "))
    }
}

/// 16 MiB: the buffers Google's TCP guidance sizes for high-bandwidth VMs.
pub const TCP_BUFFER: u64 = 16 << 20;

fn judge_sysctl(ctx: &Context, node: &str, s: &script::Sections) -> Finding {
    let text = s.get("sysctl").unwrap_or("");
    let evidence: Vec<String> = text.lines().map(str::to_string).collect();
    if ctx.nodes < 2 {
        return Finding::new(
            "sysctl",
            node,
            Outcome::Skip,
            "one node: NCCL's traffic never leaves it",
        )
        .evidence(evidence);
    }
    if ctx.flavour == GpuDirect::Rdma {
        return Finding::new("sysctl", node, Outcome::Skip, "RDMA: NCCL's data bypasses TCP")
            .evidence(evidence);
    }
    let value = |k: &str| -> Option<u64> {
        let l = text.lines().find(|l| l.starts_with(k))?;
        l.split('=').nth(1)?.split_whitespace().last()?.parse().ok()
    };
    let small: Vec<String> = [
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    ]
    .iter()
    .filter_map(|k| match value(k) {
        Some(v) if v < TCP_BUFFER => Some(format!("{k} {} MiB", v >> 20)),
        _ => None,
    })
    .collect();
    if small.is_empty() {
        return Finding::new("sysctl", node, Outcome::Pass, "TCP buffers of 16 MiB or more")
            .evidence(evidence);
    }
    Finding::new("sysctl", node, Outcome::Warn, format!("small TCP buffers: {}", shorten(&small, 2)))
        .evidence(evidence)
        .fix("`sudo sysctl -w net.core.rmem_max=67108864 net.core.wmem_max=67108864 net.ipv4.tcp_rmem='4096 131072 67108864' net.ipv4.tcp_wmem='4096 16384 67108864'`, kept in /etc/sysctl.d/")
}

fn judge_numa(node: &str, f: &Facts) -> Finding {
    let topo = f.topo.as_ref();
    let gpu_numa: std::collections::BTreeSet<u32> = topo
        .iter()
        .flat_map(|t| t.numa.iter().flatten().copied())
        .collect();
    let mut nic_numa: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for n in f.data_nics() {
        if let Some(k) = n.numa {
            nic_numa.entry(k).or_default().push(n.name.clone());
        }
    }
    for p in &f.rdma_ports {
        if let Some(k) = p.numa {
            nic_numa.entry(k).or_default().push(p.device.clone());
        }
    }
    let mut evidence: Vec<String> = gpu_numa
        .iter()
        .map(|n| format!("GPUs on NUMA node {n}"))
        .collect();
    evidence.extend(
        nic_numa
            .iter()
            .map(|(k, v)| format!("data NICs on NUMA node {k}: {}", v.join(" "))),
    );
    if gpu_numa.is_empty() || nic_numa.is_empty() {
        return Finding::new(
            "numa",
            node,
            Outcome::Skip,
            "no NUMA placement known for the GPUs or the data NICs",
        )
        .evidence(evidence);
    }
    let bare: Vec<String> = gpu_numa
        .iter()
        .filter(|n| !nic_numa.contains_key(&(**n as i32)))
        .map(|n| n.to_string())
        .collect();
    if bare.is_empty() {
        Finding::new(
            "numa",
            node,
            Outcome::Pass,
            "each NUMA node with GPUs has data NICs",
        )
        .evidence(evidence)
    } else {
        Finding::new(
            "numa",
            node,
            Outcome::Warn,
            format!("NUMA node {} has GPUs but no data NIC", bare.join(",")),
        )
        .evidence(evidence)
        .fix("traffic of those GPUs crosses the CPU interconnect: check the machine type's NIC layout")
    }
}

/// The most common value and how many have it; `None` on a tie for first.
fn majority<'a>(values: impl Iterator<Item = &'a str>) -> Option<(&'a str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in values {
        *counts.entry(v).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    match v.as_slice() {
        [(a, n), (_, m), ..] if n == m => {
            let _ = a;
            None
        }
        [(a, n), ..] => Some((a, *n)),
        [] => None,
    }
}

/// A node as the fleet judge sees it: name, facts, when its first line arrived (ns since
/// the epoch, on this machine's clock).
pub struct Seen<'a> {
    pub node: &'a str,
    pub facts: &'a Facts,
    pub arrived_ns: Option<i128>,
    /// The node's clock read in an exchange of its own, when there was one.
    pub clock: Option<Clock>,
}

/// A node's clock as read from here: the node's time, and the window on this machine's
/// clock within which the node read it (after this machine asked, before the answer
/// came). The node's offset from this machine lies in `[node - before, node - after]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub node_ns: i128,
    pub after_ns: i128,
    pub before_ns: i128,
}

impl Seen<'_> {
    /// The node's offset from this machine, as the range it must lie in (ns): from the
    /// clock exchange, else from the script's first line (read before it arrived: taken
    /// as read when it arrived, the old estimate, exact only when delivery is instant).
    fn offset_range(&self) -> Option<(i128, i128)> {
        match self.clock {
            Some(c) => Some((c.node_ns - c.before_ns, c.node_ns - c.after_ns)),
            None => {
                let o = self.facts.time_ns? - self.arrived_ns?;
                Some((o, o))
            }
        }
    }
}

/// Compare the nodes: versions, GPU counts and models, NIC MTUs and speeds, clocks.
pub fn judge_fleet(ctx: &Context, nodes: &[Seen<'_>]) -> Vec<Finding> {
    let mut out = vec![];
    if nodes.len() < 2 {
        if ctx.wants("clock") {
            if let Some(n) = nodes.first() {
                out.push(Finding::new(
                    "clock",
                    n.node,
                    Outcome::Pass,
                    "the head node (the reference)",
                ));
            }
        }
        if ctx.wants("versions") {
            if let Some(n) = nodes.first() {
                out.push(versions_pass(n));
            }
        }
        return out;
    }
    if ctx.wants("versions") {
        let per: Vec<BTreeMap<&'static str, String>> = nodes.iter().map(|n| n.facts.versions()).collect();
        let keys: std::collections::BTreeSet<&'static str> =
            per.iter().flat_map(|m| m.keys().copied()).collect();
        let mut odd: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for k in keys {
            let vals: Vec<&str> = per
                .iter()
                .map(|m| m.get(k).map(String::as_str).unwrap_or("none"))
                .collect();
            match majority(vals.iter().copied()) {
                Some((common, n)) if n < vals.len() => {
                    for (i, v) in vals.iter().enumerate() {
                        if *v != common {
                            odd.entry(i)
                                .or_default()
                                .push(format!("{k} {v} where {} other nodes have {common}", n));
                        }
                    }
                }
                None => {
                    let all: Vec<String> = nodes
                        .iter()
                        .zip(&vals)
                        .map(|(n, v)| format!("{} {v}", n.node))
                        .collect();
                    for i in 0..vals.len() {
                        odd.entry(i)
                            .or_default()
                            .push(format!("{k} differs: {}", all.join(", ")));
                    }
                }
                _ => {}
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            match odd.get(&i) {
                Some(w) => out.push(
                    Finding::new("versions", n.node, Outcome::Fail, shorten(w, 2))
                        .evidence(per[i].iter().map(|(k, v)| format!("{k}: {v}")))
                        .fix("install the same driver, CUDA and NCCL on every node (`flightdeck fleet bootstrap FLEET`, or rebuild the node from the fleet's image); mismatched NCCL versions hang or fail collectives"),
                ),
                None => out.push(versions_pass(n)),
            }
        }
    }
    if ctx.wants("gpus") && ctx.expected_gpus().is_none() {
        let counts: Vec<String> = nodes
            .iter()
            .map(|n| match n.facts.gpus.first() {
                Some(g) => format!("{}× {}", n.facts.gpus.len(), g.name),
                None => "none".to_string(),
            })
            .collect();
        if let Some((common, k)) = majority(counts.iter().map(String::as_str)) {
            for (n, c) in nodes.iter().zip(&counts) {
                if *c != common && c != "none" {
                    out.push(
                        Finding::new(
                            "gpus",
                            n.node,
                            Outcome::Fail,
                            format!("{c} where {k} other nodes have {common}"),
                        )
                        .evidence(
                            n.facts
                                .gpus
                                .iter()
                                .map(|g| format!("GPU {}: {} ({})", g.index, g.name, g.bus_id)),
                        )
                        .fix(FIX_GPU_MISSING),
                    );
                }
            }
        }
    }
    if ctx.wants("nics") {
        // Per data NIC name: the MTU and speed most nodes have.
        let mut names: Vec<String> = nodes
            .iter()
            .flat_map(|n| n.facts.probe_nics(ctx).0.into_iter().map(|x| x.name.clone()))
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            let of = |n: &Seen<'_>| n.facts.nics.iter().find(|x| x.name == name).cloned();
            let mtus: Vec<String> = nodes
                .iter()
                .map(|n| {
                    of(n)
                        .and_then(|x| x.mtu)
                        .map(|m| m.to_string())
                        .unwrap_or("missing".into())
                })
                .collect();
            let speeds: Vec<String> = nodes
                .iter()
                .map(|n| {
                    of(n)
                        .and_then(|x| x.speed)
                        .map(|m| format!("{m} Mb/s"))
                        .unwrap_or("unknown".into())
                })
                .collect();
            for (what, vals) in [("MTU", &mtus), ("speed", &speeds)] {
                let Some((common, k)) = majority(vals.iter().map(String::as_str)) else {
                    continue;
                };
                for (n, v) in nodes.iter().zip(vals) {
                    if v == common || (what == "speed" && (v == "unknown" || common == "unknown")) {
                        continue;
                    }
                    let text = if v == "missing" {
                        format!("{name} missing where {k} other nodes have it")
                    } else {
                        format!("{name} {what} {v} where {k} other nodes have {common}")
                    };
                    let fix = if v == "missing" {
                        "the node lacks a data NIC: recreate it with the fleet's NIC layout"
                    } else if what == "MTU" {
                        "set the NIC's MTU to its VPC's (`sudo ip link set NIC mtu M`), as the other nodes have it"
                    } else {
                        "a NIC at a lower speed: check the link (`ethtool NIC`); recreate the VM if it persists"
                    };
                    out.push(
                        Finding::new("nics", n.node, Outcome::Fail, text)
                            .evidence(n.facts.nics.iter().map(|x| {
                                format!(
                                    "{} {} mtu {} speed {}",
                                    x.name,
                                    x.state,
                                    x.mtu.unwrap_or(0),
                                    x.speed.unwrap_or(0)
                                )
                            }))
                            .fix(fix),
                    );
                }
            }
        }
    }
    if ctx.wants("clock") {
        // Each node's offset from the head node lies in the difference of the two ranges;
        // a node is off only when all of that range is beyond the limit (a slow answer
        // widens the range, it does not make a clock look off).
        let head = nodes[0].offset_range();
        for (i, n) in nodes.iter().enumerate() {
            let f = match (i, head, n.offset_range()) {
                (0, Some(_), _) => {
                    Finding::new("clock", n.node, Outcome::Pass, "the head node (the reference)")
                }
                (_, Some((hlo, hhi)), Some((lo, hi))) => {
                    let (lo, hi) = ((lo - hhi) as f64 / 1e6, (hi - hlo) as f64 / 1e6);
                    let within = if hi - lo >= 1.0 {
                        format!(" (±{:.0} ms)", (hi - lo) / 2.0)
                    } else {
                        String::new()
                    };
                    if lo > CLOCK_WARN_MS || hi < -CLOCK_WARN_MS {
                        // The least it can be off by.
                        let ms = if lo > 0.0 { lo } else { hi };
                        Finding::new(
                            "clock",
                            n.node,
                            Outcome::Warn,
                            format!("{ms:+.0} ms from {} at least", nodes[0].node),
                        )
                        .fix("time sync is off: check chrony (`chronyc tracking`; GCP VMs sync to metadata.google.internal)")
                    } else {
                        Finding::new(
                            "clock",
                            n.node,
                            Outcome::Pass,
                            format!("{:+.0} ms from {}{within}", (lo + hi) / 2.0, nodes[0].node),
                        )
                    }
                }
                _ => Finding::new("clock", n.node, Outcome::Skip, "no time reported"),
            };
            out.push(f);
        }
    }
    out
}

pub const CLOCK_WARN_MS: f64 = 250.0;

fn versions_pass(n: &Seen<'_>) -> Finding {
    let v = n.facts.versions();
    let what: Vec<String> = ["driver", "CUDA", "NCCL"]
        .iter()
        .filter_map(|k| {
            v.get(k)
                .map(|x| format!("{k} {}", x.split(" (").next().unwrap_or(x)))
        })
        .collect();
    // Nothing to compare is no pass: a node without a driver or NCCL was not checked.
    let (outcome, what) = if what.is_empty() {
        (
            Outcome::Skip,
            "no driver, CUDA or NCCL found to compare".to_string(),
        )
    } else {
        (Outcome::Pass, what.join(", "))
    };
    Finding::new("versions", n.node, outcome, what).evidence(v.iter().map(|(k, v)| format!("{k}: {v}")))
}

/// The reachability matrix's findings: one per named problem, and a pass per NIC that
/// had none. `names` are the nodes' names by index.
pub fn judge_reach(names: &[String], probes: &[net::Probe]) -> Vec<Finding> {
    let (named, rails) = net::analyse(probes);
    reach_findings(names, &named, &rails, probes, 0)
}

/// The findings of the problems `named` (evidence from `probes`), and a pass per NIC of
/// `rails` that has none; `cleared` suspects of the first look were not confirmed when
/// probed again alone, which the passes say.
pub fn reach_findings(
    names: &[String],
    named: &[net::Named],
    rails: &[net::RailSummary],
    probes: &[net::Probe],
    cleared: usize,
) -> Vec<Finding> {
    let mut out = vec![];
    for n in named {
        let (node, what) = match n.b {
            None => (
                names[n.a].clone(),
                format!(
                    "{} {}{}: {}",
                    n.nic,
                    n.trouble.as_str(),
                    if n.also_slow { " and slow" } else { "" },
                    n.evidence
                ),
            ),
            Some(b) => (
                names[n.a].clone(),
                format!(
                    "{} ↔ {} on {} {}: {}",
                    names[n.a],
                    names[b],
                    n.nic,
                    n.trouble.as_str(),
                    n.evidence
                ),
            ),
        };
        let evidence: Vec<String> = probes
            .iter()
            .filter(|p| {
                p.nic == n.nic
                    && (p.from == n.a || p.to == n.a)
                    && n.b.is_none_or(|b| p.from == b || p.to == b)
            })
            .map(|p| {
                format!(
                    "{} -> {} {}: {}/{} answered{}",
                    names[p.from],
                    names[p.to],
                    p.nic,
                    p.received,
                    p.sent,
                    match (&p.error, p.avg_ms) {
                        (Some(e), _) => format!(" ({e})"),
                        (None, Some(a)) => format!(", {a:.3} ms"),
                        _ => String::new(),
                    }
                )
            })
            .collect();
        let fix = match n.trouble {
            net::Trouble::Unreachable => "check the NIC is up with its address, and the VPC's firewall allows ICMP and TCP between the nodes",
            net::Trouble::Lossy => "a lossy NIC or link: check `ip -s link show NIC` and `tc qdisc show dev NIC` on the node; recreate the VM if it persists",
            net::Trouble::Slow => "a slow NIC or path: check `tc qdisc show dev NIC` (a leftover netem) and the node's load; check compact placement",
        };
        let outcome = if n.trouble == net::Trouble::Slow {
            Outcome::Warn
        } else {
            Outcome::Fail
        };
        out.push(
            Finding::new("reach", &node, outcome, what)
                .evidence(evidence)
                .fix(fix),
        );
    }
    let bad: std::collections::BTreeSet<&str> = named.iter().map(|n| n.nic.as_str()).collect();
    for r in rails.iter().filter(|r| !bad.contains(r.nic.as_str())) {
        out.push(Finding::fleet(
            "reach",
            Outcome::Pass,
            format!(
                "{}: {} probes, {}/{} answered, median {:.3} ms{}",
                r.nic,
                r.probes,
                r.received,
                r.sent,
                r.median_ms.unwrap_or(0.0),
                if cleared > 0 {
                    format!(
                        "; {} of the first look cleared when probed again alone",
                        crate::words::plural(cleared, "suspect")
                    )
                } else {
                    String::new()
                }
            ),
        ));
    }
    out
}

/// The `placement` check of a GCP fleet: each instance in a COLLOCATED policy when the
/// fleet asked for compact placement (`placement: cluster`). `names` are the nodes by
/// index.
pub fn judge_placement(
    compact: bool,
    placed: &[crate::cloud::inventory::Placed],
    names: &[String],
) -> Vec<Finding> {
    placed
        .iter()
        .map(|p| {
            let node = p
                .node
                .and_then(|i| names.get(i).cloned())
                .unwrap_or_else(|| p.instance.clone());
            let evidence: Vec<String> = std::iter::once(format!("instance {}", p.instance))
                .chain(p.policies.iter().map(|u| format!("resourcePolicies: {u}")))
                .chain(p.collocation.iter().map(|c| format!("groupPlacementPolicy.collocation: {c}")))
                .collect();
            let f = if p.gone {
                Finding::new("placement", &node, Outcome::Fail, format!("instance {} no longer exists", p.instance))
                    .fix("`flightdeck fleet status FLEET` shows what happened; apply the fleet again")
            } else if p.collocation.as_deref() == Some("COLLOCATED") {
                Finding::new("placement", &node, Outcome::Pass, "in a COLLOCATED placement policy")
            } else if compact {
                Finding::new(
                    "placement",
                    &node,
                    Outcome::Fail,
                    if p.policies.is_empty() {
                        "no placement policy: the fleet asked for compact placement".to_string()
                    } else {
                        "its placement policy is not COLLOCATED".to_string()
                    },
                )
                .fix("the instance was made without the fleet's placement policy: delete and apply the fleet again (a policy cannot be added to a running VM)")
            } else {
                Finding::new("placement", &node, Outcome::Skip, "the fleet does not ask for compact placement")
            };
            f.evidence(evidence)
        })
        .collect()
}

/// The doctor's report: every finding, in the order they came.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    pub fleet: String,
    pub nodes: Vec<String>,
    pub findings: Vec<Finding>,
    pub elapsed_ms: u64,
}

impl Report {
    /// Add findings; a problem for a node and check replaces that node's pass of the check
    /// (the fleet judge's comparison overrides a node's own view).
    pub fn add(&mut self, new: Vec<Finding>) {
        for f in new {
            if f.outcome > Outcome::Pass {
                self.findings.retain(|o| {
                    !(o.outcome == Outcome::Pass
                        && o.check == f.check
                        && o.node.is_some()
                        && o.node == f.node)
                });
            } else if f.outcome == Outcome::Pass
                && self.findings.iter().any(|o| {
                    o.check == f.check && o.node.is_some() && o.node == f.node && o.outcome > Outcome::Pass
                })
            {
                continue;
            }
            self.findings.push(f);
        }
    }

    /// Mark consequences: a node's reachability problem on a NIC that its `nics` finding
    /// names (down, MTU, missing) follows from it; a node's GPU count short follows from
    /// an Xid 79; a node unreachable on every NIC ... follows from nothing else.
    pub fn link_causes(&mut self) {
        let causes: Vec<(String, String, String)> = self
            .findings
            .iter()
            .filter(|f| f.outcome >= Outcome::Warn)
            .map(|f| {
                (
                    f.key(),
                    f.node.clone().unwrap_or_default(),
                    format!("{} {}", f.check, f.what),
                )
            })
            .collect();
        for f in self.findings.iter_mut().filter(|f| f.outcome >= Outcome::Warn) {
            let Some(node) = f.node.clone() else { continue };
            let follows = causes.iter().find(|(key, cnode, text)| {
                *cnode == node
                    && *key != f.key()
                    && match f.check {
                        // `eth1 unreachable: ...` follows from `nics eth1 down`.
                        "reach" => {
                            let nic = f.what.split(' ').next().unwrap_or("");
                            let nic = if f.what.contains(" ↔ ") {
                                f.what
                                    .split(" on ")
                                    .nth(1)
                                    .and_then(|r| r.split(' ').next())
                                    .unwrap_or("")
                            } else {
                                nic
                            };
                            text.starts_with("nics ") && text.split([' ', ',']).any(|w| w == nic)
                        }
                        "gpus" => text.starts_with("xid ") && text.contains("Xid 79"),
                        "nvlink" => {
                            text.starts_with("xid ") && (text.contains("Xid 74") || text.contains("Xid 79"))
                        }
                        _ => false,
                    }
            });
            if let Some((key, _, _)) = follows {
                f.follows = Some(key.clone());
            }
        }
    }

    /// The problems, worst first, causes before what follows from them: (finding, its
    /// consequences).
    pub fn problems(&self) -> Vec<(&Finding, Vec<&Finding>)> {
        let mut causes: Vec<&Finding> = self
            .findings
            .iter()
            .filter(|f| f.outcome >= Outcome::Warn && f.follows.is_none())
            .collect();
        let mut out: Vec<(&Finding, Vec<&Finding>)> = causes
            .drain(..)
            .map(|c| {
                let key = c.key();
                let after: Vec<&Finding> = self
                    .findings
                    .iter()
                    .filter(|f| f.follows.as_deref() == Some(key.as_str()))
                    .collect();
                (c, after)
            })
            .collect();
        // Worst first by the worst of a cause and what follows from it (a warning whose
        // consequence fails ranks with the failures), then by check.
        let worst = |(c, after): &(&Finding, Vec<&Finding>)| {
            after.iter().map(|f| f.outcome).fold(c.outcome, Outcome::max)
        };
        out.sort_by(|a, b| {
            worst(b)
                .cmp(&worst(a))
                .then_with(|| check_rank(a.0.check).cmp(&check_rank(b.0.check)))
        });
        out
    }

    pub fn worst(&self) -> Outcome {
        self.findings
            .iter()
            .map(|f| f.outcome)
            .max()
            .unwrap_or(Outcome::Pass)
    }

    /// Per outcome, how many findings.
    pub fn counts(&self) -> BTreeMap<Outcome, usize> {
        let mut m = BTreeMap::new();
        for f in &self.findings {
            *m.entry(f.outcome).or_default() += 1;
        }
        m
    }

    /// The summary: one line per problem, worst first: node, what, evidence, fix.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut out = vec![];
        for (c, after) in self.problems() {
            out.push(format!(
                "{} {} {}: {}{}",
                c.outcome.as_str().to_uppercase(),
                c.node.as_deref().unwrap_or("fleet"),
                c.check,
                c.what,
                if c.fix.is_empty() {
                    String::new()
                } else {
                    format!("; fix: {}", c.fix)
                }
            ));
            for a in after {
                out.push(format!(
                    "  └ {} {}: {} (follows from it)",
                    a.node.as_deref().unwrap_or("fleet"),
                    a.check,
                    a.what
                ));
            }
        }
        out
    }
}

fn check_rank(id: &str) -> usize {
    CHECKS.iter().position(|c| c.id == id).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod cut_tests {
    use super::*;

    #[test]
    fn a_cut_is_said_in_the_findings_that_read_the_section() {
        let cuts = script::Cuts {
            sections: vec![("topo".into(), 1234)],
            on_node: vec!["smi".into()],
            node: None,
        };
        let mut found = vec![
            Finding::new("nvlink", "n0", Outcome::Pass, "18 links per pair"),
            Finding::new("gpus", "n0", Outcome::Fail, "1 GPU"),
            Finding::new("sysctl", "n0", Outcome::Pass, "ok"),
        ];
        note_cuts("n0", &mut found, &cuts);
        assert_eq!(found[0].outcome, Outcome::Warn);
        assert_eq!(found[0].what, "18 links per pair (judged on output cut short)");
        assert_eq!(
            found[0].evidence,
            ["topo: output cut at 256 KiB … 1234 bytes more not read"]
        );
        assert_eq!(found[1].outcome, Outcome::Fail);
        assert_eq!(
            found[1].evidence,
            ["smi: output cut at 256 KiB on the node … the rest not read"]
        );
        assert_eq!(found[2].outcome, Outcome::Pass);
        assert_eq!(found.len(), 3);
        // No finding read it (`--only sysctl`): a finding of its own says it.
        let mut found = vec![Finding::new("sysctl", "n0", Outcome::Pass, "ok")];
        note_cuts("n0", &mut found, &cuts);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].what, "its output was cut short");
        assert_eq!(found[1].evidence.len(), 2);
        let flood = judge_flood(
            "n0",
            &script::Cuts {
                node: Some(99),
                ..script::Cuts::default()
            },
        );
        assert_eq!(flood[0].outcome, Outcome::Fail);
        assert_eq!(
            flood[0].evidence,
            ["the node's output passed 4 MiB … 99 bytes more not read"]
        );
    }
}
