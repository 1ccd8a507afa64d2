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
            println!("{}", p.display());
        }
        ConfigCommand::Default => print!("{}", crate::config::default_text()),
        ConfigCommand::Check => {
            let (_, opts) = super::load_cockpit(cli, paths)?;
            let file = paths.config_file();
            if file.exists() {
                println!("config: {} ok", file.display());
            } else {
                println!("config: {} (absent: defaults)", file.display());
            }
            println!("theme: {} ({})", opts.theme.name, opts.theme.description());
            println!("themes: {}", opts.state.themes.join(", "));
            println!("key bindings: {} ok", opts.state.keymap.bindings().len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
