//! The SSH layer on russh: ssh_config, known_hosts, keys and agent, connections through a
//! bastion, channels multiplexed over one connection per node.

pub mod client;
pub mod config;
pub mod known_hosts;
pub mod mux;
pub mod pool;
pub mod stream;
