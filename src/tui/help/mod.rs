//! The help overlay: every key binding of the current keymap, and the message history.

pub mod view;
