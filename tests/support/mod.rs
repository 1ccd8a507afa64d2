//! Shared test harnesses.
#![allow(dead_code)]

pub mod gcp_double;
pub mod testbed;
pub mod tmux;
