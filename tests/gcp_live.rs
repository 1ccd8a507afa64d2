//! Live refresh of the offers catalog against the local GCP **double**
//! (tests/support/gcp_double.rs): the real client (reqwest + rustls, google-cloud-auth with
//! `authorized_user` credentials whose `token_uri` is the double, or the metadata server at
//! `GCE_METADATA_HOST`), pagination, retries, token refresh and error messages; then the
//! `flightdeck offers --refresh` binary with the cache. Nothing here talks to Google.
//!
//! Expected prices are worked out by hand from the double's SKUs:
//! * a3-highgpu-8g (208 vCPUs, 1872 GiB) in us-central1 / us-east4: host 208 × 0.025 +
//!   1872 × 0.002 = 8.944; GPUs 8 × 9.796550569 = 78.3724 (the DWS SKU at 4.20076 is
//!   flex-start, not on-demand); 87.3164 on demand. Spot 208 × 0.01 + 1872 × 0.0008 +
//!   8 × 2.25 = 21.5776. Flex 208 × 0.0125 + 1872 × 0.001 + 8 × 4.20076 = 38.07808.
//! * a3-megagpu-8g: A3Plus host 208 × 0.03 + 1872 × 0.0025 = 10.92, + 8 × 11 = 98.92.
//! * a3-ultragpu-8g (224, 2952 GiB): Spot 224 × 0.01 + 2952 × 0.0008 + 8 × 3.72 = 34.3616.
//! * a4-highgpu-8g: Spot by the slice, 8 × 8.05 = 64.4 (host included).
//! * g2-standard-8 (8, 32 GiB): 8 × 0.0242 + 32 × 0.0028 + 0.56 = 0.8432.
//! * n1-highmem-8 + 2 × T4: 8 × 0.031611 + 52 × 0.004237 + 2 × 0.35 = 1.17321.

mod support;

use flightdeck::catalog::live;
use flightdeck::catalog::{Catalog, Flag, GpuDirect, Offer};
use flightdeck::cloud::gcp::{
    billing, Auth, ClientOptions, CredentialSource, Endpoints, GcpClient, GcpError, RetryPolicy, Service,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use support::gcp_double::{self as double, GcpDouble, SKUS_PATH};

fn fast() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 4,
            initial_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
        },
    }
}

fn client_with(d: &GcpDouble, creds: Value) -> GcpClient {
    let auth = Auth::new(CredentialSource::Json(Arc::new(creds))).expect("credentials");
    let endpoints = Endpoints {
        compute: d.compute_url(),
        billing: d.billing_url(),
    };
    GcpClient::new(auth, endpoints, fast()).expect("client")
}

fn client(d: &GcpDouble) -> GcpClient {
    client_with(d, d.authorized_user())
}

fn close(got: Option<f64>, want: f64, what: &str) {
    let g = got.unwrap_or_else(|| panic!("{what}: unknown, want {want}"));
    assert!((g - want).abs() < 1e-6, "{what}: {g} != {want}");
}

fn offer<'a>(c: &'a Catalog, id: &str) -> &'a Offer {
    c.get(id).unwrap_or_else(|| {
        let ids: Vec<&str> = c.offers().iter().map(|o| o.id.as_str()).collect();
        panic!("no offer {id}; have {ids:?}")
    })
}

fn flags(o: &Offer) -> Vec<&'static str> {
    o.flags.iter().map(Flag::code).collect()
}

/// Requests to the OAuth token endpoint (not the metadata server's).
fn posts_to_token(d: &GcpDouble) -> usize {
    d.requests()
        .iter()
        .filter(|q| q.method == "POST" && q.path == "/token")
        .count()
}

/// No secret of the double's credentials in `text`.
fn assert_no_secrets(text: &str) {
    for secret in [
        double::TOKEN_PREFIX,
        double::REFRESH_TOKEN,
        double::CLIENT_SECRET,
        "ya29.",
    ] {
        assert!(!text.contains(secret), "a secret ({secret}) leaked into:\n{text}");
    }
}

#[tokio::test]
async fn happy_path_pages_through_everything_and_prices_the_offers() {
    let d = GcpDouble::start().await;
    let c = client(&d);
    let now = SystemTime::now();
    let r = live::fetch(&c, double::PROJECT, now).await.expect("refresh");
    let cat = &r.catalog;
    assert_eq!(cat.source(), "live: Cloud Billing Catalog + Compute API");
    assert_eq!(
        cat.as_of(),
        live::timestamp(now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs())
    );

    // Pagination: every page of every list, in order, with the documented parameters.
    let reqs = d.requests();
    let skus: Vec<_> = reqs.iter().filter(|q| q.path == SKUS_PATH).collect();
    let tokens: Vec<Option<&str>> = skus.iter().map(|q| q.param("pageToken")).collect();
    assert_eq!(tokens, [None, Some("page-2"), Some("page-3")]);
    for q in &skus {
        assert_eq!(
            (q.param("currencyCode"), q.param("pageSize")),
            (Some("USD"), Some("5000"))
        );
    }
    let mts: Vec<_> = reqs
        .iter()
        .filter(|q| q.path.ends_with("/aggregated/machineTypes"))
        .collect();
    assert_eq!(mts.len(), 2, "two pages of machine types");
    assert_eq!(mts[0].param("filter"), Some(live::MACHINE_FILTER));
    assert_eq!(mts[1].param("pageToken"), Some("page-2"));
    assert_eq!(mts[0].param("returnPartialSuccess"), Some("true"));
    assert_eq!(mts[0].param("maxResults"), Some("500"));
    assert_eq!(d.count("/aggregated/acceleratorTypes"), 1);
    assert_eq!(
        reqs.iter()
            .filter(|q| q.path == "/compute/v1/projects/double-project/zones")
            .count(),
        2
    );
    assert_eq!(r.report.billing_pages, 3);
    // One token for everything, sent as a bearer token, with the quota project.
    assert_eq!(d.tokens_issued(), 1);
    assert_eq!(posts_to_token(&d), 1);
    for q in reqs.iter().filter(|q| q.path != "/token") {
        assert_eq!(
            q.header("authorization"),
            Some(format!("Bearer {}1", double::TOKEN_PREFIX).as_str())
        );
        assert_eq!(
            q.header("x-goog-user-project"),
            Some(double::PROJECT),
            "{}",
            q.path
        );
    }

    // The offers: exactly these (no DOWN zone, no obsolete type, no -vws, no K80, no e2).
    let ids: BTreeSet<&str> = cat.offers().iter().map(|o| o.id.as_str()).collect();
    let want: BTreeSet<&str> = [
        "a2-highgpu-1g/us-central1-a",
        "a3-highgpu-8g/europe-west4-a",
        "a3-highgpu-8g/us-central1-a",
        "a3-highgpu-8g/us-east4-a",
        "a3-megagpu-8g/us-central1-a",
        "a3-ultragpu-8g/us-central1-b",
        "a4-highgpu-8g/us-central1-b",
        "g2-standard-8/us-central1-a",
        "n1-highmem-4+nvidia-tesla-t4x1/us-central1-a",
        "n1-highmem-8+nvidia-tesla-t4x2/us-central1-a",
        "n1-standard-64+nvidia-tesla-t4x4/us-central1-a",
        "n1-standard-8+nvidia-tesla-t4x1/us-east4-a",
        "n1-highmem-8+nvidia-tesla-t4x2/us-east4-a",
    ]
    .into();
    assert_eq!(ids, want);
    assert_eq!(r.report.zones_down, ["us-central1-c"]);
    assert_eq!(r.report.offers, 13);
    assert!(
        r.report
            .to_string()
            .contains("13 offers in 4 zones (project double-project)"),
        "{}",
        r.report
    );

    let a3 = offer(cat, "a3-highgpu-8g/us-central1-a");
    close(a3.host_on_demand, 8.944, "a3 host");
    close(a3.gpu_on_demand, 78.3724, "a3 GPUs (not the DWS price)");
    close(a3.on_demand, 87.3164, "a3 on-demand");
    close(a3.host_spot, 3.5776, "a3 host spot");
    close(a3.gpu_spot, 18.0, "a3 GPUs spot");
    close(a3.spot, 21.5776, "a3 spot");
    close(a3.flex, 38.07808, "a3 flex-start");
    assert_eq!(
        (a3.gpu.as_str(), a3.gpu_count, a3.gpu_memory_gb),
        ("H100", 8, Some(80))
    );
    assert_eq!(
        (a3.vcpus, a3.ram_gb, a3.region.as_str()),
        (208, 1872, "us-central1")
    );
    assert_eq!(
        (a3.gpudirect, a3.network_gbps, a3.nics.label()),
        (GpuDirect::Tcpx, Some(1000), "1+4 GVNIC".into())
    );
    assert!(a3.flags.is_empty(), "{:?}", flags(a3));
    assert_eq!(offer(cat, "a3-highgpu-8g/us-east4-a").on_demand, a3.on_demand);

    // No A3 host SKU in EMEA: the host and so the totals are unknown, never 0; the GPUs'
    // Spot price there is far above the other regions' and above on-demand.
    let eu = offer(cat, "a3-highgpu-8g/europe-west4-a");
    assert_eq!((eu.on_demand, eu.spot, eu.host_on_demand), (None, None, None));
    close(eu.gpu_on_demand, 86.4, "eu GPUs");
    close(eu.gpu_spot, 88.0, "eu GPUs spot");
    assert_eq!(
        flags(eu),
        ["host_price_missing", "spot_high_level", "spot_above_on_demand"]
    );

    let mega = offer(cat, "a3-megagpu-8g/us-central1-a");
    close(mega.host_on_demand, 10.92, "A3Plus host");
    close(mega.on_demand, 98.92, "mega on-demand");
    assert_eq!((mega.spot, mega.gpu_spot), (None, None));
    assert_eq!(flags(mega), ["spot_price_missing"]);
    assert_eq!(mega.gpudirect, GpuDirect::Tcpxo);

    let ultra = offer(cat, "a3-ultragpu-8g/us-central1-b");
    assert_eq!(ultra.on_demand, None, "no on-demand H200 SKU");
    close(ultra.spot, 34.3616, "H200 spot");
    assert_eq!(
        (ultra.gpu_memory_gb, ultra.gpudirect),
        (Some(141), GpuDirect::Rdma)
    );
    assert_eq!(flags(ultra), ["no_plain_on_demand"]);

    let a4 = offer(cat, "a4-highgpu-8g/us-central1-b");
    close(a4.spot, 64.4, "B200 slice spot");
    assert_eq!(
        (a4.on_demand, a4.gpu_spot, a4.host_spot),
        (None, None, None),
        "calendar mode is not on-demand"
    );
    assert_eq!(flags(a4), ["no_plain_on_demand"], "the slice includes the host");

    let g2 = offer(cat, "g2-standard-8/us-central1-a");
    close(g2.on_demand, 0.8432, "g2");
    assert_eq!(flags(g2), ["spot_price_missing"]);

    let a2 = offer(cat, "a2-highgpu-1g/us-central1-a");
    assert_eq!(
        (a2.on_demand, a2.spot, a2.gpu_on_demand, a2.host_on_demand),
        (None, None, None, None)
    );
    assert_eq!(flags(a2), ["host_price_missing", "gpu_price_missing"]);

    let t4 = offer(cat, "n1-highmem-8+nvidia-tesla-t4x2/us-central1-a");
    assert!(t4.gpus_attached);
    assert_eq!((t4.gpu.as_str(), t4.vcpus, t4.ram_gb), ("T4", 8, 52));
    close(
        t4.host_on_demand,
        0.47321,
        "N1 host, which the embedded catalog lacks",
    );
    close(t4.on_demand, 1.17321, "T4 x2");
    close(t4.gpu_spot, 0.28, "T4 x2 spot");
    assert_eq!(t4.spot, None, "no N1 Spot SKU");
    close(
        offer(cat, "n1-standard-64+nvidia-tesla-t4x4/us-central1-a").on_demand,
        4.43998,
        "T4 x4",
    );
    close(
        offer(cat, "n1-standard-8+nvidia-tesla-t4x1/us-east4-a").on_demand,
        0.73,
        "T4 x1 us-east4",
    );

    for o in cat.offers() {
        for p in [
            o.on_demand,
            o.spot,
            o.flex,
            o.gpu_on_demand,
            o.gpu_spot,
            o.host_on_demand,
            o.host_spot,
        ]
        .into_iter()
        .flatten()
        {
            assert!(p > 0.0 && p.is_finite(), "{}: {p}", o.id);
        }
    }
    // The live catalog answers queries like the embedded one.
    let q = cat.query("gpu=H100 spot<30").unwrap();
    let sel = cat.select(&q, flightdeck::catalog::Pricing::Spot, &[]);
    assert_eq!(sel.indices.len(), 2, "the two Americas A3 High offers");
}

#[tokio::test]
async fn a_503_burst_is_retried_with_backoff_then_succeeds() {
    let d = GcpDouble::start().await;
    d.fail(SKUS_PATH, 503, 2);
    d.fail_with(SKUS_PATH, Some("page-3"), 429, Some(1), Some(0));
    d.fail_with("/aggregated/machineTypes", Some("page-2"), 500, Some(1), None);
    let r = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .expect("the burst is retried");
    let statuses: Vec<(Option<String>, u16)> = d
        .requests()
        .iter()
        .filter(|q| q.path == SKUS_PATH)
        .map(|q| (q.param("pageToken").map(str::to_string), q.status))
        .collect();
    let page = |p: Option<&str>, s| (p.map(str::to_string), s);
    assert_eq!(
        statuses,
        [
            page(None, 503),
            page(None, 503),
            page(None, 200),
            page(Some("page-2"), 200),
            page(Some("page-3"), 429),
            page(Some("page-3"), 200)
        ]
    );
    assert_eq!(d.count("/aggregated/machineTypes"), 3, "page 2 retried once");
    close(
        offer(&r.catalog, "a3-highgpu-8g/us-central1-a").on_demand,
        87.3164,
        "same prices",
    );
    assert_eq!(d.tokens_issued(), 1, "retries reuse the token");
}

#[tokio::test]
async fn a_refused_machine_type_filter_falls_back_to_the_whole_list() {
    let d = GcpDouble::start().await;
    d.fail_with("/aggregated/machineTypes", None, 400, Some(1), None);
    let r = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .expect("listed without the filter");
    assert_eq!(r.report.offers, 13);
    let filters: Vec<Option<String>> = d
        .requests()
        .iter()
        .filter(|q| q.path.ends_with("/aggregated/machineTypes"))
        .map(|q| q.param("filter").map(str::to_string))
        .collect();
    assert_eq!(filters, [Some(live::MACHINE_FILTER.to_string()), None, None]);
}

#[tokio::test]
async fn retries_are_bounded() {
    let d = GcpDouble::start().await;
    d.fail_with(SKUS_PATH, None, 503, None, None);
    let e = billing::list_skus(&client(&d), billing::COMPUTE_ENGINE_SERVICE, |_| Ok(()))
        .await
        .unwrap_err();
    assert_eq!(d.count(SKUS_PATH), 4, "max_attempts requests, then give up");
    match &e {
        GcpError::Api {
            service,
            status,
            attempts,
            ..
        } => assert_eq!((*service, *status, *attempts), (Service::Billing, 503, 4)),
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("Cloud Billing Catalog API") && msg.ends_with("(after 4 attempts)"),
        "{msg}"
    );
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once() {
    let d = GcpDouble::start().await;
    d.expire_next_token();
    let r = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .expect("refreshed and retried");
    assert_eq!(r.report.offers, 13);
    assert_eq!(
        d.tokens_issued(),
        2,
        "one refresh, however many calls saw the 401"
    );
    assert_eq!(posts_to_token(&d), 2);
    let first = format!("Bearer {}1", double::TOKEN_PREFIX);
    let second = format!("Bearer {}2", double::TOKEN_PREFIX);
    let api: Vec<_> = d.requests().into_iter().filter(|q| q.path != "/token").collect();
    assert!(api.iter().any(|q| q.status == 401));
    for q in &api {
        match q.status {
            401 => assert_eq!(q.header("authorization"), Some(first.as_str()), "{}", q.path),
            200 => assert_eq!(q.header("authorization"), Some(second.as_str()), "{}", q.path),
            s => panic!("{}: {s}", q.path),
        }
    }
}

#[tokio::test]
async fn a_token_refused_after_the_refresh_is_an_error_without_secrets() {
    let d = GcpDouble::start().await;
    d.refuse_all_tokens();
    let e = billing::list_skus(&client(&d), billing::COMPUTE_ENGINE_SERVICE, |_| Ok(()))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(401), "{e:?}");
    assert_eq!(
        d.count(SKUS_PATH),
        2,
        "the request, then once more with a fresh token"
    );
    assert_eq!(d.tokens_issued(), 2);
    let msg = e.to_string();
    assert!(msg.contains("gcloud auth application-default login"), "{msg}");
    assert_no_secrets(&msg);
    assert_no_secrets(&format!("{e:?}"));

    // A refresh token the token endpoint rejects: an Auth error, nothing sent to the APIs.
    let d = GcpDouble::start().await;
    let mut creds = d.authorized_user();
    creds["refresh_token"] = "1//revoked-refresh-token-secret".into();
    let e = billing::list_skus(&client_with(&d, creds), billing::COMPUTE_ENGINE_SERVICE, |_| {
        Ok(())
    })
    .await
    .unwrap_err();
    assert!(matches!(e, GcpError::Auth(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with("credentials: gcloud user credentials"), "{msg}");
    assert!(
        !msg.contains("revoked-refresh-token-secret") && !msg.contains(double::CLIENT_SECRET),
        "{msg}"
    );
    assert_eq!(d.count(SKUS_PATH), 0);
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    let d = GcpDouble::start().await;
    d.truncate(SKUS_PATH, Some("page-2"), None);
    let e = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .unwrap_err();
    match &e {
        GcpError::Malformed { service, what, .. } => {
            assert_eq!(
                (*service, what.as_str()),
                (Service::Billing, "Cloud Billing SKUs page 2")
            )
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.starts_with("Cloud Billing Catalog API (cloudbilling.googleapis.com): malformed reply (Cloud Billing SKUs page 2): EOF"),
        "{msg}"
    );
    assert_eq!(d.count(SKUS_PATH), 2, "a malformed reply is not retried");
}

#[tokio::test]
async fn forbidden_names_the_api_and_what_to_do() {
    let d = GcpDouble::start().await;
    d.forbid(
        SKUS_PATH,
        "accessNotConfigured",
        "Cloud Billing API has not been used in project 123456 before or it is disabled.",
    );
    let e = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(403));
    let msg = e.to_string();
    assert!(
        msg.starts_with("Cloud Billing Catalog API (cloudbilling.googleapis.com) answered HTTP 403 (accessNotConfigured): Cloud Billing API has not been used"),
        "{msg}"
    );
    assert!(
        msg.contains("gcloud services enable cloudbilling.googleapis.com"),
        "{msg}"
    );
    assert_eq!(d.count(SKUS_PATH), 1, "403 is not retried");

    let d = GcpDouble::start().await;
    d.forbid(
        "/aggregated/machineTypes",
        "forbidden",
        "Required 'compute.machineTypes.list' permission for 'projects/double-project'",
    );
    let msg = live::fetch(&client(&d), double::PROJECT, SystemTime::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("Compute Engine API (compute.googleapis.com) answered HTTP 403 (forbidden)"),
        "{msg}"
    );
    assert!(
        msg.contains("permission denied") && msg.contains("roles/compute.viewer"),
        "{msg}"
    );
}

// ---- The binary -----------------------------------------------------------------------------

struct Cli {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

/// A closed loopback port (for endpoints that must not be reached).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cli {
    /// A hermetic environment: own HOME and FLIGHTDECK_HOME, the double's endpoints, and a
    /// metadata server address that refuses connections (never metadata.google.internal).
    fn new(d: &GcpDouble) -> Cli {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let p = |s: &str| dir.path().join(s).display().to_string();
        let env = vec![
            ("HOME".into(), p("home")),
            ("FLIGHTDECK_HOME".into(), p("fd")),
            // A bare origin: the standard paths are appended.
            ("FLIGHTDECK_GCP_COMPUTE_URL".into(), d.origin()),
            ("FLIGHTDECK_GCP_BILLING_URL".into(), d.origin()),
            ("GCE_METADATA_HOST".into(), format!("127.0.0.1:{}", closed_port())),
        ];
        Cli { dir, env }
    }

    /// With gcloud user credentials (ADC via GOOGLE_APPLICATION_CREDENTIALS).
    fn with_user_credentials(mut self, d: &GcpDouble) -> Cli {
        let f = self.dir.path().join("adc.json");
        std::fs::write(&f, d.authorized_user().to_string()).unwrap();
        self.env
            .push(("GOOGLE_APPLICATION_CREDENTIALS".into(), f.display().to_string()));
        self
    }

    fn set(mut self, k: &str, v: String) -> Cli {
        self.env.retain(|(x, _)| x != k);
        self.env.push((k.into(), v));
        self
    }

    fn cache(&self) -> std::path::PathBuf {
        self.dir.path().join("fd/state/offers-live.csv")
    }

    async fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .expect("run flightdeck");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn ids(stdout: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn cli_refresh_caches_and_the_next_start_reads_the_cache() {
    let d = GcpDouble::start().await;
    let cli = Cli::new(&d).with_user_credentials(&d);
    let (code, out, err) = cli.run(&["offers", "--refresh", "--json", "--gpu", "H100"]).await;
    assert_eq!(code, Some(0), "stderr:\n{err}");
    assert!(
        err.contains("refreshed: 13 offers in 4 zones (project double-project)"),
        "{err}"
    );
    assert!(
        err.contains("catalog: live: Cloud Billing Catalog + Compute API, as of "),
        "{err}"
    );
    assert!(err.contains("(just now, just fetched)"), "{err}");
    assert_no_secrets(&err);
    let v: Value = serde_json::from_str(&out).unwrap();
    let a3 = v
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "a3-highgpu-8g/us-central1-a")
        .expect("a3 offer");
    assert_eq!(a3["on_demand"], 87.3164);
    assert_eq!(a3["price"], 87.3164);
    let fresh = ids(&out);
    assert_eq!(fresh.len(), 4, "A3 High x3, A3 Mega: {fresh:?}");
    assert!(cli.cache().is_file(), "cache written");
    let text = std::fs::read_to_string(cli.cache()).unwrap();
    assert!(text.contains("# source: live: Cloud Billing Catalog + Compute API"));
    assert!(text.contains("# project: double-project"));
    assert_no_secrets(&text);

    // Next start, no refresh, Google unreachable: the cache is the catalog.
    let offline = format!("http://127.0.0.1:{}", closed_port());
    let cli = cli
        .set("FLIGHTDECK_GCP_COMPUTE_URL", offline.clone())
        .set("FLIGHTDECK_GCP_BILLING_URL", offline);
    let before = d.requests().len();
    let (code, out, err) = cli.run(&["offers", "--json", "--gpu", "H100"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(ids(&out), fresh);
    assert!(
        err.contains("catalog: live: Cloud Billing Catalog + Compute API") && err.contains("cached)"),
        "{err}"
    );
    let (code, table, err) = cli.run(&["offers", "--gpu", "T4"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.starts_with("5 of 13 offers · on-demand prices in USD/hour · catalog: live:"),
        "{err}"
    );
    assert!(
        table.contains("n1-highmem-8") && table.contains("1.173"),
        "{table}"
    );
    assert_eq!(d.requests().len(), before, "no request without --refresh");

    // A refresh that fails keeps the cached catalog, says why, and exits 1.
    let cli = cli
        .set("FLIGHTDECK_GCP_COMPUTE_URL", d.origin())
        .set("FLIGHTDECK_GCP_BILLING_URL", d.origin());
    d.truncate(SKUS_PATH, Some("page-2"), None);
    let (code, out, err) = cli.run(&["offers", "--refresh", "--json", "--gpu", "H100"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("live refresh failed: Cloud Billing Catalog API (cloudbilling.googleapis.com): malformed reply (Cloud Billing SKUs page 2)"), "{err}");
    assert!(err.contains("the cached catalog stays in use"), "{err}");
    assert_eq!(ids(&out), fresh, "the cached offers are listed");
    assert!(
        std::fs::read_to_string(cli.cache()).unwrap() == text,
        "cache untouched"
    );
}

#[tokio::test]
async fn cli_refresh_failure_without_a_cache_lists_the_embedded_catalog() {
    let d = GcpDouble::start().await;
    d.forbid(
        SKUS_PATH,
        "accessNotConfigured",
        "Cloud Billing API has not been used in project 123456 before or it is disabled.",
    );
    let cli = Cli::new(&d).with_user_credentials(&d);
    let (code, out, err) = cli.run(&["offers", "--refresh", "--json"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("HTTP 403 (accessNotConfigured)"), "{err}");
    assert!(
        err.contains("gcloud services enable cloudbilling.googleapis.com"),
        "{err}"
    );
    assert!(err.contains("the embedded catalog stays in use"), "{err}");
    assert!(err.contains("catalog: SkyPilot GCP catalog"), "{err}");
    assert_eq!(ids(&out).len(), Catalog::embedded().offers().len());
    assert!(!cli.cache().exists());
    assert_no_secrets(&err);
}

#[tokio::test]
async fn cli_refresh_through_the_metadata_server() {
    let d = GcpDouble::start().await;
    // No credentials file: ADC falls back to the metadata server (the double), which also
    // names the project.
    let cli = Cli::new(&d).set("GCE_METADATA_HOST", d.addr().to_string());
    let (code, out, err) = cli.run(&["offers", "--refresh", "--json", "--gpu", "B200"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(ids(&out), ["a4-highgpu-8g/us-central1-b"]);
    assert!(d.count("/computeMetadata/v1/instance/service-accounts/default/token") >= 1);
    assert_eq!(d.count("/computeMetadata/v1/project/project-id"), 1);
    assert_eq!(posts_to_token(&d), 0, "no OAuth refresh-token flow");
    assert!(Path::new(&cli.cache()).is_file());
}
