//! The HTTP side of Google's REST APIs: base URLs, one authorized GET with retries, and
//! `nextPageToken` pagination.
//!
//! * Base URLs: [`Endpoints`], from `FLIGHTDECK_GCP_COMPUTE_URL` / `FLIGHTDECK_GCP_BILLING_URL`
//!   or Google's. Plain `http://` is accepted for loopback addresses only (a test double),
//!   so a bearer token never travels unencrypted to another host.
//! * Retries: 408, 429, 5xx (not 501), 403 with the reason `rateLimitExceeded` or
//!   `userRateLimitExceeded`, and connection failures or timeouts are retried with
//!   exponential backoff and jitter, at most [`RetryPolicy::max_attempts`] requests per call;
//!   a `Retry-After` in seconds is honoured up to [`RetryPolicy::max_delay`].
//! * 401: the token is refreshed once ([`Auth::refresh`]) and the request sent again; that
//!   extra request does not count as a retry.
//! * Errors: [`GcpError`], with Google's JSON error (`{"error": {"code", "message", "status",
//!   "errors": [{"reason"}], "details": [{"reason"}]}}`) read into `reason` and `message`.
//! * Logs: method, path, status and attempt at debug level; never headers or tokens.

use super::auth::Auth;
use super::error::{is_retryable_status, redact, GcpError, Service};
use serde::de::DeserializeOwned;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Google's Compute Engine v1 base URL.
pub const COMPUTE_URL: &str = "https://compute.googleapis.com/compute/v1";
/// Google's Cloud Billing v1 base URL.
pub const BILLING_URL: &str = "https://cloudbilling.googleapis.com/v1";
pub const COMPUTE_URL_VAR: &str = "FLIGHTDECK_GCP_COMPUTE_URL";
pub const BILLING_URL_VAR: &str = "FLIGHTDECK_GCP_BILLING_URL";

/// Where the APIs are. An override is the base URL with its path
/// (`http://127.0.0.1:8080/compute/v1`); a bare origin (`http://127.0.0.1:8080`) gets the
/// standard path (`/compute/v1`, `/v1`) appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub compute: String,
    pub billing: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Endpoints {
            compute: COMPUTE_URL.into(),
            billing: BILLING_URL.into(),
        }
    }
}

impl Endpoints {
    /// From the process environment.
    pub fn from_env() -> Result<Endpoints, GcpError> {
        Self::resolve(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
    }

    /// From a lookup function (pure, for tests).
    pub fn resolve(var: impl Fn(&str) -> Option<String>) -> Result<Endpoints, GcpError> {
        Ok(Endpoints {
            compute: match var(COMPUTE_URL_VAR) {
                Some(v) => base_url(COMPUTE_URL_VAR, &v, "/compute/v1")?,
                None => COMPUTE_URL.into(),
            },
            billing: match var(BILLING_URL_VAR) {
                Some(v) => base_url(BILLING_URL_VAR, &v, "/v1")?,
                None => BILLING_URL.into(),
            },
        })
    }

    /// Both are Google's own.
    pub fn is_google(&self) -> bool {
        self.compute == COMPUTE_URL && self.billing == BILLING_URL
    }
}

fn base_url(var: &str, value: &str, default_path: &str) -> Result<String, GcpError> {
    let v = value.trim().trim_end_matches('/');
    let bad = |why: &str| GcpError::Config(format!("{var}={value}: {why}"));
    let (scheme, rest) = v
        .split_once("://")
        .ok_or_else(|| bad("expected an http(s) URL such as https://compute.googleapis.com/compute/v1"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.is_empty() || v.contains(['?', '#']) {
        return Err(bad(
            "expected scheme://host[:port][/path], without query or fragment",
        ));
    }
    match scheme {
        "https" => {}
        "http" if is_loopback(authority) => {}
        "http" => {
            return Err(bad(
                "plain http is only allowed to a loopback address (a local test double); \
                 credentials would travel unencrypted",
            ))
        }
        _ => return Err(bad("expected an http or https URL")),
    }
    Ok(if path.is_empty() {
        format!("{v}{default_path}")
    } else {
        v.to_string()
    })
}

fn is_loopback(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests per call at most, the first included (≥ 1).
    pub max_attempts: u32,
    /// The delay before the second request; doubled for each further one.
    pub initial_delay: Duration,
    /// No delay is longer, `Retry-After` included.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(16),
        }
    }
}

impl RetryPolicy {
    /// The delay before request `attempt + 1` (attempt ≥ 1): exponential, with "equal
    /// jitter" (between half and all of the exponential value), capped.
    pub fn delay(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = self
            .initial_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_delay);
        capped.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// A whole request, reply body included (a Billing page of 5,000 SKUs is several MB).
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// A page of a Google list reply.
pub trait Page: DeserializeOwned {
    /// `nextPageToken`; `None` or empty on the last page.
    fn next_page_token(&self) -> Option<&str>;
}

/// Pages per list call at most: a guard against a server that never stops.
pub const MAX_PAGES: usize = 1000;

/// An authorized client for Google's REST APIs. Cheap to clone.
#[derive(Clone, Debug)]
pub struct GcpClient {
    http: reqwest::Client,
    auth: Auth,
    endpoints: Endpoints,
    options: ClientOptions,
}

impl GcpClient {
    pub fn new(auth: Auth, endpoints: Endpoints, options: ClientOptions) -> Result<GcpClient, GcpError> {
        super::auth::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.connect_timeout)
            .user_agent(concat!("flightdeck/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                GcpError::Config(format!(
                    "cannot set up the HTTPS client: {}",
                    redact(&e.to_string())
                ))
            })?;
        Ok(GcpClient {
            http,
            auth,
            endpoints,
            options,
        })
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// `base` of `service` + `path` (which starts with `/`).
    pub fn url(&self, service: Service, path: &str) -> String {
        let base = match service {
            Service::Compute => &self.endpoints.compute,
            Service::Billing => &self.endpoints.billing,
            Service::Metadata => "",
        };
        format!("{base}{path}")
    }

    /// GET `url` with `query` and read the JSON reply as `T`; `what` names the reply in
    /// errors (`Cloud Billing SKUs page 2`).
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        service: Service,
        url: &str,
        query: &[(&str, String)],
        what: &str,
    ) -> Result<T, GcpError> {
        let body = self.get(service, url, query).await?;
        serde_json::from_slice(&body).map_err(|e| GcpError::Malformed {
            service,
            what: what.to_string(),
            detail: redact(&e.to_string()),
        })
    }

    /// Every page of a list: `on_page` gets each in order. Returns the number of pages.
    pub async fn list_pages<T: Page>(
        &self,
        service: Service,
        url: &str,
        query: &[(&str, String)],
        what: &str,
        mut on_page: impl FnMut(T) -> Result<(), GcpError>,
    ) -> Result<usize, GcpError> {
        let mut token: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for n in 1..=MAX_PAGES {
            let mut q: Vec<(&str, String)> = query.to_vec();
            if let Some(t) = &token {
                q.push(("pageToken", t.clone()));
            }
            let page: T = self
                .get_json(service, url, &q, &format!("{what} page {n}"))
                .await?;
            let next = page
                .next_page_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            on_page(page)?;
            match next {
                None => return Ok(n),
                Some(t) => {
                    if !seen.insert(t.clone()) {
                        return Err(GcpError::Malformed {
                            service,
                            what: format!("{what} page {n}"),
                            detail: "nextPageToken repeats an earlier page's; the listing would never end"
                                .into(),
                        });
                    }
                    token = Some(t);
                }
            }
        }
        Err(GcpError::Malformed {
            service,
            what: what.to_string(),
            detail: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// One authorized GET with retries; the reply body on 2xx.
    pub async fn get(
        &self,
        service: Service,
        url: &str,
        query: &[(&str, String)],
    ) -> Result<Vec<u8>, GcpError> {
        self.send(Method::Get, service, url, query, None).await
    }

    /// One authorized request with retries; the reply body on 2xx. A POST or DELETE is
    /// retried only when the caller made it idempotent (Compute's `requestId` in `query`):
    /// the same query, so the same `requestId`, goes with every attempt.
    pub async fn send(
        &self,
        method: Method,
        service: Service,
        url: &str,
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<Vec<u8>, GcpError> {
        let policy = self.options.retry;
        let max = policy.max_attempts.max(1);
        let mut attempt = 0u32;
        let mut refreshed = false;
        let path = url_path(url);
        let verb = method.as_str();
        let payload = body.map(|b| b.to_string());
        loop {
            attempt += 1;
            let (generation, headers) = self.auth.headers().await?;
            let builder = match method {
                Method::Get => self.http.get(url),
                Method::Post => self.http.post(url),
                Method::Delete => self.http.delete(url),
            };
            let mut builder = builder.query(query).headers(headers);
            if let Some(p) = &payload {
                builder = builder
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(p.clone());
            }
            let sent = builder.send().await;
            let (status, retry_after, body) = match sent {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    match resp.bytes().await {
                        Ok(b) => (status, retry_after, b.to_vec()),
                        Err(e) => {
                            let err = network_error(service, &e);
                            tracing::debug!(%path, attempt, "{verb} {}: body: {}", service.host(), err);
                            if transient(&e) && attempt < max {
                                self.pause(attempt, None).await;
                                continue;
                            }
                            return Err(err);
                        }
                    }
                }
                Err(e) => {
                    let err = network_error(service, &e);
                    tracing::debug!(%path, attempt, "{verb} {}: {}", service.host(), err);
                    if transient(&e) && attempt < max {
                        self.pause(attempt, None).await;
                        continue;
                    }
                    return Err(err);
                }
            };
            tracing::debug!(%path, attempt, status, "{verb} {}", service.host());
            if (200..300).contains(&status) {
                return Ok(body);
            }
            if status == 401 && !refreshed {
                // The token expired or was revoked: get a fresh one, once.
                refreshed = true;
                attempt -= 1;
                self.auth.refresh(generation).await?;
                continue;
            }
            let (reason, message) = google_error(&body);
            // Google answers per-user and per-project rate limits with 403 and the
            // reason rateLimitExceeded / userRateLimitExceeded: a pause, not a permission.
            let rate_limited =
                status == 403 && matches!(reason.as_str(), "rateLimitExceeded" | "userRateLimitExceeded");
            if (is_retryable_status(status) || rate_limited) && attempt < max {
                self.pause(attempt, retry_after).await;
                continue;
            }
            return Err(GcpError::Api {
                service,
                status,
                reason,
                message,
                attempts: attempt,
            });
        }
    }

    async fn pause(&self, attempt: u32, retry_after: Option<Duration>) {
        let policy = self.options.retry;
        let d = match retry_after {
            Some(ra) => ra.min(policy.max_delay),
            None => policy.delay(attempt, jitter()),
        };
        tokio::time::sleep(d).await;
    }
}

/// The HTTP methods the Google clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// The path of a URL, for logs (no query: page tokens are noise).
fn url_path(url: &str) -> String {
    let no_query = url.split(['?', '#']).next().unwrap_or(url);
    match no_query.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/".into(), |i| rest[i..].to_string()),
        None => no_query.to_string(),
    }
}

/// Worth another try: timeouts, refused or reset connections, a body cut off. Not a TLS
/// failure (a bad certificate stays bad).
fn transient(e: &reqwest::Error) -> bool {
    !is_tls(e) && (e.is_timeout() || e.is_connect() || e.is_request() || e.is_body())
}

/// A rustls error anywhere in the chain, looking inside `io::Error`s (which wrap it, nested,
/// and whose `source()` skips the wrapped error).
fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    if e.downcast_ref::<rustls::Error>().is_some() {
        return true;
    }
    if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        if is_tls(inner) {
            return true;
        }
    }
    e.source().is_some_and(is_tls)
}

fn network_error(service: Service, e: &reqwest::Error) -> GcpError {
    // reqwest's Display names the URL; ours carry no secret (the token is a header), but keep
    // the message short: the kind, then the innermost cause.
    let kind = if is_tls(e) {
        "TLS handshake failed"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let url = e
        .url()
        .map(|u| format!(" {}://{}{}", u.scheme(), u.authority(), u.path()));
    GcpError::Network {
        service,
        message: redact(&format!("{kind}{}: {cause}", url.unwrap_or_default())),
    }
}

/// `(reason, message)` of Google's JSON error body; the start of the text when it is not one.
pub fn google_error(body: &[u8]) -> (String, String) {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Body,
    }
    #[derive(serde::Deserialize)]
    struct Body {
        #[serde(default)]
        message: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        errors: Vec<Item>,
        #[serde(default)]
        details: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default)]
        reason: String,
    }
    const LIMIT: usize = 400;
    let cut = |s: &str| -> String {
        let s = redact(s.trim());
        match s.char_indices().nth(LIMIT) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    };
    match serde_json::from_slice::<Envelope>(body) {
        Ok(Envelope { error: b }) => {
            let reason = b
                .errors
                .iter()
                .chain(&b.details)
                .map(|i| i.reason.as_str())
                .find(|r| !r.is_empty())
                .unwrap_or(&b.status)
                .to_string();
            (reason, cut(&b.message))
        }
        Err(_) => (String::new(), cut(&String::from_utf8_lossy(body))),
    }
}

/// A number in [0, 1) for jitter: splitmix64 over the clock and a counter (no RNG crate).
fn jitter() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn endpoints_default_to_google_and_take_overrides() {
        let e = Endpoints::resolve(env(&[])).unwrap();
        assert_eq!(e, Endpoints::default());
        assert!(e.is_google());
        let e = Endpoints::resolve(env(&[
            (COMPUTE_URL_VAR, "http://127.0.0.1:8089"),
            (BILLING_URL_VAR, "http://localhost:9/v1/"),
        ]))
        .unwrap();
        assert_eq!(e.compute, "http://127.0.0.1:8089/compute/v1");
        assert_eq!(e.billing, "http://localhost:9/v1");
        assert!(!e.is_google());
        let e = Endpoints::resolve(env(&[(COMPUTE_URL_VAR, "https://proxy.example/compute/v1")])).unwrap();
        assert_eq!(e.compute, "https://proxy.example/compute/v1");
        let e = Endpoints::resolve(env(&[(COMPUTE_URL_VAR, "http://[::1]:80/c")])).unwrap();
        assert_eq!(e.compute, "http://[::1]:80/c");
    }

    #[test]
    fn endpoints_refuse_plain_http_elsewhere_and_junk() {
        let cases = [
            (
                "http://10.0.0.1:80/compute/v1",
                "only allowed to a loopback address",
            ),
            ("http://example.com", "only allowed to a loopback address"),
            ("compute.googleapis.com", "expected an http(s) URL"),
            ("ftp://127.0.0.1", "expected an http or https URL"),
            ("https://x/v1?key=1", "without query"),
        ];
        for (v, want) in cases {
            let e = Endpoints::resolve(env(&[(BILLING_URL_VAR, v)]))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains(BILLING_URL_VAR), "{v}: {e}");
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let p = RetryPolicy {
            max_attempts: 5,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
        };
        assert_eq!(p.delay(1, 1.0), Duration::from_millis(100));
        assert_eq!(p.delay(1, 0.0), Duration::from_millis(50));
        assert_eq!(p.delay(2, 1.0), Duration::from_millis(200));
        assert_eq!(p.delay(3, 1.0), Duration::from_millis(350), "capped");
        assert_eq!(p.delay(60, 1.0), Duration::from_millis(350), "no overflow");
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j), "{j}");
        }
    }

    #[test]
    fn google_error_bodies() {
        let body = br#"{"error": {"code": 403, "message": "Quota exceeded.", "status": "PERMISSION_DENIED",
            "errors": [{"message": "Quota exceeded.", "domain": "usageLimits", "reason": "quotaExceeded"}]}}"#;
        assert_eq!(
            google_error(body),
            ("quotaExceeded".into(), "Quota exceeded.".into())
        );
        let body = br#"{"error": {"code": 403, "message": "API disabled", "status": "PERMISSION_DENIED",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}]}}"#;
        assert_eq!(google_error(body).0, "SERVICE_DISABLED");
        let body = br#"{"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}}"#;
        assert_eq!(google_error(body).0, "UNAVAILABLE");
        let (r, m) = google_error(b"<html>Bad Gateway</html>");
        assert_eq!((r.as_str(), m.as_str()), ("", "<html>Bad Gateway</html>"));
        let long = "x ".repeat(1000);
        assert!(google_error(long.as_bytes()).1.chars().count() <= 401);
    }

    #[test]
    fn tls_failures_are_found_inside_nested_io_errors() {
        use std::io::{Error, ErrorKind};
        let cert = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let nested = Error::other(Error::new(ErrorKind::InvalidData, cert));
        assert!(is_tls(&nested));
        assert!(!is_tls(&Error::from(ErrorKind::ConnectionRefused)));
        assert!(!is_tls(&Error::other("reset")));
    }

    #[test]
    fn log_paths_drop_the_query() {
        assert_eq!(
            url_path("https://cloudbilling.googleapis.com/v1/services/X/skus?pageToken=abc"),
            "/v1/services/X/skus"
        );
        assert_eq!(url_path("http://127.0.0.1:1"), "/");
    }
}
