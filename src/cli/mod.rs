//! The headless CLI of DESIGN.md. Thin: each subcommand calls the domain and prints a
//! table, or one JSON document with `--json`. Exit codes: 0 success, 1 failure, 2 usage
//! (and 2 for a subcommand whose feature has not landed in this build).

#[macro_use]
mod print;

mod args;
mod common;
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
use std::io::IsTerminal;
use std::process::ExitCode;

pub use args::{
    BenchArgs, Cli, Command, ConfigCommand, DoctorArgs, ExecArgs, Flavour, FleetCommand, JobCommand,
    MuxCommand, NcclCommand, NcclEngine, NcclProfile, NicsArgs, OfferSort, OffersArgs, Pricing, RunArgs,
    StragglerArgs,
};
pub(crate) use common::StatusLine;
pub use common::{
    inventory_context, load_cockpit, note_recovery, reach, resolve_fleet, resolve_fleet_kind, resolve_record,
    runtime, ssh_setup,
};

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
