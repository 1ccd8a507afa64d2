use clap::FromArgMatches;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    flightdeck::cli::quiet_on_broken_pipe();
    let matches = flightdeck::cli::command().get_matches();
    let cli = flightdeck::cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match flightdeck::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not eprintln!: a closed stderr must not turn a failure into a panic.
            let _ = writeln!(std::io::stderr(), "flightdeck: {e:#}");
            flightdeck::cli::exit_code(&e)
        }
    }
}
