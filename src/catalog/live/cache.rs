//! The live catalog's cache: `offers-live.csv` in the state dir, in the embedded data file's
//! format (so [`Catalog::parse`] reads it back with the same checks), with the fetch time.
//!
//! ```text
//! # flightdeck live offers cache, written by a refresh; do not edit.
//! # source: live: Cloud Billing Catalog + Compute API
//! # as_of: 2026-11-22T02:30:00Z
//! # fetched_at: 1795314600
//! # project: my-project
//! machine_type,gpu,...,flags
//! a3-highgpu-8g,H100,nvidia-h100-80gb,8,0,80,208,1872,1000,tcpx,1,4,GVNIC,us-east4,...
//! ```
//!
//! Written atomically: a temporary file in the same directory, synced, then renamed over the
//! cache, so a reader sees the old file or the new one, never half of one.

use crate::catalog::{Catalog, CatalogError, Offer, COLUMNS};
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "offers-live.csv";

/// The cache file in a state dir.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// A cache read back.
#[derive(Debug, Clone)]
pub struct Cached {
    pub catalog: Catalog,
    /// Unix seconds.
    pub fetched_at: u64,
    pub project: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Bad { path: PathBuf, message: String },
}

/// The file's text.
pub fn render(catalog: &Catalog, fetched_at: u64, project: &str) -> Result<String, String> {
    let mut s = String::new();
    s.push_str("# flightdeck live offers cache, written by a refresh; do not edit.\n");
    let _ = writeln!(s, "# source: {}", one_line(catalog.source()));
    let _ = writeln!(s, "# as_of: {}", one_line(catalog.as_of()));
    let _ = writeln!(s, "# fetched_at: {fetched_at}");
    let _ = writeln!(s, "# project: {}", one_line(project));
    s.push_str(&COLUMNS.join(","));
    s.push('\n');
    for o in catalog.offers() {
        s.push_str(&row(o)?);
        s.push('\n');
    }
    Ok(s)
}

fn one_line(v: &str) -> String {
    v.replace(['\n', '\r'], " ")
}

fn row(o: &Offer) -> Result<String, String> {
    let opt = |v: Option<u32>| v.map_or(String::new(), |v| v.to_string());
    let price = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    let flags: Vec<&str> = o.flags.iter().map(|f| f.code()).collect();
    let cells = [
        o.machine_type.clone(),
        o.gpu.clone(),
        o.accelerator_type.clone(),
        o.gpu_count.to_string(),
        if o.gpus_attached { "1" } else { "0" }.to_string(),
        opt(o.gpu_memory_gb),
        o.vcpus.to_string(),
        o.ram_gb.to_string(),
        opt(o.network_gbps),
        o.gpudirect.name().to_string(),
        o.nics.host_nics.to_string(),
        o.nics.gpu_nics.to_string(),
        o.nics
            .gpu_nic_type
            .map_or(String::new(), |t| t.name().to_string()),
        o.region.clone(),
        o.zone.clone(),
        price(o.on_demand),
        price(o.spot),
        price(o.flex),
        price(o.gpu_on_demand),
        price(o.gpu_spot),
        price(o.host_on_demand),
        price(o.host_spot),
        flags.join("|"),
    ];
    debug_assert_eq!(cells.len(), COLUMNS.len());
    if let Some(c) = cells.iter().find(|c| c.contains([',', '\n', '\r'])) {
        return Err(format!(
            "{}: the value {c:?} cannot be written to the cache",
            o.id
        ));
    }
    Ok(cells.join(","))
}

/// Write the cache atomically (creating the state dir).
pub fn write(path: &Path, catalog: &Catalog, fetched_at: u64, project: &str) -> Result<(), CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = render(catalog, fetched_at, project).map_err(|message| CacheError::Bad {
        path: path.to_path_buf(),
        message,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(FILE_NAME);
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Read the cache; `Ok(None)` when there is none.
pub fn read(path: &Path) -> Result<Option<Cached>, CacheError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(CacheError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    parse(&text).map(Some).map_err(|message| CacheError::Bad {
        path: path.to_path_buf(),
        message,
    })
}

/// Parse a cache file's text.
pub fn parse(text: &str) -> Result<Cached, String> {
    let catalog = Catalog::parse(text).map_err(|e: CatalogError| e.to_string())?;
    let comment = |key: &str| {
        text.lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| l[1..].split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
    };
    let fetched_at = comment("fetched_at")
        .ok_or("no `# fetched_at:` line")?
        .parse::<u64>()
        .map_err(|_| "`# fetched_at:` is not a number of seconds".to_string())?;
    Ok(Cached {
        catalog,
        fetched_at,
        project: comment("project").filter(|p| !p.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_offers_round_trip_through_the_cache_format() {
        let e = Catalog::embedded();
        let c = Catalog::new(super::super::SOURCE, "2026-11-22T02:30:00Z", e.offers().to_vec());
        let text = render(&c, 1_795_314_600, "my-proj").unwrap();
        let back = parse(&text).unwrap();
        assert_eq!(back.fetched_at, 1_795_314_600);
        assert_eq!(back.project.as_deref(), Some("my-proj"));
        assert_eq!(back.catalog.source(), super::super::SOURCE);
        assert_eq!(back.catalog.as_of(), "2026-11-22T02:30:00Z");
        assert_eq!(back.catalog.offers(), e.offers());
    }

    #[test]
    fn write_is_atomic_and_read_finds_it() {
        let dir = std::env::temp_dir().join(format!("fd-cache-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let p = path(&dir.join("state"));
        assert!(read(&p).unwrap().is_none(), "no cache yet");
        let e = Catalog::embedded();
        let c = Catalog::new("live: test", "2026-11-22T00:00:00Z", e.offers()[..3].to_vec());
        write(&p, &c, 7, "p").unwrap();
        let back = read(&p).unwrap().unwrap();
        assert_eq!(back.catalog.offers().len(), 3);
        let leftovers: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, [FILE_NAME], "no temporary file left");
        fs::write(&p, "# source: x\n# as_of: y\nnot,a,header\n").unwrap();
        let err = read(&p).unwrap_err().to_string();
        assert!(
            err.contains(FILE_NAME) && err.contains("expected the header"),
            "{err}"
        );
        fs::write(&p, format!("# source: x\n# as_of: y\n{}\n", COLUMNS.join(","))).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("fetched_at"));
        let _ = fs::remove_dir_all(&dir);
    }
}
