//! The HTTP/1.1 side of the test doubles of Google's APIs (`gcp_double`, `gce_double`):
//! a server on 127.0.0.1 that reads each request (head, then `Content-Length` bytes of
//! body), answers it with the double's `respond`, records it with the status it got, and
//! closes the connection. One request per connection (`Connection: close`), which the
//! real clients (reqwest, google-cloud-auth) handle as they would with Google.

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the double saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub status: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The server; stops when dropped.
pub struct HttpDouble {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpDouble {
    /// Listen on 127.0.0.1 (a free port) and answer every request with `respond`. `what`
    /// names the double in a failure to bind. Needs a running Tokio runtime.
    pub async fn start(
        what: &str,
        respond: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
    ) -> HttpDouble {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind {what}: {e}"));
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (log, respond) = (requests.clone(), Arc::new(respond));
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                let (log, respond) = (log.clone(), respond.clone());
                tokio::spawn(async move {
                    let _ = serve(conn, &log, &*respond).await;
                });
            }
        });
        HttpDouble { addr, requests, task }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request answered so far, in order, with the status it got.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// One connection: read the request, answer it, record it (before the reply is
/// written, so a client that has its reply finds its request recorded).
async fn serve(
    mut conn: TcpStream,
    log: &Mutex<Vec<Recorded>>,
    respond: &(dyn Fn(&Recorded) -> Reply + Send + Sync),
) -> std::io::Result<()> {
    let Some(mut rec) = read_request(&mut conn).await? else {
        return Ok(());
    };
    let reply = respond(&rec);
    rec.status = reply.status;
    log.lock().unwrap().push(rec);
    write_reply(&mut conn, &reply).await
}

/// Read one HTTP/1.1 request (head, then Content-Length bytes of body); `None` when the
/// peer closed first.
async fn read_request(conn: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > 1 << 20 {
            return Ok(None);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), parse_query(q)),
        None => (target.clone(), Vec::new()),
    };
    Ok(Some(Recorded {
        method,
        path,
        query,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        status: 0,
    }))
}

/// Write a reply and close the connection.
async fn write_reply(conn: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    if let Some(s) = reply.retry_after {
        out.push_str(&format!("Retry-After: {s}\r\n"));
    }
    out.push_str("\r\n");
    conn.write_all(out.as_bytes()).await?;
    conn.write_all(reply.body.as_bytes()).await?;
    conn.shutdown().await
}

pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub retry_after: Option<u64>,
}

pub fn json_reply(status: u16, v: Value) -> Reply {
    Reply {
        status,
        content_type: "application/json; charset=UTF-8",
        body: v.to_string(),
        retry_after: None,
    }
}

fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
