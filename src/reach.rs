//! One way to reach a node, whatever its address: a command ([`Reach::exec`]) or a login
//! shell on a terminal ([`Reach::shell`]) as a [`crate::node::Channel`]. The node's
//! [`Address`] picks the family, here and nowhere else:
//!
//! * `Local`: a process or a PTY on this machine ([`crate::node::local`]);
//! * `Ssh`: a channel on the node's shared SSH connection, through the connection holder
//!   when one runs ([`crate::ssh::pool::Pool::exec_channel`]);
//! * `Kube`: the Kubernetes exec API, in the node's debug pod or the pod named
//!   ([`crate::cloud::gke::exec`]).
//!
//! Exec, panes, telemetry, the doctor, the bootstrap and the runners take a `Reach`;
//! whoever needs a GKE fleet's Kubernetes clients gets them here ([`Reach::kube`]).

use crate::cloud::gke::Clients;
use crate::fleet::{Address, NodeTarget};
use crate::node::{self, Channel};
use crate::ssh::client::SshError;
use crate::ssh::pool::{Pool, Resolver};
use std::sync::Arc;

/// The terminal type a shell over SSH asks for.
const TERM: &str = "xterm-256color";

/// Why a node could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// SSH could not open the channel: connecting, a host key, authentication, the
    /// connection holder.
    #[error(transparent)]
    Ssh(#[from] SshError),
    /// The Kubernetes API could not run it (the API's words).
    #[error("{reason}")]
    Kube { node: String, reason: String },
    /// This machine could not start the process.
    #[error("cannot start {program}: {source}")]
    Local {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// An SSH node, and no SSH here ([`Reach::without_ssh`]).
    #[error("{node}: no SSH was set up to reach it")]
    NoSsh { node: String },
}

impl ReachError {
    /// Trying again will not help until the operator acts: a host key changed, revoked
    /// or unknown, or authentication refused.
    pub fn needs_operator(&self) -> bool {
        matches!(
            self,
            ReachError::Ssh(
                SshError::HostKeyChanged { .. }
                    | SshError::HostKeyRevoked { .. }
                    | SshError::HostKeyUnknown { .. }
                    | SshError::Auth { .. }
            )
        )
    }
}

/// How this process reaches nodes: its SSH pool and resolver (none for local nodes only),
/// its Kubernetes clients, and the login shell of local panes. Clone freely: clones share
/// connections and clients.
#[derive(Clone)]
pub struct Reach {
    ssh: Option<(Pool, Arc<Resolver>)>,
    kube: Clients,
    local_shell: Option<String>,
}

impl Reach {
    /// Reach nodes of every kind; SSH nodes through `pool`, resolved by `resolver`.
    pub fn new(pool: Pool, resolver: Arc<Resolver>) -> Reach {
        Reach {
            ssh: Some((pool, resolver)),
            kube: Clients::default(),
            local_shell: None,
        }
    }

    /// Reach local and Kubernetes nodes only: nothing of SSH is set up (no connection
    /// holder started), and an SSH node is [`ReachError::NoSsh`].
    pub fn without_ssh() -> Reach {
        Reach {
            ssh: None,
            kube: Clients::default(),
            local_shell: None,
        }
    }

    /// Local panes run `shell` (default: `$SHELL`, else `/bin/sh`).
    pub fn with_local_shell(mut self, shell: impl Into<String>) -> Reach {
        self.local_shell = Some(shell.into());
        self
    }

    /// The Kubernetes clients (shared by every clone).
    pub fn kube(&self) -> &Clients {
        &self.kube
    }

    fn ssh(&self, node: &NodeTarget) -> Result<&(Pool, Arc<Resolver>), ReachError> {
        self.ssh.as_ref().ok_or_else(|| ReachError::NoSsh {
            node: node.name.clone(),
        })
    }

    /// Run `command` (a shell command line) on `node`.
    pub async fn exec(&self, node: &NodeTarget, command: &str) -> Result<Channel, ReachError> {
        match &node.address {
            Address::Local => node::local::exec(command).map_err(|source| ReachError::Local {
                program: "sh".into(),
                source,
            }),
            Address::Ssh(host) => {
                let (pool, resolver) = self.ssh(node)?;
                // The node's shared connection (kept while the channel lives), or the
                // connection holder's.
                Ok(pool.exec_channel(&resolver.route(host), command).await?)
            }
            // The holder keeps SSH only: a GKE node's pod goes through the API from here.
            Address::Kube { node: k, .. } => {
                self.kube
                    .exec(k, command)
                    .await
                    .map_err(|reason| ReachError::Kube {
                        node: k.node.clone(),
                        reason,
                    })
            }
        }
    }

    /// A login shell on a terminal of `cols` x `rows` on `node`.
    pub async fn shell(&self, node: &NodeTarget, cols: u16, rows: u16) -> Result<Channel, ReachError> {
        match &node.address {
            Address::Local => {
                let program = self.local_shell.clone().unwrap_or_else(node::local::login_shell);
                node::local::shell(&program, cols, rows)
                    .map_err(|source| ReachError::Local { program, source })
            }
            Address::Ssh(host) => {
                let (pool, resolver) = self.ssh(node)?;
                // The node's shared connection: the channel holds it while the shell runs.
                let (conn, ch) = pool.shell(&resolver.route(host), TERM, cols, rows).await?;
                Ok(crate::ssh::stream::channel(conn, ch))
            }
            Address::Kube { node: k, .. } => {
                self.kube
                    .shell(k, cols, rows)
                    .await
                    .map_err(|reason| ReachError::Kube {
                        node: k.node.clone(),
                        reason,
                    })
            }
        }
    }
}
