//! Live refresh of the offers catalog from Google's APIs, its cache, and which catalog is in
//! use (embedded, cached or live) with how old it is.
//!
//! ```text
//!  Cloud Billing SKUs (paged) ──> PriceBook ─┐            (prices.rs)
//!  Compute zones                            ├─> offers ─> flags ─> Catalog ─> cache
//!  Compute aggregated machineTypes ─────────┤  (offers.rs) (flags.rs)        (cache.rs)
//!  Compute aggregated acceleratorTypes ─────┘
//! ```
//!
//! * [`refresh`]: the whole thing as the CLI's `--refresh` and the Offers view's `r` run it:
//!   credentials (ADC), project, fetch, build, write the cache. Fails with a [`GcpError`];
//!   the caller keeps the catalog it had.
//! * [`fetch`] / [`build`]: the same in two steps with a given client and project (tests,
//!   the provisioner's client).
//! * [`startup`]: the catalog to start with: the cache when it is readable and newer than the
//!   embedded catalog, else the embedded one.
//! * [`age`] / [`InUse::describe`]: `as of 2026-11-22T02:30:00Z (3 h old)`.
//!
//! The refreshed catalog's `source` is [`SOURCE`]; its `as_of` is the fetch time in UTC
//! (`YYYY-MM-DDTHH:MM:SSZ`).

pub mod cache;
pub mod flags;
pub mod offers;
pub mod prices;

use crate::catalog::Catalog;
use crate::cloud::gcp::{billing, compute, project, Auth, ClientOptions, Endpoints, GcpClient, GcpError};
use offers::{Inventory, Knowledge};
use prices::PriceBook;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `source` of a refreshed catalog.
pub const SOURCE: &str = "live: Cloud Billing Catalog + Compute API";

/// The machine types asked for: accelerator-optimized (`a2`, `a3`, `a4`, `a4x`, ...),
/// graphics (`g2`, ...) and N1 (hosts of attachable GPUs). A Compute `filter` regular
/// expression the whole name must match; it keeps the aggregated list to a few pages.
pub const MACHINE_FILTER: &str = r#"name eq "(a[0-9]+x?|g[0-9]+|n1)-.*""#;

/// What a refresh found, for a one-line summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub project: String,
    pub billing_pages: usize,
    pub skus: usize,
    pub skus_used: usize,
    pub price_conflicts: usize,
    pub zones: usize,
    pub zones_down: Vec<String>,
    /// Zones Compute could not list (`unreachables`).
    pub unreachable: Vec<String>,
    pub offers: usize,
    /// Offers without any known price.
    pub unpriced: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} offers in {} zones (project {}); {} of {} Compute Engine SKUs priced them ({} pages)",
            self.offers, self.zones, self.project, self.skus_used, self.skus, self.billing_pages
        )?;
        if self.unpriced > 0 {
            write!(f, "; {} offers have no price", self.unpriced)?;
        }
        if self.price_conflicts > 0 {
            write!(
                f,
                "; {} prices were given twice, the first kept",
                self.price_conflicts
            )?;
        }
        if !self.zones_down.is_empty() {
            write!(f, "; zones down, left out: {}", self.zones_down.join(", "))?;
        }
        if !self.unreachable.is_empty() {
            write!(f, "; Compute could not list: {}", self.unreachable.join(", "))?;
        }
        Ok(())
    }
}

/// A refreshed catalog.
#[derive(Debug, Clone)]
pub struct Refreshed {
    pub catalog: Catalog,
    /// Unix seconds.
    pub fetched_at: u64,
    pub report: Report,
    /// Set when the catalog could not be cached (it is still good for this run).
    pub cache_warning: Option<String>,
}

/// Fetch prices and inventory with `client` for `project` and build the catalog.
pub async fn fetch(client: &GcpClient, project: &str, now: SystemTime) -> Result<Refreshed, GcpError> {
    let mut book = PriceBook::default();
    let mut pages = 0;
    let billing = async {
        pages = billing::list_skus(client, billing::COMPUTE_ENGINE_SERVICE, |skus| {
            book.add_skus(&skus);
            Ok(())
        })
        .await?;
        Ok::<_, GcpError>(())
    };
    let (_, zones, machine_types, accelerator_types) = tokio::try_join!(
        billing,
        compute::list_zones(client, project),
        machine_types(client, project),
        compute::aggregated_accelerator_types(client, project),
    )?;
    let inv = Inventory {
        zones,
        machine_types,
        accelerator_types,
    };
    let mut r = build(&inv, &book, project, unix(now));
    r.report.billing_pages = pages;
    if r.catalog.offers().is_empty() {
        return Err(GcpError::Malformed {
            service: crate::cloud::gcp::Service::Compute,
            what: "machine and accelerator types".into(),
            detail: format!(
                "no GPU machine types in any zone of project {project}: nothing to list \
                 (is Compute Engine set up in this project?)"
            ),
        });
    }
    if book.is_empty() {
        return Err(GcpError::Malformed {
            service: crate::cloud::gcp::Service::Billing,
            what: "Cloud Billing SKUs".into(),
            detail: "no Compute Engine SKU gave a price".into(),
        });
    }
    Ok(r)
}

/// Machine types with [`MACHINE_FILTER`]; should Compute refuse the filter (400), all of
/// them (more pages, same result: offers are picked by their accelerators either way).
async fn machine_types(
    client: &GcpClient,
    project: &str,
) -> Result<compute::ByZone<compute::MachineType>, GcpError> {
    match compute::aggregated_machine_types(client, project, Some(MACHINE_FILTER)).await {
        Err(GcpError::Api { status: 400, .. }) => {
            tracing::warn!("Compute refused the machine type filter; listing every machine type");
            compute::aggregated_machine_types(client, project, None).await
        }
        other => other,
    }
}

/// Build the catalog from what was fetched (pure).
pub fn build(inv: &Inventory, book: &PriceBook, project: &str, fetched_at: u64) -> Refreshed {
    let know = Knowledge::from_catalog(Catalog::embedded());
    let mut built = offers::build(inv, book, &know);
    let sliced = std::mem::take(&mut built.sliced);
    flags::compute(&mut built.offers, |o| sliced.contains(&o.id));
    let zones: std::collections::BTreeSet<&str> = built.offers.iter().map(|o| o.zone.as_str()).collect();
    let report = Report {
        project: project.to_string(),
        billing_pages: 0,
        skus: book.stats.skus,
        skus_used: book.stats.used,
        price_conflicts: book.stats.conflicts,
        zones: zones.len(),
        zones_down: built.zones_down.clone(),
        unreachable: inv
            .machine_types
            .unreachable
            .iter()
            .chain(&inv.accelerator_types.unreachable)
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect(),
        offers: built.offers.len(),
        unpriced: built
            .offers
            .iter()
            .filter(|o| o.on_demand.is_none() && o.spot.is_none() && o.flex.is_none())
            .count(),
    };
    Refreshed {
        catalog: Catalog::new(SOURCE, timestamp(fetched_at), built.offers),
        fetched_at,
        report,
        cache_warning: None,
    }
}

/// How to refresh.
#[derive(Debug, Clone, Default)]
pub struct RefreshOptions {
    /// The GCP project; `None` to discover it (see `cloud::gcp::project`).
    pub project: Option<String>,
    /// The state dir for the cache; `None` to not cache.
    pub state_dir: Option<PathBuf>,
    pub client: ClientOptions,
}

/// Credentials from ADC, endpoints from the environment, the project, [`fetch`], and the
/// cache written. Run inside a Tokio runtime.
pub async fn refresh(opts: &RefreshOptions) -> Result<Refreshed, GcpError> {
    let endpoints = Endpoints::from_env()?;
    let auth = Auth::from_adc()?;
    let client = GcpClient::new(auth, endpoints, opts.client.clone())?;
    refresh_with(&client, opts).await
}

/// [`refresh`] with a given client.
pub async fn refresh_with(client: &GcpClient, opts: &RefreshOptions) -> Result<Refreshed, GcpError> {
    // Credentials first: without them nothing else can work, and their error says what to do.
    client.auth().headers().await?;
    let project = project::discover(opts.project.as_deref(), client.auth()).await?;
    tracing::info!(project = %project.id, from = %project.from, credentials = client.auth().describe(), "refreshing the offers catalog");
    let mut r = fetch(client, &project.id, SystemTime::now()).await?;
    if let Some(dir) = &opts.state_dir {
        if let Err(e) = cache::write(&cache::path(dir), &r.catalog, r.fetched_at, &project.id) {
            r.cache_warning = Some(format!("the refreshed catalog could not be cached: {e}"));
        }
    }
    Ok(r)
}

/// Which catalog is in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Embedded,
    /// Read from the cache at `path`.
    Cached {
        path: PathBuf,
        fetched_at: u64,
    },
    /// Fetched by this process.
    Live {
        fetched_at: u64,
    },
}

/// The catalog in use and where it came from.
#[derive(Debug, Clone)]
pub struct InUse {
    pub catalog: Cow<'static, Catalog>,
    pub origin: Origin,
    /// Set when a cache exists but could not be used.
    pub warning: Option<String>,
}

impl InUse {
    pub fn embedded() -> InUse {
        InUse {
            catalog: Cow::Borrowed(Catalog::embedded()),
            origin: Origin::Embedded,
            warning: None,
        }
    }

    pub fn live(r: Refreshed) -> InUse {
        InUse {
            origin: Origin::Live {
                fetched_at: r.fetched_at,
            },
            catalog: Cow::Owned(r.catalog),
            warning: None,
        }
    }

    /// `live: Cloud Billing Catalog + Compute API, as of 2026-11-22T02:30:00Z (3 h old,
    /// cached)`.
    pub fn describe(&self, now: SystemTime) -> String {
        let c = &self.catalog;
        // A date-only `as_of` (the embedded catalog's) is aged in days.
        let age = age(c.as_of(), now).map(|d| {
            if c.as_of().contains('T') {
                format_age(d)
            } else {
                match d.as_secs() / 86_400 {
                    0 => "today".to_string(),
                    1 => "1 day old".to_string(),
                    n => format!("{n} days old"),
                }
            }
        });
        let how = match &self.origin {
            Origin::Embedded => "embedded",
            Origin::Cached { .. } => "cached",
            Origin::Live { .. } => "just fetched",
        };
        match age {
            Some(a) => format!("{}, as of {} ({a}, {how})", c.source(), c.as_of()),
            None => format!("{}, as of {} ({how})", c.source(), c.as_of()),
        }
    }
}

/// The catalog to start with: the cache in `state_dir` when it is readable and at least as
/// new as the embedded catalog, else the embedded catalog (with a warning when a cache was
/// there but unreadable).
pub fn startup(state_dir: Option<&Path>) -> InUse {
    let Some(dir) = state_dir else {
        return InUse::embedded();
    };
    let path = cache::path(dir);
    match cache::read(&path) {
        Ok(None) => InUse::embedded(),
        Ok(Some(c)) => {
            let embedded_at = parse_time(Catalog::embedded().as_of()).unwrap_or(0);
            if c.fetched_at < embedded_at {
                return InUse::embedded();
            }
            InUse {
                catalog: Cow::Owned(c.catalog),
                origin: Origin::Cached {
                    path,
                    fetched_at: c.fetched_at,
                },
                warning: None,
            }
        }
        Err(e) => InUse {
            warning: Some(format!(
                "the cached live catalog cannot be used ({e}); using the embedded catalog"
            )),
            ..InUse::embedded()
        },
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `YYYY-MM-DDTHH:MM:SSZ` of unix seconds (UTC).
pub fn timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Unix seconds of `YYYY-MM-DD` (midnight UTC) or `YYYY-MM-DDTHH:MM:SSZ`.
pub fn parse_time(s: &str) -> Option<u64> {
    let s = s.trim();
    let (date, time) = match s.split_once('T') {
        Some((d, t)) => (d, Some(t.strip_suffix('Z')?)),
        None => (s, None),
    };
    let mut it = date.split('-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    if it.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d).checked_mul(86_400)?;
    if let Some(t) = time {
        let parts: Vec<u32> = t.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
        let [h, mi, se] = parts[..] else { return None };
        if h > 23 || mi > 59 || se > 60 {
            return None;
        }
        secs += i64::from(h * 3600 + mi * 60 + se);
    }
    u64::try_from(secs).ok()
}

/// How old a catalog dated `as_of` is at `now` (`None` when the date cannot be read).
pub fn age(as_of: &str, now: SystemTime) -> Option<Duration> {
    let t = parse_time(as_of)?;
    Some(Duration::from_secs(unix(now).saturating_sub(t)))
}

/// `just now`, `12 min old`, `3 h old`, `5 days old`.
pub fn format_age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => "just now".into(),
        60..3600 => format!("{} min old", s / 60),
        3600..172_800 => format!("{} h old", s / 3600),
        _ => format!("{} days old", s / 86_400),
    }
}

// Howard Hinnant's days <-> civil date algorithms (proleptic Gregorian, UTC).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_and_ages() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(951_782_400), "2000-02-29T00:00:00Z");
        let t = parse_time("2026-11-22T02:30:05Z").unwrap();
        assert_eq!(timestamp(t), "2026-11-22T02:30:05Z");
        assert_eq!(parse_time("2026-11-22"), Some(t - 2 * 3600 - 30 * 60 - 5));
        for bad in [
            "",
            "2026-13-01",
            "2026-11-22T25:00:00Z",
            "2026-11-22T02:30:05",
            "x",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        for days in [-1000i64, 0, 11_016, 20_779, 60_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        let now = UNIX_EPOCH + Duration::from_secs(t + 3 * 3600 + 59);
        assert_eq!(
            age("2026-11-22T02:30:05Z", now),
            Some(Duration::from_secs(3 * 3600 + 59))
        );
        assert_eq!(format_age(Duration::from_secs(3 * 3600 + 59)), "3 h old");
        assert_eq!(format_age(Duration::from_secs(59)), "just now");
        assert_eq!(format_age(Duration::from_secs(720)), "12 min old");
        assert_eq!(format_age(Duration::from_secs(5 * 86_400)), "5 days old");
        assert_eq!(age("not a date", now), None);
    }

    #[test]
    fn describe_names_source_date_age_and_origin() {
        let now = UNIX_EPOCH + Duration::from_secs(parse_time("2026-11-25").unwrap() + 60);
        let d = InUse::embedded().describe(now);
        assert!(
            d.contains("SkyPilot") && d.ends_with("as of 2026-11-22 (3 days old, embedded)"),
            "{d}"
        );
    }

    #[test]
    fn startup_prefers_a_newer_cache_and_survives_a_broken_one() {
        let dir = std::env::temp_dir().join(format!("fd-live-startup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(startup(None).origin, Origin::Embedded);
        assert_eq!(startup(Some(&dir)).origin, Origin::Embedded, "no cache");
        let e = Catalog::embedded();
        let fresh = parse_time("2026-12-01T00:00:00Z").unwrap();
        let c = Catalog::new(SOURCE, timestamp(fresh), e.offers()[..2].to_vec());
        cache::write(&cache::path(&dir), &c, fresh, "p").unwrap();
        let u = startup(Some(&dir));
        assert!(matches!(u.origin, Origin::Cached { fetched_at, .. } if fetched_at == fresh));
        assert_eq!(u.catalog.offers().len(), 2);
        let old = parse_time("2026-01-01T00:00:00Z").unwrap();
        cache::write(&cache::path(&dir), &c, old, "p").unwrap();
        assert_eq!(
            startup(Some(&dir)).origin,
            Origin::Embedded,
            "older than the embedded catalog"
        );
        std::fs::write(cache::path(&dir), "garbage").unwrap();
        let u = startup(Some(&dir));
        assert_eq!(u.origin, Origin::Embedded);
        assert!(u.warning.unwrap().contains("cannot be used"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
