use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = flightdeck::cli::Cli::parse();
    match flightdeck::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flightdeck: {e:#}");
            ExitCode::from(1)
        }
    }
}
