//! The cockpit's services: everything `update`'s commands ask for that does I/O or owns
//! tasks. Pane sessions (one task per node), the state store, the SSH pool with a
//! prompter that asks through the cockpit. Results come back as messages.

mod event;

pub use event::{inventory_context, ServiceEvent};

use super::panes::PaneTile;
use super::state::{Command, Msg};
use crate::fleet::BackendKind;
use crate::paths::Paths;
use crate::reach::Reach;
use crate::ssh::client::{BoxFuture, Prompter, SshOptions};
use crate::ssh::known_hosts::HostKeyPolicy;
use crate::ssh::pool::{Pool, Resolver};
use crate::store::{FleetRecord, Store};
use crate::term::session::{self, PaneEvent, PaneHandle, PaneInput, PaneState};
use crate::term::{self, SharedScreen};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

enum Answer {
    HostKey(bool),
    Passphrase(Option<String>),
}

/// Asks the operator through the cockpit: a question overlay, answered by a command.
pub struct TuiPrompter {
    tx: mpsc::Sender<ServiceEvent>,
    next: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    accept_all: AtomicBool,
}

impl TuiPrompter {
    fn ask(&self, msg: impl FnOnce(u64) -> Msg) -> oneshot::Receiver<Answer> {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        let _ = self.tx.try_send(ServiceEvent::Msg(msg(id)));
        rx
    }

    fn answer(&self, id: u64, a: Answer) {
        if let Some(tx) = self.pending.lock().expect("pending lock").remove(&id) {
            let _ = tx.send(a);
        }
    }
}

impl Prompter for TuiPrompter {
    fn confirm_host_key<'a>(&'a self, host: &'a str, fingerprint: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if self.accept_all.load(Ordering::SeqCst) {
                return true;
            }
            let (host, fingerprint) = (host.to_string(), fingerprint.to_string());
            match self
                .ask(|id| Msg::HostKeyQuestion {
                    id,
                    host,
                    fingerprint,
                })
                .await
            {
                Ok(Answer::HostKey(yes)) => yes,
                _ => false,
            }
        })
    }

    fn passphrase<'a>(&'a self, key: &'a Path) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let key = key.display().to_string();
            match self.ask(|id| Msg::PassphraseQuestion { id, key }).await {
                Ok(Answer::Passphrase(p)) => p,
                _ => None,
            }
        })
    }
}

pub struct Services {
    tx: mpsc::Sender<ServiceEvent>,
    paths: Paths,
    prompter: Arc<TuiPrompter>,
    /// How the cockpit reaches nodes: its connections (which it holds and serves to other
    /// flightdeck commands) and its Kubernetes clients.
    reach: Reach,
    panes: HashMap<usize, (PaneHandle, SharedScreen)>,
    /// The pane ids of each fleet whose panes are open (shown or in the background).
    pane_fleets: HashMap<String, Vec<usize>>,
    pane_events: mpsc::Sender<PaneEvent>,
    next_pane: usize,
    /// The task following an NCCL run, if any.
    follow: Option<tokio::task::JoinHandle<()>>,
    /// The NICs view's samplers (stopped when dropped).
    samplers: Option<crate::telemetry::service::Samplers>,
    /// The task following the opened job, if any.
    job_follow: Option<tokio::task::JoinHandle<()>>,
    /// The doctor's run on a fleet.
    doctor: Option<tokio::task::JoinHandle<()>>,
    /// Cancels the running fleet apply.
    fleet_cancel: crate::cloud::Cancel,
}

impl Services {
    pub fn new(tx: mpsc::Sender<ServiceEvent>, paths: Paths, accept_new_host_keys: bool) -> Services {
        let prompter = Arc::new(TuiPrompter {
            tx: tx.clone(),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            accept_all: AtomicBool::new(false),
        });
        let resolver = Arc::new(Resolver::from_env());
        let policy = if accept_new_host_keys {
            HostKeyPolicy::AcceptNew
        } else {
            HostKeyPolicy::Ask
        };
        let opts = SshOptions {
            known_hosts: resolver.known_hosts("*"),
            policy,
            prompter: prompter.clone(),
            use_agent: true,
            agent_socket: None,
            keys: Default::default(),
        };
        // Pane events reach the loop through one forwarder, in order.
        let (pane_events, mut rx) = mpsc::channel::<PaneEvent>(1024);
        let fwd = tx.clone();
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                if fwd
                    .send(ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Event(e))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        tokio::spawn(watch_state(tx.clone(), paths.state_dir.clone()));
        // The cockpit holds its connections while it runs and serves other flightdeck
        // commands over them (unless the config says `mux: off`, or a holder runs).
        let pool = Pool::holding(opts);
        let reach = Reach::new(pool.clone(), resolver);
        for kind in BackendKind::ALL {
            tokio::spawn(watch_inventory(
                tx.clone(),
                paths.clone(),
                reach.kube().clone(),
                crate::cloud::inventory_for(kind),
            ));
        }
        let mux_off = crate::config::Config::load(&paths).is_ok_and(|c| c.mux == crate::config::MuxMode::Off);
        if !mux_off {
            match crate::ssh::mux::bind(&crate::ssh::mux::socket_path(&paths.state_dir)) {
                Ok(Some(bound)) => {
                    let holder = crate::ssh::mux::Holder::new(
                        pool.clone(),
                        crate::ssh::mux::HolderKind::Cockpit,
                        None,
                    );
                    tokio::spawn(holder.serve(bound));
                }
                Ok(None) => tracing::info!("a connection holder runs already; the cockpit does not serve"),
                Err(e) => tracing::warn!("the cockpit's connection holder socket: {e}"),
            }
        }
        Services {
            tx,
            paths,
            prompter,
            reach,
            panes: HashMap::new(),
            pane_fleets: HashMap::new(),
            pane_events,
            next_pane: 0,
            follow: None,
            samplers: None,
            job_follow: None,
            doctor: None,
            fleet_cancel: crate::cloud::Cancel::default(),
        }
    }

    /// Carry out a command of `update` (all but Quit, Suspend, LoadTheme and Yank, which
    /// the event loop does itself).
    pub fn run(&mut self, command: Command) {
        match command {
            Command::LoadFleets => {
                let load = self.reload_state();
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                let reach = self.reach.clone();
                tokio::spawn(async move {
                    if load.await.unwrap_or(false) {
                        super::jobs::service::refresh(tx, dir, reach).await;
                    }
                });
                self.upkeep_on_load();
            }
            // Another flightdeck changed the state: read it again, nothing more.
            Command::ReloadState => drop(self.reload_state()),
            Command::OpenPanes(arg) if arg.trim().contains(' ') => {
                // `:open FLEET SELECTOR`: panes in the pods a label selector picks in a
                // GKE fleet's namespace.
                let (name, selector) = arg.trim().split_once(' ').unwrap_or_default();
                let (name, selector) = (name.to_string(), selector.trim().to_string());
                let (tx, dir, clients) = (
                    self.tx.clone(),
                    self.paths.state_dir.clone(),
                    self.reach.kube().clone(),
                );
                tokio::spawn(async move {
                    let event = match pod_panes(&dir, &clients, &name, &selector).await {
                        Ok(r) => ServiceEvent::OpenPanes(r),
                        Err(e) => ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Failed(e))),
                    };
                    let _ = tx.send(event).await;
                });
            }
            // Open already (shown or in the background): the same shells again.
            Command::OpenPanes(name) if self.pane_fleets.contains_key(&name) => {
                let _ = self
                    .tx
                    .try_send(ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Shown {
                        fleet: name,
                    })));
            }
            Command::OpenPanes(name) => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::task::spawn_blocking(move || {
                    let event = match Store::new(&dir).load() {
                        Ok((s, _)) => match s.fleet(&name) {
                            Ok(r) => ServiceEvent::OpenPanes(r.clone()),
                            Err(e) => ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Failed(format!(
                                "{e}: apply it first (flightdeck fleet apply FILE)"
                            )))),
                        },
                        Err(e) => {
                            ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Failed(e.to_string())))
                        }
                    };
                    let _ = tx.blocking_send(event);
                });
            }
            Command::ClosePanes => self.close_panes(),
            Command::ClosePanesOf(fleet) => {
                for id in self.pane_fleets.remove(&fleet).unwrap_or_default() {
                    if let Some((h, _)) = self.panes.remove(&id) {
                        let _ = h.input.try_send(PaneInput::Close);
                    }
                }
            }
            Command::PaneInput { ids, bytes } => {
                for id in ids {
                    self.send(id, PaneInput::Bytes(bytes.clone()));
                }
            }
            Command::PaneResize { id, cols, rows } => self.send(id, PaneInput::Resize { cols, rows }),
            Command::PaneRestart(id) => self.send(id, PaneInput::Restart),
            Command::SnapshotPane(id) => {
                if let Some((_, screen)) = self.panes.get(&id) {
                    let lines = term::snapshot_lines(screen);
                    let _ =
                        self.tx
                            .try_send(ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Snapshot {
                                id,
                                lines,
                            })));
                }
            }
            Command::AnswerHostKey { id, accept, all } => {
                if all {
                    self.prompter.accept_all.store(true, Ordering::SeqCst);
                }
                self.prompter.answer(id, Answer::HostKey(accept));
            }
            Command::AnswerPassphrase { id, passphrase } => {
                self.prompter
                    .answer(id, Answer::Passphrase(passphrase.map(|s| s.0)));
            }
            Command::WriteFile { path, text } => {
                let tx = self.tx.clone();
                tokio::task::spawn_blocking(move || {
                    let result = write_new(Path::new(&path), &text)
                        .map(|()| path.clone())
                        .map_err(|e| format!("{path}: {e}"));
                    let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Fleets(
                        super::fleets::Msg::FileWritten(result),
                    )));
                });
            }
            Command::FollowRun(id) => self.follow_run(id),
            Command::RefreshOffers => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::spawn(async move {
                    let opts = crate::catalog::live::RefreshOptions {
                        state_dir: Some(dir),
                        ..Default::default()
                    };
                    let result = crate::catalog::live::refresh(&opts)
                        .await
                        .map(|r| (Box::new(r.catalog), r.report.to_string()))
                        .map_err(|e| e.to_string());
                    let _ = tx
                        .send(ServiceEvent::Msg(Msg::Offers(super::offers::Msg::Refreshed(
                            result,
                        ))))
                        .await;
                });
            }
            Command::StartTelemetry(fleet) => self.start_telemetry(fleet),
            Command::RunDoctor(fleet) => {
                if let Some(old) = self.doctor.take() {
                    old.abort();
                }
                let (tx, paths) = (self.tx.clone(), self.paths.clone());
                self.doctor = Some(tokio::spawn(super::doctor::service::run(
                    tx,
                    paths,
                    self.reach.clone(),
                    fleet,
                )));
            }
            Command::FollowJob(id) => {
                if let Some(old) = self.job_follow.take() {
                    old.abort();
                }
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                self.job_follow = Some(tokio::spawn(super::jobs::service::follow(
                    tx,
                    dir,
                    self.reach.clone(),
                    id,
                )));
            }
            Command::PollJobs => {
                let (tx, dir, reach) = (self.tx.clone(), self.paths.state_dir.clone(), self.reach.clone());
                tokio::spawn(super::jobs::service::poll(tx, dir, reach));
            }
            Command::UnfollowJob => {
                if let Some(old) = self.job_follow.take() {
                    old.abort();
                }
            }
            Command::StopJob(id) => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::spawn(super::jobs::service::stop(tx, dir, self.reach.clone(), id));
            }
            Command::RunJob(file) => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::spawn(super::jobs::service::run(tx, dir, self.reach.clone(), file));
            }
            Command::PlanFleet(file) => super::fleets::service::spawn_plan(
                self.tx.clone(),
                self.paths.clone(),
                self.reach.clone(),
                file,
            ),
            Command::ApplyFleet { file, reviewed } => {
                self.fleet_cancel = crate::cloud::Cancel::default();
                super::fleets::service::spawn_apply(
                    self.tx.clone(),
                    self.paths.clone(),
                    self.reach.clone(),
                    file,
                    reviewed,
                    self.fleet_cancel.clone(),
                )
            }
            Command::CancelFleetOp => self.fleet_cancel.cancel(),
            Command::DeleteFleet(name) => super::fleets::service::spawn_delete(
                self.tx.clone(),
                self.paths.clone(),
                self.reach.clone(),
                name,
            ),
            Command::EditFile(path) => super::fleets::service::spawn_edit(self.tx.clone(), path),
            Command::SaveFile { path, text, original } => {
                super::fleets::service::spawn_save(self.tx.clone(), path, text, original)
            }
            Command::NcclRunChoices => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::task::spawn_blocking(move || {
                    let fleets = super::nccl::service::choices(&dir);
                    let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::RunFleets(
                        fleets,
                    ))));
                });
            }
            Command::StartNcclRun(req) => {
                let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
                tokio::spawn(super::nccl::service::start(tx, dir, self.reach.clone(), *req));
            }
            Command::Quit | Command::Suspend | Command::LoadTheme(_) | Command::Yank(_) => {}
        }
    }

    /// Follow run `id` on its first node: its log from the first line, parsed, each new
    /// row sent as the report so far; then its end. One run followed at a time.
    fn follow_run(&mut self, id: String) {
        if let Some(old) = self.follow.take() {
            old.abort();
        }
        let (tx, dir, reach) = (self.tx.clone(), self.paths.state_dir.clone(), self.reach.clone());
        self.follow = Some(tokio::spawn(async move {
            let state_dir = dir.clone();
            let fail = |error: String| {
                ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Failed {
                    id: id.clone(),
                    error,
                }))
            };
            let state = match tokio::task::spawn_blocking(move || Store::new(&dir).load()).await {
                Ok(Ok((s, _))) => s,
                Ok(Err(e)) => return drop(tx.send(fail(e.to_string())).await),
                Err(e) => return drop(tx.send(fail(e.to_string())).await),
            };
            let Some(run) = state.runs.iter().find(|r| r.id == id) else {
                return drop(tx.send(fail("the run is not in the state".into())).await);
            };
            let Ok(fleet) = state.fleet(&run.fleet) else {
                return drop(
                    tx.send(fail(format!("its fleet `{}` is gone from the state", run.fleet)))
                        .await,
                );
            };
            let launcher = crate::nccl::launcher_for(fleet.backend);
            let nodes = launcher.heads(run, &fleet.nodes);
            if nodes.is_empty() {
                return drop(tx.send(fail("the run has no nodes".into())).await);
            }
            // The same following as `nccl run` and `nccl attach`: every node's exit code,
            // the history entry concluded, the exit codes written to the state.
            let rows = tx.clone();
            let on_row = |_: &crate::nccl::Row, parser: &crate::nccl::Parser| {
                // A full queue skips a row's redraw; the final report follows anyway.
                let _ = rows.try_send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Report {
                    id: id.clone(),
                    report: Box::new(parser.report()),
                })));
            };
            let (f, _) = crate::nccl::remote::follow_to_end(
                &state_dir,
                reach.clone(),
                &fleet.name,
                &id,
                &nodes,
                on_row,
            )
            .await;
            // What the run left goes when it ends (a GKE run's test pods).
            if let Err(e) = launcher.cleanup(&reach, &id, &nodes).await {
                tracing::warn!("run {id}: {e}");
            }
            let dir = state_dir.clone();
            if let Ok(Ok(all)) =
                tokio::task::spawn_blocking(move || crate::nccl::history::load_all(&dir)).await
            {
                let _ = tx
                    .send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::History(all))))
                    .await;
            }
            let end = super::nccl::RunEnd {
                codes: f.named_codes(&nodes),
                tail: f.error_tail(&nodes[0].name, 20),
            };
            let _ = tx
                .send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Report {
                    id: id.clone(),
                    report: Box::new(f.report),
                })))
                .await;
            let _ = tx
                .send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Ended {
                    id,
                    end: Box::new(end),
                })))
                .await;
        }));
    }

    /// Read the state store and send what the views show (fleets, runs, jobs, the NCCL
    /// history and straggler result); resolves to whether a job is unfinished.
    fn reload_state(&self) -> tokio::task::JoinHandle<bool> {
        let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
        tokio::task::spawn_blocking(move || {
            let loaded = Store::new(&dir).load();
            let runs = loaded.as_ref().map(|(s, _)| s.runs.clone()).unwrap_or_default();
            let jobs = loaded.as_ref().map(|(s, _)| s.jobs.clone()).unwrap_or_default();
            let result = loaded.map(|(s, _)| s.fleets).map_err(|e| e.to_string());
            let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Fleets(super::fleets::Msg::Loaded(result))));
            let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Runs(runs))));
            let now = crate::store::now_unix();
            let unfinished = jobs.iter().any(|j| !j.finished());
            let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Jobs(crate::tui::jobs::Msg::List {
                jobs,
                now,
            })));
            // A damaged history is logged by the loader; the view goes on without it.
            let history = crate::nccl::history::load_all(&dir).unwrap_or_default();
            let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::History(
                history,
            ))));
            let stragglers = crate::nccl::history::load_stragglers(&dir)
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "nccl stragglers");
                    None
                })
                .map(Box::new);
            let _ = tx.blocking_send(ServiceEvent::Msg(Msg::Nccl(crate::tui::nccl::Msg::Stragglers(
                stragglers,
            ))));
            unfinished
        })
    }

    /// Samplers on every node of `fleet` (the previous ones stop when dropped).
    fn start_telemetry(&mut self, fleet: String) {
        self.samplers = None;
        let (tx, dir) = (self.tx.clone(), self.paths.state_dir.clone());
        let loaded = tokio::task::block_in_place(|| Store::new(&dir).load());
        let record = match loaded {
            Ok((s, _)) => s.fleet(&fleet).ok().cloned(),
            Err(e) => {
                let _ = tx.try_send(ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Failed(
                    e.to_string(),
                ))));
                return;
            }
        };
        let Some(record) = record else {
            let _ = tx.try_send(ServiceEvent::Msg(Msg::Panes(crate::tui::panes::Msg::Failed(
                format!("no fleet `{fleet}` in the state"),
            ))));
            return;
        };
        let nodes: Vec<String> = record.nodes.iter().map(|n| n.name.clone()).collect();
        let _ = tx.try_send(ServiceEvent::Msg(Msg::Nics(crate::tui::nics::Msg::Started {
            fleet,
            nodes,
        })));
        let (ttx, mut trx) = mpsc::channel(1024);
        let opts = crate::telemetry::service::Options::live(crate::telemetry::sampler::Interval::DEFAULT);
        self.samplers = Some(crate::telemetry::service::spawn(
            self.reach.clone(),
            record.nodes.clone(),
            opts,
            ttx,
        ));
        tokio::spawn(async move {
            while let Some(e) = trx.recv().await {
                if tx
                    .send(ServiceEvent::Msg(Msg::Nics(crate::tui::nics::Msg::Sample(
                        Box::new(e),
                    ))))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
    }

    fn send(&self, id: usize, input: PaneInput) {
        if let Some((h, _)) = self.panes.get(&id) {
            if h.input.try_send(input).is_err() {
                tracing::warn!("pane {id}: input queue full or closed; keystrokes dropped");
            }
        }
    }

    /// The inventories that look when the fleets load (GCP's: preempted, stopped, gone).
    fn upkeep_on_load(&self) {
        for kind in BackendKind::ALL {
            let inventory = crate::cloud::inventory_for(kind);
            if inventory.upkeep_on_load() {
                tokio::spawn(upkeep(
                    self.tx.clone(),
                    inventory_context(&self.paths).with_kube(self.reach.kube().clone()),
                    inventory,
                ));
            }
        }
    }

    fn close_panes(&mut self) {
        self.pane_fleets.clear();
        for (_, (h, _)) in self.panes.drain() {
            let _ = h.input.try_send(PaneInput::Close);
        }
    }

    /// Start a session per node of `record`; returns the tiles for the view. Other
    /// fleets' panes go on in the background; an older set of this fleet's ends.
    pub fn open_panes(&mut self, record: &FleetRecord) -> Result<Vec<PaneTile>, String> {
        for id in self.pane_fleets.remove(&record.name).unwrap_or_default() {
            if let Some((h, _)) = self.panes.remove(&id) {
                let _ = h.input.try_send(PaneInput::Close);
            }
        }
        let mut tiles = vec![];
        for node in &record.nodes {
            let id = self.next_pane;
            self.next_pane += 1;
            let screen = term::new_screen(24, 80);
            let handle = session::spawn(
                id,
                self.reach.clone(),
                node.clone(),
                screen.clone(),
                self.pane_events.clone(),
            );
            self.panes.insert(id, (handle, screen.clone()));
            tiles.push(PaneTile {
                id,
                node: node.name.clone(),
                host: node.host().to_string(),
                state: PaneState::Connecting,
                marked: false,
                screen,
                size: (80, 24),
            });
        }
        self.pane_fleets
            .insert(record.name.clone(), tiles.iter().map(|t| t.id).collect());
        tracing::info!(fleet = %record.name, nodes = tiles.len(), "panes opened");
        Ok(tiles)
    }
}

/// Create `path` (and its directory) with `text`; an existing file is never overwritten.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::new(
                    e.kind(),
                    "exists already; edit the name in the file's path or remove the old file",
                )
            } else {
                e
            }
        })?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

impl Services {
    /// Before the cockpit exits: the GKE debug pods it made for panes, exec and
    /// telemetry are removed (within 10 s; `fleet gc` finds any left).
    pub async fn shutdown(&mut self) {
        self.close_panes();
        let clients = self.reach.kube().clone();
        match tokio::time::timeout(std::time::Duration::from_secs(10), clients.remove_created()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("removed {n} GKE debug pods"),
            Err(_) => {
                tracing::warn!("GKE debug pods not all removed within 10s; `flightdeck fleet gc` finds them")
            }
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        if let Some(f) = self.job_follow.take() {
            f.abort();
        }
        self.close_panes();
    }
}

/// One look of `inventory` at its fleets: what changed in the state is shown again (a
/// preempted GCP node), what was seen goes to the views (a GKE cluster's snapshot).
/// Failures go to the log; the views keep what they have.
async fn upkeep(
    tx: mpsc::Sender<ServiceEvent>,
    ctx: crate::cloud::inventory::Context,
    inventory: &'static dyn crate::cloud::Inventory,
) {
    use crate::cloud::inventory::Upkept;
    let found = match inventory.upkeep(&ctx).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("checking {} nodes: {e}", inventory.kind());
            return;
        }
    };
    for f in found {
        let msg = match f {
            Upkept::StateChanged => {
                let dir = ctx.state_dir.clone();
                match tokio::task::spawn_blocking(move || Store::new(&dir).load()).await {
                    Ok(Ok((s, _))) => Msg::Fleets(super::fleets::Msg::Loaded(Ok(s.fleets))),
                    _ => continue,
                }
            }
            Upkept::Seen { fleet, seen } => {
                Msg::Nodes(super::nodes::Msg::GkeSnapshot { fleet, result: seen })
            }
        };
        if tx.send(ServiceEvent::Msg(msg)).await.is_err() {
            return;
        }
    }
}

/// Tell the loop when the state file changes (a job or run started from the command
/// line, or by another cockpit), so the views show it without `r`. The store renames a
/// new `state.json` into place: inotify reports the rename into the state dir, and
/// nothing wakes while nothing changes. Several changes close together give one reload.
async fn watch_state(tx: mpsc::Sender<ServiceEvent>, dir: std::path::PathBuf) {
    if let Err(e) = crate::paths::private_dir(&dir) {
        tracing::warn!(error = %e, dir = %dir.display(), "state dir: not watched");
        return;
    }
    let watch = match crate::store::watch::DirWatch::new(&dir) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, dir = %dir.display(), "state dir: not watched (reload with r)");
            return;
        }
    };
    loop {
        match watch.changed(crate::store::STATE_FILE).await {
            Ok(()) => {
                // Let a burst of writes settle, then reload once.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                watch.drain();
                if tx.send(ServiceEvent::Msg(Msg::StateChanged)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "state dir watch ended");
                return;
            }
        }
    }
}

/// A GKE fleet's record with the pods `selector` picks as its nodes (each reached in its
/// first container), for `:open FLEET SELECTOR`.
async fn pod_panes(
    dir: &std::path::Path,
    clients: &crate::cloud::gke::Clients,
    name: &str,
    selector: &str,
) -> Result<FleetRecord, String> {
    let d = dir.to_path_buf();
    let (state, _) = tokio::task::spawn_blocking(move || Store::new(&d).load())
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let mut record = state.fleet(name).map_err(|e| e.to_string())?.clone();
    let (target, pods) =
        crate::cloud::gke::backend::Target::pods_of_record(clients, &record, selector).await?;
    record.nodes = pods;
    if record.nodes.is_empty() {
        return Err(format!(
            "no running pod in namespace {} matches `{selector}`",
            target.namespace
        ));
    }
    Ok(record)
}

/// Look at one family's fleets while the cockpit runs, as often as its inventory says
/// (GCP: every `gcp.health_check_secs`, so a preempted Spot node shows without a reload;
/// GKE: every 10 s, the clusters' pools, nodes and workloads for the Nodes view); ends
/// with the cockpit.
async fn watch_inventory(
    tx: mpsc::Sender<ServiceEvent>,
    paths: Paths,
    kube: crate::cloud::gke::Clients,
    inventory: &'static dyn crate::cloud::Inventory,
) {
    let Some(every) = inventory.upkeep_every(&inventory_context(&paths)) else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if inventory.upkeep_on_load() {
        // Loading the fleets looked already.
        tick.tick().await;
    }
    loop {
        tick.tick().await;
        if tx.is_closed() {
            return;
        }
        let ctx = inventory_context(&paths).with_kube(kube.clone());
        upkeep(tx.clone(), ctx, inventory).await;
    }
}
