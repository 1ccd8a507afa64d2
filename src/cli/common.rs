//! What the subcommands share: the status line, the runtime, fleet resolution and how
//! nodes are reached, the inventories' context, SSH set-up, the cockpit's files.

use super::args::Cli;
use crate::config::Config;
use crate::paths::Paths;
use crate::tui;

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
    let record = crate::fleet::resolve(fleet, &state).map_err(anyhow::Error::msg)?;
    // What runs is what was applied; an edit since is said, not run.
    if let Some(w) = crate::fleet::applied::drift_warning(&record) {
        errln!("warning: {w}");
    }
    Ok(record)
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
    with_reach(resolve_record(fleet, paths)?, cli, paths)
}

/// [`resolve_fleet_kind`] with the nodes the cloud has now where they come and go
/// without flightdeck (`Inventory::live_nodes`: a GKE pool applied at zero nodes has
/// nodes once a job brought them up); the recorded nodes, with a warning, when the
/// cloud cannot be asked.
pub fn resolve_fleet_kind_now(
    fleet: &str,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(
    String,
    crate::fleet::BackendKind,
    Vec<crate::fleet::NodeTarget>,
    crate::reach::Reach,
)> {
    let mut r = resolve_record(fleet, paths)?;
    let ctx = inventory_context(paths)?;
    // The answer is taken out of the borrow of `r` the question holds, then applied.
    let now = match crate::cloud::lifecycle::inventory_for(r.backend).live_nodes(&ctx, &r) {
        Some(ask) => Some(runtime()?.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(30), ask)
                .await
                .unwrap_or_else(|_| Err("no answer within 30 s".into()))
        })),
        None => None,
    };
    match now {
        Some(Ok(nodes)) => r.nodes = nodes,
        Some(Err(e)) => errln!(
            "fleet `{}`: its nodes now could not be listed ({e}); using the {} recorded when it was applied",
            r.name,
            crate::words::plural(r.nodes.len(), "node")
        ),
        None => {}
    }
    with_reach(r, cli, paths)
}

/// A resolved fleet's name, family and nodes, with how this command reaches them.
fn with_reach(
    r: crate::store::FleetRecord,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(
    String,
    crate::fleet::BackendKind,
    Vec<crate::fleet::NodeTarget>,
    crate::reach::Reach,
)> {
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
        prompter: std::sync::Arc::new(super::prompt::TtyPrompter::default()),
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
        crate::config::MuxMode::On => {
            pool.with_mux(crate::ssh::mux::Client::new(super::mux_cmd::socket(paths)))
        }
        crate::config::MuxMode::Auto => {
            if let Err(e) = super::mux_cmd::ensure_running(paths) {
                tracing::warn!("connection holder not started: {e}");
            }
            pool.with_mux(crate::ssh::mux::Client::new(super::mux_cmd::socket(paths)))
        }
    };
    (pool, std::sync::Arc::new(resolver))
}

/// `--theme NAME` names a theme that exists (embedded or the user's), for every command:
/// a misspelt flag is a usage error (exit 2) whether or not the command draws colour.
pub fn check_theme_flag(cli: &Cli, paths: &Paths) -> anyhow::Result<()> {
    let Some(name) = &cli.theme else { return Ok(()) };
    let available = tui::theme::Theme::available(paths);
    if available.iter().any(|a| a == name) {
        return Ok(());
    }
    let hint = crate::yaml::closest(name, available.iter().map(String::as_str))
        .map(|h| format!("did you mean `{h}`? "))
        .unwrap_or_default();
    Err(super::usage(format!(
        "--theme: unknown theme `{name}`; {hint}available: {}",
        available.join(", ")
    )))
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
    tui::theme::ColorDepth::set_configured(config.color_depth);
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

/// A usage error: the command line parsed, but a flag's value names nothing (a bad
/// `--filter`, a `--nodes` that selects no node, an unknown `--theme`). Exit 2, as clap's
/// own usage errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error as an `anyhow::Error`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// The exit code for an error of `cli::run`: 2 for a [`Usage`] error, else 1.
pub fn exit_code(e: &anyhow::Error) -> std::process::ExitCode {
    if e.chain().any(|c| c.downcast_ref::<Usage>().is_some()) {
        std::process::ExitCode::from(2)
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// A file's finding as stderr shows it: `FILE:LINE:COL: ...` where it has a place in the
/// file (as compilers write them); one about the whole file (it cannot be read, it is
/// too large) is the command's error and starts with `flightdeck: `, as every other.
pub fn diag_line(d: &crate::fleet::Diagnostic) -> String {
    match d.line {
        Some(_) => d.to_string(),
        None => format!("flightdeck: {d}"),
    }
}
