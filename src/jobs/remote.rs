//! The I/O side of jobs: upload, launch, follow, query and stop a job's processes on its
//! nodes through [`crate::exec`] (this machine, or SSH). Used by `flightdeck job` and by
//! the cockpit's Jobs view alike.

use super::launch::{self, job_dir};
use super::spec::Job;
use crate::detach::{self, Status};
use crate::exec::{self, Event, Transport};
use crate::fleet::NodeTarget;
use tokio::sync::mpsc;

/// A node of a job: its rank (position in the job) and how to reach it.
#[derive(Debug, Clone)]
pub struct JobNode {
    pub rank: usize,
    pub target: NodeTarget,
}

/// What following a job reports.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEvent {
    /// A line of a node's output, in order.
    Line { rank: usize, text: String },
    /// The node's process group ended (`None`: the code could not be read).
    Exit { rank: usize, code: Option<i32> },
    /// The connection to the node ended before the job did; following it again resumes.
    Lost { rank: usize, error: String },
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
    transport: Transport,
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
                "uploading {} ({} bytes) to {} node(s)",
                local.display(),
                bytes.len(),
                nodes.len()
            ));
            let per_node: Vec<Vec<String>> = nodes
                .iter()
                .map(|n| {
                    let part = super::spec::Upload {
                        local: local.clone(),
                        remote: rel.clone(),
                    };
                    let (dir, path) = launch::upload_target(job, id, n.rank, &part);
                    detach::upload_commands(&dir, &path, &bytes, mode)
                })
                .collect();
            let chunks = per_node.first().map_or(0, |c| c.len());
            for i in 0..chunks {
                let todo: Vec<(&JobNode, String)> = nodes
                    .iter()
                    .zip(&per_node)
                    .filter(|(n, _)| !failed.iter().any(|(r, _)| *r == n.rank))
                    .map(|(n, c)| (n, c[i].clone()))
                    .collect();
                let cmds = todo.iter().map(|(n, c)| (n.target.clone(), c.clone())).collect();
                let res = exec::collect(transport.clone(), cmds).await;
                for ((n, _), (code, out, err)) in todo.iter().zip(res) {
                    if code != 0 {
                        failed.push((
                            n.rank,
                            format!("upload of {rel}: {}", fail_text(code, &out, &err)),
                        ));
                    }
                }
            }
        }
    }
    let all: Vec<NodeTarget> = nodes.iter().map(|n| n.target.clone()).collect();
    let todo: Vec<&JobNode> = nodes
        .iter()
        .filter(|n| !failed.iter().any(|(r, _)| *r == n.rank))
        .collect();
    let cmds: Vec<(NodeTarget, String)> = todo
        .iter()
        .map(|n| {
            let script = launch::node_script(job, id, &all, n.rank, profile);
            (
                n.target.clone(),
                detach::launch_command(&job_dir(id, n.rank), &script),
            )
        })
        .collect();
    progress(format!("starting on {} node(s)", cmds.len()));
    let res = exec::collect(transport, cmds).await;
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
pub async fn follow(
    transport: Transport,
    id: String,
    nodes: Vec<(JobNode, usize)>,
    tx: mpsc::Sender<FollowEvent>,
) {
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
    let (etx, mut erx) = mpsc::channel(4096);
    let h = tokio::spawn(exec::run_each(transport, jobs, 256, etx));
    let mut ended: Vec<usize> = vec![];
    let rank_of = |index: usize| ranks.iter().find(|(i, _)| *i == index).map_or(index, |r| r.1);
    while let Some(e) = erx.recv().await {
        match e {
            Event::Line { node, text, .. } => {
                let rank = rank_of(node);
                let ev = match detach::exit_marker(&text) {
                    Some(code) => {
                        ended.push(rank);
                        FollowEvent::Exit { rank, code }
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

/// Each node's [`Status`], or why it could not be read.
pub async fn status(
    transport: Transport,
    id: &str,
    nodes: &[JobNode],
) -> Vec<(usize, Result<Status, String>)> {
    let cmds: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.target.clone(), detach::status_command(&job_dir(id, n.rank))))
        .collect();
    let res = exec::collect(transport, cmds).await;
    nodes
        .iter()
        .zip(res)
        .map(|(n, (code, out, err))| {
            (
                n.rank,
                detach::parse_status(out.trim()).ok_or_else(|| fail_text(code, &out, &err)),
            )
        })
        .collect()
}

/// Stop the job on `nodes` (TERM, then KILL after `grace_s`); each node's exit code.
pub async fn stop(
    transport: Transport,
    id: &str,
    nodes: &[JobNode],
    grace_s: u32,
) -> Vec<(usize, Result<Status, String>)> {
    let cmds: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| {
            (
                n.target.clone(),
                detach::stop_command(&job_dir(id, n.rank), grace_s),
            )
        })
        .collect();
    let res = exec::collect(transport, cmds).await;
    nodes
        .iter()
        .zip(res)
        .map(|(n, (code, out, err))| {
            (
                n.rank,
                out.lines()
                    .last()
                    .and_then(detach::parse_status)
                    .ok_or_else(|| fail_text(code, &out, &err)),
            )
        })
        .collect()
}

/// The last `lines` lines of each node's output (all with `None`).
pub async fn tail(
    transport: Transport,
    id: &str,
    nodes: &[JobNode],
    lines: Option<usize>,
) -> Vec<(usize, Result<String, String>)> {
    let cmds: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| {
            (
                n.target.clone(),
                detach::tail_command(&job_dir(id, n.rank), lines),
            )
        })
        .collect();
    let res = exec::collect(transport, cmds).await;
    nodes
        .iter()
        .zip(res)
        .map(|(n, (code, out, err))| {
            (
                n.rank,
                if code == 0 {
                    Ok(out)
                } else {
                    Err(fail_text(code, &out, &err))
                },
            )
        })
        .collect()
}
