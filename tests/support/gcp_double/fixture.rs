//! The GCP double's fixture: Cloud Billing SKUs and Compute lists in the documented shapes
//! (../shared/reference/gcp/billing.md §2.1, compute-api.md §8), with illustrative prices
//! chosen so that tests can work out the offers by hand.

use super::PROJECT;
use serde_json::{json, Value};

/// `google.type.Money` of a USD amount: `units` as a string, `nanos` as a number.
fn money(usd: f64) -> Value {
    let units = usd.trunc() as i64;
    let nanos = ((usd - usd.trunc()) * 1e9).round() as i64;
    json!({"currencyCode": "USD", "units": units.to_string(), "nanos": nanos})
}

/// `category`: (resourceFamily, resourceGroup, usageType).
fn sku(id: &str, desc: &str, category: (&str, &str, &str), unit: &str, usd: f64, regions: &[&str]) -> Value {
    let (family, group, usage) = category;
    json!({
        "name": format!("services/6F81-5844-456A/skus/{id}"),
        "skuId": id,
        "description": desc,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family,
                     "resourceGroup": group, "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "effectiveTime": "2026-11-21T12:00:00.000Z",
            "summary": "",
            "pricingExpression": {
                "usageUnit": unit, "displayQuantity": 1,
                "tieredRates": [{"startUsageAmount": 0, "unitPrice": money(usd)}],
                "usageUnitDescription": if unit == "h" { "hour" } else { "gibibyte hour" },
                "baseUnit": if unit == "h" { "s" } else { "By.s" },
                "baseUnitDescription": "second",
                "baseUnitConversionFactor": 3600
            },
            "aggregationInfo": {"aggregationLevel": "ACCOUNT", "aggregationInterval": "DAILY", "aggregationCount": 1},
            "currencyConversionRate": 1
        }],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": if regions.len() > 1 { "MULTI_REGIONAL" } else { "REGIONAL" }, "regions": regions}
    })
}

const AM: &[&str] = &["us-central1", "us-east4"];
const IOWA: &[&str] = &["us-central1"];
const EU: &[&str] = &["europe-west4"];

/// Three pages of Compute Engine SKUs.
pub fn billing_pages() -> Vec<Value> {
    let c = "Compute";
    let p1 = vec![
        // The DWS pitfall, first on the page as SkyPilot's first match would take it: an
        // OnDemand usage type, a lower price, the same GPU words.
        sku(
            "H100-DWS-AM",
            "Nvidia H100 80GB GPU attached to DWS Defined Duration VMs running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            4.20076,
            AM,
        ),
        sku(
            "H100-OD-AM",
            "Nvidia H100 80GB GPU running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            9.796550569,
            AM,
        ),
        sku(
            "H100-OD-EU",
            "Nvidia H100 80GB GPU running in EMEA",
            (c, "GPU", "OnDemand"),
            "h",
            10.8,
            EU,
        ),
        sku(
            "H100-CUD",
            "Commitment v1: Nvidia H100 80GB GPU in Americas for 1 Year",
            (c, "GPU", "Commit1Yr"),
            "h",
            6.0,
            AM,
        ),
        sku(
            "A3-CORE",
            "A3 Instance Core running in Americas",
            (c, "CPU", "OnDemand"),
            "h",
            0.025,
            AM,
        ),
        sku(
            "A3-RAM",
            "A3 Instance Ram running in Americas",
            (c, "RAM", "OnDemand"),
            "GiBy.h",
            0.002,
            AM,
        ),
    ];
    let p2 = vec![
        sku(
            "A3-CORE-SPOT",
            "Spot Preemptible A3 Instance Core running in Americas",
            (c, "CPU", "Preemptible"),
            "h",
            0.01,
            AM,
        ),
        sku(
            "A3-RAM-SPOT",
            "Spot Preemptible A3 Instance Ram running in Americas",
            (c, "RAM", "Preemptible"),
            "GiBy.h",
            0.0008,
            AM,
        ),
        sku(
            "H100-SPOT-AM",
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            (c, "GPU", "Preemptible"),
            "h",
            2.25,
            AM,
        ),
        sku(
            "H100-SPOT-EU",
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in EMEA",
            (c, "GPU", "Preemptible"),
            "h",
            11.0,
            EU,
        ),
        sku(
            "A3-CORE-DWS",
            "DWS Defined Duration A3 Core running in Americas",
            (c, "CPU", "OnDemand"),
            "h",
            0.0125,
            AM,
        ),
        sku(
            "A3-RAM-DWS",
            "DWS Defined Duration A3 Ram running in Americas",
            (c, "RAM", "OnDemand"),
            "GiBy.h",
            0.001,
            AM,
        ),
        sku(
            "A3P-CORE",
            "A3Plus Instance Core running in Americas",
            (c, "CPU", "OnDemand"),
            "h",
            0.03,
            IOWA,
        ),
        sku(
            "A3P-RAM",
            "A3Plus Instance Ram running in Americas",
            (c, "RAM", "OnDemand"),
            "GiBy.h",
            0.0025,
            IOWA,
        ),
        sku(
            "H100M-OD",
            "Nvidia H100 80GB Mega GPU running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            11.0,
            IOWA,
        ),
    ];
    let p3 = vec![
        sku(
            "H200-SPOT",
            "Nvidia H200 141GB GPU attached to Spot Preemptible VMs running in Americas",
            (c, "GPU", "Preemptible"),
            "h",
            3.72,
            IOWA,
        ),
        sku(
            "B200-SLICE-SPOT",
            "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
            (c, "GPU", "Preemptible"),
            "h",
            8.05,
            IOWA,
        ),
        sku(
            "B200-SLICE-CAL",
            "DWS Calendar Mode A4 Nvidia B200 (1 gpu slice) running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            10.0,
            IOWA,
        ),
        sku(
            "L4-OD",
            "Nvidia L4 GPU running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            0.56,
            IOWA,
        ),
        sku(
            "G2-CORE",
            "G2 Instance Core running in Americas",
            (c, "CPU", "OnDemand"),
            "h",
            0.0242,
            IOWA,
        ),
        sku(
            "G2-RAM",
            "G2 Instance Ram running in Americas",
            (c, "RAM", "OnDemand"),
            "GiBy.h",
            0.0028,
            IOWA,
        ),
        sku(
            "N1-CORE",
            "N1 Predefined Instance Core running in Americas",
            (c, "N1Standard", "OnDemand"),
            "h",
            0.031611,
            AM,
        ),
        sku(
            "N1-RAM",
            "N1 Predefined Instance Ram running in Americas",
            (c, "N1Standard", "OnDemand"),
            "GiBy.h",
            0.004237,
            AM,
        ),
        sku(
            "T4-OD",
            "Nvidia Tesla T4 GPU running in Americas",
            (c, "GPU", "OnDemand"),
            "h",
            0.35,
            AM,
        ),
        sku(
            "T4-SPOT",
            "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
            (c, "GPU", "Preemptible"),
            "h",
            0.14,
            AM,
        ),
        sku(
            "LSSD",
            "SSD backed Local Storage running in Americas",
            ("Storage", "LocalSSD", "OnDemand"),
            "GiBy.mo",
            0.08,
            AM,
        ),
        sku(
            "LIC",
            "Licensing Fee for Windows Server on A3 (CPU cost)",
            ("License", "Windows", "OnDemand"),
            "h",
            0.046,
            AM,
        ),
    ];
    [p1, p2, p3].into_iter().map(|s| json!({ "skus": s })).collect()
}

fn region_url(r: &str) -> String {
    format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/regions/{r}")
}

fn zone(name: &str, status: &str) -> Value {
    let r = name.rsplit_once('-').unwrap().0;
    json!({"kind": "compute#zone", "id": "2000", "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
           "name": name, "description": name, "status": status, "region": region_url(r),
           "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{name}"),
           "availableCpuPlatforms": ["Intel Sapphire Rapids"], "supportsPzs": false})
}

/// Two pages of zones; `us-central1-c` is DOWN.
pub fn zone_pages() -> Vec<Value> {
    let list = |items: Vec<Value>| {
        json!({"kind": "compute#zoneList", "id": format!("projects/{PROJECT}/zones"), "items": items,
               "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones")})
    };
    vec![
        list(vec![
            zone("us-central1-a", "UP"),
            zone("us-central1-b", "UP"),
            zone("us-central1-c", "DOWN"),
        ]),
        list(vec![zone("us-east4-a", "UP"), zone("europe-west4-a", "UP")]),
    ]
}

fn machine(name: &str, zone: &str, cpus: u32, memory_mb: u64, acc: Option<(&str, u32)>) -> Value {
    let mut m = json!({
        "kind": "compute#machineType", "id": "9000", "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name, "description": format!("{cpus} vCPUs, {} GB RAM", memory_mb / 1024),
        "guestCpus": cpus, "memoryMb": memory_mb, "imageSpaceGb": 0,
        "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
        "zone": zone, "isSharedCpu": false,
        "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}/machineTypes/{name}")
    });
    if let Some((t, n)) = acc {
        m["accelerators"] = json!([{"guestAcceleratorType": t, "guestAcceleratorCount": n}]);
    }
    m
}

fn n1_hosts(zone: &str, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| {
            let (cpus, mb) = match *n {
                "n1-standard-4" => (4, 15360),
                "n1-standard-8" => (8, 30720),
                "n1-standard-64" => (64, 245760),
                "n1-highmem-4" => (4, 26624),
                "n1-highmem-8" => (8, 53248),
                "n1-highcpu-8" => (8, 7373),
                "n1-highmem-64" => (64, 425984),
                other => panic!("no shape for {other}"),
            };
            machine(n, zone, cpus, mb, None)
        })
        .collect()
}

/// Two pages of the aggregated machine types, with a warning-only scope.
pub fn machine_type_pages() -> Vec<Value> {
    let agg = |items: Value| {
        json!({"kind": "compute#machineTypeAggregatedList",
               "id": format!("projects/{PROJECT}/aggregated/machineTypes"), "items": items,
               "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/aggregated/machineTypes")})
    };
    let a = "us-central1-a";
    let mut ca = vec![
        machine("a3-highgpu-8g", a, 208, 1_916_928, Some(("nvidia-h100-80gb", 8))),
        machine(
            "a3-megagpu-8g",
            a,
            208,
            1_916_928,
            Some(("nvidia-h100-mega-80gb", 8)),
        ),
        machine("g2-standard-8", a, 8, 32_768, Some(("nvidia-l4", 1))),
        machine("a2-highgpu-1g", a, 12, 87_040, Some(("nvidia-tesla-a100", 1))),
        machine("e2-standard-2", a, 2, 8_192, None),
    ];
    ca.extend(n1_hosts(
        a,
        &[
            "n1-standard-4",
            "n1-standard-8",
            "n1-standard-64",
            "n1-highmem-4",
            "n1-highmem-8",
            "n1-highcpu-8",
            "n1-highmem-64",
        ],
    ));
    let mut obsolete = machine(
        "a2-megagpu-16g",
        a,
        96,
        1_376_256,
        Some(("nvidia-tesla-a100", 16)),
    );
    obsolete["deprecated"] = json!({"state": "OBSOLETE", "replacement": "a2-highgpu-8g"});
    ca.push(obsolete);
    let page1 = agg(json!({
        "zones/us-central1-a": {"machineTypes": ca},
        "zones/us-central1-b": {"machineTypes": [
            machine("a3-ultragpu-8g", "us-central1-b", 224, 3_022_848, Some(("nvidia-h200-141gb", 8))),
            machine("a4-highgpu-8g", "us-central1-b", 224, 4_063_232, Some(("nvidia-b200", 8))),
        ]},
        "zones/asia-south1-c": {"warning": {"code": "NO_RESULTS_ON_PAGE",
            "message": "There are no results for scope 'zones/asia-south1-c' on this page.",
            "data": [{"key": "scope", "value": "zones/asia-south1-c"}]}}
    }));
    let mut east = vec![machine(
        "a3-highgpu-8g",
        "us-east4-a",
        208,
        1_916_928,
        Some(("nvidia-h100-80gb", 8)),
    )];
    east.extend(n1_hosts(
        "us-east4-a",
        &["n1-standard-4", "n1-standard-8", "n1-highmem-8"],
    ));
    let page2 = agg(json!({
        "zones/us-central1-c": {"machineTypes": [machine("a3-highgpu-8g", "us-central1-c", 208, 1_916_928, Some(("nvidia-h100-80gb", 8)))]},
        "zones/us-east4-a": {"machineTypes": east},
        "zones/europe-west4-a": {"machineTypes": [machine("a3-highgpu-8g", "europe-west4-a", 208, 1_916_928, Some(("nvidia-h100-80gb", 8)))]}
    }));
    vec![page1, page2]
}

fn accelerator(name: &str, zone: &str, description: &str, max: u32) -> Value {
    json!({"kind": "compute#acceleratorType", "id": "10000", "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
           "name": name, "description": description, "maximumCardsPerInstance": max,
           "zone": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}"),
           "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}/acceleratorTypes/{name}")})
}

/// One page of aggregated accelerator types.
pub fn accelerator_types() -> Value {
    let a = "us-central1-a";
    let mut k80 = accelerator("nvidia-tesla-k80", a, "NVIDIA Tesla K80", 8);
    k80["deprecated"] = json!({"state": "OBSOLETE"});
    json!({"kind": "compute#acceleratorTypeAggregatedList",
           "id": format!("projects/{PROJECT}/aggregated/acceleratorTypes"),
           "items": {
             "zones/us-central1-a": {"acceleratorTypes": [
                accelerator("nvidia-h100-80gb", a, "NVIDIA H100 80GB", 8),
                accelerator("nvidia-h100-mega-80gb", a, "NVIDIA H100 80GB MEGA", 8),
                accelerator("nvidia-l4", a, "NVIDIA L4", 8),
                accelerator("nvidia-tesla-a100", a, "NVIDIA A100 40GB", 16),
                accelerator("nvidia-tesla-t4", a, "NVIDIA T4", 4),
                accelerator("nvidia-tesla-t4-vws", a, "NVIDIA Tesla T4 Virtual Workstation", 4),
                k80]},
             "zones/us-central1-b": {"acceleratorTypes": [
                accelerator("nvidia-h200-141gb", "us-central1-b", "NVIDIA H200 141GB", 8),
                accelerator("nvidia-b200", "us-central1-b", "NVIDIA B200", 8)]},
             "zones/us-east4-a": {"acceleratorTypes": [
                accelerator("nvidia-h100-80gb", "us-east4-a", "NVIDIA H100 80GB", 8),
                accelerator("nvidia-tesla-t4", "us-east4-a", "NVIDIA T4", 4)]},
             "zones/europe-west4-a": {"acceleratorTypes": [
                accelerator("nvidia-h100-80gb", "europe-west4-a", "NVIDIA H100 80GB", 8)]},
             "zones/me-central2-a": {"warning": {"code": "NO_RESULTS_ON_PAGE",
                "message": "There are no results for scope 'zones/me-central2-a' on this page.",
                "data": [{"key": "scope", "value": "zones/me-central2-a"}]}}
           },
           "selfLink": format!("https://www.googleapis.com/compute/v1/projects/{PROJECT}/aggregated/acceleratorTypes")})
}
