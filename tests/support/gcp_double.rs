//! A local HTTP/1.1 **double** of the Google APIs the offers refresh calls: a test double,
//! not Google. It speaks the documented request and reply shapes
//! (../shared/reference/gcp/billing.md, compute-api.md, auth.md) on 127.0.0.1, so the real
//! client code (reqwest, google-cloud-auth, pagination, retries) runs against it unchanged:
//!
//! * Cloud Billing Catalog: `GET /v1/services/6F81-5844-456A/skus?currencyCode=USD&pageSize=…
//!   [&pageToken=…]` → `{"skus": [...], "nextPageToken": "..."}`, three pages;
//! * Compute Engine v1: `GET /compute/v1/projects/double-project/zones` (two pages),
//!   `/aggregated/machineTypes` (two pages, with a `NO_RESULTS_ON_PAGE` warning scope) and
//!   `/aggregated/acceleratorTypes`;
//! * OAuth token endpoint of `authorized_user` credentials: `POST /token` with the JSON body
//!   google-cloud-auth sends → `{"access_token", "expires_in", "token_type"}`;
//! * GCE metadata server: `GET /computeMetadata/v1/instance/service-accounts/default/token`
//!   and `/computeMetadata/v1/project/project-id` (header `Metadata-Flavor: Google`).
//!
//! API calls need `Authorization: Bearer <a token this double issued and still accepts>`,
//! else 401 in Google's error shape. Faults are scripted per path: N replies with a status
//! (Google's error JSON, optional `Retry-After`), a truncated JSON body, a lasting 403.
//! Every request is recorded. The prices in the fixture are illustrative numbers chosen so
//! that tests can compute the expected offers by hand (see `tests/gcp_live.rs`).

mod fixture;

use super::http_double::HttpDouble;
pub use super::http_double::{json_reply, Recorded, Reply};
use fixture::{accelerator_types, billing_pages, machine_type_pages, zone_pages};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

pub const PROJECT: &str = "double-project";
pub const CLIENT_ID: &str = "double-client.apps.googleusercontent.com";
pub const CLIENT_SECRET: &str = "double-client-secret-do-not-print";
pub const REFRESH_TOKEN: &str = "1//double-refresh-token-do-not-print";
/// Issued access tokens start with this (`ya29.` like Google's).
pub const TOKEN_PREFIX: &str = "ya29.double-access-token-";
pub const SKUS_PATH: &str = "/v1/services/6F81-5844-456A/skus";

#[derive(Debug, Clone)]
enum Fault {
    /// Answer with this status and Google's error body.
    Status {
        status: u16,
        reason: String,
        message: String,
        retry_after: Option<u64>,
    },
    /// 200 with a body cut in the middle of the JSON.
    Truncated,
}

#[derive(Debug, Clone)]
struct Scripted {
    /// Applies to requests whose path contains this (and, when set, whose pageToken is).
    path: String,
    page_token: Option<String>,
    /// Replies left; `None` = forever.
    left: Option<usize>,
    fault: Fault,
}

#[derive(Default)]
struct State {
    faults: Vec<Scripted>,
    issued: usize,
    valid: HashSet<String>,
    /// The next issued token is refused by the APIs once used (as if it had expired).
    expire_next: bool,
    /// Refuse every token.
    refuse_all: bool,
}

/// The double; stops when dropped.
pub struct GcpDouble {
    server: HttpDouble,
    state: Arc<Mutex<State>>,
}

impl GcpDouble {
    /// Listen on 127.0.0.1 (a free port). Needs a running Tokio runtime.
    pub async fn start() -> GcpDouble {
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let server = HttpDouble::start("the GCP double", move |req| respond(req, &s)).await;
        GcpDouble { server, state }
    }

    /// `127.0.0.1:PORT` (what `GCE_METADATA_HOST` takes).
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    pub fn origin(&self) -> String {
        self.server.origin()
    }

    pub fn compute_url(&self) -> String {
        format!("{}/compute/v1", self.origin())
    }

    pub fn billing_url(&self) -> String {
        format!("{}/v1", self.origin())
    }

    /// What `gcloud auth application-default login` writes, pointed at this double's token
    /// endpoint.
    pub fn authorized_user(&self) -> Value {
        json!({
            "type": "authorized_user",
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "refresh_token": REFRESH_TOKEN,
            "token_uri": format!("{}/token", self.origin()),
            "quota_project_id": PROJECT,
        })
    }

    /// The next `times` requests whose path contains `path` get `status`.
    pub fn fail(&self, path: &str, status: u16, times: usize) {
        self.fail_with(path, None, status, Some(times), None);
    }

    /// Full control: restrict to a `pageToken`, `times` (`None` = always), `Retry-After`.
    pub fn fail_with(
        &self,
        path: &str,
        page_token: Option<&str>,
        status: u16,
        times: Option<usize>,
        retry_after: Option<u64>,
    ) {
        let (reason, message) = match status {
            429 => (
                "rateLimitExceeded",
                "Quota exceeded for quota metric 'Read requests'.",
            ),
            500 => ("backendError", "Internal error encountered."),
            503 => ("backendError", "The service is currently unavailable."),
            _ => ("", "error"),
        };
        self.push(
            path,
            page_token,
            times,
            Fault::Status {
                status,
                reason: reason.into(),
                message: message.into(),
                retry_after,
            },
        );
    }

    /// Every request whose path contains `path` gets 403 with `reason` (`accessNotConfigured`
    /// for a disabled API, `forbidden` for a missing permission).
    pub fn forbid(&self, path: &str, reason: &str, message: &str) {
        self.push(
            path,
            None,
            None,
            Fault::Status {
                status: 403,
                reason: reason.into(),
                message: message.into(),
                retry_after: None,
            },
        );
    }

    /// The next `times` requests for `path` (page `page_token`) get a truncated JSON body.
    pub fn truncate(&self, path: &str, page_token: Option<&str>, times: Option<usize>) {
        self.push(path, page_token, times, Fault::Truncated);
    }

    fn push(&self, path: &str, page_token: Option<&str>, left: Option<usize>, fault: Fault) {
        self.state.lock().unwrap().faults.push(Scripted {
            path: path.into(),
            page_token: page_token.map(str::to_string),
            left,
            fault,
        });
    }

    /// The next token issued is accepted by no API (an expired token): the first API call
    /// with it gets 401.
    pub fn expire_next_token(&self) {
        self.state.lock().unwrap().expire_next = true;
    }

    /// No token is accepted any more.
    pub fn refuse_all_tokens(&self) {
        self.state.lock().unwrap().refuse_all = true;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    /// Requests whose path contains `path`.
    pub fn count(&self, path: &str) -> usize {
        self.requests().iter().filter(|r| r.path.contains(path)).count()
    }

    /// Access tokens issued (OAuth and metadata endpoints together).
    pub fn tokens_issued(&self) -> usize {
        self.state.lock().unwrap().issued
    }
}

/// Google's error body: `{"error": {"code", "message", "errors": [{"message", "domain",
/// "reason"}], "status"}}`.
pub fn google_error(status: u16, reason: &str, message: &str) -> Value {
    let grpc = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    let mut err = json!({"code": status, "message": message, "status": grpc});
    if !reason.is_empty() {
        err["errors"] = json!([{"message": message, "domain": "global", "reason": reason}]);
    }
    json!({ "error": err })
}

fn respond(req: &Recorded, state: &Arc<Mutex<State>>) -> Reply {
    let mut st = state.lock().unwrap();
    // Token endpoints.
    if req.method == "POST" && req.path == "/token" {
        return token_endpoint(req, &mut st);
    }
    if req.path.starts_with("/computeMetadata/v1/") {
        if req.header("metadata-flavor") != Some("Google") {
            return json_reply(403, json!({"error": "missing Metadata-Flavor: Google"}));
        }
        if req.path == "/computeMetadata/v1/project/project-id" {
            return Reply {
                status: 200,
                content_type: "application/text",
                body: PROJECT.into(),
                retry_after: None,
            };
        }
        if req.path == "/computeMetadata/v1/instance/service-accounts/default/token" {
            let t = issue(&mut st);
            return json_reply(
                200,
                json!({"access_token": t, "expires_in": 3599, "token_type": "Bearer"}),
            );
        }
        return json_reply(404, json!({"error": "not found"}));
    }
    // Scripted faults, in order.
    let page_token = req.param("pageToken").map(str::to_string);
    if let Some(i) = st.faults.iter().position(|f| {
        req.path.contains(&f.path)
            && f.left != Some(0)
            && (f.page_token.is_none() || f.page_token == page_token)
    }) {
        let f = &mut st.faults[i];
        if let Some(n) = &mut f.left {
            *n -= 1;
        }
        return match f.fault.clone() {
            Fault::Status {
                status,
                reason,
                message,
                retry_after,
            } => Reply {
                retry_after,
                ..json_reply(status, google_error(status, &reason, &message))
            },
            Fault::Truncated => Reply {
                status: 200,
                content_type: "application/json; charset=UTF-8",
                body: r#"{"skus": [{"name": "services/6F81-5844-456A/skus/0000-1111-2222", "skuId": "0000-1111-2222", "description": "Nvidia L4 GPU runn"#.into(),
                retry_after: None,
            },
        };
    }
    // Authorization.
    let token = req
        .header("authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or("");
    if st.refuse_all || !st.valid.contains(token) {
        return json_reply(
            401,
            google_error(
                401,
                "authError",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
            ),
        );
    }
    if req.method != "GET" {
        return json_reply(400, google_error(400, "badRequest", "only GET here"));
    }
    if req.path == SKUS_PATH {
        if req.param("currencyCode") != Some("USD") {
            return json_reply(400, google_error(400, "badRequest", "currencyCode"));
        }
        return page(&billing_pages(), page_token.as_deref());
    }
    let compute = format!("/compute/v1/projects/{PROJECT}");
    if let Some(rest) = req.path.strip_prefix(&compute) {
        return match rest {
            "/zones" => page(&zone_pages(), page_token.as_deref()),
            "/aggregated/machineTypes" => page(&machine_type_pages(), page_token.as_deref()),
            "/aggregated/acceleratorTypes" => page(&[accelerator_types()], page_token.as_deref()),
            _ => json_reply(404, google_error(404, "notFound", "The resource was not found")),
        };
    }
    if req.path.starts_with("/compute/v1/projects/") {
        return json_reply(
            403,
            google_error(
                403,
                "forbidden",
                "Permission denied on resource project (or it may not exist).",
            ),
        );
    }
    json_reply(404, google_error(404, "notFound", "not found"))
}

fn issue(st: &mut State) -> String {
    st.issued += 1;
    let t = format!("{TOKEN_PREFIX}{}", st.issued);
    if st.expire_next {
        st.expire_next = false;
    } else {
        st.valid.insert(t.clone());
    }
    t
}

/// `POST /token` as Google's OAuth endpoint answers an `authorized_user` refresh.
fn token_endpoint(req: &Recorded, st: &mut State) -> Reply {
    let body: Value = serde_json::from_str(&req.body).unwrap_or(Value::Null);
    let ok = body["grant_type"] == "refresh_token"
        && body["refresh_token"] == REFRESH_TOKEN
        && body["client_id"] == CLIENT_ID
        && body["client_secret"] == CLIENT_SECRET;
    if !ok {
        return json_reply(
            400,
            json!({"error": "invalid_grant", "error_description": "Bad Request"}),
        );
    }
    let t = issue(st);
    json_reply(
        200,
        json!({"access_token": t, "expires_in": 3599, "token_type": "Bearer",
               "scope": body["scopes"].as_str().unwrap_or("")}),
    )
}

/// The page a `pageToken` names: none → the first; `page-N` → the Nth.
fn page(pages: &[Value], token: Option<&str>) -> Reply {
    let i = match token {
        None => 0,
        Some(t) => match t.strip_prefix("page-").and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if n >= 2 && n <= pages.len() => n - 1,
            _ => return json_reply(400, google_error(400, "invalid", "Invalid page token.")),
        },
    };
    let mut v = pages[i].clone();
    if i + 1 < pages.len() {
        v["nextPageToken"] = json!(format!("page-{}", i + 2));
    }
    json_reply(200, v)
}
