//! flightdeck: a terminal cockpit for multi-node GPU clusters on Google Cloud.
//! See DESIGN.md beside the repository for the architecture.

pub mod catalog;
pub mod cli;
pub mod config;
pub mod logging;
pub mod paths;
pub mod tui;
pub mod yaml;
