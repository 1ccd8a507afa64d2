//! NCCL: reading nccl-tests output and NCCL's debug lines.
//!
//! - [`mod@parse`]: the streaming parser ([`Parser`]) turning nccl-tests output, as it is
//!   printed, into [`Event`]s and a [`Report`]; `flightdeck nccl parse` and the runner's
//!   live view both use it.
//! - [`transport`]: which transport NCCL used ([`Transport`], from `NCCL_DEBUG=INFO`
//!   lines) and the warning for a GPUDirect machine that fell back to sockets
//!   ([`fallback_warning`]).
//!
//! Pure: no I/O, no terminal, no clock.

mod line;
pub mod parse;
pub mod transport;

pub use parse::{parse_text, Device, Document, Event, Measurement, OutOfBounds, Parser, Report, Row};
pub use transport::{fallback_warning, GpuDirect, Net, P2pLink, Transport, TransportDetector};
