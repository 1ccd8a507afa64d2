//! The headless CLI of DESIGN.md. Thin: each subcommand calls the domain and prints a
//! table, or one JSON document with `--json`. Exit codes: 0 success, 1 failure, 2 usage
//! (clap's own errors, and a [`Usage`] error: a flag's value that parses but means
//! nothing here). A reader that stops early (`| head`) ends the command as it ends any
//! Unix filter: quietly, by SIGPIPE ([`quiet_on_broken_pipe`]).
//!
//! Messages on stderr, one rule (as git's `fatal:`/cargo's `error:`): an error that ends the
//! command, and a warning, start with `flightdeck: ` (`flightdeck: warning: `), whichever
//! command it is (the operator typed it); a fleet file's findings are `FILE:LINE:COL: ...`
//! as compilers write them; progress lines name what they are about (`job NAME: ...`).

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
mod table;

use crate::config::{Config, LogLevel};
use crate::paths::Paths;
use crate::tui;
use std::io::IsTerminal;
use std::process::ExitCode;

pub use args::{
    command, BenchArgs, Cli, Command, ConfigCommand, DoctorArgs, ExecArgs, Flavour, FleetCommand, JobCommand,
    MuxCommand, NcclCommand, NcclEngine, NcclProfile, NicsArgs, OfferSort, OffersArgs, Pricing, RunArgs,
    StragglerArgs,
};
pub(crate) use common::StatusLine;
pub use common::{
    exit_code, inventory_context, load_cockpit, note_recovery, reach, resolve_fleet, resolve_fleet_kind,
    resolve_fleet_kind_now, resolve_record, runtime, ssh_setup, usage, Usage,
};

/// stdout is a pipe whose reader has gone (`| head` read what it wanted).
fn stdout_is_broken() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd, no wait; POLLERR on a pipe's write end means no reader is left.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n == 1 && fd.revents & libc::POLLERR != 0
}

/// End the process as a Unix filter ends when its reader went away: killed by SIGPIPE,
/// nothing printed (the shell shows 141; `set -o pipefail` sees it).
pub fn die_of_broken_pipe() -> ! {
    // SAFETY: the default action of SIGPIPE ends the process; nothing is left to run.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(128 + libc::SIGPIPE)
}

/// Writes to a closed stdout (or stderr, with `2>&1 | head`) end the command quietly
/// instead of with "Broken pipe" (an error on the way out) or a panic (exit 101): Rust
/// ignores SIGPIPE, so such a write fails with EPIPE, and `println!` panics on it. The
/// panic hook catches the print macros' panics; [`run`] the errors. SIGPIPE itself stays
/// ignored: a connection or a child's pipe that breaks is an error to report, not death.
pub fn quiet_on_broken_pipe() {
    let next = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("os error 32") {
            die_of_broken_pipe();
        }
        next(info)
    }));
}

fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    }) && stdout_is_broken()
}

/// Run the parsed command line; returns the process exit code. An error's text (which
/// may carry what a node or an API said) comes back through
/// [`crate::term::visible::text`], ready for `main` to print; [`exit_code`] says with
/// which code. An error from writing to a stdout whose reader has gone ends the process
/// here ([`die_of_broken_pipe`]).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    run_command(cli).map_err(|e| {
        if broken_pipe(&e) {
            die_of_broken_pipe();
        }
        let whole = format!("{e:#}");
        if e.chain().any(|c| c.downcast_ref::<Usage>().is_some()) {
            return usage(crate::term::visible::text(&whole));
        }
        match crate::term::visible::text(&whole) {
            std::borrow::Cow::Borrowed(_) => e,
            std::borrow::Cow::Owned(shown) => anyhow::Error::msg(shown),
        }
    })
}

fn run_command(cli: Cli) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    crate::term::visible::set_raw(cli.raw);
    common::check_theme_flag(&cli, &paths)?;
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
            profile,
        })) => nccl_cmd::parse(file, *json, machine_type.as_deref(), *nodes, *profile),
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
