//! Running NCCL benchmarks on a fleet's nodes, detached so they survive the operator.
//!
//! Each node gets a run directory `~/.flightdeck/runs/<id>/` holding the script, its
//! output (`out.log`), its pid and, once it ends, its `exit_code`. The script is started
//! in its own session (`setsid`, stdin from /dev/null), so losing the SSH connection or
//! quitting flightdeck loses the view, never the run. Following a run is a `tail` of the
//! log that ends when the process does, then prints the exit code on a marker line; the
//! same command re-attaches later. The launch, follow and stop commands are
//! [`crate::detach`]'s, as for jobs.
//!
//! Engines:
//! - `nccl-tests`: the `<collective>_perf` binaries found on the node (a directory can be
//!   given), one node with `-g N`;
//! - `torch`: a torch.distributed benchmark embedded in flightdeck, launched with
//!   torchrun on every node (rendezvous on the first), printing rows in nccl-tests'
//!   format so the same parser reads both.

use super::transport::GpuDirect;
use crate::detach::{self, quote};
use std::fmt::Write as _;

/// The collectives both engines run.
pub const COLLECTIVES: &[&str] = &[
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
];

/// The marker line a follow command ends with: `__flightdeck_exit__ <code or ?> <start> <end>` ([`crate::detach::exit_marker`]).
pub use crate::detach::EXIT_MARKER;

/// The torch.distributed benchmark, copied to the nodes by the launch script.
pub const TORCH_BENCH: &str = include_str!("torch_bench.py");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    NcclTests,
    Torch,
}

/// The timed iterations, warm-up iterations and data type of a run that names none
/// (`nccl run`, `nccl stragglers` and the cockpit's run dialog).
pub const DEFAULT_ITERS: u32 = 20;
pub const DEFAULT_WARMUP: u32 = 5;
pub const DEFAULT_DTYPE: &str = "float";

/// The data types of nccl-tests' `-d` (its `test_typenames`; bfloat16 with NCCL 2.10
/// and later). nccl-tests runs `float` for a name it does not know, after one line of
/// warning, so a name is checked before the run.
pub const DTYPES: &[&str] = &[
    "float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64",
];

/// The data types flightdeck's torch benchmark maps to torch's (`DTYPES` of
/// torch_bench.py).
pub const TORCH_DTYPES: &[&str] = &[
    "float", "half", "bfloat16", "double", "int8", "uint8", "int32", "int64",
];

impl Engine {
    /// `nccl-tests` or `torch`, as the history and the CLI name it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::NcclTests => "nccl-tests",
            Engine::Torch => "torch",
        }
    }

    /// The engine [`Engine::name`] names.
    pub fn from_name(name: &str) -> Option<Engine> {
        [Engine::NcclTests, Engine::Torch]
            .into_iter()
            .find(|e| e.name() == name)
    }

    /// The data types this engine runs.
    pub fn dtypes(self) -> &'static [&'static str] {
        match self {
            Engine::NcclTests => DTYPES,
            Engine::Torch => TORCH_DTYPES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    pub collective: String,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub step_factor: u32,
    /// GPUs per node; `None`: all the node has (nvidia-smi counts them).
    pub gpus: Option<u32>,
    pub iters: u32,
    pub warmup: u32,
    pub dtype: String,
    pub engine: Engine,
    /// The GPUDirect environment to set (None: NCCL's defaults).
    pub profile: GpuDirect,
    /// Where the nccl-tests binaries are, if not on PATH or in the usual places.
    pub nccl_tests_dir: Option<String>,
    /// The environment lines the node scripts set, as edited before the run; `None`:
    /// the profile's own ([`profile_env`]).
    pub env: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown collective `{name}`; expected one of {}{hint}", COLLECTIVES.join(", "))]
    Collective { name: String, hint: String },
    #[error("`{0}` is not a size (e.g. 8, 64K, 1M, 8G)")]
    Size(String),
    #[error("the smallest size {0} is above the largest {1}")]
    Range(u64, u64),
    #[error("the step factor must be at least 2, got {0}")]
    Factor(u32),
    #[error("the timed iterations per size must be at least 1")]
    Iters,
    #[error("{} has no data type `{name}`; expected one of {}{hint}", .engine.name(), .engine.dtypes().join(", "))]
    Dtype {
        name: String,
        engine: Engine,
        hint: String,
    },
    #[error("environment line {0}: {1}")]
    Env(usize, String),
}

/// `8`, `64K`, `1M`, `8G` (powers of 1024), as nccl-tests reads `-b`/`-e`.
pub fn parse_size(s: &str) -> Result<u64, SpecError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| SpecError::Size(s.to_string()))
}

/// `8B`, `1K`, `8M`, `1G`; `1.5K` for sizes that are not a whole number of units (the
/// sizes [`parse_size`] reads, as tables and titles show them).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if bytes.is_multiple_of(scale) {
        format!("{}{}", bytes / scale, UNITS[unit])
    } else {
        let v = format!("{:.1}", bytes as f64 / scale as f64);
        format!("{}{}", v.trim_end_matches('0').trim_end_matches('.'), UNITS[unit])
    }
}

impl RunSpec {
    pub fn check(&self) -> Result<(), SpecError> {
        if !COLLECTIVES.contains(&self.collective.as_str()) {
            let hint = crate::yaml::did_you_mean(&self.collective, COLLECTIVES.iter().copied());
            return Err(SpecError::Collective {
                name: self.collective.clone(),
                hint,
            });
        }
        if self.min_bytes > self.max_bytes {
            return Err(SpecError::Range(self.min_bytes, self.max_bytes));
        }
        if self.step_factor < 2 {
            return Err(SpecError::Factor(self.step_factor));
        }
        if self.iters == 0 {
            return Err(SpecError::Iters);
        }
        let dtypes = self.engine.dtypes();
        if !dtypes.contains(&self.dtype.as_str()) {
            let hint = crate::yaml::did_you_mean(&self.dtype, dtypes.iter().copied());
            return Err(SpecError::Dtype {
                name: self.dtype.clone(),
                engine: self.engine,
                hint,
            });
        }
        for (i, line) in self.env.iter().flatten().enumerate() {
            if line.contains("__FD_") {
                return Err(SpecError::Env(
                    i + 1,
                    "`__FD_` is reserved for flightdeck's script markers".into(),
                ));
            }
            if line.chars().any(|c| c.is_control() && c != '\t') {
                return Err(SpecError::Env(i + 1, "holds a control character".into()));
            }
        }
        Ok(())
    }

    /// The environment lines the node scripts set: the edited ones, else the profile's.
    pub fn env_lines(&self) -> Vec<String> {
        self.env.clone().unwrap_or_else(|| profile_env(self.profile))
    }
}

/// The environment of a GPUDirect flavour on the images flightdeck provisions: COS for
/// TCPX (eth names), Ubuntu for TCPXO and RDMA (enp names), as Google and the anchors
/// publish it (shared/reference/anchors.md (c); bootstrap::steps names the sources).
/// Lines are shell: `export K=V`, or a `.` of the plugin's own profile when it has one.
pub fn profile_env(profile: GpuDirect) -> Vec<String> {
    use crate::shellenv::{export, source, Value};
    let literals = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| export(k, Value::Literal(v)))
            .collect::<Vec<_>>()
    };
    match profile {
        GpuDirect::None => vec![],
        // COS, where TCPX runs (bootstrap::steps): the NICs are eth0 and eth1..eth4, the
        // plugin is mounted at /usr/local/tcpx/lib64 in the run's container (SkyPilot's
        // GPU_DIRECT_TCPX_SPECIFIC_OPTIONS, dstack's gcp.md).
        GpuDirect::Tcpx => {
            let mut v = literals(&[
                ("NCCL_NET", "GPUDirectTCPX_v7"),
                ("NCCL_SOCKET_IFNAME", "eth0"),
                ("NCCL_GPUDIRECTTCPX_CTRL_DEV", "eth0"),
                ("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1,eth2,eth3,eth4"),
                ("NCCL_CROSS_NIC", "0"),
                ("NCCL_ALGO", "Ring"),
                ("NCCL_PROTO", "Simple"),
                ("NCCL_NSOCKS_PERTHREAD", "4"),
                ("NCCL_SOCKET_NTHREADS", "1"),
                ("NCCL_NET_GDR_LEVEL", "PIX"),
                ("NCCL_P2P_PXN_LEVEL", "0"),
                ("NCCL_DYNAMIC_CHUNK_SIZE", "524288"),
                ("NCCL_P2P_NET_CHUNKSIZE", "524288"),
                ("NCCL_P2P_PCI_CHUNKSIZE", "524288"),
                ("NCCL_P2P_NVL_CHUNKSIZE", "1048576"),
                ("NCCL_BUFFSIZE", "4194304"),
                (
                    "NCCL_GPUDIRECTTCPX_TX_BINDINGS",
                    "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
                ),
                (
                    "NCCL_GPUDIRECTTCPX_RX_BINDINGS",
                    "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
                ),
                ("NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS", "50000"),
                ("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", "/run/tcpx"),
                ("NCCL_GPUDIRECTTCPX_FORCE_ACK", "0"),
            ]);
            v.push(export(
                "LD_LIBRARY_PATH",
                Value::Prepend("/usr/local/nvidia/lib64:/usr/local/tcpx/lib64"),
            ));
            v
        }
        // Cluster Toolkit's a3-megagpu-8g run-nccl-tests.sh: `NCCL_LIB_DIR=… source
        // nccl-env-profile.sh`, then the Ubuntu NIC names.
        GpuDirect::Tcpxo => {
            let mut v = vec![
                export("NCCL_LIB_DIR", Value::Literal(TCPXO_LIB_DIR)),
                source(&format!("{TCPXO_LIB_DIR}/nccl-env-profile.sh")),
            ];
            v.extend(literals(&[
                ("NCCL_FASTRAK_CTRL_DEV", "enp0s12"),
                (
                    "NCCL_FASTRAK_IFNAME",
                    "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0",
                ),
                ("NCCL_SOCKET_IFNAME", "enp0s12"),
                ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),
                ("NCCL_NVLSTREE_MAX_CHUNKSIZE", "131072"),
            ]));
            v.push(export("LD_LIBRARY_PATH", Value::Prepend(TCPXO_LIB_DIR)));
            v
        }
        // Cluster Toolkit's a3-ultragpu-8g run-nccl-tests.sh: `source set_nccl_env.sh`,
        // NCCL_NET=gIB, the gVNIC names; the values of its a4high-vm.yaml.
        GpuDirect::Rdma => {
            let mut v = vec![source(RDMA_ENV_SCRIPT)];
            v.extend(literals(&[
                ("NCCL_NET", "gIB"),
                ("NCCL_CROSS_NIC", "0"),
                ("NCCL_NET_GDR_LEVEL", "PIX"),
                ("NCCL_P2P_NET_CHUNKSIZE", "131072"),
                ("NCCL_NVLS_CHUNKSIZE", "524288"),
                ("NCCL_IB_ADAPTIVE_ROUTING", "1"),
                ("NCCL_IB_QPS_PER_CONNECTION", "4"),
                ("NCCL_IB_TC", "52"),
                ("NCCL_IB_FIFO_TC", "84"),
                ("NCCL_SOCKET_IFNAME", "enp0s19,enp192s20"),
                ("GLOO_SOCKET_IFNAME", "enp0s19,enp192s20"),
            ]));
            v.push(export("LD_LIBRARY_PATH", Value::Prepend(RDMA_LIB_DIR)));
            v
        }
    }
}

/// Where the TCPXO plugin, its NCCL and Google's `nccl-env-profile.sh` are installed.
pub const TCPXO_LIB_DIR: &str = "/var/lib/tcpxo/lib64";
/// Where gIB's plugin is installed, and its environment script.
pub const RDMA_LIB_DIR: &str = "/usr/local/gib/lib64";
pub const RDMA_ENV_SCRIPT: &str = "/usr/local/gib/scripts/set_nccl_env.sh";

/// The debug settings a run adds after its profile so that the transport can be judged
/// (the net plugin NCCL loaded, the channels' transports), unless the profile's lines
/// set `NCCL_DEBUG` themselves: INIT and NET only, a few hundred lines per run.
pub fn debug_lines(env: &[String]) -> Vec<String> {
    use crate::shellenv::{export, exported_names, Value};
    if exported_names(env).iter().any(|k| k == "NCCL_DEBUG") {
        return vec![];
    }
    vec![
        export("NCCL_DEBUG", Value::Literal("INFO")),
        export("NCCL_DEBUG_SUBSYS", Value::Literal("INIT,NET")),
    ]
}

/// The head of a node script: the shebang, what it is, `set -u`, the run's environment
/// (the profile's lines, then the debug settings).
fn script_head(what: &str, env: &[String]) -> String {
    let mut s = format!(
        "{}\n# written by flightdeck: {what}\n{}",
        crate::shellenv::SHEBANG,
        crate::shellenv::HEADER
    );
    for line in env.iter().chain(&tidy_lines(env)).chain(&debug_lines(env)) {
        let _ = writeln!(s, "{line}");
    }
    // Open files up to the session's hard limit, as Google's TCPXO rank entry does
    // (`ulimit -n 1048576`, mpi_entry.sh): an SSH session's soft 1024 runs out under
    // FasTrak's sockets per flow and peer at scale (gpudirect review N3).
    s.push_str(RAISE_NOFILE);
    s
}

/// The line that raises the soft open-files limit to the hard one (never fails).
pub const RAISE_NOFILE: &str = "ulimit -n \"$(ulimit -H -n)\" 2>/dev/null || :\n";

/// After a profile's lines: `LD_LIBRARY_PATH` without the empty entries a sourced
/// profile may leave (Google's TCPXO profile prepends to an unset one).
pub fn tidy_lines(env: &[String]) -> Vec<String> {
    let names = crate::shellenv::exported_names(env);
    let sources = env.iter().any(|l| l.contains(" . ") || l.starts_with(". "));
    if names.iter().any(|k| k == "LD_LIBRARY_PATH") || sources {
        vec![crate::shellenv::tidy_path("LD_LIBRARY_PATH")]
    } else {
        vec![]
    }
}

/// Where a run lives on a node (relative to the login's home).
pub fn run_dir(id: &str) -> String {
    format!(".flightdeck/runs/{id}")
}

/// The script one node runs: environment, then the engine's command. `rank` is the
/// node's index, `nodes` the node count, `master` the first node's address.
pub fn node_script(spec: &RunSpec, rank: usize, nodes: usize, master: &str) -> String {
    let env = spec.env_lines();
    let mut s = script_head("one node of an NCCL benchmark", &env);
    s.push_str(&detach::expect_start_line(RUN_DIR_WORD));
    s.push_str(&cos_lines(&env, &[]));
    let started = detach::reporting_start(RUN_DIR_WORD);
    let gpus = match spec.gpus {
        Some(g) => g.to_string(),
        None => "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 1)".to_string(),
    };
    let _ = writeln!(s, "GPUS={gpus}");
    let _ = writeln!(s, "[ \"$GPUS\" -ge 1 ] 2>/dev/null || GPUS=1");
    match spec.engine {
        Engine::NcclTests => {
            find_binary(&mut s, spec);
            let _ = writeln!(
                s,
                "exec $FD_IN {started} \"$BIN\" -b {} -e {} -f {} -g \"$GPUS\" -n {} -w {} -d {}",
                spec.min_bytes,
                spec.max_bytes,
                spec.step_factor,
                spec.iters,
                spec.warmup,
                quote(&spec.dtype)
            );
        }
        Engine::Torch => {
            let _ = writeln!(
                s,
                "[ -z \"$FD_IN\" ] || {{ echo \"flightdeck: the torch engine needs Python and torch on the node, and Container-Optimized OS has neither: use --engine nccl-tests\" >&2; exit 127; }}"
            );
            let _ = writeln!(s, "PY=$(command -v python3 || command -v python)");
            let _ = writeln!(
                s,
                "exec {started} \"$PY\" -m torch.distributed.run --nnodes {nodes} --node-rank {rank} --nproc-per-node \"$GPUS\" \
                 --master-addr {m} --master-port 29517 torch_bench.py --op {op} --minbytes {b} --maxbytes {e} --stepfactor {f} --iters {n} --warmup {w} --dtype {d}",
                m = quote(master),
                op = spec.collective,
                b = spec.min_bytes,
                e = spec.max_bytes,
                f = spec.step_factor,
                n = spec.iters,
                w = spec.warmup,
                d = quote(&spec.dtype),
            );
        }
    }
    s
}

/// Shell lines setting `BIN` to the collective's nccl-tests binary, or exiting 127 with
/// the places looked at.
fn find_binary(s: &mut String, spec: &RunSpec) {
    let bin = format!("{}_perf", spec.collective);
    // On COS the binaries are those of the container's image.
    let image_dir = spec
        .nccl_tests_dir
        .clone()
        .unwrap_or_else(|| crate::bootstrap::cos::IMAGE_NCCL_TESTS.to_string());
    let _ = writeln!(
        s,
        "if [ -n \"$FD_IN\" ]; then BIN={}; else",
        quote(&format!("{image_dir}/{bin}"))
    );
    // The operator's --nccl-tests-dir is a quoted word; the others are the shell's.
    let mut dirs: Vec<String> = spec
        .nccl_tests_dir
        .iter()
        .map(|d| quote(&format!("{d}/{bin}")))
        .collect();
    dirs.push(format!("\"${{NCCL_TESTS_DIR:-}}/{bin}\""));
    dirs.push(format!("/opt/nccl-tests/build/{bin}"));
    dirs.push(format!("\"$HOME/nccl-tests/build/{bin}\""));
    let _ = writeln!(s, "BIN=$(command -v {bin} 2>/dev/null || true)");
    for d in &dirs {
        let _ = writeln!(s, "[ -z \"$BIN\" ] && [ -x {d} ] && BIN={d}");
    }
    let _ = writeln!(
        s,
        "[ -n \"$BIN\" ] || {{ echo \"flightdeck: {bin} not found (PATH, --nccl-tests-dir, NCCL_TESTS_DIR, /opt/nccl-tests/build, ~/nccl-tests/build)\" >&2; exit 127; }}"
    );
    let _ = writeln!(s, "fi");
}

/// The lines that make a script run its command in the TCPX container on a COS node
/// ([`crate::bootstrap::cos`]), passing the profile's variables by name.
fn cos_lines(env: &[String], mpi: &[String]) -> String {
    let mut names: Vec<String> = profile_names(env);
    names.extend(profile_names(&debug_lines(env)));
    names.extend(profile_names(mpi));
    // The run's id reaches the ranks in the container too (mpirun's `-x` passes it on).
    names.push("FLIGHTDECK_RUN_ID".to_string());
    names.retain(|k| k != "PATH");
    names.sort();
    names.dedup();
    // The plugin image by the digest the bootstrap recorded on this node (its tag where
    // none is recorded).
    let image = crate::bootstrap::steps::pinned_image_word(crate::bootstrap::steps::TCPX_PLUGIN_IMAGE);
    crate::bootstrap::cos::container_lines(&names, &image)
}

/// The run's directory as its script sees it (the script runs there; mounted at the same
/// path in a COS container).
const RUN_DIR_WORD: &str = "\"$PWD\"";

/// The NIC mpirun's own TCP traffic keeps to: the first interface of the profile's
/// `NCCL_SOCKET_IFNAME` (the control NIC: eth0 for TCPX, enp0s12 for TCPXO, enp0s19 for
/// RDMA), as every reference pins it; `None` when the profile names none.
pub fn control_nic(env: &[String]) -> Option<String> {
    let v = crate::shellenv::exported_value(env, "NCCL_SOCKET_IFNAME")?;
    if v.starts_with('^') {
        return None;
    }
    let first = v.trim_start_matches('=').split(',').next()?.trim().to_string();
    (!first.is_empty() && crate::shellenv::is_plain_word(&first)).then_some(first)
}

/// mpirun's transport options: TCP between the ranks, on the control NIC
/// (google/nccl-plugin-gpudirect-tcpxo's run-nccl-tcpxo.sh: `--mca btl tcp,self --mca
/// btl_tcp_if_include ${ctrl_dev}`; Cluster Toolkit's a4high-vm.yaml and the GKE
/// manifests likewise); without a profile, every interface but loopback and docker's
/// bridge, whose address is the same on every node (dstack: `btl_tcp_if_exclude
/// lo,docker0`).
pub fn mpi_pinning(env: &[String]) -> String {
    match control_nic(env) {
        Some(nic) => format!("--mca btl tcp,self --mca btl_tcp_if_include {nic}"),
        None => "--mca btl tcp,self --mca btl_tcp_if_exclude lo,docker0".to_string(),
    }
}

/// mpirun's environment on the head node: its ssh options (flightdeck's node-to-node
/// config; Open MPI 4's ORTE and 5's PRRTE read different names), and its daemons'
/// out-of-band TCP on the same NIC as [`mpi_pinning`] (set through the environment, which
/// both versions read and neither refuses).
pub fn mpi_env(env: &[String]) -> Vec<String> {
    use crate::shellenv::{export, Value};
    let cfg = format!("-F $HOME/{NODE_SSH_DIR}/config");
    let mut v = vec![
        export("OMPI_MCA_plm_rsh_args", Value::Expr(&cfg)),
        export("PRTE_MCA_plm_ssh_args", Value::Expr(&cfg)),
    ];
    let (key, nics) = match control_nic(env) {
        Some(nic) => ("include", nic),
        None => ("exclude", "lo,docker0".to_string()),
    };
    for prefix in ["OMPI_MCA", "PRTE_MCA"] {
        v.push(export(
            &format!("{prefix}_oob_tcp_if_{key}"),
            Value::Literal(&nics),
        ));
    }
    v
}

/// Where flightdeck keeps the fleet's node-to-node SSH files on every node (relative to
/// the login's home): the key pair, a known_hosts of the fleet's nodes and a config.
pub const NODE_SSH_DIR: &str = ".flightdeck/ssh";

/// One host of a multi-node run: the address the other nodes reach it on, its SSH port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiHost {
    pub addr: String,
    pub port: Option<u16>,
}

/// Shell lines writing an Open MPI hostfile: one line per node, `slots` the script's
/// `$GPUS`. Each address is a quoted word (never expanded by the shell).
pub fn hostfile_lines(hosts: &[MpiHost]) -> String {
    let mut s = String::from(": > hostfile\n");
    for h in hosts {
        let _ = writeln!(
            s,
            "printf '%s slots=%s\\n' {} \"$GPUS\" >> hostfile",
            quote(&h.addr)
        );
    }
    s
}

/// The variable names a profile's lines export (`export K=V`).
pub fn profile_names(lines: &[String]) -> Vec<String> {
    crate::shellenv::exported_names(lines)
}

/// The head node's script of a multi-node nccl-tests run through mpirun: the profile's
/// environment, the hostfile, then mpirun with one process per GPU (`-g 1` each), every
/// variable of the profile and every `NCCL_*` set at that point passed with `-x`, output
/// lines tagged with their rank (`--tag-output`), and mpirun's SSH to the other nodes
/// through flightdeck's node-to-node config (strict host keys). The nccl-tests binaries
/// must be built with MPI=1 on every node, at the same path.
pub fn mpirun_script(spec: &RunSpec, hosts: &[MpiHost], mpirun: &str) -> String {
    let env = spec.env_lines();
    let mut s = script_head(
        "the head node of a multi-node nccl-tests run through mpirun",
        &env,
    );
    // mpirun's own settings: reach the other nodes with flightdeck's node-to-node SSH
    // files, and keep its TCP traffic on the control NIC.
    let mpi = mpi_env(&env);
    for line in &mpi {
        let _ = writeln!(s, "{line}");
    }
    s.push_str(&detach::expect_start_line(RUN_DIR_WORD));
    s.push_str(&cos_lines(&env, &mpi));
    let gpus = match spec.gpus {
        Some(g) => g.to_string(),
        None => "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 1)".to_string(),
    };
    let _ = writeln!(s, "GPUS={gpus}");
    let _ = writeln!(s, "[ \"$GPUS\" -ge 1 ] 2>/dev/null || GPUS=1");
    find_binary(&mut s, spec);
    s.push_str(&hostfile_lines(hosts));
    let _ = writeln!(s, "MPIRUN={}", quote(mpirun));
    let _ = writeln!(
        s,
        "[ -n \"$FD_IN\" ] || command -v \"$MPIRUN\" >/dev/null 2>&1 || {{ echo \"flightdeck: $MPIRUN not found on the head node (install Open MPI, or give --mpirun PATH)\" >&2; exit 127; }}"
    );
    // In the COS container mpirun runs as root.
    let _ = writeln!(
        s,
        "ROOT=; {{ [ \"$(id -u)\" = 0 ] || [ -n \"$FD_IN\" ]; }} && ROOT=--allow-run-as-root"
    );
    let mut xs: Vec<String> = profile_names(&env);
    // LD_LIBRARY_PATH goes only when set (mpirun warns about an unset one), once; every
    // NCCL_* set when mpirun starts goes through `$XS` (the profile's, the debug
    // settings, what a sourced profile set), so not twice.
    xs.retain(|k| k != "LD_LIBRARY_PATH" && !k.starts_with("NCCL_"));
    xs.push("PATH".to_string());
    xs.sort();
    xs.dedup();
    let _ = writeln!(
        s,
        "XS=$(env | sed -n 's/^\\(NCCL_[A-Za-z0-9_]*\\)=.*/-x \\1/p' | sort -u | tr '\\n' ' ')"
    );
    let _ = writeln!(
        s,
        "exec $FD_IN {started} \"$MPIRUN\" $ROOT ${{FD_AGENT:+--launch-agent \"$FD_AGENT\"}} --tag-output --hostfile hostfile -np $(({n} * GPUS)) --map-by ppr:\"$GPUS\":node --bind-to none {pin} {x} ${{LD_LIBRARY_PATH:+-x LD_LIBRARY_PATH}} ${{FLIGHTDECK_RUN_ID:+-x FLIGHTDECK_RUN_ID}} $XS \"$BIN\" -b {b} -e {e} -f {f} -g 1 -n {it} -w {w} -d {d}",
        started = detach::reporting_start(RUN_DIR_WORD),
        n = hosts.len(),
        pin = mpi_pinning(&env),
        x = xs.iter().map(|k| format!("-x {k}")).collect::<Vec<_>>().join(" "),
        b = spec.min_bytes,
        e = spec.max_bytes,
        f = spec.step_factor,
        it = spec.iters,
        w = spec.warmup,
        d = quote(&spec.dtype),
    );
    s
}

/// The command that starts `script` detached in the run directory and prints its pid
/// ([`crate::detach::launch_command`]: a run directory is never reused). With the torch
/// engine the script first writes the embedded benchmark next to itself. The script goes
/// on the command's stdin.
pub fn launch_command(id: &str, script: &str, with_torch_bench: bool) -> detach::WithInput {
    // Every rank's environment carries the run's id (mpirun passes it on: `-x`), so the
    // doctor's `procs` knows a rank on any node as this run's.
    let id_line = format!(
        "{}\n",
        crate::shellenv::export(RUN_ID_VAR, crate::shellenv::Value::Literal(id))
    );
    let script = match script
        .split_once('\n')
        .filter(|(first, _)| first.starts_with("#!"))
    {
        Some((shebang, rest)) => format!("{shebang}\n{id_line}{rest}"),
        None => format!("{id_line}{script}"),
    };
    let script = if with_torch_bench {
        let bench = format!("cat > torch_bench.py {}", detach::heredoc("BENCH", TORCH_BENCH));
        match script
            .split_once('\n')
            .filter(|(first, _)| first.starts_with("#!"))
        {
            Some((shebang, rest)) => format!("{shebang}\n{bench}{rest}"),
            None => format!("{bench}{script}"),
        }
    } else {
        script.to_string()
    };
    detach::launch_command(&run_dir(id), &script)
}

/// The command that prints a run's output from the start, follows it until the run
/// ends, then prints the [`EXIT_MARKER`] line. Re-attaching later is the same command.
pub fn follow_command(id: &str) -> String {
    detach::follow_command(&run_dir(id), 1)
}

/// The command that stops a run: TERM to its session and every descendant, KILL after
/// `grace_s` seconds (recording exit code 137 when it had to).
pub fn stop_command(id: &str, grace_s: u32) -> String {
    detach::stop_command(&run_dir(id), grace_s)
}

/// The variable that carries a run's id to its ranks ([`launch_command`]).
pub const RUN_ID_VAR: &str = "FLIGHTDECK_RUN_ID";

/// A run id: `nccl-<collective>-<unix seconds>-<4 hex digits>`, the digits from the
/// clock's nanoseconds and the process id so two runs in one second differ.
pub fn new_id(collective: &str, now: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().rotate_left(16)) & 0xffff;
    format!("nccl-{collective}-{now}-{salt:04x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(engine: Engine) -> RunSpec {
        RunSpec {
            collective: "all_reduce".into(),
            min_bytes: 8,
            max_bytes: 1 << 30,
            step_factor: 2,
            gpus: Some(2),
            iters: 20,
            warmup: 5,
            dtype: "float".into(),
            engine,
            profile: GpuDirect::None,
            nccl_tests_dir: Some("/opt/x".into()),
            env: None,
        }
    }

    #[test]
    fn sizes_and_checks() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("8G").unwrap(), 8 << 30);
        assert!(parse_size("8X").is_err() && parse_size("").is_err());
        let mut s = spec(Engine::NcclTests);
        s.collective = "allreduce".into();
        assert!(s
            .check()
            .unwrap_err()
            .to_string()
            .contains("did you mean `all_reduce`?"));
        s.collective = "all_reduce".into();
        s.min_bytes = 1 << 31;
        assert!(s.check().is_err());
    }

    #[test]
    fn iterations_and_data_types_are_checked_per_engine() {
        let mut s = spec(Engine::NcclTests);
        s.warmup = 0;
        assert_eq!(s.check(), Ok(()), "no warm-up is a valid choice");
        s.iters = 0;
        assert_eq!(s.check(), Err(SpecError::Iters));
        s.iters = 1;
        for d in DTYPES {
            s.dtype = d.to_string();
            assert_eq!(s.check(), Ok(()), "{d}");
        }
        s.dtype = "floot".into();
        assert_eq!(
            s.check().unwrap_err().to_string(),
            "nccl-tests has no data type `floot`; expected one of float, half, bfloat16, double, \
             int8, uint8, int32, uint32, int64, uint64; did you mean `float`?"
        );
        let mut t = spec(Engine::Torch);
        t.dtype = "uint32".into();
        assert!(t
            .check()
            .unwrap_err()
            .to_string()
            .starts_with("torch has no data type `uint32`; expected one of float, half"));
        t.dtype = "bfloat16".into();
        assert_eq!(t.check(), Ok(()));
    }

    /// The torch engine's list is the benchmark's own: the keys of its `DTYPES`.
    #[test]
    fn torch_data_types_are_the_benchmarks() {
        let line = TORCH_BENCH
            .split("DTYPES = {")
            .nth(1)
            .and_then(|r| r.split('}').next())
            .expect("DTYPES in torch_bench.py");
        let mut keys: Vec<&str> = line
            .split(',')
            .filter_map(|kv| kv.split(':').next())
            .map(|k| k.trim().trim_matches('"'))
            .filter(|k| !k.is_empty())
            .collect();
        let mut ours = TORCH_DTYPES.to_vec();
        keys.sort_unstable();
        ours.sort_unstable();
        assert_eq!(keys, ours);
        assert!(TORCH_DTYPES.iter().all(|d| DTYPES.contains(d)));
    }

    #[test]
    fn profiles_carry_the_published_variables() {
        assert!(profile_env(GpuDirect::None).is_empty());
        let tcpxo = profile_env(GpuDirect::Tcpxo).join("\n");
        assert!(
            tcpxo.contains("NCCL_NVLSTREE_MAX_CHUNKSIZE='131072'"),
            "the guest config checker needs it"
        );
        assert!(profile_env(GpuDirect::Rdma).join("\n").contains("NCCL_NET='gIB'"));
        assert!(profile_env(GpuDirect::Tcpx)
            .join("\n")
            .contains("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"));
    }

    /// What the profiles give LD_LIBRARY_PATH on a node: the plugin's directories first,
    /// the node's earlier value after them, never a literal `${…}` and never an empty
    /// entry (the current directory); under bash with `set -u`, with LD_LIBRARY_PATH
    /// unset as in a fresh SSH exec session. (TCPXO's and RDMA's profiles to source are
    /// not on this machine: they are skipped here, sourced in tests/gpudirect_run.rs.)
    #[test]
    fn library_paths_expand_on_the_node_and_keep_the_earlier_value() {
        for (profile, first) in [
            (GpuDirect::Tcpx, "/usr/local/nvidia/lib64:/usr/local/tcpx/lib64"),
            (GpuDirect::Tcpxo, "/var/lib/tcpxo/lib64"),
            (GpuDirect::Rdma, "/usr/local/gib/lib64"),
        ] {
            let lines = profile_env(profile);
            for l in &lines {
                // A `${` inside single quotes would reach the node as text.
                let quoted: Vec<&str> = l.split('\'').skip(1).step_by(2).collect();
                assert!(!quoted.iter().any(|q| q.contains("${")), "{l}");
            }
            for (earlier, want) in [
                (None, first.to_string()),
                (Some(""), first.to_string()),
                (
                    Some("/usr/local/cuda/lib64"),
                    format!("{first}:/usr/local/cuda/lib64"),
                ),
            ] {
                let mut script = String::from(crate::shellenv::HEADER);
                for l in &lines {
                    script.push_str(l);
                    script.push('\n');
                }
                script.push_str("printf '%s' \"$LD_LIBRARY_PATH\"");
                let mut cmd = std::process::Command::new("bash");
                cmd.arg("-c").arg(&script).env_remove("LD_LIBRARY_PATH");
                if let Some(e) = earlier {
                    cmd.env("LD_LIBRARY_PATH", e);
                }
                let out = cmd.output().unwrap();
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                assert_eq!(
                    String::from_utf8_lossy(&out.stdout),
                    want,
                    "{profile:?} {earlier:?}"
                );
            }
        }
    }

    /// Runs turn NCCL's INFO lines on (INIT and NET) so the transport can be judged,
    /// unless the operator's lines set NCCL_DEBUG; Google's TCPXO profile sets WARN, and
    /// the run's setting comes after it.
    #[test]
    fn runs_export_nccl_debug_info_unless_the_operator_set_it() {
        let mut sp = spec(Engine::NcclTests);
        sp.profile = GpuDirect::Tcpxo;
        let s = node_script(&sp, 0, 1, "10.0.0.1");
        assert!(s.starts_with("#!/usr/bin/env bash\n"), "{s}");
        let profile_at = s.find("nccl-env-profile.sh").unwrap();
        let debug_at = s.find("export NCCL_DEBUG='INFO'").unwrap();
        assert!(profile_at < debug_at, "{s}");
        assert!(s.contains("export NCCL_DEBUG_SUBSYS='INIT,NET'"), "{s}");
        sp.env = Some(vec!["export NCCL_DEBUG='TRACE'".into()]);
        let s = node_script(&sp, 0, 1, "10.0.0.1");
        assert!(
            !s.contains("NCCL_DEBUG='INFO'") && !s.contains("NCCL_DEBUG_SUBSYS"),
            "{s}"
        );
    }

    /// mpirun keeps its own TCP to the profile's control NIC, as every reference pins it,
    /// and away from docker's bridge without a profile.
    #[test]
    fn mpirun_is_pinned_to_the_control_nic() {
        assert_eq!(
            mpi_pinning(&profile_env(GpuDirect::Tcpxo)),
            "--mca btl tcp,self --mca btl_tcp_if_include enp0s12"
        );
        assert_eq!(
            mpi_pinning(&profile_env(GpuDirect::Tcpx)),
            "--mca btl tcp,self --mca btl_tcp_if_include eth0"
        );
        assert_eq!(
            mpi_pinning(&profile_env(GpuDirect::Rdma)),
            "--mca btl tcp,self --mca btl_tcp_if_include enp0s19"
        );
        assert_eq!(
            mpi_pinning(&[]),
            "--mca btl tcp,self --mca btl_tcp_if_exclude lo,docker0"
        );
        assert_eq!(
            mpi_pinning(&["export NCCL_SOCKET_IFNAME='^docker'".into()]),
            "--mca btl tcp,self --mca btl_tcp_if_exclude lo,docker0"
        );
        let env = mpi_env(&profile_env(GpuDirect::Rdma));
        assert!(
            env.contains(&"export OMPI_MCA_oob_tcp_if_include='enp0s19'".to_string()),
            "{env:?}"
        );
        assert!(
            env.contains(&"export PRTE_MCA_oob_tcp_if_include='enp0s19'".to_string()),
            "{env:?}"
        );
    }

    /// The scripts run for real under sh: a launch of a script that prints and exits 3,
    /// followed to its end.
    #[test]
    fn launch_and_follow_run_detached_under_sh() {
        let home = tempfile::tempdir().unwrap();
        let sh_in = |(cmd, input): &detach::WithInput| {
            use std::io::Write;
            let mut child = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("HOME", home.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // A launch that refuses (a reused directory) exits before it reads its input:
            // the pipe may be closed by then.
            let _ = child.stdin.take().unwrap().write_all(input);
            String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
        };
        let sh = |cmd: &str| sh_in(&(cmd.to_string(), vec![]));
        let started = sh_in(&launch_command(
            "t1",
            "echo one\nsleep 0.3\necho two\nexit 3\n",
            true,
        ));
        assert!(started.starts_with("started "), "{started}");
        let followed = sh(&follow_command("t1"));
        assert!(
            followed.starts_with(&format!("one\ntwo\n{EXIT_MARKER} 3 ")),
            "{followed}"
        );
        let marker = followed.lines().last().and_then(crate::detach::exit_marker);
        assert_eq!(marker.map(|m| m.code), Some(Some(3)), "{followed}");
        // Re-attaching after the end shows it all again.
        assert_eq!(sh(&follow_command("t1")), followed);
        assert!(home.path().join(".flightdeck/runs/t1/torch_bench.py").exists());
        assert!(
            !sh_in(&launch_command("t1", "exit 0\n", false)).starts_with("started"),
            "a run directory is never reused"
        );
        assert_ne!(new_id("all_reduce", 1), new_id("all_reduce", 1));
        // Stopping a long run kills its whole session.
        sh_in(&launch_command("t2", "sleep 30 & wait\n", false));
        sh(&stop_command("t2", 1));
        let f = sh(&follow_command("t2"));
        let marker = f.lines().last().and_then(crate::detach::exit_marker);
        assert_eq!(marker.map(|m| m.code), Some(Some(143)), "{f}");
    }

    #[test]
    fn node_scripts_find_the_binary_or_say_where_they_looked() {
        let s = node_script(&spec(Engine::NcclTests), 0, 1, "10.0.0.1");
        assert!(
            s.contains("all_reduce_perf\" -b 8 -e 1073741824 -f 2 -g \"$GPUS\" -n 20 -w 5 -d 'float'")
                || s.contains("-b 8 -e 1073741824"),
            "{s}"
        );
        let home = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&s)
            .env("HOME", home.path())
            .env("PATH", "/usr/bin:/bin")
            .current_dir(home.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127));
        assert!(String::from_utf8_lossy(&out.stderr).contains("all_reduce_perf not found"));
        let t = node_script(&spec(Engine::Torch), 1, 2, "10.0.0.1");
        assert!(
            t.contains("--nnodes 2 --node-rank 1 --nproc-per-node \"$GPUS\" --master-addr '10.0.0.1'"),
            "{t}"
        );
    }

    /// The head's mpirun script, run for real under sh with a stub mpirun that prints
    /// its arguments and the environment it was given.
    #[test]
    fn hostfile_addresses_are_words_never_expanded() {
        let dir = tempfile::tempdir().unwrap();
        let evil = format!("10.0.0.1$(touch {}/pwned)", dir.path().display());
        let hosts = vec![MpiHost {
            addr: evil.clone(),
            port: None,
        }];
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("GPUS=8\n{}", hostfile_lines(&hosts)))
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(!dir.path().join("pwned").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("hostfile")).unwrap(),
            format!("{evil} slots=8\n")
        );
    }

    /// The run's id is in every rank's environment: the launched script exports it (the
    /// doctor's `procs` tells the run's ranks by it), mpirun passes it on.
    #[test]
    fn the_launched_script_exports_the_run_id() {
        for torch in [false, true] {
            let (_, input) =
                launch_command("nccl-all_reduce-1-abcd", "#!/usr/bin/env bash\necho hi\n", torch);
            let text = String::from_utf8_lossy(&input);
            assert!(
                text.lines()
                    .any(|l| l == "export FLIGHTDECK_RUN_ID='nccl-all_reduce-1-abcd'")
                    && text.contains("#!/usr/bin/env bash\n"),
                "{text}"
            );
        }
    }

    #[test]
    fn mpirun_script_builds_the_hostfile_and_passes_the_profile() {
        let mut sp = spec(Engine::NcclTests);
        sp.profile = GpuDirect::Tcpx;
        let hosts = vec![
            MpiHost {
                addr: "10.0.0.1".into(),
                port: None,
            },
            MpiHost {
                addr: "10.0.0.2".into(),
                port: Some(2222),
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("all_reduce_perf");
        let stub = dir.path().join("mpirun");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::write(
            &stub,
            "#!/bin/sh\necho \"ARGS $*\"\necho \"RSH $OMPI_MCA_plm_rsh_args\"\necho \"OOB $OMPI_MCA_oob_tcp_if_include\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        for f in [&bin, &stub] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        sp.nccl_tests_dir = Some(dir.path().display().to_string());
        let script = mpirun_script(&sp, &hosts, stub.to_str().unwrap());
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .env("NCCL_DEBUG", "INFO")
            .env("LD_LIBRARY_PATH", "/opt/nccl/lib")
            .env(RUN_ID_VAR, "nccl-all_reduce-1-abcd")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("hostfile")).unwrap(),
            "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
        );
        let args = text.lines().find(|l| l.starts_with("ARGS ")).unwrap();
        assert!(
            args.contains("--tag-output --hostfile hostfile -np 4 --map-by ppr:2:node --bind-to none --mca btl tcp,self --mca btl_tcp_if_include eth0 "),
            "{args}"
        );
        assert!(text.contains("\nOOB eth0\n"), "{text}");
        for x in [
            "-x NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
            "-x LD_LIBRARY_PATH",
            "-x NCCL_DEBUG",
            "-x NCCL_NET",
            "-x FLIGHTDECK_RUN_ID",
        ] {
            assert!(args.contains(x), "{x}: {args}");
        }
        assert_eq!(args.matches("-x LD_LIBRARY_PATH").count(), 1, "{args}");
        assert!(
            args.ends_with("all_reduce_perf -b 8 -e 1073741824 -f 2 -g 1 -n 20 -w 5 -d float"),
            "{args}"
        );
        let rsh = text.lines().find(|l| l.starts_with("RSH ")).unwrap();
        assert_eq!(
            rsh,
            format!("RSH -F {}/.flightdeck/ssh/config", dir.path().display())
        );
        assert_eq!(
            profile_names(&["export A='1'".into(), ". x".into()]),
            vec!["A".to_string()]
        );
        // No mpirun: a clear error.
        let missing = mpirun_script(&sp, &hosts, "/nonexistent/mpirun");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(&missing)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("/nonexistent/mpirun not found on the head node")
        );
    }
}
