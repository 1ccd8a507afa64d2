//! The command line: clap's types for every subcommand and its flags.

use crate::config::LogLevel;
use crate::nccl::runner;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

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

// Each main subcommand's `--help` ends with examples (as README's), then a pointer to the
// global options, which only `flightdeck --help` lists ([`command`]).

const OFFERS_EXAMPLES: &str = "Examples:
  flightdeck offers --gpu H100 --gpus 8 --pricing spot
  flightdeck offers --filter 'gpu=H200 spot<40 gpudirect=rdma' --sort gpu-price
  flightdeck offers --region 'us-*' --json | jq '.[0]'";

const FLEET_EXAMPLES: &str = "Examples:
  flightdeck fleet apply fleets/local.yaml --yes     # this machine as a one-node fleet
  flightdeck fleet validate fleets/ssh-hosts.yaml    # your hosts, in dstack's format
  flightdeck fleet plan fleets/a3-mega-tcpxo.yaml    # resources, NICs, $/h; calls nothing
  flightdeck fleet status a3-mega                    # preempted or stopped nodes, exit 1
  flightdeck fleet delete a3-mega --yes              # waits until every resource is gone
  flightdeck fleet gc                                # labelled resources the state lost";

const FLEET_PLAN_EXAMPLES: &str = "Examples:
  flightdeck fleet plan fleets/a3-mega-tcpxo.yaml > plan.txt   # the plan is on stdout
  flightdeck fleet plan fleets/a3-mega-tcpxo.yaml --json | jq .hourly_usd";

const FLEET_APPLY_EXAMPLES: &str = "Examples:
  flightdeck fleet apply fleets/ssh-hosts.yaml       # shows the plan, asks, then applies
  flightdeck fleet apply fleets/local.yaml --yes     # no question (scripts)
  flightdeck fleet apply a3.yaml --no-bootstrap      # GCP nodes without the GPUDirect set-up";

const FLEET_DELETE_EXAMPLES: &str = "Examples:
  flightdeck fleet delete a3-mega                    # shows what goes, asks, then deletes
  flightdeck fleet delete a3-mega --yes              # no question (scripts)
  flightdeck fleet delete a3-mega --forget           # drop its record; touch no cloud";

const EXEC_EXAMPLES: &str = "Examples:
  flightdeck exec lab -- nvidia-smi -L
  flightdeck exec lab --collapse -- nvidia-smi -L    # identical outputs grouped
  flightdeck exec lab --nodes 0,2-3 --timeout 30 -- 'dmesg | tail -5'
  flightdeck exec lab --json -- hostname | jq '.[].exit'";

const NCCL_EXAMPLES: &str = "Examples:
  flightdeck nccl run lab -g 8 -e 8G                 # nccl-tests on every node, detached
  flightdeck nccl attach                             # follow the newest run again
  flightdeck nccl parse out.txt --machine-type a3-megagpu-8g
  flightdeck nccl compare RUN_A RUN_B
  flightdeck nccl stragglers lab                     # name the slow node or link";

const NCCL_RUN_EXAMPLES: &str = "Examples:
  flightdeck nccl run lab -g 8 -e 8G
  flightdeck nccl run lab --test all_gather -b 1K -e 8G --profile tcpxo
  flightdeck nccl run a3u --dry-run                  # GKE: the objects it would create

Exit: the worst exit code of the nodes' runs (as exec), 0 when all ended well; 1 when
the run printed no rows.";

const NICS_EXAMPLES: &str = "Examples:
  flightdeck nics lab                                # per-NIC rates over 5 samples
  flightdeck nics lab --interval 500ms --samples 10 --gpu-links
  flightdeck nics lab --samples 5 --json             # rates and imbalance flags";

const JOB_EXAMPLES: &str = "Examples:
  flightdeck job run examples/train/job.yaml         # launch and follow; Ctrl-C stops following
  flightdeck job list
  flightdeck job logs train --follow --tail 20
  flightdeck job stop train";

const JOB_RUN_EXAMPLES: &str = "Examples:
  flightdeck job run examples/train/job.yaml
  flightdeck job run job.yaml --detach --stop-on-failure
  flightdeck job run train.yaml --dry-run            # GKE: the JobSet, on stdout";

const DOCTOR_EXAMPLES: &str = "Examples:
  flightdeck doctor lab                              # every check on every node, worst first
  flightdeck doctor lab --only gpus,xid,ecc --evidence
  flightdeck doctor --list                           # the checks
  flightdeck doctor lab --json | jq '.problems'";

const CONFIG_EXAMPLES: &str = "Examples:
  flightdeck config default > \"$(flightdeck config path)\"   # a commented config to edit
  flightdeck config check
  flightdeck config path --log";

const MUX_EXAMPLES: &str = "Examples:
  flightdeck mux start                               # one SSH connection per node, shared
  flightdeck mux status --json
  flightdeck mux stop";

/// Where a subcommand's help says the global options are.
const GLOBALS_NOTE: &str =
    "Global options (--theme, --log-level, --raw, --no-mux, ...): see `flightdeck --help`.";

/// flightdeck's command line: [`Cli`]'s, with the global options listed once, under their
/// heading in `flightdeck --help`. Every subcommand still takes them (hidden copies, so
/// clap does not add visible ones) and its help ends with a line that points there.
pub fn command() -> clap::Command {
    let root = <Cli as clap::CommandFactory>::command();
    let globals: Vec<clap::Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().hide(true))
        .collect();
    root.mut_subcommands(|sc| with_hidden_globals(sc, &globals))
}

fn with_hidden_globals(mut sc: clap::Command, globals: &[clap::Arg]) -> clap::Command {
    for a in globals {
        sc = sc.arg(a.clone());
    }
    let after = match sc.get_after_help() {
        Some(h) => format!("{h}\n\n{GLOBALS_NOTE}"),
        None => GLOBALS_NOTE.to_string(),
    };
    sc.after_help(after)
        .mut_subcommands(|c| with_hidden_globals(c, globals))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List GPU offers and prices from the embedded catalog.
    #[command(after_help = OFFERS_EXAMPLES)]
    Offers(OffersArgs),
    /// Validate, plan, apply, list, delete and garbage-collect fleets.
    #[command(subcommand)]
    #[command(after_help = FLEET_EXAMPLES)]
    Fleet(FleetCommand),
    /// Run a command on every node of a fleet; output prefixed by node, exit = worst.
    #[command(after_help = EXEC_EXAMPLES)]
    Exec(ExecArgs),
    /// Run NCCL tests on a fleet, or parse nccl-tests output.
    #[command(subcommand)]
    #[command(after_help = NCCL_EXAMPLES)]
    Nccl(NcclCommand),
    /// Sample per-NIC traffic and GPU figures on every node of a fleet.
    #[command(after_help = NICS_EXAMPLES)]
    Nics(NicsArgs),
    /// Run, list, follow and stop training jobs.
    #[command(subcommand)]
    #[command(after_help = JOB_EXAMPLES)]
    Job(JobCommand),
    /// Check every node of a fleet at once (GPUs, driver and NCCL versions, NVLink, ECC,
    /// Xid, clocks, NICs, RDMA, GPUDirect, reachability, placement); problems worst first.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// Show where the config lives, print a commented default, or check it.
    #[command(subcommand)]
    #[command(after_help = CONFIG_EXAMPLES)]
    Config(ConfigCommand),
    /// The connection holder: one live SSH connection per node, shared by every command
    /// (as OpenSSH's ControlMaster); start, status, stop, or serve in the foreground.
    #[command(subcommand)]
    #[command(after_help = MUX_EXAMPLES)]
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
    /// Print an example fleet file built into flightdeck (the repository's fleets/), to
    /// start from where only the binary is: `flightdeck fleet example local > local.yaml`.
    /// Without NAME, list them.
    Example {
        /// local, ssh-hosts, a3-high-tcpx, a3-mega-tcpxo, a3-ultra-rdma or a4-rdma.
        name: Option<String>,
    },
    /// Check fleet files: every error as FILE:LINE:COL: message, exit 2 on any error.
    Validate {
        /// Fleet files to check.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show what apply would create or delete, with costs; changes nothing.
    #[command(after_help = FLEET_PLAN_EXAMPLES)]
    Plan {
        /// The fleet file.
        file: PathBuf,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create or update the fleet described by a file; new GCP nodes are then
    /// bootstrapped for their GPUDirect flavour (see `fleet bootstrap`).
    #[command(after_help = FLEET_APPLY_EXAMPLES)]
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
        /// Only these nodes: indices (0,2), ranges (0-3), names or hosts (lab-2), or patterns
        /// with * (lab-1*).
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
    #[command(after_help = FLEET_DELETE_EXAMPLES)]
    Delete {
        /// The fleet's name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
        /// Only forget the fleet: its record leaves the state and nothing in its cloud
        /// is touched (for a fleet that cannot be deleted, e.g. without a project or
        /// credentials). What it made stays; `fleet gc` finds it later.
        #[arg(long)]
        forget: bool,
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

impl NcclProfile {
    /// The flavour this profile names; `auto` takes `auto`.
    pub fn flavour_or(self, auto: crate::gpudirect::GpuDirect) -> crate::gpudirect::GpuDirect {
        use crate::gpudirect::GpuDirect;
        match self {
            NcclProfile::Auto => auto,
            NcclProfile::None => GpuDirect::None,
            NcclProfile::Tcpx => GpuDirect::Tcpx,
            NcclProfile::Tcpxo => GpuDirect::Tcpxo,
            NcclProfile::Rdma => GpuDirect::Rdma,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum NcclCommand {
    /// Run an NCCL benchmark across the fleet's nodes, detached (it survives a lost
    /// connection; `nccl attach` follows it again).
    #[command(after_help = NCCL_RUN_EXAMPLES)]
    Run(RunArgs),
    /// Follow a run again (the newest when no id is given), from its first line.
    Attach {
        /// The run's id, as `nccl run` printed it.
        id: Option<String>,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Read an NCCL log from a file, or from stdin with -: nccl-tests' tables (any
    /// version, any launcher's prefixes, several tests), NCCL's debug lines and PyTorch's
    /// NCCL errors, finished or not. Exit 1 when a run did not finish or its verdict fails.
    Parse {
        /// The file to parse, or - for stdin.
        file: String,
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
        /// Judge the run against the expected curve of this machine type (e.g.
        /// a3-megagpu-8g, or 2xH200 for one node with two H200s); its GPUDirect profile
        /// judges the transport unless --profile says otherwise.
        #[arg(long, value_name = "TYPE")]
        machine_type: Option<String>,
        /// Nodes the run spanned (default: ranks / GPUs per node of the machine type).
        #[arg(long, value_name = "N", requires = "machine_type")]
        nodes: Option<u32>,
        /// The GPUDirect profile the run was meant to use, for the transport judge (as
        /// `nccl run`'s verdict): auto takes the machine type's.
        #[arg(long, value_enum, default_value = "auto")]
        profile: NcclProfile,
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
    Stragglers(StragglerArgs),
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
    ///
    /// Exit status: 0 when every node exited 0; else the exit code of the node that failed
    /// (under stop_on_failure, the first to fail, not the others' 143 from being stopped),
    /// else the highest; 255 for a node that could not be reached.
    #[command(after_help = JOB_RUN_EXAMPLES)]
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
        /// GKE fleets: print the JobSet the job would create (YAML, as `kubectl
        /// --dry-run=client -o yaml`) and create nothing; no cluster is asked, so the
        /// nodes come from `nodes:` and the GPUs from `gpus_per_node:` or the machine type.
        #[arg(long)]
        dry_run: bool,
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

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// The fleet's name (or a fleet file).
    #[arg(required_unless_present = "list")]
    pub fleet: Option<String>,
    /// Only these nodes: indices (0,2), ranges (0-3), names or hosts (lab-2), or patterns
    /// with * (lab-1*).
    #[arg(long, value_delimiter = ',', value_name = "NODES")]
    pub nodes: Vec<String>,
    /// Only these checks (comma-separated ids; `--list` names them).
    #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
    pub only: Vec<String>,
    /// The GPUDirect flavour to check for (auto: the fleet file's, else its machine type's).
    #[arg(long, value_enum, default_value_t = NcclProfile::Auto)]
    pub profile: NcclProfile,
    /// The machine type the nodes should be (default: the fleet file's instance_types).
    #[arg(long)]
    pub machine_type: Option<String>,
    /// Print each problem's evidence under it.
    #[arg(long)]
    pub evidence: bool,
    /// List the checks and exit.
    #[arg(long, conflicts_with_all = ["json", "evidence"])]
    pub list: bool,
    /// Print one JSON document instead of a report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The fleet's name (or a fleet file).
    pub fleet: String,
    #[command(flatten)]
    pub bench: BenchArgs,
    /// Only these nodes: indices (0,2), ranges (0-3), names or hosts (lab-2), or patterns
    /// with * (lab-1*).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NODES",
        conflicts_with = "node_count"
    )]
    pub nodes: Vec<String>,
    /// On how many nodes: on a GKE fleet the scheduler places the test pods (Kueue admits
    /// them, the autoscaler grows the pool, from zero too), where `--nodes` pins them to
    /// the nodes it names; on other fleets the first N.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub node_count: Option<u32>,
    /// On a GKE fleet, how long (seconds) the test may wait for Kueue to admit it and for
    /// the pool's nodes before it is given up and its JobSet removed; without it, as long
    /// as queued provisioning takes.
    #[arg(long, value_name = "SECONDS")]
    pub wait: Option<u64>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// GKE fleets: print the Kubernetes objects the run would create (YAML documents
    /// separated by `---`, as `kubectl --dry-run=client -o yaml`) and create nothing; no
    /// cluster is asked, so the GPUs a node has come from -g or the machine type.
    #[arg(long)]
    pub dry_run: bool,
}

/// The benchmark flags of `nccl run` and `nccl stragglers`. The size defaults are
/// `nccl run`'s; `nccl stragglers` sets its own on its command.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Collective: all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv.
    #[arg(long, default_value = "all_reduce")]
    pub test: String,
    /// Smallest message size (e.g. 8, 1M).
    #[arg(short = 'b', long = "minbytes", default_value = "8")]
    pub min_bytes: String,
    /// Largest message size (e.g. 8G).
    #[arg(short = 'e', long = "maxbytes", default_value = "8G")]
    pub max_bytes: String,
    /// Size multiplication factor between steps.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub step_factor: u32,
    /// GPUs per node (default: all of the node's GPUs).
    #[arg(short = 'g', long = "ngpus")]
    pub gpus: Option<u32>,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value_t = runner::DEFAULT_ITERS)]
    pub iters: u32,
    /// Warm-up iterations per size (`--warmup_iters` is nccl-tests' own spelling).
    #[arg(short = 'w', long = "warmup_iters", visible_alias = "warmup-iters", default_value_t = runner::DEFAULT_WARMUP)]
    pub warmup: u32,
    /// Data type (float, half, bfloat16, double, int32, ...).
    #[arg(short = 'd', long = "datatype", default_value = runner::DEFAULT_DTYPE)]
    pub dtype: String,
    /// Benchmark engine: nccl-tests binaries on the node (several nodes: through mpirun
    /// on the first), or flightdeck's torch.distributed benchmark (torchrun on every node).
    #[arg(long, value_enum, default_value = "nccl-tests")]
    pub engine: NcclEngine,
    /// GPUDirect environment profile (auto: from the machine type; none when unknown).
    #[arg(long, value_enum, default_value = "auto")]
    pub profile: NcclProfile,
    /// Where the nccl-tests binaries are on the nodes (else PATH, NCCL_TESTS_DIR, /opt/nccl-tests/build, ~/nccl-tests/build).
    #[arg(long, value_name = "DIR")]
    pub nccl_tests_dir: Option<String>,
    /// The mpirun of the head node for nccl-tests on several nodes.
    #[arg(long, value_name = "PATH", default_value = "mpirun")]
    pub mpirun: String,
    /// The machine type the verdict is judged for (default: the fleet file's
    /// instance_types, else the GPUs nccl-tests lists, e.g. 2xH200).
    #[arg(long, value_name = "TYPE")]
    pub machine_type: Option<String>,
    /// Skip the check of the nodes' GPUDirect pieces (interfaces, plugin, RxDM) before
    /// the run starts.
    #[arg(long)]
    pub no_preflight: bool,
    /// Set a variable after the profile's lines (repeatable), as the cockpit's run
    /// dialog edits them: `--env NCCL_SOCKET_IFNAME=eth0`.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
}

/// `nccl run`'s benchmark flags, with larger default sizes: a straggler shows in the
/// bandwidth-bound sizes, and each group runs once per stage.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("min_bytes", |a| a.default_value("64M")),
    mut_arg("max_bytes", |a| a.default_value("4G"))
)]
pub struct StragglerArgs {
    /// The fleet's name (or a fleet file).
    pub fleet: String,
    #[command(flatten)]
    pub bench: BenchArgs,
    /// A figure below this share of its stage's usual figure is slow.
    #[arg(long, default_value_t = crate::nccl::straggler::THRESHOLD)]
    pub threshold: f64,
    /// Print one JSON document instead of a report.
    #[arg(long)]
    pub json: bool,
}
