//! Reading the catalog data file that `scripts/build_catalog.py` writes.
//!
//! Format: `# key: value` comment lines (at least `source` and `as_of`), then a CSV header
//! naming exactly [`COLUMNS`], then one offer per line. No quoting (no cell holds a comma);
//! an empty cell is an unknown value.

use super::model::{Flag, Flags, GpuDirect, NicLayout, NicType, Offer};

/// The data file's columns, in order.
pub const COLUMNS: [&str; 23] = [
    "machine_type",
    "gpu",
    "accelerator_type",
    "gpu_count",
    "gpus_attached",
    "gpu_memory_gb",
    "vcpus",
    "ram_gb",
    "network_gbps",
    "gpudirect",
    "host_nics",
    "gpu_nics",
    "gpu_nic_type",
    "region",
    "zone",
    "on_demand",
    "spot",
    "flex",
    "gpu_on_demand",
    "gpu_spot",
    "host_on_demand",
    "host_spot",
    "flags",
];

/// A catalog data file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("catalog line {line}: {message}")]
pub struct CatalogError {
    /// 1-based; 0 when the problem is the file as a whole.
    pub line: usize,
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> CatalogError {
    CatalogError {
        line,
        message: message.into(),
    }
}

/// The parts of a catalog data file: its source, its date and its offers.
#[derive(Debug)]
pub struct Parsed {
    pub source: String,
    pub as_of: String,
    pub offers: Vec<Offer>,
}

pub fn parse(text: &str) -> Result<Parsed, CatalogError> {
    let mut source = None;
    let mut as_of = None;
    let mut header_seen = false;
    let mut offers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some((key, value)) = comment.split_once(':') {
                match key.trim() {
                    "source" => source = Some(value.trim().to_string()),
                    "as_of" => as_of = Some(value.trim().to_string()),
                    _ => {}
                }
            }
            continue;
        }
        if !header_seen {
            let got: Vec<&str> = line.split(',').collect();
            if got != COLUMNS {
                return Err(err(
                    n,
                    format!("expected the header `{}`, found `{line}`", COLUMNS.join(",")),
                ));
            }
            header_seen = true;
            continue;
        }
        offers.push(parse_row(n, line)?);
    }
    if !header_seen {
        return Err(err(0, "no header line"));
    }
    let source = source.ok_or_else(|| err(0, "no `# source:` line"))?;
    let as_of = as_of.ok_or_else(|| err(0, "no `# as_of:` line"))?;
    Ok(Parsed {
        source,
        as_of,
        offers,
    })
}

fn parse_row(n: usize, line: &str) -> Result<Offer, CatalogError> {
    let cells: Vec<&str> = line.split(',').collect();
    if cells.len() != COLUMNS.len() {
        return Err(err(
            n,
            format!("expected {} cells, found {}", COLUMNS.len(), cells.len()),
        ));
    }
    let cell = |name: &str| -> &str {
        let i = COLUMNS.iter().position(|c| *c == name).expect("known column");
        cells[i]
    };
    let text = |name: &str| -> Result<String, CatalogError> {
        let v = cell(name);
        if v.is_empty() {
            Err(err(n, format!("`{name}` is empty")))
        } else {
            Ok(v.to_string())
        }
    };
    let opt_u32 = |name: &str| -> Result<Option<u32>, CatalogError> {
        let v = cell(name);
        if v.is_empty() {
            return Ok(None);
        }
        v.parse()
            .map(Some)
            .map_err(|_| err(n, format!("`{name}`: `{v}` is not a whole number")))
    };
    let u32_ = |name: &str| -> Result<u32, CatalogError> {
        opt_u32(name)?.ok_or_else(|| err(n, format!("`{name}` is empty")))
    };
    let price = |name: &str| -> Result<Option<f64>, CatalogError> {
        let v = cell(name);
        if v.is_empty() {
            return Ok(None);
        }
        match v.parse::<f64>() {
            // A price of 0 would be an unknown written as a number: refuse it.
            Ok(p) if p.is_finite() && p > 0.0 => Ok(Some(p)),
            _ => Err(err(
                n,
                format!("`{name}`: `{v}` is not a price (a positive number, or empty when unknown)"),
            )),
        }
    };
    let small = |name: &str| -> Result<u8, CatalogError> {
        let v = u32_(name)?;
        u8::try_from(v).map_err(|_| err(n, format!("`{name}`: {v} is too large")))
    };

    let machine_type = text("machine_type")?;
    let accelerator_type = text("accelerator_type")?;
    let zone = text("zone")?;
    let gpu_count = u32_("gpu_count")?;
    let gpus_attached = match cell("gpus_attached") {
        "0" => false,
        "1" => true,
        v => return Err(err(n, format!("`gpus_attached`: expected 0 or 1, found `{v}`"))),
    };
    let gpudirect = GpuDirect::parse(cell("gpudirect")).ok_or_else(|| {
        err(
            n,
            format!(
                "`gpudirect`: expected none, tcpx, tcpxo or rdma, found `{}`",
                cell("gpudirect")
            ),
        )
    })?;
    let gpu_nic_type = match cell("gpu_nic_type") {
        "" => None,
        v => Some(NicType::parse(v).ok_or_else(|| err(n, format!("`gpu_nic_type`: unknown `{v}`")))?),
    };
    let flags = match cell("flags") {
        "" => Flags::default(),
        v => v
            .split('|')
            .map(|code| Flag::parse(code).ok_or_else(|| err(n, format!("`flags`: unknown flag `{code}`"))))
            .collect::<Result<Flags, _>>()?,
    };
    let id = Offer::make_id(
        &machine_type,
        &zone,
        gpus_attached.then_some((accelerator_type.as_str(), gpu_count)),
    );
    Ok(Offer {
        id,
        machine_type,
        gpu: text("gpu")?,
        accelerator_type,
        gpu_count,
        gpus_attached,
        gpu_memory_gb: opt_u32("gpu_memory_gb")?,
        vcpus: u32_("vcpus")?,
        ram_gb: u32_("ram_gb")?,
        network_gbps: opt_u32("network_gbps")?,
        gpudirect,
        nics: NicLayout {
            host_nics: small("host_nics")?,
            gpu_nics: small("gpu_nics")?,
            gpu_nic_type,
        },
        region: text("region")?,
        zone,
        on_demand: price("on_demand")?,
        spot: price("spot")?,
        flex: price("flex")?,
        gpu_on_demand: price("gpu_on_demand")?,
        gpu_spot: price("gpu_spot")?,
        host_on_demand: price("host_on_demand")?,
        host_spot: price("host_spot")?,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "# source: test\n# as_of: 2026-01-02\n";

    fn file(rows: &[&str]) -> String {
        format!("{HEAD}{}\n{}\n", COLUMNS.join(","), rows.join("\n"))
    }

    const ROW: &str = "a3-highgpu-8g,H100,nvidia-h100-80gb,8,0,80,208,1872,1000,tcpx,1,4,GVNIC,\
                       us-east4,us-east4-a,87.83247,15.80912,,78.37241,14.10560,9.46006,1.70352,";

    #[test]
    fn parses_a_row_with_known_and_unknown_values() {
        let c = parse(&file(&[ROW])).unwrap();
        assert_eq!((c.source.as_str(), c.as_of.as_str()), ("test", "2026-01-02"));
        let o = &c.offers[0];
        assert_eq!(o.id, "a3-highgpu-8g/us-east4-a");
        assert_eq!(o.on_demand, Some(87.83247));
        assert_eq!(o.flex, None);
        assert_eq!(o.gpudirect, GpuDirect::Tcpx);
        assert_eq!(o.nics.gpu_nic_type, Some(NicType::Gvnic));
        assert!(o.flags.is_empty());
    }

    #[test]
    fn rejects_bad_files_with_the_line() {
        let zero = ROW.replace("87.83247", "0");
        let flag = format!("{ROW}made_up");
        let short = ROW.replace(",tcpx,", ",");
        let gd = ROW.replace(",tcpx,", ",tcpy,");
        let cases: Vec<(String, &str)> = vec![
            (file(&[&zero]), "line 4: `on_demand`: `0` is not a price"),
            (file(&[&flag]), "line 4: `flags`: unknown flag `made_up`"),
            (file(&[&short]), "line 4: expected 23 cells, found 22"),
            (
                file(&[&gd]),
                "line 4: `gpudirect`: expected none, tcpx, tcpxo or rdma, found `tcpy`",
            ),
            (format!("{HEAD}machine_type,gpu\n"), "line 3: expected the header"),
            (
                format!("# as_of: x\n{}\n", COLUMNS.join(",")),
                "no `# source:` line",
            ),
            (HEAD.to_string(), "no header line"),
        ];
        for (text, want) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}
