//! The SSH backend: existing hosts (dstack's SSH fleets). Applying connects to every
//! node (through its bastion), verifying host keys, and runs `uname -n` on it; the fleet
//! is recorded only when every node answered.

use super::{Backend, Progress};
use crate::exec::{self, Event};
use crate::fleet::{BackendKind, Fleet, NodeTarget};
use crate::reach::Reach;
use crate::ssh::client::BoxFuture;
use crate::store::FleetRecord;

pub struct SshHosts {
    pub reach: Reach,
    pub fanout: usize,
}

impl Backend for SshHosts {
    fn kind(&self) -> BackendKind {
        BackendKind::Ssh
    }

    fn apply<'a>(
        &'a self,
        fleet: &'a Fleet,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<Vec<NodeTarget>, String>> {
        Box::pin(async move {
            let nodes = fleet.node_targets();
            let (tx, mut rx) = exec::channel(256);
            let run = tokio::spawn(exec::run(
                self.reach.clone(),
                nodes.clone(),
                "uname -n".into(),
                self.fanout,
                tx,
            ));
            let mut names = vec![String::new(); nodes.len()];
            let mut failures = vec![];
            while let Some(e) = rx.recv().await {
                match e {
                    Event::Line { node, text, .. } => names[node] = text,
                    Event::Done { node, result } => match result.error {
                        None if result.code == 0 => {
                            progress(format!("{}: reachable ({})", nodes[node].name, names[node]))
                        }
                        None => {
                            failures.push(format!("{}: `uname -n` exited {}", nodes[node].name, result.code))
                        }
                        Some(err) => failures.push(format!("{}: {err}", nodes[node].name)),
                    },
                }
            }
            let _ = run.await;
            if failures.is_empty() {
                Ok(nodes)
            } else {
                // "Not reached", not "unreachable": a refused host key or a failed
                // login is no network fault; each node's line says which.
                Err(format!(
                    "{} of {} not reached:\n  {}",
                    failures.len(),
                    crate::words::plural(nodes.len(), "node"),
                    failures.join("\n  ")
                ))
            }
        })
    }

    fn delete<'a>(
        &'a self,
        record: &'a FleetRecord,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            progress(format!(
                "{}: SSH fleet forgotten (the hosts are yours and stay as they are)",
                record.name
            ));
            Ok(())
        })
    }
}
