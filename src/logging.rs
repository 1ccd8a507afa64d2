//! Logs go to `flightdeck.log` in the state dir, never to the screen. The file is rotated
//! once (to `flightdeck.log.1`) when it passes [`MAX_LOG_BYTES`] at start-up, so it does
//! not grow with uptime across runs.

use crate::config::LogLevel;
use crate::paths::Paths;
use anyhow::Context as _;
use std::sync::Mutex;

pub const MAX_LOG_BYTES: u64 = 10 * 1024 * 1024;

/// Start logging to the state dir's log file at `level`.
pub fn init(paths: &Paths, level: LogLevel) -> anyhow::Result<()> {
    crate::paths::private_dir(&paths.state_dir)
        .with_context(|| format!("cannot create the state dir {}", paths.state_dir.display()))?;
    let file = paths.log_file();
    if std::fs::metadata(&file).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let _ = std::fs::rename(&file, file.with_extension("log.1"));
    }
    let out = crate::paths::private_file(true)
        .open(&file)
        .with_context(|| format!("cannot open the log file {}", file.display()))?;
    tracing_subscriber::fmt()
        .with_writer(Mutex::new(out))
        .with_ansi(false)
        .with_max_level(level.filter())
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))?;
    Ok(())
}
