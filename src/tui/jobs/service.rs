//! The Jobs view's services: start a job from a job file, follow an opened job on every
//! node (reconnecting to nodes whose connection drops, from the last line seen), stop a
//! job. The work is `crate::jobs::remote`'s and the fleet's [`JobRunner`]'s, shared
//! with `flightdeck job`.

use crate::jobs::{self, remote, FollowEvent, JobNode, JobRunner};
use crate::reach::Reach;
use crate::store::{self, JobRecord, Store};
use crate::tui::jobs::NodeFollow;
use crate::tui::services::ServiceEvent;
use crate::tui::state::Msg;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

async fn load(dir: PathBuf) -> Result<store::State, String> {
    tokio::task::spawn_blocking(move || Store::new(&dir).load())
        .await
        .map_err(|e| e.to_string())?
        .map(|(s, _)| s)
        .map_err(|e| e.to_string())
}

/// A job's record, its fleet's runner and its nodes.
async fn job_and_nodes(
    dir: PathBuf,
    id: &str,
    reach: &Reach,
) -> Result<(JobRecord, Arc<dyn JobRunner>, Vec<JobNode>), String> {
    let state = load(dir).await?;
    let job = state
        .jobs
        .iter()
        .find(|j| j.id == id)
        .cloned()
        .ok_or_else(|| format!("job {id} is not in the state"))?;
    let (runner, nodes) = runner_of(&state, &job, reach)?;
    Ok((job, runner, nodes))
}

/// How job `job` of `state` is run from the cockpit: its fleet's runner (its nodes
/// reached through `reach`) and its nodes.
fn runner_of(
    state: &store::State,
    job: &JobRecord,
    reach: &Reach,
) -> Result<(Arc<dyn JobRunner>, Vec<JobNode>), String> {
    let fleet = state
        .fleet(&job.fleet)
        .map_err(|_| format!("its fleet `{}` is gone from the state", job.fleet))?;
    let runner = jobs::runner_for(fleet.backend, reach.clone());
    let nodes = runner.job_nodes(job, fleet)?;
    Ok((runner, nodes))
}

async fn send(tx: &mpsc::Sender<ServiceEvent>, msg: Msg) -> bool {
    tx.send(ServiceEvent::Msg(msg)).await.is_ok()
}

/// Lines are sent in batches: at most this long after the first of a batch.
const BATCH: Duration = Duration::from_millis(50);

/// Follow job `id` on every node until each has ended. A node whose connection drops
/// is followed again after a pause (1 s, doubling to 30 s) from its last line.
pub async fn follow(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach, id: String) {
    let (job, runner, nodes) = match job_and_nodes(dir.clone(), &id, &reach).await {
        Ok(x) => x,
        Err(e) => {
            let _ = send(
                &tx,
                Msg::Jobs(crate::tui::jobs::Msg::Started(Err(format!(
                    "cannot follow job {id}: {e}"
                )))),
            )
            .await;
            return;
        }
    };
    let store = Store::new(&dir);
    let mut seen = vec![0usize; nodes.len()];
    let mut ended = vec![false; nodes.len()];
    let mut backoff = Duration::from_secs(1);
    let mut stopping = false;
    loop {
        let todo: Vec<(JobNode, usize)> = nodes
            .iter()
            .filter(|n| !ended[n.rank])
            .map(|n| (n.clone(), seen[n.rank] + 1))
            .collect();
        if todo.is_empty() {
            return;
        }
        let (etx, mut erx) = mpsc::channel(4096);
        let h = tokio::spawn(runner.follow(id.clone(), todo, etx));
        let mut batch: Vec<(usize, String)> = vec![];
        let mut deadline: Option<tokio::time::Instant> = None;
        let mut lost = false;
        loop {
            let ev = match deadline {
                Some(d) => match tokio::time::timeout_at(d, erx.recv()).await {
                    Ok(ev) => ev,
                    Err(_) => {
                        deadline = None;
                        let lines = std::mem::take(&mut batch);
                        if !send(
                            &tx,
                            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                                id: id.clone(),
                                lines,
                                now: store::now_unix(),
                            }),
                        )
                        .await
                        {
                            h.abort();
                            return;
                        }
                        continue;
                    }
                },
                None => erx.recv().await,
            };
            let Some(ev) = ev else { break };
            match ev {
                FollowEvent::Line { rank, text } => {
                    seen[rank] += 1;
                    batch.push((rank, text));
                    deadline.get_or_insert_with(|| tokio::time::Instant::now() + BATCH);
                    if batch.len() >= 2000 {
                        deadline = Some(tokio::time::Instant::now());
                    }
                    continue;
                }
                other => {
                    if !batch.is_empty() {
                        deadline = None;
                        let lines = std::mem::take(&mut batch);
                        let _ = send(
                            &tx,
                            Msg::Jobs(crate::tui::jobs::Msg::Lines {
                                id: id.clone(),
                                lines,
                                now: store::now_unix(),
                            }),
                        )
                        .await;
                    }
                    match other {
                        FollowEvent::Exit {
                            rank,
                            code,
                            started,
                            ended: at,
                        } => {
                            ended[rank] = true;
                            backoff = Duration::from_secs(1);
                            if let Some(code) = code {
                                let st = crate::detach::Status::Exited {
                                    code,
                                    started,
                                    ended: at,
                                };
                                let found = vec![(rank, Ok(st))];
                                let _ =
                                    remote::record_codes_async(&store, &id, found, remote::Stop::No).await;
                            }
                            let _ = send(
                                &tx,
                                Msg::Jobs(crate::tui::jobs::Msg::Node {
                                    id: id.clone(),
                                    rank,
                                    follow: NodeFollow::Exited(code),
                                }),
                            )
                            .await;
                            if code != Some(0) && job.stop_on_failure && !stopping {
                                // The job asked for all or nothing: the others are stopped.
                                stopping = true;
                                let others: Vec<JobNode> =
                                    nodes.iter().filter(|n| !ended[n.rank]).cloned().collect();
                                let (r, jid, grace, s) =
                                    (runner.clone(), id.clone(), job.stop_grace.max(1), store.clone());
                                tokio::spawn(async move {
                                    let found = r.stop(&jid, &others, grace).await;
                                    let why = remote::Stop::Failure(rank);
                                    let _ = remote::record_codes_async(&s, &jid, found, why).await;
                                });
                            }
                        }
                        FollowEvent::Lost { rank, error } => {
                            lost = true;
                            let _ = send(
                                &tx,
                                Msg::Jobs(crate::tui::jobs::Msg::Node {
                                    id: id.clone(),
                                    rank,
                                    follow: NodeFollow::Lost(error),
                                }),
                            )
                            .await;
                        }
                        FollowEvent::Line { .. } => unreachable!("lines are handled above"),
                    }
                }
            }
        }
        if !batch.is_empty() {
            let _ = send(
                &tx,
                Msg::Jobs(crate::tui::jobs::Msg::Lines {
                    id: id.clone(),
                    lines: batch,
                    now: store::now_unix(),
                }),
            )
            .await;
        }
        let _ = h.await;
        if lost {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(30));
            for n in nodes.iter().filter(|n| !ended[n.rank]) {
                let _ = send(
                    &tx,
                    Msg::Jobs(crate::tui::jobs::Msg::Node {
                        id: id.clone(),
                        rank: n.rank,
                        follow: NodeFollow::Following,
                    }),
                )
                .await;
            }
        }
    }
}

/// Stop job `id` on every node and record the outcome.
pub async fn stop(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach, id: String) {
    let result = async {
        let (job, runner, nodes) = job_and_nodes(dir.clone(), &id, &reach).await?;
        let grace = if job.stop_grace == 0 { 10 } else { job.stop_grace };
        let found = runner.stop(&id, &nodes, grace).await;
        remote::record_codes_async(&Store::new(&dir), &id, found.clone(), remote::Stop::Operator).await?;
        Ok::<String, String>(
            found
                .iter()
                .map(|(rank, r)| {
                    let name = &nodes[*rank].target.name;
                    match r {
                        Ok(st) => format!("{name}: {}", st.words()),
                        Err(e) => format!("{name}: {e}"),
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
    .await;
    let _ = send(&tx, Msg::Jobs(crate::tui::jobs::Msg::Stopped { id, result })).await;
}

/// Start the job of `file` on its fleet.
pub async fn run(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach, file: String) {
    let result = async {
        let path = PathBuf::from(&file);
        let lookup = |k: &str| std::env::var(k).ok();
        let job = crate::jobs::spec::load(&path, &lookup).map_err(|d| {
            d.iter()
                .filter(|d| d.severity == crate::fleet::Severity::Error)
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let state = load(dir.clone()).await?;
        let fleet = state
            .fleet(&job.fleet)
            .map_err(|e| format!("{file}: fleet `{}` is not applied{}", job.fleet, e.hint))?;
        let target = remote::Target {
            fleet: fleet.name.clone(),
            backend: fleet.backend,
            nodes: fleet.nodes.clone(),
            reach,
            spec: crate::fleet::applied::applied_spec(fleet),
            preflight: true,
            // The cockpit has no way to say yes to each: such files need the CLI.
            files_outside: false,
        };
        let progress = |m: String| tracing::info!("job {}: {m}", job.name);
        let (record, _) = remote::start(&Store::new(&dir), &job, target, false, &progress).await?;
        Ok(record.id)
    }
    .await;
    let _ = send(&tx, Msg::Jobs(crate::tui::jobs::Msg::Started(result))).await;
}

/// Ask the nodes of every unfinished job how it is, record what they say, and report
/// the jobs again: a job that ended while no flightdeck was watching shows its codes.
pub async fn refresh(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach) {
    let Ok(state) = load(dir.clone()).await else {
        return;
    };
    let found = remote::refresh(&Store::new(&dir), &state.jobs, |j| runner_of(&state, j, &reach)).await;
    for (id, note) in &found.notes {
        tracing::debug!(job = %id, "{note}");
    }
    if found.ended {
        if let Ok(state) = load(dir).await {
            let _ = send(
                &tx,
                Msg::Jobs(crate::tui::jobs::Msg::List {
                    jobs: state.jobs,
                    now: store::now_unix(),
                }),
            )
            .await;
        }
    }
}

/// How often the jobs are asked while the Jobs view shows running ones.
pub const POLL: Duration = Duration::from_secs(3);

/// After [`POLL`], ask the nodes of every unfinished job how it is (one round per fleet,
/// [`remote::refresh`]), record what ended, and report the jobs again, also when nothing
/// changed (the view then asks for the next poll while it shows running jobs).
pub async fn poll(tx: mpsc::Sender<ServiceEvent>, dir: PathBuf, reach: Reach) {
    tokio::time::sleep(POLL).await;
    let jobs = match load(dir.clone()).await {
        Ok(state) => {
            let found =
                remote::refresh(&Store::new(&dir), &state.jobs, |j| runner_of(&state, j, &reach)).await;
            for (id, note) in &found.notes {
                tracing::debug!(job = %id, "{note}");
            }
            if found.ended {
                load(dir).await.map(|s| s.jobs).ok()
            } else {
                Some(state.jobs)
            }
        }
        Err(e) => {
            tracing::debug!("jobs poll: {e}");
            None
        }
    };
    let _ = send(
        &tx,
        Msg::Jobs(crate::tui::jobs::Msg::Polled {
            jobs,
            now: store::now_unix(),
        }),
    )
    .await;
}
