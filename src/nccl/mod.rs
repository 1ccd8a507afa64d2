//! NCCL: reading nccl-tests output and NCCL's debug lines.
//!
//! - [`mod@parse`]: the streaming parser ([`Parser`]) turning nccl-tests output, as it is
//!   printed, into [`Event`]s and a [`Report`]; `flightdeck nccl parse` and the runner's
//!   live view both use it.
//! - [`transport`]: which transport NCCL used ([`Transport`], from `NCCL_DEBUG=INFO`
//!   lines) and the warning for a GPUDirect machine that fell back to sockets
//!   ([`fallback_warning`]).
//! - [`expect`]: expected curves per machine type, collective and node count, and the
//!   verdict of a run against them.
//! - [`history`]: runs kept in the state dir, and two runs compared.
//! - [`straggler`]: the straggler finder's decisions (which nodes to run together next,
//!   rankings, the slow node or link).
//! - [`runner`]: the commands that launch, follow and stop runs on the nodes.
//! - [`profile`]: the GPUDirect profile `auto` picks for a fleet (runs and jobs).
//! - [`remote`]: the I/O side: starting a run on a fleet's nodes, recording it, and
//!   following it, shared by `flightdeck nccl` and the cockpit.
//!
//! Pure but for [`remote`]: no I/O, no terminal, no clock.

pub mod baseline;
pub mod expect;
pub mod history;
mod line;
pub mod nodessh;
pub mod parse;
pub mod profile;
pub mod remote;
pub mod runner;
pub mod straggler;
pub mod transport;

pub use parse::{parse_text, Device, Document, Event, Measurement, OutOfBounds, Parser, Report, Row};
pub use transport::{fallback_warning, GpuDirect, Net, P2pLink, Transport, TransportDetector};

/// `8B`, `1K`, `8M`, `1G`; `1.5K` for sizes that are not a whole number of units.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >= 1u64 << (10 * (unit + 1)) {
        unit += 1;
    }
    let scale = 1u64 << (10 * unit);
    if bytes.is_multiple_of(scale) {
        format!("{}{}", bytes / scale, UNITS[unit])
    } else {
        let v = format!("{:.1}", bytes as f64 / scale as f64);
        format!("{}{}", v.trim_end_matches('0').trim_end_matches('.'), UNITS[unit])
    }
}
