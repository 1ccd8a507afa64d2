//! Shared test harnesses.
#![allow(dead_code)]

pub mod testbed;
pub mod tmux;
