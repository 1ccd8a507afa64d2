//! `flightdeck config path|default|check`.

use super::{Cli, ConfigCommand};
use crate::paths::Paths;
use std::process::ExitCode;

pub fn run(cmd: &ConfigCommand, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Path { state, log, themes } => {
            let p = if *state {
                paths.state_dir.clone()
            } else if *log {
                paths.log_file()
            } else if *themes {
                paths.themes_dir()
            } else {
                paths.config_file()
            };
            outln!("{}", p.display());
        }
        ConfigCommand::Default => out!(
            "{}",
            crate::config::default_text(&crate::tui::keymap::default_bindings_text())
        ),
        ConfigCommand::Check => {
            let (_, opts) = super::load_cockpit(cli, paths)?;
            let file = paths.config_file();
            if file.exists() {
                outln!("config: {} ok", file.display());
            } else {
                outln!("config: {} (absent: defaults)", file.display());
            }
            outln!("theme: {} ({})", opts.theme.name, opts.theme.description());
            outln!("themes: {}", opts.state.themes.join(", "));
            outln!("key bindings: {} ok", opts.state.keymap.bindings().len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
