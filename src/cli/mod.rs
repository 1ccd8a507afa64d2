//! The headless CLI of DESIGN.md. Thin: each subcommand calls the domain and prints a
//! table, or one JSON document with `--json`. Exit codes: 0 success, 1 failure, 2 usage
//! (and 2 for a subcommand whose feature has not landed in this build).

/// `println!` of the CLI: the line goes through [`crate::term::visible::text`], so
/// whatever it holds from a node, an API or a file another user could write is shown,
/// never acted on by the terminal. Every line the subcommands print goes through this,
/// [`out!`], [`errln!`] or [`err!`]; only a node's streamed output (`exec`, `job logs`,
/// [`crate::term::visible::for_stdout`]) is written otherwise. `tests/terminal_output.rs`
/// holds every print site to it.
macro_rules! outln {
    () => {
        println!()
    };
    ($($arg:tt)*) => {
        println!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `print!` of the CLI (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {
        print!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `eprintln!` of the CLI (see [`outln!`]).
macro_rules! errln {
    () => {
        eprintln!()
    };
    ($($arg:tt)*) => {
        eprintln!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

/// `eprint!` of the CLI (see [`outln!`]).
macro_rules! err {
    ($($arg:tt)*) => {
        eprint!("{}", $crate::term::visible::text(&format!($($arg)*)))
    };
}

mod config_cmd;
pub mod doctor_cmd;
mod exec_cmd;
mod fleet_cmd;
mod job_cmd;
mod mux_cmd;
mod nccl_cmd;
mod nccl_stragglers;
mod nics_cmd;
mod offers_cmd;
pub mod prompt;

use crate::config::{Config, LogLevel};
use crate::paths::Paths;
use crate::tui;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// A terminal cockpit for multi-node GPU clusters on Google Cloud.
///
/// With no subcommand, opens the interactive cockpit. The subcommands do the same work
/// headless, for scripts: `--json` prints one JSON document on stdout and nothing else.
#[derive(Debug, Parser)]
#[command(name = "flightdeck", version, about, long_about)]
pub struct Cli {
    /// Colour theme: dark, light, high-contrast, colorblind or a user theme
    /// (overrides the config file). NO_COLOR turns any theme monochrome.
    #[arg(long, global = true, value_name = "NAME", help_heading = "Global options")]
    pub theme: Option<String>,

    /// Level of the log file in the state dir (overrides the config file).
    #[arg(long, global = true, value_name = "LEVEL", help_heading = "Global options")]
    pub log_level: Option<LogLevel>,

    /// Accept and remember the host keys of SSH hosts not yet in known_hosts, without
    /// asking (a changed key is still refused).
    #[arg(long, global = true, help_heading = "Global options")]
    pub accept_new_host_keys: bool,

    /// Pass nodes' control sequences (titles, clipboard, cursor moves) to this terminal as
    /// they are; by default only colour passes and the rest is shown, not acted on.
    #[arg(long, global = true, help_heading = "Global options")]
    pub raw: bool,

    /// Connect to the nodes from this process even when a connection holder runs (the
    /// cockpit, or `flightdeck mux`); the config's `mux: off` does it always.
    #[arg(long, global = true, help_heading = "Global options")]
    pub no_mux: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List GPU offers and prices from the embedded catalog.
    Offers(OffersArgs),
    /// Validate, plan, apply, list, delete and garbage-collect fleets.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Run a command on every node of a fleet; output prefixed by node, exit = worst.
    Exec(ExecArgs),
    /// Run NCCL tests on a fleet, or parse nccl-tests output.
    #[command(subcommand)]
    Nccl(NcclCommand),
    /// Sample per-NIC traffic and GPU figures on every node of a fleet.
    Nics(NicsArgs),
    /// Run, list, follow and stop training jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Check every node of a fleet at once (GPUs, driver and NCCL versions, NVLink, ECC,
    /// Xid, clocks, NICs, RDMA, GPUDirect, reachability, placement); problems worst first.
    Doctor(doctor_cmd::DoctorArgs),
    /// Show where the config lives, print a commented default, or check it.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The connection holder: one live SSH connection per node, shared by every command
    /// (as OpenSSH's ControlMaster); start, status, stop, or serve in the foreground.
    #[command(subcommand)]
    Mux(MuxCommand),
}

#[derive(Debug, Subcommand)]
pub enum MuxCommand {
    /// Start the holder in the background (if none runs); it exits after `mux_persist`
    /// (default 10m) without a command.
    Start,
    /// Show the holder that runs (the cockpit or `flightdeck mux`) and its connections.
    Status {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Stop the background holder: it takes no new command at once and exits when the
    /// commands it runs for other terminals have ended (`ssh -O stop`).
    Stop {
        /// Exit now, cutting the commands that still run (`ssh -O exit`).
        #[arg(long)]
        force: bool,
    },
    /// Run the holder in the foreground (what `start` runs in the background).
    Serve {
        /// Exit after this long without a command (90s, 10m, 2h; default: the config's
        /// `mux_persist`, else 10m); 0 never.
        #[arg(long, value_name = "TIME")]
        persist: Option<crate::config::Span>,
    },
}

/// A GPUDirect flavour that has a bootstrap.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Flavour {
    Tcpx,
    Tcpxo,
    Rdma,
}

impl Flavour {
    pub fn gpudirect(self) -> crate::nccl::GpuDirect {
        match self {
            Flavour::Tcpx => crate::nccl::GpuDirect::Tcpx,
            Flavour::Tcpxo => crate::nccl::GpuDirect::Tcpxo,
            Flavour::Rdma => crate::nccl::GpuDirect::Rdma,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Pricing {
    OnDemand,
    Spot,
    Flex,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OfferSort {
    Price,
    GpuPrice,
    Gpus,
}

#[derive(Debug, Args)]
pub struct OffersArgs {
    /// GPU model, e.g. H100, H200, B200, A100, L4.
    #[arg(long)]
    pub gpu: Option<String>,
    /// Number of GPUs per machine.
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Region, e.g. us-central1 (a trailing * matches a prefix).
    #[arg(long)]
    pub region: Option<String>,
    /// Zone, e.g. us-central1-a.
    #[arg(long)]
    pub zone: Option<String>,
    /// Which price to show and sort by.
    #[arg(long, value_enum, default_value = "on-demand")]
    pub pricing: Pricing,
    /// Highest price per machine-hour in USD.
    #[arg(long, value_name = "USD")]
    pub max_price: Option<f64>,
    /// Sort order.
    #[arg(long, value_enum, default_value = "price")]
    pub sort: OfferSort,
    /// Filter query, e.g. 'gpu=H200 gpus>=8 spot<40 gpudirect=rdma' (quote it:
    /// the shell reads < and >). Fields: machine, gpu, gpus, gpumem, vcpus, ram, gbps,
    /// gpudirect, region, zone, ondemand, spot, flex, price, gpuprice; operators = != < <=
    /// > >=; * matches any text; a bare word matches any text field.
    #[arg(long, value_name = "QUERY")]
    pub filter: Option<String>,
    /// Refresh prices from Google's Billing Catalog API before listing.
    #[arg(long)]
    pub refresh: bool,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Check fleet files; errors as FILE:LINE:COL: message, exit 1 on any error.
    Validate {
        /// Fleet files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show what apply would create or delete, with costs; changes nothing.
    Plan {
        /// The fleet file.
        file: PathBuf,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create or update the fleet described by a file; new GCP nodes are then
    /// bootstrapped for their GPUDirect flavour (see `fleet bootstrap`).
    Apply {
        /// The fleet file.
        file: PathBuf,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// Do not run the GPUDirect bootstrap on the nodes afterwards.
        #[arg(long)]
        no_bootstrap: bool,
    },
    /// Install what GPUDirect needs on a fleet's nodes (RxDM, NCCL net plugin, gIB,
    /// nccl-tests, ...): each step is checked first, so a second run does nothing and a
    /// half-done node is finished. `--show FLAVOUR` prints the script a node runs.
    Bootstrap {
        /// The fleet's name (or a fleet file).
        #[arg(required_unless_present = "show")]
        fleet: Option<String>,
        /// Only these nodes: indices (0,1), ranges (0-3), names or hosts, patterns with *.
        #[arg(long, value_delimiter = ',', value_name = "NODES")]
        nodes: Vec<String>,
        /// The flavour (default: the fleet file's network.gpudirect, else its machine type's).
        #[arg(long, value_enum)]
        flavour: Option<Flavour>,
        /// Print the script a node runs for this flavour, and nothing else.
        #[arg(long, value_enum, value_name = "FLAVOUR", conflicts_with_all = ["fleet", "nodes", "flavour"])]
        show: Option<Flavour>,
        /// Print one JSON document of each node's steps instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// List fleets in the state store.
    List {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a fleet and every resource flightdeck created for it.
    Delete {
        /// The fleet's name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Find (and with --yes delete) resources labelled by flightdeck that the state does not know.
    Gc {
        /// Delete what was found without asking.
        #[arg(long)]
        yes: bool,
        /// Print one JSON document of what was found.
        #[arg(long)]
        json: bool,
    },
    /// Ask the cloud how a fleet's nodes are: running, or preempted / stopped / gone.
    Status {
        /// The fleet's name.
        name: String,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The fleet's name.
    pub fleet: String,
    /// Only these nodes: indices (0,2), ranges (0-3), names or hosts (lab-2), or patterns
    /// with * (lab-1*).
    #[arg(long, value_delimiter = ',', value_name = "NODES")]
    pub nodes: Vec<String>,
    /// Run on at most this many nodes at once.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub fanout: usize,
    /// Stop a node's command after this many seconds and report it as timed out (exit
    /// 124), like pdsh -u.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Group nodes whose output is identical (like `dshbak -c`), printed at the end.
    #[arg(long)]
    pub collapse: bool,
    /// Print one JSON document with each node's output and exit code.
    #[arg(long, conflicts_with = "collapse")]
    pub json: bool,
    /// The command to run on each node (after --).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NcclEngine {
    NcclTests,
    Torch,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NcclProfile {
    Auto,
    None,
    Tcpx,
    Tcpxo,
    Rdma,
}

#[derive(Debug, Subcommand)]
pub enum NcclCommand {
    /// Run an NCCL benchmark across the fleet's nodes, detached (it survives a lost
    /// connection; `nccl attach` follows it again).
    Run(nccl_cmd::RunArgs),
    /// Follow a run again (the newest when no id is given), from its first line.
    Attach {
        /// The run's id, as `nccl run` printed it.
        id: Option<String>,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Parse nccl-tests output from a file, or from stdin with -.
    Parse {
        /// The file to parse, or - for stdin.
        file: String,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
        /// Judge the run against the expected curve of this machine type (e.g.
        /// a3-megagpu-8g, or 2xH200 for one node with two H200s).
        #[arg(long, value_name = "TYPE")]
        machine_type: Option<String>,
        /// Nodes the run spanned (default: ranks / GPUs per node of the machine type).
        #[arg(long, value_name = "N", requires = "machine_type")]
        nodes: Option<u32>,
    },
    /// List the NCCL runs kept in the state dir: when, what, peak busbw, verdict.
    History {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Compare two runs of the history: busbw per message size of both, and B/A.
    Compare {
        /// The first run (A).
        a: String,
        /// The second run (B).
        b: String,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Find the slow node or link of a fleet: every node alone, then a ring of node pairs,
    /// then bisection of the suspects with a good node; nodes and links ranked by busbw.
    Stragglers(nccl_stragglers::StragglerArgs),
}

#[derive(Debug, Args)]
pub struct NicsArgs {
    /// The fleet's name.
    pub fleet: String,
    /// Sampling interval, 100ms to 10s.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Number of samples to take before printing (rates need one more reading).
    #[arg(long, default_value_t = 5)]
    pub samples: u32,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Data NICs by name, instead of the automatic rule (comma-separated, * matches any
    /// text, e.g. 'eth1,eth2' or 'enp*s0'); RDMA ports by device (mlx5_0).
    #[arg(long, value_delimiter = ',', value_name = "NICS")]
    pub data_nics: Vec<String>,
    /// Control NICs by name, instead of the automatic rule (comma-separated, * wildcard).
    #[arg(long, value_delimiter = ',', value_name = "NICS")]
    pub control_nics: Vec<String>,
    /// Also sample the GPUs' PCIe and NVLink throughput (nvidia-smi dmon: about 0.7% of a
    /// core on each node).
    #[arg(long)]
    pub gpu_links: bool,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Launch the job described by a job file on its fleet, detached on every node, and
    /// follow it (Ctrl-C stops following; the job goes on).
    Run {
        /// The job file.
        file: PathBuf,
        /// Start it and return, without following.
        #[arg(long)]
        detach: bool,
        /// Stop every node as soon as one fails (also `stop_on_failure: true` in the file).
        #[arg(long)]
        stop_on_failure: bool,
        /// Skip the check of the nodes' GPUDirect pieces before the job starts.
        #[arg(long)]
        no_preflight: bool,
        /// Upload `files:` from outside the job file's folder too (refused otherwise).
        #[arg(long)]
        files_outside: bool,
    },
    /// List jobs with state, nodes, duration and exit codes.
    List {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A job's state, exit codes and the metrics read from its logs.
    Show {
        /// The job's name (its latest run) or id.
        name: String,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a job's logs, prefixed by node.
    Logs {
        /// The job's name (its latest run) or id.
        name: String,
        /// Only this node (rank).
        #[arg(long)]
        node: Option<usize>,
        /// Keep printing as the logs grow, until the job ends.
        #[arg(long, short)]
        follow: bool,
        /// Only the last N lines of each node.
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
    },
    /// Stop a job on every node (TERM to each node's process group, KILL after a grace
    /// period) and record the exit codes.
    Stop {
        /// The job's name (its latest run) or id.
        name: String,
        /// Seconds between TERM and KILL (default: the job file's stop_grace, else 10).
        #[arg(long, value_name = "S")]
        grace: Option<u32>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the config file's path (or another of flightdeck's places).
    Path {
        /// Print the state dir instead.
        #[arg(long, conflicts_with_all = ["log", "themes"])]
        state: bool,
        /// Print the log file instead.
        #[arg(long, conflicts_with = "themes")]
        log: bool,
        /// Print the user themes dir instead.
        #[arg(long)]
        themes: bool,
    },
    /// Print a commented config file with every default.
    Default,
    /// Check the config file, the key bindings and the theme; list the themes.
    Check,
}

/// Run the parsed command line; returns the process exit code. An error's text (which
/// may carry what a node or an API said) comes back through
/// [`crate::term::visible::text`], ready for `main` to print.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    run_command(cli).map_err(|e| {
        let whole = format!("{e:#}");
        match crate::term::visible::text(&whole) {
            std::borrow::Cow::Borrowed(_) => e,
            std::borrow::Cow::Owned(shown) => anyhow::Error::msg(shown),
        }
    })
}

fn run_command(cli: Cli) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    crate::term::visible::set_raw(cli.raw);
    match &cli.command {
        None => run_tui(&cli, &paths),
        Some(Command::Config(c)) => config_cmd::run(c, &cli, &paths),
        Some(Command::Mux(c)) => {
            init_cli_logging(&cli, &paths);
            mux_cmd::run(c, &cli, &paths)
        }
        Some(Command::Fleet(c)) => {
            init_cli_logging(&cli, &paths);
            fleet_cmd::run(c, &cli, &paths)
        }
        Some(Command::Exec(a)) => {
            init_cli_logging(&cli, &paths);
            exec_cmd::run(a, &cli, &paths)
        }
        Some(Command::Nics(a)) => {
            init_cli_logging(&cli, &paths);
            nics_cmd::run(a, &cli, &paths)
        }
        Some(Command::Job(c)) => {
            init_cli_logging(&cli, &paths);
            job_cmd::run(c, &cli, &paths)
        }
        Some(Command::Doctor(a)) => {
            init_cli_logging(&cli, &paths);
            doctor_cmd::run(a, &cli, &paths)
        }
        Some(Command::Offers(args)) => offers_cmd::run(args),
        Some(Command::Nccl(NcclCommand::Parse {
            file,
            json,
            machine_type,
            nodes,
        })) => nccl_cmd::parse(file, *json, machine_type.as_deref(), *nodes),
        Some(Command::Nccl(NcclCommand::History { json })) => nccl_cmd::history_list(*json, &paths),
        Some(Command::Nccl(NcclCommand::Compare { a, b, json })) => nccl_cmd::compare(a, b, *json, &paths),
        Some(Command::Nccl(NcclCommand::Stragglers(args))) => {
            init_cli_logging(&cli, &paths);
            nccl_stragglers::run(args, &cli, &paths)
        }
        Some(Command::Nccl(NcclCommand::Run(args))) => {
            init_cli_logging(&cli, &paths);
            nccl_cmd::run(args, &cli, &paths)
        }
        Some(Command::Nccl(NcclCommand::Attach { id, json })) => {
            init_cli_logging(&cli, &paths);
            nccl_cmd::attach(id.as_deref(), *json, &cli, &paths)
        }
    }
}

/// The status line of a long operation ([`crate::progress::Line`]) whose messages, which
/// carry what nodes and APIs say, go through [`crate::term::visible::text`].
pub(crate) struct StatusLine(crate::progress::Line);

impl StatusLine {
    pub(crate) fn start(label: &str) -> StatusLine {
        StatusLine(crate::progress::Line::start(&crate::term::visible::text(label)))
    }

    /// One message (or a tally) of the operation.
    pub(crate) fn print(&self, line: &str) {
        self.0.print(&crate::term::visible::text(line));
    }
}

/// Headless commands log to the same file as the cockpit (never to the screen).
fn init_cli_logging(cli: &Cli, paths: &Paths) {
    let level = cli
        .log_level
        .or_else(|| Config::load(paths).ok().and_then(|c| c.log_level))
        .unwrap_or(LogLevel::Info);
    if let Err(e) = crate::logging::init(paths, level) {
        errln!("flightdeck: logging disabled: {e:#}");
    }
}

/// A runtime for one command's async work.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Tell the operator (and the log) that the state file was recovered.
pub fn note_recovery(r: Option<crate::store::Recovery>) {
    if let Some(r) = r {
        errln!("{}", r.message);
        tracing::warn!("{}", r.message);
    }
}

/// The fleet given by name (from the state) or by file ([`crate::fleet::resolve`]).
pub fn resolve_record(fleet: &str, paths: &Paths) -> anyhow::Result<crate::store::FleetRecord> {
    let (state, recovery) = crate::store::Store::new(&paths.state_dir).load()?;
    note_recovery(recovery);
    crate::fleet::resolve(fleet, &state).map_err(anyhow::Error::msg)
}

/// How this command reaches `nodes`: SSH (and the connection holder) is set up only
/// when one of them is an SSH node.
pub fn reach(nodes: &[crate::fleet::NodeTarget], cli: &Cli, paths: &Paths) -> crate::reach::Reach {
    if nodes.iter().any(|n| n.ssh().is_some()) {
        let (pool, resolver) = ssh_setup(cli, paths);
        crate::reach::Reach::new(pool, resolver)
    } else {
        crate::reach::Reach::without_ssh()
    }
}

/// The name, nodes and reach of a fleet given by name (from the state) or by file.
pub fn resolve_fleet(
    fleet: &str,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(String, Vec<crate::fleet::NodeTarget>, crate::reach::Reach)> {
    let (name, _, nodes, reach) = resolve_fleet_kind(fleet, cli, paths)?;
    Ok((name, nodes, reach))
}

/// [`resolve_fleet`], with the fleet's backend family.
pub fn resolve_fleet_kind(
    fleet: &str,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(
    String,
    crate::fleet::BackendKind,
    Vec<crate::fleet::NodeTarget>,
    crate::reach::Reach,
)> {
    let r = resolve_record(fleet, paths)?;
    let reach = reach(&r.nodes, cli, paths);
    Ok((r.name, r.backend, r.nodes, reach))
}

/// What the fleets' inventories read: the state dir, the config's `gcp:` block, and
/// Kubernetes clients.
pub fn inventory_context(paths: &Paths) -> anyhow::Result<crate::cloud::inventory::Context> {
    Ok(crate::cloud::inventory::Context {
        state_dir: paths.state_dir.clone(),
        gcp: Config::load(paths)?.gcp,
        kube: Default::default(),
    })
}

/// The SSH pool and resolver for this run: ~/.ssh/config, known_hosts, the agent, and
/// questions on the terminal (or none with --accept-new-host-keys).
/// With the config's `mux` (and no `--no-mux`), channels go through the connection
/// holder when one runs (`auto`: one is started when none runs).
pub fn ssh_setup(
    cli: &Cli,
    paths: &Paths,
) -> (crate::ssh::pool::Pool, std::sync::Arc<crate::ssh::pool::Resolver>) {
    use crate::ssh::known_hosts::HostKeyPolicy;
    let resolver = crate::ssh::pool::Resolver::from_env();
    // The session's policy is the flag's; each host's own StrictHostKeyChecking (per
    // target and per jump host, as `ssh -G` resolves it) is combined with it when the
    // host is reached (`known_hosts::effective`), so a host that says `ask` or `yes` is
    // never loosened by another block's `accept-new`.
    let policy = if cli.accept_new_host_keys {
        HostKeyPolicy::AcceptNew
    } else {
        HostKeyPolicy::Ask
    };
    let opts = crate::ssh::client::SshOptions {
        known_hosts: resolver.known_hosts("*"),
        policy,
        prompter: std::sync::Arc::new(prompt::TtyPrompter::default()),
        use_agent: true,
        agent_socket: None,
        keys: Default::default(),
    };
    let pool = crate::ssh::pool::Pool::new(opts);
    let mode = if cli.no_mux {
        crate::config::MuxMode::Off
    } else {
        Config::load(paths).map(|c| c.mux).unwrap_or_default()
    };
    let pool = match mode {
        crate::config::MuxMode::Off => pool,
        crate::config::MuxMode::On => pool.with_mux(crate::ssh::mux::Client::new(mux_cmd::socket(paths))),
        crate::config::MuxMode::Auto => {
            if let Err(e) = mux_cmd::ensure_running(paths) {
                tracing::warn!("connection holder not started: {e}");
            }
            pool.with_mux(crate::ssh::mux::Client::new(mux_cmd::socket(paths)))
        }
    };
    (pool, std::sync::Arc::new(resolver))
}

/// Load config, keymap and theme: everything the cockpit needs before it takes the
/// terminal, so that a bad file is reported on a normal screen.
pub fn load_cockpit(cli: &Cli, paths: &Paths) -> anyhow::Result<(Config, tui::app::AppOptions)> {
    let config = Config::load(paths)?;
    let monochrome = tui::theme::Theme::no_color_from_env();
    let theme_name = cli
        .theme
        .clone()
        .or_else(|| config.theme.clone())
        .unwrap_or_else(|| tui::theme::DEFAULT_THEME.to_string());
    let theme = tui::theme::Theme::load(&theme_name, paths, monochrome)?;
    let keymap = tui::keymap::Keymap::with_overrides(&tui::keymap::load_overrides(&paths.config_file())?);
    let mut state = tui::state::State::new(keymap, tui::theme::Theme::available(paths), theme_name);
    // A cached live catalog (from an earlier refresh) when it is newer than the embedded one.
    let in_use = crate::catalog::live::startup(Some(&paths.state_dir));
    if in_use.origin != crate::catalog::live::Origin::Embedded {
        state.offers = tui::offers::OffersView::new(std::sync::Arc::new(in_use.catalog.into_owned()));
    }
    Ok((
        config,
        tui::app::AppOptions {
            state,
            theme,
            paths: paths.clone(),
            monochrome,
            accept_new_host_keys: cli.accept_new_host_keys,
        },
    ))
}

fn run_tui(cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        anyhow::bail!("the cockpit needs a terminal; for scripts use a subcommand (flightdeck --help)");
    }
    let (config, opts) = load_cockpit(cli, paths)?;
    let level = cli.log_level.or(config.log_level).unwrap_or(LogLevel::Info);
    crate::logging::init(paths, level)?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "flightdeck starting");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(tui::app::run(opts));
    if let Err(e) = &result {
        tracing::error!("cockpit failed: {e:#}");
    }
    result.map(|()| ExitCode::SUCCESS)
}
