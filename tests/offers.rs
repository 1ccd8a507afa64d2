//! `flightdeck offers`, run as the real binary: the done-when commands, errors,
//! and the embedded data file against its source and its build script.
//!
//! Expected prices are read from the committed source CSV (data/gcp-gpu-vms.source.csv,
//! SkyPilot's GCP GPU rows): host row + GPU row of the same zone.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn flightdeck(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .expect("run flightdeck")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json_array(out: &Output) -> Vec<Value> {
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    match serde_json::from_slice(&out.stdout) {
        Ok(Value::Array(items)) => items,
        other => panic!("stdout is not one JSON array: {other:?}\n{}", text(&out.stdout)),
    }
}

/// One row of the source CSV, by (instance type or "", accelerator or "", count or "", zone).
fn source_price(instance: &str, accel: &str, count: &str, zone: &str) -> (Option<f64>, Option<f64>) {
    let csv = std::fs::read_to_string(Path::new(ROOT).join("data/gcp-gpu-vms.source.csv")).unwrap();
    let row = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|c| {
            // GpuInfo holds commas: count from the end for zone and prices.
            let n = c.len();
            c[0] == instance && c[3] == accel && c[4] == count && c[n - 3] == zone
        })
        .unwrap_or_else(|| panic!("no source row {instance}/{accel}/{count}/{zone}"));
    let n = row.len();
    let num = |s: &str| (!s.is_empty()).then(|| s.parse::<f64>().unwrap());
    (num(row[n - 2]), num(row[n - 1]))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

#[test]
fn h200_json_lists_a3_ultra_offers_with_prices() {
    let out = flightdeck(&["offers", "--gpu", "H200", "--json"]);
    let items = json_array(&out);
    assert!(out.stderr.is_empty(), "nothing to note: {}", text(&out.stderr));
    assert_eq!(items.len(), 18, "9 zones x (a3-ultragpu-8g, -nolssd)");
    for o in &items {
        let mt = o["machine_type"].as_str().unwrap();
        assert!(mt == "a3-ultragpu-8g" || mt == "a3-ultragpu-8g-nolssd", "{mt}");
        assert_eq!(o["gpu"], "H200");
        assert_eq!(o["gpu_count"], 8);
        assert_eq!(o["gpu_memory_gb"], 141);
        assert_eq!(o["gpudirect"], "rdma");
        assert_eq!(o["nics"]["gpu_nics"], 8);
        assert!(o["on_demand"].is_number(), "{o}");
        assert!(o["flex"].is_null(), "no flex-start prices in the source");
        assert_eq!(o["pricing"], "on-demand");
        assert_eq!(o["price"], o["on_demand"]);
    }
    // Sorted by on-demand price, cheapest first.
    let prices: Vec<f64> = items.iter().map(|o| o["on_demand"].as_f64().unwrap()).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");

    // us-central1-b, from the source: host 12.266 + 8 x H200 74.49392 on demand,
    // 2.82111 + 29.7976 spot.
    let o = items
        .iter()
        .find(|o| o["id"] == "a3-ultragpu-8g/us-central1-b")
        .expect("a3-ultragpu-8g in us-central1-b");
    assert_eq!(o["on_demand"].as_f64(), Some(86.75992));
    assert_eq!(o["spot"].as_f64(), Some(32.61871));
    assert_eq!(o["price_per_gpu"].as_f64(), Some(10.84499));
    // Every offer's price is its two source rows added.
    for o in &items {
        let (zone, mt) = (o["zone"].as_str().unwrap(), o["machine_type"].as_str().unwrap());
        let (host_od, host_spot) = source_price(mt, "", "", zone);
        let (gpu_od, gpu_spot) = source_price("", "H200", "8", zone);
        let od = o["on_demand"].as_f64().unwrap();
        assert!(close(od, host_od.unwrap() + gpu_od.unwrap()), "{mt} {zone}: {od}");
        match (host_spot, gpu_spot) {
            (Some(h), Some(g)) => assert!(close(o["spot"].as_f64().unwrap(), h + g), "{mt} {zone}"),
            _ => assert!(
                o["spot"].is_null(),
                "{mt} {zone}: a missing part makes the price unknown"
            ),
        }
    }
}

#[test]
fn b200_spot_by_gpu_price_says_plainly_what_is_unknown() {
    let out = flightdeck(&[
        "offers",
        "--gpu",
        "B200",
        "--pricing",
        "spot",
        "--sort",
        "gpu-price",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let err = text(&out.stderr);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 9, "{table}");
    for r in &rows {
        let cells: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(cells[0], "a4-highgpu-8g", "{r}");
        // ON-DEMAND, SPOT, FLEX, $/GPU-H: unknown, shown as ?, never 0.
        assert_eq!(&cells[9..13], ["?", "?", "?", "?"], "{r}");
    }
    assert!(
        table.lines().next().unwrap().starts_with("MACHINE TYPE"),
        "{table}"
    );
    assert!(
        err.contains("as of 2026-11-22") && err.contains("SkyPilot"),
        "{err}"
    );
    assert!(err.contains("? = unknown"), "{err}");
    // The GPUs' part, from the source: 8 x 8.055 = 64.44 (us-east4 ...) to 8 x 9.666 = 77.328.
    assert!(
        err.contains("a4-highgpu-8g with 8x B200 180GB: host price not in the catalog; the GPUs alone cost 90.216 on-demand, 64.440–77.328 spot $/h (9 zones)"),
        "{err}"
    );
    assert!(
        err.contains("9 of 9 offers listed have no known spot price"),
        "{err}"
    );

    let out = flightdeck(&[
        "offers",
        "--gpu",
        "B200",
        "--pricing",
        "spot",
        "--sort",
        "gpu-price",
        "--json",
    ]);
    let items = json_array(&out);
    assert_eq!(items.len(), 9);
    let (_, b200_spot_us_east4) = source_price("", "B200", "8", "us-east4-b");
    for o in &items {
        assert_eq!(o["machine_type"], "a4-highgpu-8g");
        assert!(
            o["spot"].is_null() && o["on_demand"].is_null() && o["price_per_gpu"].is_null(),
            "{o}"
        );
        assert!(o["flags"]
            .as_array()
            .unwrap()
            .contains(&Value::from("host_price_missing")));
        if o["zone"] == "us-east4-b" {
            assert_eq!(o["gpu_spot"].as_f64(), b200_spot_us_east4);
        }
    }
}

#[test]
fn spot_sort_by_gpu_price_is_cheapest_first_with_unknowns_last() {
    let out = flightdeck(&[
        "offers",
        "--gpu",
        "H100",
        "--gpus",
        "8",
        "--pricing",
        "spot",
        "--sort",
        "gpu-price",
        "--json",
    ]);
    let items = json_array(&out);
    let per_gpu: Vec<Option<f64>> = items.iter().map(|o| o["price_per_gpu"].as_f64()).collect();
    let known: Vec<f64> = per_gpu.iter().map_while(|p| *p).collect();
    assert!(known.len() > 20, "{per_gpu:?}");
    assert!(
        per_gpu[known.len()..].iter().all(Option::is_none),
        "unknown last: {per_gpu:?}"
    );
    assert!(known.windows(2).all(|w| w[0] <= w[1]), "{known:?}");
    // The cheapest H100 x8 spot offer in the source: a3-highgpu-8g or a3-edgegpu-8g in
    // us-east4 (host 1.70352 + GPUs 14.1056 = 15.80912 $/h, 1.97614 per GPU-hour).
    assert_eq!(items[0]["spot"].as_f64(), Some(15.80912), "{}", items[0]);
    assert_eq!(items[0]["region"], "us-east4");
    let kinds: std::collections::BTreeSet<&str> = items
        .iter()
        .map(|o| o["machine_type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains("a3-megagpu-8g"),
        "gpu=H100 includes A3 Mega: {kinds:?}"
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("have no known spot price"), "{stderr}");
}

#[test]
fn filter_flags_and_query_combine() {
    let out = flightdeck(&[
        "offers",
        "--filter",
        "gpus>=8 region=us-* spot<25 gpudirect=tcpxo",
        "--gpu",
        "h100",
        "--pricing",
        "spot",
        "--json",
    ]);
    let items = json_array(&out);
    assert!(!items.is_empty());
    for o in &items {
        assert_eq!(o["machine_type"], "a3-megagpu-8g");
        assert!(o["region"].as_str().unwrap().starts_with("us-"));
        assert!(o["spot"].as_f64().unwrap() < 25.0);
    }
    let zones: Vec<&str> = items.iter().map(|o| o["zone"].as_str().unwrap()).collect();
    assert!(zones.contains(&"us-central1-a"), "{zones:?}");

    let out = flightdeck(&[
        "offers",
        "--zone",
        "us-central1-b",
        "--gpu",
        "H200",
        "--region",
        "us-*",
    ]);
    let table = text(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("a3-ultragpu-8g "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "a3-ultragpu-8g",
            "H200",
            "141GB",
            "8",
            "us-central1-b",
            "224",
            "2952",
            "3600",
            "RDMA",
            "86.760",
            "32.619",
            "?",
            "10.845",
            "no-od"
        ]
    );
}

#[test]
fn max_price_drops_unknown_prices_and_says_how_many() {
    let out = flightdeck(&[
        "offers",
        "--gpu",
        "B200",
        "--pricing",
        "spot",
        "--max-price",
        "1000",
        "--json",
    ]);
    assert_eq!(json_array(&out).len(), 0);
    let err = text(&out.stderr);
    assert!(
        err.contains("note: 9 offers left out because their spot price is unknown"),
        "{err}"
    );
    assert!(err.contains("no offers match"), "{err}");

    // T4 on N1: the host price is not in the catalog, so no T4 offer has a price.
    let out = flightdeck(&["offers", "--gpu", "T4", "--max-price", "100"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).lines().count(), 1, "header row only");
    let err = text(&out.stderr);
    assert!(
        err.contains("147 offers left out because their on-demand price is unknown"),
        "{err}"
    );
}

#[test]
fn no_match_is_an_empty_result_and_exit_0() {
    let out = flightdeck(&["offers", "--gpu", "H100", "--gpus", "3", "--json"]);
    assert_eq!(json_array(&out).len(), 0);
    assert!(text(&out.stderr).contains("no offers match"));
    let out = flightdeck(&["offers", "--gpu", "H100", "--gpus", "3"]);
    assert_eq!(out.status.code(), Some(0));
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 1, "{table}");
    assert!(table.starts_with("MACHINE TYPE"));
}

#[test]
fn bad_queries_exit_2_with_where_and_what() {
    // (args, message fragments on stderr)
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["offers", "--filter", "gpu=H100 gpus>>8"],
            &[
                "bad --filter at column 14: `>>` is not an operator",
                "  gpu=H100 gpus>>8\n               ^^",
            ],
        ),
        (
            &["offers", "--filter", "gpu=H10"],
            &["column 5: unknown GPU `H10`; did you mean H100?"],
        ),
        (
            &["offers", "--gpu", "H10"],
            &["--gpu H10: unknown GPU `H10`; did you mean H100?"],
        ),
        (&["offers", "--gpu", "B20", "--json"], &["did you mean B200?"]),
        (
            &["offers", "--region", "us-centrl1"],
            &["did you mean us-central1?"],
        ),
        (&["offers", "--filter", "colour=red"], &["unknown field `colour`"]),
        (
            &["offers", "--filter", "spot<cheap"],
            &["expected a number after `spot<`, found `cheap`"],
        ),
        (
            &["offers", "--gpu", "H100 gpus=8"],
            &["--gpu \"H100 gpus=8\": expected one word"],
        ),
    ];
    for (args, fragments) in cases {
        let out = flightdeck(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: a usage error");
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        for f in *fragments {
            assert!(err.contains(f), "{args:?}: stderr lacks {f:?}:\n{err}");
        }
    }
}

#[test]
fn refresh_without_credentials_keeps_the_embedded_catalog() {
    // Hermetic: no credentials file, a metadata server address and Google endpoints that
    // refuse connections (loopback), so nothing leaves the machine.
    let closed = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["offers", "--refresh", "--json"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("GCE_METADATA_HOST", closed().to_string())
        .env("FLIGHTDECK_GCP_COMPUTE_URL", format!("http://{}", closed()))
        .env("FLIGHTDECK_GCP_BILLING_URL", format!("http://{}", closed()))
        .stdin(Stdio::null())
        .output()
        .expect("run flightdeck");
    assert_eq!(out.status.code(), Some(1), "the refresh failed: exit 1");
    let err = text(&out.stderr);
    assert!(err.contains("live refresh failed: credentials:"), "{err}");
    assert!(err.contains("gcloud auth application-default login"), "{err}");
    assert!(err.contains("the embedded catalog stays in use"), "{err}");
    match serde_json::from_slice(&out.stdout) {
        Ok(Value::Array(items)) => assert_eq!(items.len(), 911, "the embedded catalog is listed"),
        other => panic!("stdout is not one JSON array: {other:?}"),
    }
}

#[test]
fn the_whole_catalog_as_json_never_prices_at_zero() {
    let items = json_array(&flightdeck(&["offers", "--json"]));
    assert_eq!(items.len(), 911);
    let fields = [
        "on_demand",
        "spot",
        "flex",
        "gpu_on_demand",
        "gpu_spot",
        "host_on_demand",
        "host_spot",
        "price",
        "price_per_gpu",
    ];
    for o in &items {
        for f in fields {
            let v = &o[f];
            assert!(v.is_null() || v.as_f64().unwrap() > 0.0, "{}: {f} = {v}", o["id"]);
        }
        let keys: Vec<&String> = o.as_object().unwrap().keys().collect();
        assert!(
            keys.iter()
                .all(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
            "snake_case: {keys:?}"
        );
    }
    let a4 = items
        .iter()
        .filter(|o| o["machine_type"] == "a4-highgpu-8g")
        .count();
    assert_eq!(a4, 9);
    let ids: std::collections::BTreeSet<&str> = items.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 911, "ids are unique");
}

#[test]
fn the_data_file_is_what_the_script_makes_from_the_source() {
    let run = |out: &Path| {
        Command::new("python3")
            .arg(Path::new(ROOT).join("scripts/build_catalog.py"))
            .arg("--check")
            .arg("--out")
            .arg(out)
            .output()
            .expect("python3 runs scripts/build_catalog.py")
    };
    let committed = Path::new(ROOT).join("src/catalog/gcp_offers.csv");
    let out = run(&committed);
    assert!(
        out.status.success(),
        "src/catalog/gcp_offers.csv is stale: run python3 scripts/build_catalog.py\n{}",
        text(&out.stderr)
    );

    // The check fails on a file that differs by one price.
    let dir = tempfile::tempdir().unwrap();
    let tampered = dir.path().join("gcp_offers.csv");
    let data = std::fs::read_to_string(&committed).unwrap();
    assert!(data.contains(",86.75992,"));
    std::fs::write(&tampered, data.replacen(",86.75992,", ",86.75993,", 1)).unwrap();
    let out = run(&tampered);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not what scripts/build_catalog.py makes"));
}
