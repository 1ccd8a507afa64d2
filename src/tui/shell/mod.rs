//! The shell: what every feature shares, so that features read it instead of importing
//! one another. The views and their switching (`view.rs`), input routed by key context
//! (`input.rs`), the global actions (`act.rs`), the layers over a view (`overlay.rs`:
//! questions, yes/no, quit), the `:` palette (`palette.rs`, `command.rs`), the `/` filter
//! (`filter.rs`), the status line and its history (`status.rs`) and the fleet the cockpit
//! is about (`fleet.rs`). The key bindings are `tui::action` and `tui::keymap`, the
//! colours `tui::theme`.

pub mod act;
pub mod command;
pub mod filter;
pub mod fleet;
pub mod input;
pub mod overlay;
pub mod palette;
pub mod status;
pub mod view;
