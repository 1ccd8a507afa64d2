//! Commands and shells on GKE nodes: a host-network debug pod per node (what
//! `kubectl debug node/NODE --profile=sysadmin` makes: the node's network, PIDs and IPC,
//! privileged, the node's root at `/host`), created on first use, labelled with the
//! fleet, and removed when the fleet is deleted or by `fleet gc`; commands run in it
//! through the exec API's websocket (channels v5/v4: stdin, stdout, stderr, the exit
//! status, resize).

use super::{object_name, Clients, KubeNode, FLEET_LABEL, ROLE_LABEL};
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

/// The annotation that lets Cluster Autoscaler remove a node a debug pod is on (a bare
/// pod with a hostPath volume otherwise keeps a Spot or flex-start node up: the
/// autoscaler FAQ's "pods not backed by a controller" and "pods with local storage").
pub const SAFE_TO_EVICT: (&str, &str) = ("cluster-autoscaler.kubernetes.io/safe-to-evict", "true");

/// Where a command in a debug pod leaves a mark named by its PID while it runs (and its
/// time of last use): `fleet gc` takes a debug pod with a live mark for one in use.
const USE_DIR: &str = "${HOME:-/root}/.flightdeck-use";

/// The mark every command in a debug pod leaves before it runs (its shell's PID stays
/// the command's through `exec`, a pane's chroot included).
fn use_mark() -> String {
    format!("d=\"{USE_DIR}\"; mkdir -p \"$d\" 2>/dev/null && : > \"$d/$$\" 2>/dev/null; unset d; ")
}

/// How long a debug pod must be unused before `fleet gc` removes it (default 10
/// minutes; `FLIGHTDECK_GKE_DEBUG_IDLE_SECS` overrides).
pub fn debug_idle() -> Duration {
    std::env::var("FLIGHTDECK_GKE_DEBUG_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(600))
}

/// The beginning of a node's debug pod names (the API server adds 5 random characters,
/// as `kubectl debug node` pods get): at most 58 characters, the API's generateName cut.
pub fn debug_pod_prefix(node: &str) -> String {
    format!("{}-", object_name(&format!("fd-debug-{node}"), 57))
}

/// The debug pod for `n`, made by `owner` (as JSON: the API's own shape); the API
/// server names it from `generateName`, so no pod made by anyone else is ever taken for
/// it.
pub fn debug_pod(n: &KubeNode, owner: &super::Owner) -> Pod {
    let mut labels = super::labels(owner, &n.fleet, "debug");
    labels.insert(NODE_LABEL.into(), object_name(&n.node, 63).into());
    let v = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": debug_pod_prefix(&n.node),
            "namespace": n.namespace,
            "labels": labels,
            "annotations": {SAFE_TO_EVICT.0: SAFE_TO_EVICT.1},
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

/// The label naming a debug pod's node.
pub const NODE_LABEL: &str = "flightdeck-node";

/// Whether pod `p` is a debug pod `owner` made for `n` as [`debug_pod`] makes one:
/// flightdeck's labels (managed-by, fleet, role, node, owner), pinned to the node, the
/// fleet's debug image, privileged, the node's PIDs and its root at `/host`. `Err` says
/// what differs; nothing is run in a pod that fails this.
pub fn verify_debug(p: &Pod, n: &KubeNode, owner: &super::Owner) -> Result<(), String> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let mut want: Vec<(String, String)> = super::labels(owner, &n.fleet, "debug")
        .into_iter()
        .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
        .collect();
    want.push((NODE_LABEL.into(), object_name(&n.node, 63)));
    let mut wrong: Vec<String> = want
        .iter()
        .filter(|(k, v)| labels.get(k) != Some(v))
        .map(|(k, v)| format!("label {k} is not {v}"))
        .collect();
    let spec = p.spec.as_ref();
    if spec.and_then(|s| s.node_name.as_deref()) != Some(n.node.as_str()) {
        wrong.push(format!("spec.nodeName is not {}", n.node));
    }
    let c = spec.and_then(|s| s.containers.iter().find(|c| c.name == DEBUG_CONTAINER));
    if c.and_then(|c| c.image.as_deref()) != Some(n.debug_image.as_str()) {
        wrong.push(format!(
            "its {DEBUG_CONTAINER} container's image is not {}",
            n.debug_image
        ));
    }
    if c.and_then(|c| c.security_context.as_ref()?.privileged) != Some(true) {
        wrong.push("it is not privileged".into());
    }
    if spec.and_then(|s| s.host_pid) != Some(true) {
        wrong.push("it does not share the node's PIDs".into());
    }
    let host_root = spec
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .any(|v| v.host_path.as_ref().is_some_and(|h| h.path == "/"));
    if !host_root {
        wrong.push("it does not mount the node's root".into());
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "pod {name} is not a debug pod flightdeck made for node {}: {}; nothing is run in it",
            n.node,
            wrong.join(", ")
        ))
    }
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

/// How pod `p` ended, for a message: its phase with the kubelet's reason and message
/// (a pod refused on its node: `Failed: OutOfnvidia.com/gpu: Pod was rejected: ...`), else
/// with its first ended container's reason and exit code.
pub fn pod_ended(p: &Pod) -> String {
    let (phase, _) = pod_phase(p);
    let status = p.status.as_ref();
    if let Some(reason) = status.and_then(|s| s.reason.clone()) {
        let message = status.and_then(|s| s.message.clone());
        return format!(
            "{phase}: {reason}{}",
            message.map(|m| format!(": {m}")).unwrap_or_default()
        );
    }
    let ended = status.and_then(|s| s.container_statuses.as_ref()).and_then(|cs| {
        cs.iter()
            .find_map(|c| Some((c.name.clone(), c.state.as_ref()?.terminated.clone()?)))
    });
    match ended {
        Some((name, t)) => format!(
            "{phase}: container {name} exited {}{}",
            t.exit_code,
            t.reason.map(|r| format!(" ({r})")).unwrap_or_default()
        ),
        None => phase,
    }
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
                    "Succeeded" | "Failed" => return Err(format!("pod {name} ended ({})", pod_ended(&p))),
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
    /// This process's debug pod on `n`'s node: made on first use (with `generateName`,
    /// never taken over from a name), checked ([`verify_debug`]) and waited for.
    async fn ensure_debug(&self, n: &KubeNode, api: &Api<Pod>) -> Result<String, String> {
        let cell = self
            .debug
            .lock()
            .expect("debug pods lock")
            .entry((n.cluster.clone(), n.node.clone()))
            .or_default()
            .clone();
        let mut ready = cell.lock().await;
        if let Some(name) = ready.as_ref() {
            return Ok(name.clone());
        }
        let owner = self.owner();
        let (name, uid) = self.create_debug(n, api, &owner).await?;
        wait_running(api, &name, DEBUG_START)
            .await
            .map_err(|e| format!("node {}: {e}", n.node))?;
        // What runs is what was made: the same object (uid) and still its shape.
        let p = api.get(&name).await.map_err(|e| super::cluster::why(&e))?;
        if p.metadata.uid.as_deref() != Some(uid.as_str()) {
            return Err(format!(
                "node {}: pod {name} is not the debug pod flightdeck made (another object took its name); nothing is run in it",
                n.node
            ));
        }
        verify_debug(&p, n, &owner)?;
        *ready = Some(name.clone());
        Ok(name)
    }

    /// Create `n`'s debug pod; its name and uid. A 409 (a generated name that was taken)
    /// is answered by creating again, never by using the pod that has the name.
    async fn create_debug(
        &self,
        n: &KubeNode,
        api: &Api<Pod>,
        owner: &super::Owner,
    ) -> Result<(String, String), String> {
        tracing::info!(node = %n.node, "creating the debug pod");
        let mut tries = 0;
        loop {
            tries += 1;
            match api.create(&PostParams::default(), &debug_pod(n, owner)).await {
                Ok(p) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    if let Ok(mut c) = self.created.lock() {
                        c.push((n.cluster.clone(), n.namespace.clone(), name.clone()));
                    }
                    // The API's answer is the pod as stored: check it before waiting on it.
                    verify_debug(&p, n, owner).map_err(|e| format!("node {}: {e}", n.node))?;
                    return Ok((name, uid));
                }
                Err(kube::Error::Api(s)) if s.code == 409 && tries < 3 => {
                    tracing::info!(node = %n.node, "a generated debug pod name was taken; creating again");
                }
                Err(e) => {
                    return Err(format!(
                        "node {}: creating its debug pod: {}",
                        n.node,
                        super::cluster::why(&e)
                    ))
                }
            }
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
                *r = None;
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
                &format!("{}{HOST_PATHS}{command}", use_mark()),
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

/// Delete this owner's pods ([`Clients::owner`]) of `fleet` with `role` (all roles when
/// `None`) in `namespace`: how many went, and the others of that fleet's name there,
/// which are listed and not touched ("pod NAME owned by X").
pub async fn delete_pods(
    clients: &Clients,
    cluster: &super::ClusterRef,
    namespace: &str,
    fleet: &str,
    role: Option<&str>,
) -> Result<(usize, Vec<String>), String> {
    let client = clients.get(cluster).await?;
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let owner = clients.owner();
    let mut sel = format!("{FLEET_LABEL}={fleet}");
    if let Some(r) = role {
        sel.push_str(&format!(",{ROLE_LABEL}={r}"));
    }
    let pods = api
        .list(&ListParams::default().labels(&sel))
        .await
        .map_err(|e| super::cluster::why(&e))?;
    let mut gone = 0;
    let mut others = vec![];
    for p in pods.items {
        let name = p.metadata.name.clone().unwrap_or_default();
        if let Some(whose) = owner.other(&p.metadata.labels.clone().unwrap_or_default()) {
            others.push(format!("pod {name} {whose}"));
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => gone += 1,
            Err(e) if super::cluster::not_found(&e) => {}
            Err(e) => return Err(format!("deleting pod {name}: {}", super::cluster::why(&e))),
        }
    }
    if let Ok(mut d) = clients.debug.lock() {
        d.retain(|(c, _), _| c != cluster);
    }
    Ok((gone, others))
}

/// Whether a debug pod is in use, as `fleet gc` asks.
#[derive(Debug, Clone, PartialEq)]
pub enum DebugUse {
    /// A command or pane of some flightdeck runs in it now.
    Busy,
    /// Unused for this many seconds (since its last command, else since it was made).
    Idle(u64),
}

/// Whether debug pod `p` is in use: a live mark of a command in it ([`USE_DIR`]), else
/// how long since the last one (or since the pod was made). A pod that does not run is
/// idle since it was made; one that cannot be asked counts as busy.
pub async fn debug_use(api: &Api<Pod>, p: &Pod, now: u64) -> DebugUse {
    let made = p
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().and_then(super::view::parse_time))
        .unwrap_or(now);
    let since_made = DebugUse::Idle(now.saturating_sub(made));
    if pod_phase(p).0 != "Running" {
        return since_made;
    }
    let name = p.metadata.name.clone().unwrap_or_default();
    let script = format!(
        "d=\"{USE_DIR}\"; busy=0; last=0; for f in \"$d\"/*; do [ -e \"$f\" ] || continue; \
         if [ -d \"/proc/${{f##*/}}\" ]; then busy=1; t=$(stat -c %Y \"$f\" 2>/dev/null || echo 0); \
         [ \"$t\" -gt \"$last\" ] && last=$t; else t=$(stat -c %Y \"$f\" 2>/dev/null || echo 0); \
         [ \"$t\" -gt \"$last\" ] && last=$t; rm -f \"$f\"; fi; done; echo \"use $busy $last $(date +%s)\""
    );
    let ask = async {
        let mut ch = exec_in(api, &name, DEBUG_CONTAINER, &script, None).await?;
        if let Some(w) = ch.stdin.lock().await.as_mut() {
            let _ = w.shutdown().await;
        }
        let mut out = Vec::new();
        while let Some(o) = ch.rx.recv().await {
            match o {
                Output::Stdout(b) => out.extend(b),
                Output::Exit(_) => break,
                _ => {}
            }
        }
        Ok::<String, String>(String::from_utf8_lossy(&out).into_owned())
    };
    let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(20), ask).await else {
        return DebugUse::Busy;
    };
    parse_use(&out, made).unwrap_or(DebugUse::Busy)
}

/// The check's `use BUSY LAST NOW` line, for a pod made at `made`.
fn parse_use(out: &str, made: u64) -> Option<DebugUse> {
    let line = out.lines().find_map(|l| l.strip_prefix("use "))?;
    let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let [busy, last, now] = f[..] else { return None };
    if busy != 0 {
        return Some(DebugUse::Busy);
    }
    Some(DebugUse::Idle(now.saturating_sub(last.max(made))))
}

/// Run `f` (a CLI command's work on nodes), then remove the debug pods `clients` made
/// for it; on Ctrl-C, remove them and give `None` (the command was interrupted).
pub async fn removing_debug_pods<F: std::future::Future>(clients: &Clients, f: F) -> Option<F::Output> {
    let out = tokio::select! {
        out = f => Some(out),
        _ = tokio::signal::ctrl_c() => None,
    };
    match tokio::time::timeout(Duration::from_secs(20), clients.remove_created()).await {
        Ok(n) if n > 0 => tracing::info!("removed {n} debug pods"),
        Ok(_) => {}
        Err(_) => tracing::warn!("debug pods were not all removed within 20s (`fleet gc` removes idle ones)"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;

    /// Gke review L8: a pod the kubelet refused says why, not only "Failed".
    #[test]
    fn an_ended_pod_says_why() {
        let pod = |status: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": status})).unwrap()
        };
        let refused = pod(
            serde_json::json!({"phase": "Failed", "reason": "OutOfnvidia.com/gpu",
            "message": "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 8, used: 8, capacity: 8"}),
        );
        assert_eq!(
            pod_ended(&refused),
            "Failed: OutOfnvidia.com/gpu: Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 8, used: 8, capacity: 8"
        );
        let exited = pod(
            serde_json::json!({"phase": "Failed", "containerStatuses": [{"name": "test", "image": "i", "imageID": "",
            "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}),
        );
        assert_eq!(pod_ended(&exited), "Failed: container test exited 3 (Error)");
        assert_eq!(
            pod_ended(&pod(serde_json::json!({"phase": "Succeeded"}))),
            "Succeeded"
        );
    }

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

    fn owner() -> crate::cloud::gke::Owner {
        crate::cloud::gke::Owner::new(
            "alice",
            "bastion",
            std::path::Path::new("/home/alice/.local/state/flightdeck"),
        )
    }

    #[test]
    fn debug_pods_are_host_pods_pinned_to_their_node() {
        let n = KubeNode::for_tests("gke-a3u-pool-1-abcd");
        let v = serde_json::to_value(debug_pod(&n, &owner())).unwrap();
        assert_eq!(v["spec"]["nodeName"], "gke-a3u-pool-1-abcd");
        assert_eq!(v["spec"]["hostNetwork"], true);
        assert_eq!(v["spec"]["hostPID"], true);
        assert_eq!(v["metadata"]["labels"][FLEET_LABEL], "a3u");
        assert_eq!(v["metadata"]["labels"][ROLE_LABEL], "debug");
        assert_eq!(v["spec"]["volumes"][0]["hostPath"]["path"], "/");
        assert_eq!(v["metadata"]["generateName"], "fd-debug-gke-a3u-pool-1-abcd-");
        assert!(v["metadata"]["name"].is_null(), "the API server names it");
    }

    /// H3: Cluster Autoscaler may remove the node under a debug pod; D4: the owner's labels.
    #[test]
    fn debug_pods_let_the_autoscaler_go_and_name_their_owner() {
        let n = KubeNode::for_tests("gke-a3u-pool-1-abcd");
        let o = owner();
        let v = serde_json::to_value(debug_pod(&n, &o)).unwrap();
        assert_eq!(
            v["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"],
            "true"
        );
        assert_eq!(v["metadata"]["labels"]["flightdeck-owner"], "alice");
        assert_eq!(v["metadata"]["labels"]["flightdeck-state"], o.state.as_str());
        let long = debug_pod_prefix(&"n".repeat(80));
        assert!(long.len() <= 58 && long.ends_with('-'), "{long}");
    }

    /// D6: a pod is used only when it is the debug pod this owner made for the node.
    #[test]
    fn only_a_true_debug_pod_passes_the_check() {
        let n = KubeNode::for_tests("gke-a3u-pool-1-abcd");
        let o = owner();
        let good = || {
            let mut p = debug_pod(&n, &o);
            p.metadata.name = Some("fd-debug-gke-a3u-pool-1-abcd-x7k2q".into());
            p
        };
        verify_debug(&good(), &n, &o).unwrap();
        let mut squat = good();
        squat.metadata.labels = Some([("app".to_string(), "not-flightdeck".to_string())].into());
        let e = verify_debug(&squat, &n, &o).unwrap_err();
        assert!(e.contains("label app.kubernetes.io/managed-by"), "{e}");
        let mut elsewhere = good();
        elsewhere.spec.as_mut().unwrap().node_name = Some("attacker-node".into());
        assert!(verify_debug(&elsewhere, &n, &o)
            .unwrap_err()
            .contains("spec.nodeName"));
        let mut evil = good();
        evil.spec.as_mut().unwrap().containers[0].image = Some("evil/steal:latest".into());
        assert!(verify_debug(&evil, &n, &o).unwrap_err().contains("image"));
        let mut tame = good();
        tame.spec.as_mut().unwrap().host_pid = Some(false);
        tame.spec.as_mut().unwrap().volumes = Some(vec![]);
        let e = verify_debug(&tame, &n, &o).unwrap_err();
        assert!(e.contains("PIDs") && e.contains("root"), "{e}");
        let bob = crate::cloud::gke::Owner::new("bob", "bastion", std::path::Path::new("/s"));
        assert!(verify_debug(&good(), &n, &bob)
            .unwrap_err()
            .contains("flightdeck-owner"));
    }

    /// M6: a live mark means busy; otherwise idle since the last use, else since made.
    #[test]
    fn use_marks_tell_busy_from_idle() {
        assert_eq!(parse_use("use 1 100 200\n", 50), Some(DebugUse::Busy));
        assert_eq!(parse_use("use 0 100 700\n", 50), Some(DebugUse::Idle(600)));
        assert_eq!(parse_use("use 0 0 700\n", 500), Some(DebugUse::Idle(200)));
        assert_eq!(parse_use("garbage", 0), None);
        assert!(use_mark().contains("$$"));
    }
}
