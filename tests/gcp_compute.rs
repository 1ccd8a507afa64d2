//! The Compute client (`cloud::gcp::ops`) against the Compute Engine **double**
//! (tests/support/gce_double.rs): operations walked PENDING → RUNNING → DONE, errors inside
//! operations surfaced with their code, 404 as "gone", label filters and pagination,
//! unknown fields refused the way Google refuses them. Nothing here talks to Google.

mod support;

use flightdeck::cloud::gcp::ops::{classify, Compute, ComputeError, Failure, Instance, Scope, WaitOptions};
use flightdeck::cloud::gcp::{Auth, ClientOptions, CredentialSource, Endpoints, GcpClient, RetryPolicy};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::gce_double::{GceDouble, PROJECT};

fn compute(d: &GceDouble) -> Compute {
    let auth = Auth::new(CredentialSource::Json(Arc::new(d.credentials()))).unwrap();
    let endpoints = Endpoints {
        compute: format!("{}/compute/v1", d.origin()),
        billing: format!("{}/v1", d.origin()),
    };
    let options = ClientOptions {
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 4,
            initial_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
        },
    };
    let mut c = Compute::new(GcpClient::new(auth, endpoints, options).unwrap(), PROJECT);
    c.wait = WaitOptions {
        poll: Duration::from_millis(10),
        timeout: Duration::from_secs(20),
    };
    c
}

fn instance(name: &str, zone: &str, labels: Value) -> Value {
    json!({
        "name": name,
        "machineType": format!("zones/{zone}/machineTypes/g2-standard-8"),
        "disks": [{"boot": true, "autoDelete": true, "type": "PERSISTENT",
                   "initializeParams": {"diskSizeGb": "100", "sourceImage": "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2204-amd64-with-nvidia-580"}}],
        "networkInterfaces": [{"network": format!("projects/{PROJECT}/global/networks/default"),
                               "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}],
        "scheduling": {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE", "automaticRestart": true},
        "labels": labels,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_go_pending_running_done_and_deletes_are_idempotent() {
    let d = GceDouble::start().await;
    let c = compute(&d);
    let zone = Scope::Zone("us-central1-a".into());
    let op = c
        .insert(&zone, "instances", &instance("box-0", "us-central1-a", json!({})))
        .await
        .unwrap();
    assert_eq!(op.status, "PENDING");
    assert_eq!(op.scope(), zone);
    let got: Instance = c.get(&zone, "instances", "box-0").await.unwrap().unwrap();
    assert_eq!(got.status, "PROVISIONING", "the instance exists from its insert");
    let done = c.wait(op).await.unwrap();
    assert!(done.is_done() && done.errors().is_empty());
    let polls: Vec<Value> = d
        .calls("GET", &format!("/operations/{}", done.name))
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap_or(Value::Null))
        .collect();
    assert!(polls.len() >= 2, "polled until DONE: {}", polls.len());
    let got: Instance = c.get(&zone, "instances", "box-0").await.unwrap().unwrap();
    assert_eq!(got.status, "RUNNING");
    assert!(got.external_ip().is_some() && got.internal_ip().is_some());

    c.delete_wait(&zone, "instances", "box-0").await.unwrap();
    assert!(
        c.get::<Value>(&zone, "instances", "box-0")
            .await
            .unwrap()
            .is_none(),
        "404 is None"
    );
    c.delete_wait(&zone, "instances", "box-0").await.unwrap();
    assert!(
        c.delete(&zone, "instances", "box-0").await.unwrap().is_none(),
        "already gone: no operation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_inside_operations_and_synchronous_errors_are_surfaced() {
    let d = GceDouble::start().await;
    d.stockout("us-east4-b");
    d.quota_exceeded("europe-west4", "NVIDIA_L4_GPUS");
    let c = compute(&d);
    let z = Scope::Zone("us-east4-b".into());
    let e = c
        .insert_wait(&z, "instances", &instance("x-0", "us-east4-b", json!({})))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
    assert_eq!(classify(&e), Failure::Capacity);
    assert!(
        matches!(
            &e,
            ComputeError::Operation {
                http_status: Some(503),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("insert of x-0 failed (HTTP 503): ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
        "{e}"
    );
    assert!(
        c.get::<Value>(&z, "instances", "x-0").await.unwrap().is_none(),
        "a failed insert leaves nothing"
    );

    let z = Scope::Zone("europe-west4-b".into());
    let e = c
        .insert_wait(&z, "instances", &instance("x-1", "europe-west4-b", json!({})))
        .await
        .unwrap_err();
    assert_eq!((e.code(), classify(&e)), ("QUOTA_EXCEEDED", Failure::RegionQuota));

    // A name taken: 409 alreadyExists, synchronously.
    let z = Scope::Zone("us-central1-a".into());
    c.insert_wait(&z, "instances", &instance("dup", "us-central1-a", json!({})))
        .await
        .unwrap();
    let e = c
        .insert(&z, "instances", &instance("dup", "us-central1-a", json!({})))
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), "alreadyExists"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_and_bad_values_are_refused_like_google_does() {
    let d = GceDouble::start().await;
    let c = compute(&d);
    let z = Scope::Zone("us-central1-a".into());
    let mut body = instance("bad", "us-central1-a", json!({}));
    body["networkInterfaces"][0]["nicTyp"] = json!("GVNIC");
    let e = c.insert(&z, "instances", &body).await.unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(
        e.message()
            .contains("Unknown name \"nicTyp\" at 'resource.networkInterfaces'"),
        "{}",
        e.message()
    );
    let mut body = instance("bad", "us-central1-a", json!({}));
    body["scheduling"]["provisioningModel"] = json!("CHEAP");
    let e = c.insert(&z, "instances", &body).await.unwrap_err();
    assert!(
        e.message()
            .contains("'resource.scheduling.provisioningModel': 'CHEAP'"),
        "{}",
        e.message()
    );
    let body = instance("bad", "us-central1-a", json!({"Owner": "x"}));
    let e = c.insert(&z, "instances", &body).await.unwrap_err();
    assert!(e.message().contains("resource.labels"), "{}", e.message());
    assert!(d.existing("instances").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_filters_across_pages_and_zones() {
    let d = GceDouble::start().await;
    d.page_size(2);
    let c = compute(&d);
    for (i, zone) in ["us-central1-a", "us-central1-b", "us-east4-a"]
        .iter()
        .enumerate()
    {
        for j in 0..3 {
            let fleet = if j == 2 { "other" } else { "demo" };
            let labels = json!({"flightdeck-fleet": fleet, "flightdeck-owner": "tester"});
            d.plant_instance(zone, &format!("n-{i}-{j}"), labels);
        }
    }
    let found = c
        .aggregated_instances(
            "(labels.flightdeck-fleet = \"demo\") AND (labels.flightdeck-owner = \"tester\")",
        )
        .await
        .unwrap();
    let mut names: Vec<&str> = found.iter().map(|i| i.name.as_str()).collect();
    names.sort();
    assert_eq!(names, vec!["n-0-0", "n-0-1", "n-1-0", "n-1-1", "n-2-0", "n-2-1"]);
    let pages = d.calls("GET", "/aggregated/instances");
    assert_eq!(pages.len(), 3, "six items, two per page");
    assert_eq!(pages[1].param("pageToken"), Some("double-page-2"));
    let zonal: Vec<Value> = c
        .list(
            &Scope::Zone("us-central1-b".into()),
            "instances",
            Some("labels.flightdeck-fleet = \"other\""),
        )
        .await
        .unwrap();
    assert_eq!(zonal.len(), 1);
    assert_eq!(zonal[0]["name"], "n-1-2");
}
