//! The interactive cockpit. `update.rs` is the one mutation point (a router: one arm per
//! feature folder, the rest to `shell/`), `views/` render the state, `app.rs` runs the
//! event loop and owns the terminal. docs/DESIGN.md shows the layout and how to add a view.

pub mod action;
pub mod app;
pub mod doctor;
pub mod fleets;
pub mod help;
pub mod jobs;
pub mod keymap;
pub mod nccl;
pub mod nics;
pub mod nodes;
pub mod offers;
pub mod panes;
pub mod services;
pub mod shell;
pub mod state;
pub mod terminal;
pub mod theme;
pub mod update;
pub mod views;
pub mod widgets;
