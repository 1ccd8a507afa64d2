//! Google Cloud: credentials, an HTTP client for Google's REST APIs, the typed lists the
//! offers catalog reads, and the provisioner of GPU fleets built on the same client.
//!
//! ```text
//!  Auth (ADC via google-cloud-auth) ──headers──> GcpClient (reqwest + rustls/ring)
//!                                                 │ get / get_json / list_pages
//!                                                 │ retries 429/5xx, one refresh on 401
//!              billing::list_skus ────────────────┤
//!              compute::{list_zones, aggregated_machine_types, aggregated_accelerator_types}
//!              ops::Compute (POST/DELETE with requestId, operations to DONE) ──┐
//!  settings + layout + plan (pure) ──> provision (apply) / upkeep (delete, gc, check)
//!                                       └─ backend::GcpBackend (Backend trait, state store)
//! ```
//!
//! * [`auth`]: [`Auth`] from Application Default Credentials or a given source.
//! * [`http`]: [`GcpClient`], [`Endpoints`] (`FLIGHTDECK_GCP_COMPUTE_URL`,
//!   `FLIGHTDECK_GCP_BILLING_URL`), [`RetryPolicy`], [`ClientOptions`].
//! * [`error`]: [`GcpError`] (`Api{service, status, reason, message}`, `Auth`, `Network`,
//!   `Malformed{what}`, `Config`), [`Service`].
//! * [`billing`], [`compute`]: the reply shapes and the list calls.
//! * [`project`]: which project to call Compute for.
//! * [`ops`]: inserts, deletes, gets and lists of Compute, operations polled, errors classified.
//! * [`settings`]: the config file's `gcp:` block (dstack's gcp backend fields).
//! * [`layout`]: GPUDirect flavour, NICs, image and disk per machine type.
//! * [`plan`]: candidates in price order, resources with request bodies, the plan.
//! * [`provision`], [`upkeep`], [`backend`]: apply; delete, gc, node checks; the backend.

pub mod auth;
pub mod backend;
pub mod billing;
pub mod compute;
pub mod error;
pub mod http;
pub mod layout;
pub mod ops;
pub mod plan;
pub mod project;
pub mod provision;
pub mod settings;
pub mod upkeep;

pub use auth::{AdcLocation, Auth, CredentialSource, CLOUD_PLATFORM_SCOPE};
pub use error::{redact, GcpError, Service};
pub use http::{ClientOptions, Endpoints, GcpClient, RetryPolicy};
