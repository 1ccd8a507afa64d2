//! Jobs as detached processes on a fleet's nodes (VMs, hosts, this machine): the job's
//! files uploaded, then each node's script ([`super::launch::node_script`]) started
//! detached ([`crate::detach`]), so a job outlives the connection and the flightdeck
//! that started it; followed, asked, stopped and fenced through [`crate::exec`].

use super::launch::{self, job_dir};
use super::runner::{self, FollowEvent, JobNode, JobRunner, Launch, PerRank, Progress};
use super::spec::Job;
use crate::detach::{self, Status};
use crate::exec::{self, Event};
use crate::fleet::{FleetSpec, NodeTarget};
use crate::nccl::GpuDirect;
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, JobRecord};
use tokio::sync::mpsc;

/// The detached runner: nodes reached through `reach`.
pub struct Detached {
    reach: Reach,
}

impl Detached {
    pub fn new(reach: Reach) -> Detached {
        Detached { reach }
    }
}

impl JobRunner for Detached {
    fn ranks(
        &self,
        _: &str,
        nodes: Vec<NodeTarget>,
        _: Option<&FleetSpec>,
        _: Option<usize>,
    ) -> Vec<NodeTarget> {
        nodes
    }

    fn job_nodes(&self, record: &JobRecord, fleet: &FleetRecord) -> Result<Vec<JobNode>, String> {
        runner::job_nodes(record, &fleet.nodes)
    }

    /// What only a GKE fleet's pods have (Secrets, buckets, claims, a service account)
    /// is refused with its place in the job file.
    fn admits(&self, job: &Job) -> Result<(), String> {
        super::spec::refusal(job, &job.gke_only, "only a GKE fleet runs this")
    }

    fn preflight<'a>(
        &'a self,
        nodes: &'a [JobNode],
        profile: GpuDirect,
        env: &'a [String],
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let targets: Vec<NodeTarget> = nodes.iter().map(|n| n.target.clone()).collect();
            crate::bootstrap::preflight::check_nodes(self.reach.clone(), &targets, profile, env, progress)
                .await
        })
    }

    fn launch<'a>(&'a self, l: Launch<'a>, progress: Progress<'a>) -> BoxFuture<'a, PerRank<u32>> {
        Box::pin(launch(self.reach.clone(), l.job, l.id, l.nodes, l.env, progress))
    }

    fn follow(
        &self,
        id: String,
        nodes: Vec<(JobNode, usize)>,
        tx: mpsc::Sender<FollowEvent>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(follow(self.reach.clone(), id, nodes, tx))
    }

    fn status<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(status(self.reach.clone(), id, nodes))
    }

    fn statuses<'a>(&'a self, jobs: &'a [(String, Vec<JobNode>)]) -> BoxFuture<'a, Vec<PerRank<Status>>> {
        Box::pin(statuses(self.reach.clone(), jobs))
    }

    fn stop<'a>(&'a self, id: &'a str, nodes: &'a [JobNode], grace_s: u32) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(stop(self.reach.clone(), id, nodes, grace_s))
    }

    fn fence<'a>(
        &'a self,
        id: &'a str,
        nodes: &'a [JobNode],
        grace_s: u32,
    ) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(fence(self.reach.clone(), id, nodes, grace_s))
    }

    fn tail<'a>(
        &'a self,
        id: &'a str,
        nodes: &'a [JobNode],
        lines: Option<usize>,
    ) -> BoxFuture<'a, PerRank<String>> {
        Box::pin(tail(self.reach.clone(), id, nodes, lines))
    }

    fn line_counts<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, Vec<(usize, usize)>> {
        Box::pin(line_counts(self.reach.clone(), id, nodes))
    }
}

fn fail_text(code: i32, out: &str, err: &str) -> String {
    let text = format!("{} {}", err.trim(), out.trim());
    let text = text.trim();
    if text.is_empty() {
        format!("exit {code}")
    } else {
        text.lines().last().unwrap_or(text).to_string()
    }
}

/// Upload the job's files to every node, then start the job's script on each, detached.
/// Returns each node's pid, or why it could not start. `progress` hears each step.
pub async fn launch(
    reach: Reach,
    job: &Job,
    id: &str,
    nodes: &[JobNode],
    profile: &[String],
    progress: &(dyn Fn(String) + Sync),
) -> Vec<(usize, Result<u32, String>)> {
    let mut failed: Vec<(usize, String)> = vec![];
    for u in &job.uploads {
        let files = match launch::expand(u) {
            Ok(f) => f,
            Err(e) => {
                return nodes
                    .iter()
                    .map(|n| (n.rank, Err(format!("cannot read {}: {e}", u.local.display()))))
                    .collect()
            }
        };
        for (local, rel) in files {
            let bytes = match std::fs::read(&local) {
                Ok(b) => b,
                Err(e) => {
                    return nodes
                        .iter()
                        .map(|n| (n.rank, Err(format!("cannot read {}: {e}", local.display()))))
                        .collect()
                }
            };
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&local)
                .map(|m| m.permissions().mode() & 0o755)
                .unwrap_or(0o644)
                | 0o600;
            progress(format!(
                "uploading {} ({} bytes) to {}",
                local.display(),
                bytes.len(),
                crate::words::plural(nodes.len(), "node")
            ));
            let todo: Vec<&JobNode> = nodes
                .iter()
                .filter(|n| !failed.iter().any(|(r, _)| *r == n.rank))
                .collect();
            let cmds = todo
                .iter()
                .map(|n| {
                    let part = super::spec::Upload {
                        local: local.clone(),
                        remote: rel.clone(),
                    };
                    let (dir, path) = launch::upload_target(job, id, n.rank, &part);
                    let (command, input) = detach::upload_command(&dir, &path, &bytes, mode);
                    (n.target.clone(), command, input)
                })
                .collect();
            let res = exec::collect_with_input(reach.clone(), cmds).await;
            for (n, (code, out, err)) in todo.iter().zip(res) {
                if code != 0 {
                    failed.push((
                        n.rank,
                        format!("upload of {rel}: {}", fail_text(code, &out, &err)),
                    ));
                }
            }
        }
    }
    let all: Vec<NodeTarget> = nodes.iter().map(|n| n.target.clone()).collect();
    let todo: Vec<&JobNode> = nodes
        .iter()
        .filter(|n| !failed.iter().any(|(r, _)| *r == n.rank))
        .collect();
    let cmds: Vec<(NodeTarget, String, Vec<u8>)> = todo
        .iter()
        .map(|n| {
            let script = launch::node_script(job, id, &all, n.rank, profile);
            let (command, input) = detach::launch_command(&job_dir(id, n.rank), &script);
            (n.target.clone(), command, input)
        })
        .collect();
    progress(format!(
        "starting on {}",
        crate::words::plural(cmds.len(), "node")
    ));
    let res = exec::collect_with_input(reach, cmds).await;
    let mut out: Vec<(usize, Result<u32, String>)> = failed.into_iter().map(|(r, e)| (r, Err(e))).collect();
    for (n, (code, stdout, stderr)) in todo.iter().zip(res) {
        let pid = stdout
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .and_then(|p| p.trim().parse::<u32>().ok());
        out.push((
            n.rank,
            match (code, pid) {
                (0, Some(p)) => Ok(p),
                _ => Err(fail_text(code, &stdout, &stderr)),
            },
        ));
    }
    out.sort_by_key(|(r, _)| *r);
    out
}

/// Follow every node's output from line `from` (1 = the start) until its process group
/// ends, reporting on `tx`. Returns when every node has ended or been lost.
pub async fn follow(reach: Reach, id: String, nodes: Vec<(JobNode, usize)>, tx: mpsc::Sender<FollowEvent>) {
    let ranks: Vec<(usize, usize)> = nodes.iter().map(|(n, _)| (n.target.index, n.rank)).collect();
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|(n, from)| {
            (
                n.target.clone(),
                detach::follow_command(&job_dir(&id, n.rank), *from),
            )
        })
        .collect();
    let (etx, mut erx) = exec::channel(1024);
    let h = tokio::spawn(exec::run_each(reach, jobs, 256, etx));
    let mut ended: Vec<usize> = vec![];
    let rank_of = |index: usize| ranks.iter().find(|(i, _)| *i == index).map_or(index, |r| r.1);
    while let Some(e) = erx.recv().await {
        match e {
            Event::Line { node, text, .. } => {
                let rank = rank_of(node);
                let ev = match detach::exit_marker(&text) {
                    Some(exit) => {
                        ended.push(rank);
                        FollowEvent::Exit {
                            rank,
                            code: exit.code,
                            started: exit.started,
                            ended: exit.ended,
                        }
                    }
                    None => FollowEvent::Line { rank, text },
                };
                if tx.send(ev).await.is_err() {
                    break;
                }
            }
            Event::Done { node, result } => {
                let rank = rank_of(node);
                if !ended.contains(&rank) {
                    let error = result.error.unwrap_or_else(|| {
                        format!("the follow ended with exit {} before the job did", result.code)
                    });
                    let _ = tx.send(FollowEvent::Lost { rank, error }).await;
                }
            }
        }
    }
    h.abort();
}

/// Run one command per node (made from the node's job directory) and read each node's
/// (exit code, stdout, stderr) into a result.
async fn on_nodes<T>(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    command: impl Fn(&str) -> String,
    read: impl Fn(i32, String, String) -> Result<T, String>,
) -> Vec<(usize, Result<T, String>)> {
    let cmds: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.target.clone(), command(&job_dir(id, n.rank))))
        .collect();
    let res = exec::collect(reach, cmds).await;
    nodes
        .iter()
        .zip(res)
        .map(|(n, (code, out, err))| (n.rank, read(code, out, err)))
        .collect()
}

/// Each node's [`Status`], or why it could not be read.
pub async fn status(reach: Reach, id: &str, nodes: &[JobNode]) -> Vec<(usize, Result<Status, String>)> {
    on_nodes(reach, id, nodes, detach::status_command, |code, out, err| {
        detach::parse_status(out.trim()).ok_or_else(|| fail_text(code, &out, &err))
    })
    .await
}

/// The line that starts the answer for the `i`th job of a [`statuses`] command.
const JOB_MARK: &str = "__flightdeck_job__";

/// Each job's [`status`], asking every node once for all the jobs it runs: one command
/// per node, answering a marked block per job directory.
pub async fn statuses(reach: Reach, jobs: &[(String, Vec<JobNode>)]) -> Vec<PerRank<Status>> {
    // Per node (by index): its target and the (job, rank) pairs it runs.
    let mut per_node: Vec<(NodeTarget, Vec<(usize, usize)>)> = vec![];
    for (j, (_, nodes)) in jobs.iter().enumerate() {
        for n in nodes {
            match per_node.iter_mut().find(|(t, _)| t.index == n.target.index) {
                Some((_, asks)) => asks.push((j, n.rank)),
                None => per_node.push((n.target.clone(), vec![(j, n.rank)])),
            }
        }
    }
    let cmds: Vec<(NodeTarget, String)> = per_node
        .iter()
        .map(|(t, asks)| {
            let blocks: Vec<String> = asks
                .iter()
                .enumerate()
                .map(|(i, (j, rank))| {
                    format!(
                        "echo {JOB_MARK} {i}\n( {} )",
                        detach::status_command(&job_dir(&jobs[*j].0, *rank)).trim_end()
                    )
                })
                .collect();
            (t.clone(), blocks.join("\n"))
        })
        .collect();
    let res = exec::collect(reach, cmds).await;
    let mut out: Vec<PerRank<Status>> = jobs.iter().map(|_| vec![]).collect();
    for ((_, asks), (code, stdout, err)) in per_node.iter().zip(res) {
        let mut answers: Vec<Option<Status>> = vec![None; asks.len()];
        let mut at: Option<usize> = None;
        for line in stdout.lines() {
            if let Some(i) = line
                .strip_prefix(JOB_MARK)
                .and_then(|r| r.trim().parse::<usize>().ok())
            {
                at = Some(i);
            } else if let (Some(i), Some(st)) = (at.take(), detach::parse_status(line.trim())) {
                if let Some(a) = answers.get_mut(i) {
                    *a = Some(st);
                }
            }
        }
        for ((j, rank), answer) in asks.iter().zip(answers) {
            out[*j].push((*rank, answer.ok_or_else(|| fail_text(code, &stdout, &err))));
        }
    }
    for (r, (_, nodes)) in out.iter_mut().zip(jobs) {
        r.sort_by_key(|(rank, _)| nodes.iter().position(|n| n.rank == *rank));
    }
    out
}

/// The status a stop or fence ends with: its last line.
fn final_status(code: i32, out: String, err: String) -> Result<Status, String> {
    out.lines()
        .last()
        .and_then(detach::parse_status)
        .ok_or_else(|| fail_text(code, &out, &err))
}

/// Stop the job on `nodes` (TERM, then KILL after `grace_s`); each node's exit code.
pub async fn stop(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    grace_s: u32,
) -> Vec<(usize, Result<Status, String>)> {
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::stop_command(dir, grace_s),
        final_status,
    )
    .await
}

/// End a launch cut off by the death of its launcher on `nodes`
/// ([`detach::fence_command`]); each node's exit code.
pub async fn fence(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    grace_s: u32,
) -> Vec<(usize, Result<Status, String>)> {
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::fence_command(dir, grace_s),
        final_status,
    )
    .await
}

/// The last `lines` lines of each node's output (all with `None`).
pub async fn tail(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    lines: Option<usize>,
) -> Vec<(usize, Result<String, String>)> {
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::tail_command(dir, lines),
        |code, out, err| {
            if code == 0 {
                Ok(out)
            } else {
                Err(fail_text(code, &out, &err))
            }
        },
    )
    .await
}

/// How many lines each node's output has (0 where it cannot be read).
pub async fn line_counts(reach: Reach, id: &str, nodes: &[JobNode]) -> Vec<(usize, usize)> {
    let cmds = nodes
        .iter()
        .map(|j| {
            let dir = detach::dir_word(&job_dir(id, j.rank));
            (
                j.target.clone(),
                format!("wc -l < {dir}/out.log 2>/dev/null || echo 0"),
            )
        })
        .collect();
    nodes
        .iter()
        .zip(exec::collect(reach, cmds).await)
        .map(|(j, (_, out, _))| (j.rank, out.trim().parse().unwrap_or(0)))
        .collect()
}
