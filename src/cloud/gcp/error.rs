//! What can go wrong talking to Google, as one typed error.
//!
//! Messages are for operators: they name the API, say what Google answered and what to do.
//! They never carry a token, a key or a credentials file's contents: everything that comes
//! from outside (Google's messages, the auth library's) passes through [`redact`].

use std::fmt;

/// The Google API a request went to (for messages and hints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Cloud Billing Catalog API, `cloudbilling.googleapis.com`.
    Billing,
    /// Compute Engine API, `compute.googleapis.com`.
    Compute,
    /// The GCE metadata server (project id on a VM).
    Metadata,
}

impl Service {
    /// `Cloud Billing Catalog API`.
    pub fn name(self) -> &'static str {
        match self {
            Service::Billing => "Cloud Billing Catalog API",
            Service::Compute => "Compute Engine API",
            Service::Metadata => "GCE metadata server",
        }
    }

    /// The service name `gcloud services enable` takes.
    pub fn host(self) -> &'static str {
        match self {
            Service::Billing => "cloudbilling.googleapis.com",
            Service::Compute => "compute.googleapis.com",
            Service::Metadata => "metadata.google.internal",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.host())
    }
}

/// An error from a Google API call or from getting credentials for one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GcpError {
    /// Google answered with an HTTP error (after retries, where it was worth retrying).
    #[error("{}", api_message(*service, *status, reason, message, *attempts))]
    Api {
        service: Service,
        status: u16,
        /// Google's reason code: `errors[0].reason` (`accessNotConfigured`, `forbidden`,
        /// `rateLimitExceeded`), else `ErrorInfo.reason`, else `status`
        /// (`PERMISSION_DENIED`); empty when the reply said none.
        reason: String,
        /// Google's message, redacted and cut to a few hundred characters.
        message: String,
        /// Requests sent for this call, retries included.
        attempts: u32,
    },
    /// No usable credentials, or Google's token service refused them.
    #[error("credentials: {0}")]
    Auth(String),
    /// The request did not reach Google or no reply came back (offline, DNS, timeout).
    #[error("{service}: network: {message}")]
    Network { service: Service, message: String },
    /// Google's reply could not be read as the documented shape.
    #[error("{service}: malformed reply ({what}): {detail}")]
    Malformed {
        service: Service,
        /// Which reply: `Cloud Billing SKUs page 2`.
        what: String,
        detail: String,
    },
    /// flightdeck is not set up to make the call: no project, a bad endpoint override.
    #[error("{0}")]
    Config(String),
}

impl GcpError {
    /// The HTTP status, for API errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            GcpError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// HTTP statuses worth another try: rate limits and server-side failures.
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || status == 408 || (500..=599).contains(&status) && status != 501
}

fn api_message(service: Service, status: u16, reason: &str, message: &str, attempts: u32) -> String {
    let mut s = format!("{service} answered HTTP {status}");
    if !reason.is_empty() {
        s.push_str(&format!(" ({reason})"));
    }
    if !message.is_empty() {
        s.push_str(&format!(": {message}"));
    }
    let lower = reason.to_ascii_lowercase();
    let hint = match status {
        401 => "the credentials were refused even after a fresh token; run `gcloud auth \
                application-default login`, or point GOOGLE_APPLICATION_CREDENTIALS at a valid key file"
            .to_string(),
        403 if lower.contains("accessnotconfigured") || lower.contains("service_disabled") => format!(
            "the {} is not enabled for the project; enable it with `gcloud services enable {}`",
            service.name(),
            service.host()
        ),
        403 => format!(
            "permission denied: the account behind the credentials may not use the {} for this \
             project (Compute needs e.g. compute.machineTypes.list and compute.zones.list; \
             `roles/compute.viewer` has them)",
            service.name()
        ),
        404 => format!("not found: check the project id and the {} URL", service.name()),
        429 => format!(
            "rate limit or quota of the {} exhausted; try again later",
            service.name()
        ),
        s if s >= 500 => format!("Google's {} failed; try again later", service.name()),
        _ => String::new(),
    };
    if !hint.is_empty() {
        s.push_str(&format!(" — {hint}"));
    }
    if attempts > 1 {
        s.push_str(&format!(" (after {attempts} attempts)"));
    }
    s
}

/// Remove anything that could be a credential from a message taken from outside: bearer
/// tokens, OAuth access (`ya29.`) and refresh (`1//`) tokens, PEM blocks, JWTs, and any long
/// run of token characters. Keeps the message readable otherwise.
pub fn redact(text: &str) -> String {
    // PEM blocks first: they span lines.
    let mut s = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN") {
        s.push_str(&rest[..start]);
        s.push_str("<redacted key>");
        let after = &rest[start..];
        match after.find("-----END") {
            Some(end) => {
                let tail = &after[end + 8..];
                let close = tail.find("-----").map_or(tail.len(), |p| p + 5);
                rest = &tail[close..];
            }
            None => rest = "",
        }
    }
    s.push_str(rest);

    let mut out = String::with_capacity(s.len());
    let mut redact_next = false;
    for word in split_keep(&s) {
        if word.chars().all(char::is_whitespace) {
            out.push_str(word);
            continue;
        }
        let core = word.trim_matches(|c: char| "\"'`<>()[]{},;".contains(c));
        let secret = redact_next
            || core.starts_with("ya29.")
            || core.starts_with("1//")
            || core.starts_with("eyJ")
            || long_token_run(core);
        redact_next = core.eq_ignore_ascii_case("bearer");
        if secret && !core.is_empty() {
            out.push_str(&word.replace(core, "<redacted>"));
        } else {
            out.push_str(word);
        }
    }
    out
}

/// Split into words and the whitespace between them, keeping both.
fn split_keep(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in s.char_indices() {
        let space = c.is_whitespace();
        match in_space {
            Some(prev) if prev != space => {
                parts.push(&s[start..i]);
                start = i;
            }
            _ => {}
        }
        in_space = Some(space);
    }
    if start < s.len() {
        parts.push(&s[start..]);
    }
    parts
}

/// 32 or more characters of the alphabet tokens are made of, with digits and letters mixed
/// (so long words, URLs with slashes between short segments, and numbers survive).
fn long_token_run(word: &str) -> bool {
    let mut run = 0;
    let mut digits = false;
    let mut letters = false;
    for c in word.chars() {
        if c.is_ascii_alphanumeric() || "-_.+/=".contains(c) {
            run += 1;
            digits |= c.is_ascii_digit();
            letters |= c.is_ascii_alphabetic();
            if run >= 32 && digits && letters && !word.contains("://") {
                return true;
            }
        } else {
            run = 0;
            digits = false;
            letters = false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_tokens_and_keys_and_keeps_the_rest() {
        let cases = [
            (
                "Authorization: Bearer abc.def",
                "Authorization: Bearer <redacted>",
            ),
            ("token ya29.a0AfH6SMBx rejected", "token <redacted> rejected"),
            ("refresh 1//0gAbCdEf failed", "refresh <redacted> failed"),
            (
                "key -----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n end",
                "key <redacted key>\n end",
            ),
            ("jwt eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.sig", "jwt <redacted>"),
            (
                "secret \"Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo\" here",
                "secret \"<redacted>\" here",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
        let plain = "Quota 'NVIDIA_H100_GPUS' exceeded.  Limit: 0.0 in region us-east4. \
                     See https://cloud.google.com/compute/docs/resource-error";
        assert_eq!(redact(plain), plain);
    }

    #[test]
    fn api_errors_name_the_api_and_say_what_to_do() {
        let e = GcpError::Api {
            service: Service::Billing,
            status: 403,
            reason: "accessNotConfigured".into(),
            message: "Cloud Billing API has not been used in project 123".into(),
            attempts: 1,
        };
        let s = e.to_string();
        assert!(
            s.starts_with("Cloud Billing Catalog API (cloudbilling.googleapis.com) answered HTTP 403"),
            "{s}"
        );
        assert!(
            s.contains("gcloud services enable cloudbilling.googleapis.com"),
            "{s}"
        );
        let e = GcpError::Api {
            service: Service::Compute,
            status: 403,
            reason: "forbidden".into(),
            message: "Required 'compute.machineTypes.list' permission".into(),
            attempts: 1,
        };
        assert!(e.to_string().contains("permission denied"), "{e}");
        let e = GcpError::Api {
            service: Service::Compute,
            status: 503,
            reason: String::new(),
            message: String::new(),
            attempts: 5,
        };
        assert!(
            e.to_string().ends_with("try again later (after 5 attempts)"),
            "{e}"
        );
        assert_eq!(e.status(), Some(503));
    }

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504, 408] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 501] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
