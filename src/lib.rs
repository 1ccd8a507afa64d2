//! flightdeck: a terminal cockpit for multi-node GPU clusters on Google Cloud.
//! See DESIGN.md beside the repository for the architecture.

pub mod bootstrap;
pub mod catalog;
pub mod cli;
pub mod cloud;
pub mod config;
pub mod detach;
pub mod doctor;
pub mod exec;
pub mod fleet;
pub mod gpudirect;
pub mod jobs;
pub mod logging;
pub mod nccl;
pub mod node;
pub mod paths;
pub mod progress;
pub mod reach;
pub mod shellenv;
pub mod ssh;
pub mod store;
pub mod telemetry;
pub mod term;
pub mod tui;
pub mod words;
pub mod yaml;
