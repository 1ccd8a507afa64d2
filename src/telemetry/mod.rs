//! Live per-NIC and GPU telemetry of every node of a fleet.
//!
//! ```text
//!  node: sampler.sh (sh loop, one exec channel)      flightdeck
//!   /proc/net/dev, /sys/class/infiniband, ──text──> service (I/O: SSH or local sh)
//!   nvidia-smi -lms (background)                       │ TelemetryEvent
//!                                                      v
//!                     parse::RecordParser ─> Record ─> series::Telemetry::ingest
//!                                                      │  rate::RateTracker (wraps, resets, gaps)
//!                                                      │  rings per (node, device, metric)
//!                                                      v
//!                      downsample / stats ─> views;  imbalance::detect_in ─> flags;
//!                      report::build ─> `flightdeck nics --json`
//! ```
//! Everything but `service` is pure: no clock, no I/O, no ratatui.

pub mod imbalance;
pub mod layout;
pub mod parse;
pub mod rate;
pub mod report;
pub mod sampler;
pub mod series;
pub mod service;
pub mod synth;

pub use imbalance::{Direction, Flag, Rule};
pub use layout::{Classifier, Role};
pub use parse::{Hello, Item, Record, RecordParser};
pub use rate::{Device, Sample};
pub use sampler::Interval;
pub use series::{Metric, Ring, Series, SeriesKey, Telemetry, WindowStats};
pub use service::{Options, Samplers, TelemetryEvent};
