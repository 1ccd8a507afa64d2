//! The local backend: this machine is the fleet's one node. Commands run with `sh -c`,
//! panes are local PTYs. Applying checks that a shell runs; nothing is created.

use super::{Backend, Progress};
use crate::fleet::{BackendKind, Fleet, NodeTarget};
use crate::ssh::client::BoxFuture;
use crate::store::FleetRecord;

pub struct Local;

impl Backend for Local {
    fn kind(&self) -> BackendKind {
        BackendKind::Local
    }

    fn apply<'a>(
        &'a self,
        fleet: &'a Fleet,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<Vec<NodeTarget>, String>> {
        Box::pin(async move {
            let out = tokio::process::Command::new("sh")
                .args(["-c", "uname -n"])
                .output()
                .await
                .map_err(|e| format!("local: cannot run sh: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "local: `sh -c uname -n` failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            progress(format!(
                "{}-0: local shell on {}",
                fleet.name,
                String::from_utf8_lossy(&out.stdout).trim()
            ));
            Ok(fleet.node_targets())
        })
    }

    fn delete<'a>(
        &'a self,
        record: &'a FleetRecord,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            progress(format!(
                "{}: local fleet forgotten (nothing to tear down)",
                record.name
            ));
            Ok(())
        })
    }
}
