//! Commands and shells on GKE nodes: a host-network debug pod per node (what
//! `kubectl debug node/NODE --profile=sysadmin` makes: the node's network, PIDs and IPC,
//! privileged, the node's root at `/host`), created on first use, labelled with the
//! fleet, and removed when the fleet is deleted or by `fleet gc`; commands run in it
//! through the exec API's websocket (channels v5/v4: stdin, stdout, stderr, the exit
//! status, resize).

use super::{object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::node::{BoxFuture, Channel, ChannelError, ChannelRead, ChannelWrite, Output, Signal};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, AttachedProcess, DeleteParams, ListParams, PostParams, TerminalSize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, Mutex};

/// The debug pod's container.
pub const DEBUG_CONTAINER: &str = "debug";
/// How long a debug pod may take to run (an image pull on a fresh node).
const DEBUG_START: Duration = Duration::from_secs(180);

/// Host tools seen from the debug pod: GKE installs the NVIDIA driver's binaries and
/// libraries under /home/kubernetes/bin/nvidia on the node (COS and Ubuntu images).
pub const HOST_PATHS: &str = "PATH=$PATH:/host/home/kubernetes/bin/nvidia/bin; \
LD_LIBRARY_PATH=/host/home/kubernetes/bin/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; \
export PATH LD_LIBRARY_PATH; ";

/// The shell a pane gets: the node's own (a chroot into `/host`, as operators do after
/// `kubectl debug node`), else the debug image's.
pub const PANE_SHELL: &str = "if [ -x /host/bin/bash ]; then exec chroot /host /bin/bash -l; fi; \
if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l";

/// The debug pod's name for a node.
pub fn debug_pod_name(node: &str) -> String {
    object_name(&format!("fd-debug-{node}"), 63)
}

/// The debug pod for `n` (as JSON: the API's own shape).
pub fn debug_pod(n: &KubeNode) -> Pod {
    let v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": debug_pod_name(&n.node),
            "namespace": n.namespace,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                FLEET_LABEL: n.fleet,
                ROLE_LABEL: "debug",
                "flightdeck-node": object_name(&n.node, 63),
            },
        },
        "spec": {
            "nodeName": n.node,
            "hostNetwork": true,
            "hostPID": true,
            "hostIPC": true,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "enableServiceLinks": false,
            "tolerations": [{"operator": "Exists"}],
            "priorityClassName": null,
            "containers": [{
                "name": DEBUG_CONTAINER,
                "image": n.debug_image,
                "command": ["sleep", "infinity"],
                "stdin": true,
                "securityContext": {"privileged": true},
                "volumeMounts": [{"name": "host-root", "mountPath": "/host"}],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
            }],
            "volumes": [{"name": "host-root", "hostPath": {"path": "/"}}],
        },
    });
    serde_json::from_value(v).expect("the debug pod is a Pod")
}

/// The phase of a pod, and why it is not running when it waits.
pub fn pod_phase(p: &Pod) -> (String, Option<String>) {
    let status = p.status.as_ref();
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()))
        .map(|w| {
            format!(
                "{}{}",
                w.reason.clone().unwrap_or_default(),
                w.message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
            )
        })
        .or_else(|| {
            status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                })
                .map(|c| {
                    format!(
                        "{}{}",
                        c.reason.clone().unwrap_or_default(),
                        c.message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
                    )
                })
        });
    (phase, waiting)
}

/// Wait until pod `name` runs; `Err` says what it is stuck on.
pub async fn wait_running(api: &Api<Pod>, name: &str, limit: Duration) -> Result<(), String> {
    let start = Instant::now();
    let mut last: Option<String>;
    loop {
        match api.get_opt(name).await {
            Ok(Some(p)) => {
                let (phase, waiting) = pod_phase(&p);
                match phase.as_str() {
                    "Running" => return Ok(()),
                    "Succeeded" | "Failed" => return Err(format!("pod {name} ended ({phase})")),
                    _ => last = waiting.or(Some(phase)),
                }
            }
            Ok(None) => return Err(format!("pod {name} is gone")),
            Err(e) => last = Some(super::cluster::why(&e)),
        }
        if start.elapsed() > limit {
            return Err(format!(
                "pod {name} did not run within {}s: {}",
                limit.as_secs(),
                last.unwrap_or_default()
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

impl Clients {
    /// The debug pod on `n`'s node, created if missing (or ended) and waited for.
    async fn ensure_debug(&self, n: &KubeNode, api: &Api<Pod>) -> Result<String, String> {
        let name = debug_pod_name(&n.node);
        let cell = self
            .debug
            .lock()
            .expect("debug pods lock")
            .entry((n.cluster.clone(), n.node.clone()))
            .or_default()
            .clone();
        let mut ready = cell.lock().await;
        if *ready {
            return Ok(name);
        }
        match api.get_opt(&name).await.map_err(|e| super::cluster::why(&e))? {
            Some(p) if matches!(pod_phase(&p).0.as_str(), "Succeeded" | "Failed") => {
                let _ = api.delete(&name, &DeleteParams::default()).await;
                wait_gone(api, &name).await?;
                self.create_debug(n, api).await?;
            }
            Some(_) => {}
            None => self.create_debug(n, api).await?,
        }
        wait_running(api, &name, DEBUG_START)
            .await
            .map_err(|e| format!("node {}: {e}", n.node))?;
        *ready = true;
        Ok(name)
    }

    async fn create_debug(&self, n: &KubeNode, api: &Api<Pod>) -> Result<(), String> {
        tracing::info!(node = %n.node, "creating the debug pod");
        match api.create(&PostParams::default(), &debug_pod(n)).await {
            Ok(_) => {
                if let Ok(mut c) = self.created.lock() {
                    c.push((n.cluster.clone(), n.namespace.clone(), debug_pod_name(&n.node)));
                }
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(format!(
                "node {}: creating its debug pod: {}",
                n.node,
                super::cluster::why(&e)
            )),
        }
    }

    /// Remove the debug pods these clients created (the cockpit, as it quits); how many
    /// went.
    pub async fn remove_created(&self) -> usize {
        let made: Vec<(super::ClusterRef, String, String)> = self
            .created
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        let mut gone = 0;
        for (cluster, ns, pod) in made {
            let Ok(client) = self.get(&cluster).await else {
                continue;
            };
            let api: Api<Pod> = Api::namespaced(client, &ns);
            match api.delete(&pod, &DeleteParams::default()).await {
                Ok(_) => gone += 1,
                Err(e) if super::cluster::not_found(&e) => {}
                Err(e) => tracing::warn!("debug pod {pod} was not removed: {}", super::cluster::why(&e)),
            }
        }
        if let Ok(mut d) = self.debug.lock() {
            d.clear();
        }
        gone
    }

    /// Forget that `n`'s debug pod runs (it was deleted under us).
    fn forget_debug(&self, n: &KubeNode) {
        if let Some(cell) = self
            .debug
            .lock()
            .expect("debug pods lock")
            .get(&(n.cluster.clone(), n.node.clone()))
        {
            if let Ok(mut r) = cell.try_lock() {
                *r = false;
            }
        }
    }

    /// Run `command` (a shell command line) on `n`'s node in its debug pod.
    pub async fn exec(&self, n: &KubeNode, command: &str) -> Result<Channel, String> {
        self.attach(n, command, None).await.map(KubeChannel::into_channel)
    }

    /// A login shell on a TTY of `cols` x `rows` on `n`'s node.
    pub async fn shell(&self, n: &KubeNode, cols: u16, rows: u16) -> Result<Channel, String> {
        self.attach(n, PANE_SHELL, Some((cols, rows)))
            .await
            .map(KubeChannel::into_channel)
    }

    async fn attach(
        &self,
        n: &KubeNode,
        command: &str,
        tty: Option<(u16, u16)>,
    ) -> Result<KubeChannel, String> {
        let client = self.get(&n.cluster).await?;
        let api: Api<Pod> = Api::namespaced(client, &n.namespace);
        if let Some(pod) = &n.pod {
            let c = n.container.as_deref().unwrap_or(DEBUG_CONTAINER);
            return exec_in(&api, pod, c, command, tty)
                .await
                .map_err(|e| format!("pod {pod}: {e}"));
        }
        let mut tried = false;
        loop {
            let pod = self.ensure_debug(n, &api).await?;
            match exec_in(
                &api,
                &pod,
                DEBUG_CONTAINER,
                &format!("{HOST_PATHS}{command}"),
                tty,
            )
            .await
            {
                Ok(ch) => return Ok(ch),
                Err(e) if !tried && (not_there(&e)) => {
                    tracing::info!(node = %n.node, "debug pod gone ({e}); making it again");
                    self.forget_debug(n);
                    tried = true;
                }
                Err(e) => return Err(format!("node {}: {e}", n.node)),
            }
        }
    }
}

fn not_there(e: &str) -> bool {
    e.contains("NotFound") || e.contains("not found") || e.contains("ended") || e.contains("not running")
}

async fn wait_gone(api: &Api<Pod>, name: &str) -> Result<(), String> {
    for _ in 0..100 {
        match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(e) => return Err(super::cluster::why(&e)),
        }
    }
    Err(format!("pod {name} was not deleted within 20s"))
}

/// Run `command` with `sh -c` in `container` of pod `pod`: stdin, stdout, stderr (or a
/// TTY of the given size) and the exit status.
async fn exec_in(
    api: &Api<Pod>,
    pod: &str,
    container: &str,
    command: &str,
    tty: Option<(u16, u16)>,
) -> Result<KubeChannel, String> {
    let ap = AttachParams {
        container: Some(container.to_string()),
        stdin: true,
        stdout: true,
        stderr: tty.is_none(),
        tty: tty.is_some(),
        max_stdin_buf_size: Some(64 * 1024),
        max_stdout_buf_size: Some(64 * 1024),
        max_stderr_buf_size: Some(64 * 1024),
    };
    let mut proc = api
        .exec(pod, ["sh", "-c", command], &ap)
        .await
        .map_err(|e| super::cluster::why(&e))?;
    Ok(KubeChannel::new(&mut proc, tty).with_process(proc))
}

/// A command's channel on the exec API: outputs to read, stdin and a resize to write.
struct KubeChannel {
    rx: mpsc::Receiver<Output>,
    stdin: Arc<Mutex<Option<tokio::io::WriteHalf<tokio::io::SimplexStream>>>>,
    resize: Option<ResizeSender>,
    proc: Option<Arc<AttachedProcess>>,
}

/// kube-rs's resize sender.
type ResizeSender = futures::channel::mpsc::Sender<TerminalSize>;

/// How to write to a command on the exec API: stdin, its end, a resize, a close.
struct KubeWriter {
    stdin: Arc<Mutex<Option<tokio::io::WriteHalf<tokio::io::SimplexStream>>>>,
    resize: Option<ResizeSender>,
    proc: Option<Arc<AttachedProcess>>,
}

struct KubeReader {
    rx: mpsc::Receiver<Output>,
    _proc: Option<Arc<AttachedProcess>>,
}

impl KubeChannel {
    fn new(proc: &mut AttachedProcess, tty: Option<(u16, u16)>) -> KubeChannel {
        let (tx, rx) = mpsc::channel(64);
        let stdout = proc.stdout();
        let stderr = proc.stderr();
        let status = proc.take_status();
        let resize = if tty.is_some() { proc.terminal_size() } else { None };
        let stdin = proc.stdin();
        tokio::spawn(async move {
            let pump = |r: Option<tokio::io::ReadHalf<tokio::io::SimplexStream>>,
                        err: bool,
                        tx: mpsc::Sender<Output>| async move {
                let Some(mut r) = r else { return };
                let mut buf = vec![0u8; 32 * 1024];
                loop {
                    match r.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            let data = buf[..n].to_vec();
                            let out = if err {
                                Output::Stderr(data)
                            } else {
                                Output::Stdout(data)
                            };
                            if tx.send(out).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            };
            tokio::join!(pump(stdout, false, tx.clone()), pump(stderr, true, tx.clone()));
            if let Some(status) = status {
                if let Some(s) = status.await {
                    let _ = tx.send(Output::Exit(exit_code(&s))).await;
                }
            }
        });
        let mut ch = KubeChannel {
            rx,
            stdin: Arc::new(Mutex::new(stdin)),
            resize,
            proc: None,
        };
        if let (Some((cols, rows)), Some(r)) = (tty, ch.resize.as_mut()) {
            let _ = r.try_send(TerminalSize {
                width: cols,
                height: rows,
            });
        }
        ch
    }

    fn with_process(mut self, proc: AttachedProcess) -> KubeChannel {
        self.proc = Some(Arc::new(proc));
        self
    }

    fn into_channel(self) -> Channel {
        Channel::new(
            KubeReader {
                rx: self.rx,
                _proc: self.proc.clone(),
            },
            KubeWriter {
                stdin: self.stdin,
                resize: self.resize,
                proc: self.proc,
            },
        )
    }
}

impl ChannelRead for KubeReader {
    fn next(&mut self) -> BoxFuture<'_, Option<Output>> {
        Box::pin(async move { self.rx.recv().await })
    }
}

impl ChannelWrite for KubeWriter {
    fn data<'a>(&'a self, bytes: &'a [u8]) -> BoxFuture<'a, Result<(), ChannelError>> {
        Box::pin(async move {
            let mut g = self.stdin.lock().await;
            let w = g.as_mut().ok_or(ChannelError::Closed("stdin"))?;
            w.write_all(bytes)
                .await
                .map_err(|e| ChannelError::Failed(e.to_string()))
        })
    }

    /// The end of stdin: the exec API's v5 CLOSE for stdin.
    fn eof(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            if let Some(mut w) = self.stdin.lock().await.take() {
                let _ = w.shutdown().await;
            }
            Ok(())
        })
    }

    /// The exec API carries no signals: the command's own time limit (`timeout` on the
    /// node, as flightdeck wraps a limited command) or a close ends it.
    fn signal(&self, _sig: Signal) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async {
            Err(ChannelError::Unsupported(
                "the Kubernetes exec API carries no signals",
            ))
        })
    }

    fn resize(&self, cols: u16, rows: u16) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            use futures::SinkExt;
            match &self.resize {
                Some(r) => r
                    .clone()
                    .send(TerminalSize {
                        width: cols,
                        height: rows,
                    })
                    .await
                    .map_err(|e| ChannelError::Failed(e.to_string())),
                None => Ok(()),
            }
        })
    }

    /// Close the websocket: the API server ends the exec stream (a TTY's shell gets a
    /// hangup).
    fn close(&self) -> BoxFuture<'_, Result<(), ChannelError>> {
        Box::pin(async move {
            self.stdin.lock().await.take();
            if let Some(p) = &self.proc {
                p.abort();
            }
            Ok(())
        })
    }
}

/// The exit code in an exec's final Status: 0 for Success; for NonZeroExitCode the code
/// in its `ExitCode` cause; otherwise (the API could not run it) 126, as a shell says
/// for a command that cannot run.
pub fn exit_code(s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> i32 {
    if s.status.as_deref() == Some("Success") {
        return 0;
    }
    s.details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
        .and_then(|c| c.message.as_deref()?.trim().parse().ok())
        .unwrap_or(126)
}

/// Delete flightdeck's pods of `fleet` with `role` (all roles when `None`) in `namespace`;
/// returns how many there were.
pub async fn delete_pods(
    clients: &Clients,
    cluster: &super::ClusterRef,
    namespace: &str,
    fleet: &str,
    role: Option<&str>,
) -> Result<usize, String> {
    let client = clients.get(cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let mut sel = format!("{FLEET_LABEL}={fleet}");
    if let Some(r) = role {
        sel.push_str(&format!(",{ROLE_LABEL}={r}"));
    }
    let pods = api
        .list(&ListParams::default().labels(&sel))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    let n = pods.items.len();
    for p in pods.items {
        if let Some(name) = p.metadata.name {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if super::cluster::not_found(&e) => {}
                Err(e) => return Err(format!("deleting pod {name}: {}", super::cluster::why(&e))),
            }
        }
    }
    if let Ok(mut d) = clients.debug.lock() {
        d.retain(|(c, _), _| c != cluster);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    #[test]
    fn exit_codes_come_from_the_status() {
        let ok: Status = serde_json::from_str(r#"{"metadata":{},"status":"Success"}"#).unwrap();
        assert_eq!(exit_code(&ok), 0);
        let three: Status = serde_json::from_str(
            r#"{"status":"Failure","reason":"NonZeroExitCode","message":"x","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#,
        )
        .unwrap();
        assert_eq!(exit_code(&three), 3);
        let other: Status = serde_json::from_str(
            r#"{"status":"Failure","reason":"InternalError","message":"no such container"}"#,
        )
        .unwrap();
        assert_eq!(exit_code(&other), 126);
    }

    #[test]
    fn debug_pods_are_host_pods_pinned_to_their_node() {
        let n = KubeNode::for_tests("gke-a3u-pool-1-abcd");
        let v = serde_json::to_value(debug_pod(&n)).unwrap();
        assert_eq!(v["spec"]["nodeName"], "gke-a3u-pool-1-abcd");
        assert_eq!(v["spec"]["hostNetwork"], true);
        assert_eq!(v["spec"]["hostPID"], true);
        assert_eq!(v["metadata"]["labels"][FLEET_LABEL], "a3u");
        assert_eq!(v["metadata"]["labels"][ROLE_LABEL], "debug");
        assert_eq!(v["spec"]["volumes"][0]["hostPath"]["path"], "/");
        assert_eq!(v["metadata"]["name"], "fd-debug-gke-a3u-pool-1-abcd");
    }
}
