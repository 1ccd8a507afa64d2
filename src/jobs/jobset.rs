//! Jobs as JobSets on a GKE fleet's cluster: one pod per rank (the JobSet's indexed
//! Job, exclusive per node), with Kueue's queue and DWS flex-start when the fleet has
//! them, the pod profile of the job's GPUDirect flavour, and the RxDM sidecar where
//! TCPX/TCPXO needs it. Status, stop, logs and follow read the pods; the plain
//! Kubernetes calls are [`crate::cloud::gke::jobs`]'s.

use super::runner::{self, FollowEvent, JobNode, JobRunner, Launch, PerRank, Progress};
use super::spec::Job;
use crate::cloud::gke::jobs::{
    create_jobset, delete_jobset, jobset_exists, jobset_name, rank_pod, JOB_LABEL,
};
use crate::cloud::gke::{self, object_name, Clients, KubeNode, FLEET_LABEL, MANAGED_BY, ROLE_LABEL};
use crate::detach::Status;
use crate::fleet::{FleetSpec, NodeTarget};
use crate::nccl::GpuDirect;
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, JobRecord};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use tokio::sync::mpsc;

/// The JobSet runner: a GKE fleet's jobs through its cluster's Kubernetes API.
pub struct JobSets {
    clients: Clients,
}

impl JobSets {
    pub fn new(clients: Clients) -> JobSets {
        JobSets { clients }
    }
}

impl JobRunner for JobSets {
    fn ranks(
        &self,
        fleet: &str,
        nodes: Vec<NodeTarget>,
        spec: Option<&FleetSpec>,
        wanted: Option<usize>,
    ) -> Vec<NodeTarget> {
        match spec.and_then(|s| s.gke.as_ref()) {
            // Ranks need no recorded node (a flex-start pool may be at zero).
            Some(g) => {
                let n = wanted.unwrap_or(nodes.len().max(1));
                gke::backend::Target::from_gke(g).pad(fleet, &nodes, n)
            }
            None => nodes,
        }
    }

    fn job_nodes(&self, record: &JobRecord, fleet: &FleetRecord) -> Result<Vec<JobNode>, String> {
        let t = gke::backend::Target::of_record(fleet)?;
        runner::job_nodes(record, &t.pad(&fleet.name, &fleet.nodes, record.nodes.len()))
    }

    fn admits(&self, job: &Job) -> Result<(), String> {
        if !job.uploads.is_empty() {
            return Err(format!(
                "{}: `files:` are not uploaded to GKE pods: put them in the job's image (`image:`) or a volume (`volumes:` with `gcs: BUCKET` or `pvc: CLAIM`)",
                job.file.display()
            ));
        }
        super::spec::refusal(job, &job.not_on_gke, "a GKE fleet cannot run this")
    }

    /// The pods get their GPUDirect pieces from the cluster (the device plugin, the NCCL
    /// installer's mounts, the RxDM sidecar): what can be seen from here is whether the
    /// flavour's installer DaemonSet runs at all, said as a warning when it does not
    /// (`gke::nccl::missing_installer`). A cluster that cannot be asked is no refusal.
    fn preflight<'a>(
        &'a self,
        nodes: &'a [JobNode],
        profile: GpuDirect,
        _: &'a [String],
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if profile == GpuDirect::None {
                return Ok(());
            }
            let Some(node) = nodes.iter().find_map(|n| n.target.kube()) else {
                return Ok(());
            };
            let Ok(client) = self.clients.get(&node.cluster).await else {
                return Ok(());
            };
            let installed = gke::nccl::kube_system_daemonsets(client).await;
            if let Some(w) = installed.and_then(|d| gke::nccl::missing_installer(profile, &d)) {
                progress(w);
            }
            Ok(())
        })
    }

    /// One JobSet for every rank: each rank starts with it (pid 0: a pod has none to
    /// record) or fails with it.
    fn launch<'a>(&'a self, l: Launch<'a>, progress: Progress<'a>) -> BoxFuture<'a, PerRank<u32>> {
        Box::pin(async move {
            let spec = l.spec.and_then(|s| s.gke.clone()).unwrap_or_default();
            let flex = l.spec.and_then(|s| s.flex_start).map(|d| d.0);
            match start(
                &self.clients,
                l.job,
                l.id,
                l.nodes,
                l.profile,
                l.env,
                &spec,
                flex,
                progress,
            )
            .await
            {
                Ok(()) => l.nodes.iter().map(|n| (n.rank, Ok(0))).collect(),
                Err(e) => l.nodes.iter().map(|n| (n.rank, Err(e.clone()))).collect(),
            }
        })
    }

    fn follow(
        &self,
        id: String,
        nodes: Vec<(JobNode, usize)>,
        tx: mpsc::Sender<FollowEvent>,
    ) -> BoxFuture<'static, ()> {
        Box::pin(follow(self.clients.clone(), id, nodes, tx))
    }

    fn status<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(status(&self.clients, id, nodes))
    }

    /// The pods' grace is the job's `stop_grace`, set in the JobSet when it started.
    fn stop<'a>(&'a self, id: &'a str, nodes: &'a [JobNode], _: u32) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(stop(&self.clients, id, nodes))
    }

    /// A JobSet starts whole or not at all: a start cut off is ended by deleting the
    /// JobSet, should it have been made.
    fn fence<'a>(&'a self, id: &'a str, nodes: &'a [JobNode], _: u32) -> BoxFuture<'a, PerRank<Status>> {
        Box::pin(stop(&self.clients, id, nodes))
    }

    fn tail<'a>(
        &'a self,
        id: &'a str,
        nodes: &'a [JobNode],
        lines: Option<usize>,
    ) -> BoxFuture<'a, PerRank<String>> {
        Box::pin(tail(&self.clients, id, nodes, lines))
    }

    /// The lines of each rank's pod log.
    fn line_counts<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, Vec<(usize, usize)>> {
        Box::pin(async move {
            tail(&self.clients, id, nodes, None)
                .await
                .into_iter()
                .map(|(rank, text)| (rank, text.map_or(0, |t| t.lines().count())))
                .collect()
        })
    }
}

/// The JobSet's one replicated job.
pub const REPLICATED_JOB: &str = "workers";
/// The job's container.
pub const CONTAINER: &str = "job";
/// The image a job runs in when its file names none (PyTorch with NCCL, as the GKE
/// training guides use).
pub const DEFAULT_IMAGE: &str = "nvcr.io/nvidia/pytorch:25.01-py3";

/// The environment of a job's pod: torchrun's (MASTER_ADDR is the first pod through the
/// JobSet's headless service, NODE_RANK its completion index), dstack's and SkyPilot's
/// names, then the NCCL profile and the job's own `env` in the script.
pub fn pod_env(job: &Job, id: &str, nodes: usize, namespace: &str) -> Vec<serde_json::Value> {
    let js = jobset_name(id);
    let master = format!("{js}-{REPLICATED_JOB}-0-0.{js}.{namespace}.svc.cluster.local");
    let port = super::launch::DEFAULT_MASTER_PORT.to_string();
    let index = serde_json::json!({"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}});
    let n = nodes.to_string();
    // The keys of existing Secrets the job names, under the prefix its own env has.
    let mut env: Vec<serde_json::Value> = job
        .secret_env
        .iter()
        .map(|(k, r)| serde_json::json!({"name": format!("{ENV_PREFIX}{k}"), "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}}))
        .collect();
    let lit = |k: &str, v: &str| serde_json::json!({"name": k, "value": v});
    for (k, v) in [
        ("FLIGHTDECK_JOB", job.name.as_str()),
        ("FLIGHTDECK_JOB_ID", id),
        ("MASTER_ADDR", master.as_str()),
        ("NNODES", n.as_str()),
        ("DSTACK_RUN_NAME", job.name.as_str()),
        ("DSTACK_MASTER_NODE_IP", master.as_str()),
        ("DSTACK_NODES_NUM", n.as_str()),
        ("SKYPILOT_TASK_ID", id),
        ("SKYPILOT_NUM_NODES", n.as_str()),
    ] {
        env.push(lit(k, v));
        if k == "MASTER_ADDR" {
            // The job's own MASTER_PORT comes from its Secret, as its whole env does.
            env.push(match job.env.iter().any(|(k, _)| k == "MASTER_PORT") {
                true => serde_json::json!({"name": "MASTER_PORT", "valueFrom": {"secretKeyRef": {"name": env_secret_name(id), "key": "MASTER_PORT"}}}),
                false => lit("MASTER_PORT", &port),
            });
        }
    }
    for k in ["NODE_RANK", "DSTACK_NODE_RANK", "SKYPILOT_NODE_RANK"] {
        env.push(serde_json::json!({"name": k, "valueFrom": index}));
    }
    env
}

/// The pod's script: GPUS_PER_NODE and the totals, the NCCL profile, the job's env, its
/// working directory, then its commands.
pub fn pod_script(job: &Job, gpus: u32, nodes: usize, profile: &[String]) -> String {
    use crate::detach::quote;
    use crate::shellenv::{export, Value};
    let mut s = String::from(crate::shellenv::HEADER);
    let world = format!("$(({nodes} * GPUS_PER_NODE))");
    for line in [
        export("GPUS_PER_NODE", Value::Literal(&gpus.to_string())),
        export("WORLD_SIZE", Value::Expr(&world)),
        export("DSTACK_GPUS_PER_NODE", Value::Expr("$GPUS_PER_NODE")),
        export("DSTACK_GPUS_NUM", Value::Expr("$WORLD_SIZE")),
        export("SKYPILOT_NUM_GPUS_PER_NODE", Value::Expr("$GPUS_PER_NODE")),
    ] {
        s.push_str(&line);
        s.push('\n');
    }
    for line in profile {
        s.push_str(line);
        s.push('\n');
    }
    // The job's env by name only: its values are in the job's Secret, which the
    // container gets under ENV_PREFIX (envFrom); exported here after the profile, so
    // that the job's values win over the profile's as on SSH nodes.
    let names = job
        .env
        .iter()
        .map(|(k, _)| k)
        .chain(job.secret_env.iter().map(|(k, _)| k));
    for k in names {
        let from = format!("{ENV_PREFIX}{k}");
        s.push_str(&export(k, Value::Expr(&format!("${from}"))));
        s.push_str(&format!("; unset {from}\n"));
    }
    if let Some(wd) = &job.spec.working_dir {
        s.push_str(&format!("mkdir -p {0} && cd {0} || exit 126\n", quote(wd)));
    }
    s.push_str("set +u\n");
    for c in job.spec.commands.iter().flatten() {
        s.push_str(c);
        s.push('\n');
    }
    s
}

/// A job pod's CPU request when its file's `resources` give none.
pub const DEFAULT_CPU: &str = "1";
/// A job pod's memory request when its file's `resources` give none.
pub const DEFAULT_MEMORY: &str = "4Gi";
/// How long a finished JobSet stays (seconds).
pub const TTL_AFTER_FINISHED: u64 = 86_400;

/// The prefix of the job's env in its container's environment (envFrom of its Secret),
/// until the pod's script exports each under its own name.
pub const ENV_PREFIX: &str = "FLIGHTDECK_ENV_";

/// The name of job `id`'s Secret holding its env.
pub fn env_secret_name(id: &str) -> String {
    format!("{}-env", jobset_name(id))
}

/// The labels of job `id`'s JobSet and Secret.
fn job_labels(id: &str, fleet: &str) -> serde_json::Value {
    serde_json::json!({
        MANAGED_BY.0: MANAGED_BY.1,
        FLEET_LABEL: fleet,
        ROLE_LABEL: "job",
        JOB_LABEL: object_name(id, 63),
    })
}

/// Job `id`'s Secret holding its env (none when it has none), labelled as its JobSet
/// and owned by it (uid `owner`), so that it goes when the JobSet does. The values
/// travel here and nowhere else: not in the pod spec, not on a command line.
pub fn env_secret(job: &Job, id: &str, at: &Placement, owner: &str) -> Option<serde_json::Value> {
    if job.env.is_empty() {
        return None;
    }
    let data: serde_json::Map<String, serde_json::Value> = job
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    Some(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": env_secret_name(id),
            "namespace": at.node.namespace,
            "labels": job_labels(id, &at.node.fleet),
            "ownerReferences": [{
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": jobset_name(id),
                "uid": owner,
            }],
        },
        "type": "Opaque",
        "stringData": data,
    }))
}

/// Where and how a GKE job runs.
pub struct Placement<'a> {
    pub node: &'a KubeNode,
    pub pools: &'a [String],
    pub queue: Option<&'a str>,
    /// The nodes are DWS flex-start (GKE's `cloud.google.com/gke-flex-start` label, or
    /// the fleet file's `flex_start`): the longest run, in seconds, Kueue's
    /// ProvisioningRequest asks for.
    pub flex_start: Option<u64>,
    /// The fleet file's `gke.topology`: Kueue TAS for jobs whose file names none.
    pub topology: Option<&'a crate::fleet::spec::Topology>,
}

/// The JobSet for `job` (id `id`) on `nodes` pods of `gpus` GPUs each.
pub fn jobset(
    job: &Job,
    id: &str,
    nodes: usize,
    gpus: u32,
    profile: &[String],
    at: &Placement,
) -> serde_json::Value {
    let js = jobset_name(id);
    let mut labels = job_labels(id, &at.node.fleet);
    let mut annotations = serde_json::Map::new();
    if let Some(q) = at.queue {
        labels["kueue.x-k8s.io/queue-name"] = q.into();
    }
    if let Some(secs) = at.flex_start {
        // Kueue passes `provreq.kueue.x-k8s.io/*` to the ProvisioningRequest's parameters.
        annotations.insert(
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds".into(),
            secs.to_string().into(),
        );
    }
    let mut selector = serde_json::Map::new();
    if at.flex_start.is_some() {
        selector.insert("cloud.google.com/gke-flex-start".into(), "true".into());
    }
    // One rank per node: a required anti-affinity between the JobSet's own pods on the
    // hostname. Not JobSet's `exclusive-topology`: that is one *Job* per domain, and its
    // webhook pins every follower pod of the one Job to the leader's node (xpk and
    // gpu-recipes use no exclusive placement for GPUs). It selects on flightdeck's own
    // label of the pod template, not JobSet's `jobset-name`, which the JobSet controller
    // adds to the pods only: Kueue's ProvisioningRequest PodTemplate is the template as
    // written, and without the label there the autoscaler would pack two ranks on one
    // node (gke review L1).
    let mut affinity = serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {JOB_LABEL: object_name(id, 63)}}, "topologyKey": "kubernetes.io/hostname"}
    ]}});
    if !at.pools.is_empty() {
        affinity["nodeAffinity"] = serde_json::json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": gke::view::POOL_LABEL, "operator": "In", "values": at.pools}]}
        ]}});
    }
    let image = job.spec.image.clone().unwrap_or_else(|| DEFAULT_IMAGE.into());
    // A memory volume at /dev/shm, as every GKE GPU manifest mounts one, bounded by the
    // node's memory (a training job's data loaders use more than an NCCL test's).
    let (shm, shm_mount) = gke::nccl::shared_memory(job.requests.shm.as_deref());
    // CPU and memory requests, so that the pods are not BestEffort (evicted first): the
    // job's `resources`, else a floor.
    let requests = serde_json::json!({
        "cpu": job.requests.cpu.clone().unwrap_or_else(|| DEFAULT_CPU.into()),
        "memory": job.requests.memory.clone().unwrap_or_else(|| DEFAULT_MEMORY.into()),
    });
    // The job's volumes: Cloud Storage buckets through the GCS FUSE CSI driver (an
    // ephemeral CSI volume and the pod annotation that has GKE inject gcsfuse's
    // sidecar, as Google's "Access Cloud Storage buckets with the Cloud Storage FUSE CSI
    // driver" and gpu-recipes' JobSets give them) and PersistentVolumeClaims.
    let mut volumes = vec![shm];
    let mut mounts = vec![shm_mount];
    let mut pod_annotations = serde_json::Map::new();
    for (i, v) in job.volumes.iter().enumerate() {
        use super::spec::VolumeSource;
        let (name, vol) = match &v.source {
            VolumeSource::Gcs {
                bucket,
                mount_options,
            } => {
                pod_annotations.insert("gke-gcsfuse/volumes".into(), "true".into());
                let mut attrs = serde_json::json!({"bucketName": bucket});
                if let Some(o) = mount_options {
                    attrs["mountOptions"] = o.clone().into();
                }
                let name = format!("gcs-{i}");
                let vol = serde_json::json!({"name": name, "csi": {
                    "driver": "gcsfuse.csi.storage.gke.io", "readOnly": v.read_only, "volumeAttributes": attrs}});
                (name, vol)
            }
            VolumeSource::Pvc { claim } => {
                let name = format!("pvc-{i}");
                let vol = serde_json::json!({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": v.read_only}});
                (name, vol)
            }
        };
        volumes.push(vol);
        mounts.push(serde_json::json!({"name": name, "mountPath": v.path, "readOnly": v.read_only}));
    }
    let env_from = match job.env.is_empty() {
        true => serde_json::json!([]),
        false => serde_json::json!([{"prefix": ENV_PREFIX, "secretRef": {"name": env_secret_name(id)}}]),
    };
    let mut set = serde_json::json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": js,
            "namespace": at.node.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "suspend": at.queue.is_some(),
            "network": {"enableDNSHostnames": true, "subdomain": js},
            "failurePolicy": {"maxRestarts": 0},
            // Finished JobSets go after a day, as xpk and cluster-toolkit set a TTL (their
            // pods and logs with them; flightdeck's record keeps the outcome).
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": nodes,
                        "completions": nodes,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,
                        "template": {
                            "metadata": {"labels": {FLEET_LABEL: at.node.fleet, ROLE_LABEL: "job", JOB_LABEL: object_name(id, 63)},
                                         "annotations": pod_annotations},
                            "spec": {
                                "restartPolicy": "Never",
                                "nodeSelector": selector,
                                "affinity": affinity,
                                "tolerations": [{"key": gke::GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
                                                {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}],
                                "terminationGracePeriodSeconds": job.stop_grace(),
                                "volumes": volumes,
                                "containers": [{
                                    "name": CONTAINER,
                                    "image": image,
                                    "command": ["bash", "-c", pod_script(job, gpus, nodes, profile)],
                                    "env": pod_env(job, id, nodes, &at.node.namespace),
                                    "envFrom": env_from,
                                    "resources": {"limits": {gke::GPU_RESOURCE: gpus.to_string()}, "requests": requests},
                                    "volumeMounts": mounts,
                                }],
                            },
                        },
                    },
                },
            }],
        },
    });
    if let Some(t) = job.spec.topology.as_ref().or(at.topology) {
        with_topology(&mut set, t);
    }
    if let Some(secs) = job.max_duration {
        // `max_duration`: the Job's activeDeadlineSeconds ends its pods past it.
        set["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] = secs.into();
    }
    let pod = &mut set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
    if let Some(sa) = &job.spec.service_account {
        // The KSA the pods run as: Workload Identity's, for Google APIs (GCS FUSE too).
        pod["serviceAccountName"] = sa.clone().into();
    }
    set
}

/// Kueue Topology Aware Scheduling on the pod template (a checked `t`; an unchecked
/// one is left out).
pub fn with_topology(set: &mut serde_json::Value, t: &crate::fleet::spec::Topology) {
    let Ok((key, level)) = t.annotation() else {
        return;
    };
    let meta = &mut set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"];
    if !meta["annotations"].is_object() {
        meta["annotations"] = serde_json::json!({});
    }
    meta["annotations"][key] = level.into();
}

/// Start `job` (id `id`) as a JobSet on the GKE fleet of `nodes` (one pod per rank).
#[allow(clippy::too_many_arguments)]
pub async fn start(
    clients: &Clients,
    job: &Job,
    id: &str,
    nodes: &[JobNode],
    profile: crate::nccl::GpuDirect,
    profile_lines: &[String],
    spec: &crate::fleet::spec::Gke,
    flex_start: Option<u64>,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(), String> {
    let node = nodes
        .first()
        .and_then(|n| n.target.kube().cloned())
        .ok_or("no GKE nodes")?;
    let client = clients.get(&node.cluster).await?;
    // The first recorded node says whether the pool is DWS flex-start and how many GPUs
    // a node has; with none recorded (a flex-start pool at zero), the fleet file's
    // `flex_start` and the job's `gpus_per_node` do.
    let n0 = match nodes
        .iter()
        .find_map(|n| n.target.kube().filter(|k| !k.node.is_empty()))
    {
        Some(k) => {
            let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
            Some(
                api.get(&k.node)
                    .await
                    .map_err(|e| format!("node {}: {}", k.node, gke::cluster::why(&e)))?,
            )
        }
        None => None,
    };
    let labels = n0
        .as_ref()
        .and_then(|n| n.metadata.labels.clone())
        .unwrap_or_default();
    // DWS flex-start runs at most 7 days.
    let flex_labelled = labels
        .get("cloud.google.com/gke-flex-start")
        .is_some_and(|v| v == "true");
    let flex_start = flex_start.or(flex_labelled.then_some(604_800));
    let gpus = match (job.spec.gpus_per_node, &n0) {
        (Some(g), _) => g,
        (None, Some(n)) => gke::view::gpus_allocatable(n) as u32,
        (None, None) => {
            return Err(format!(
                "{}: the fleet has no node recorded to count GPUs on: give `gpus_per_node`",
                job.file.display()
            ))
        }
    }
    .max(1);
    let at = Placement {
        node: &node,
        pools: spec.node_pools.as_deref().unwrap_or(&[]),
        queue: spec.queue.as_deref(),
        flex_start,
        topology: spec.topology.as_ref(),
    };
    let set = job_jobset(
        job,
        id,
        nodes.len(),
        gpus,
        profile_lines,
        &at,
        profile,
        spec.networks.as_deref(),
    )?;
    create_jobset(clients, &node, &set).await?;
    // The env's Secret, owned by the JobSet (its uid): the pods wait for it (the kubelet
    // starts no container whose envFrom Secret is missing) and it goes with the JobSet.
    if let Err(e) = create_env_secret(&client, &clients.owner(), job, id, &at).await {
        let _ = delete_jobset(clients, &node, id).await;
        return Err(e);
    }
    progress(format!(
        "JobSet {} created in namespace {}: {} of {} GPUs{}{}",
        jobset_name(id),
        node.namespace,
        crate::words::plural(nodes.len(), "pod"),
        gpus,
        at.queue.map(|q| format!(", Kueue queue {q}")).unwrap_or_default(),
        flex_start
            .map(|s| format!(", DWS flex-start (at most {s} s)"))
            .unwrap_or_default()
    ));
    Ok(())
}

/// Create job `id`'s env Secret, owned by its JobSet (just created), with the owner
/// labels its JobSet has (what `job run --dry-run` prints, and `fleet gc` reads).
async fn create_env_secret(
    client: &kube::Client,
    owner: &gke::Owner,
    job: &Job,
    id: &str,
    at: &Placement<'_>,
) -> Result<(), String> {
    use kube::api::{DynamicObject, PostParams};
    if job.env.is_empty() {
        return Ok(());
    }
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &at.node.namespace,
        &crate::cloud::gke::jobs::jobset_resource(),
    );
    let uid = sets
        .get(&jobset_name(id))
        .await
        .map_err(|e| format!("JobSet {}: {}", jobset_name(id), gke::cluster::why(&e)))?
        .metadata
        .uid
        .ok_or_else(|| format!("JobSet {} has no uid", jobset_name(id)))?;
    let mut secret = env_secret(job, id, at, &uid).expect("a job with env has a Secret");
    gke::stamp_owner(owner, &mut secret);
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(secret).map_err(|e| e.to_string())?;
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &at.node.namespace);
    api.create(&PostParams::default(), &secret)
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "creating Secret {} (the job's env): {}",
                env_secret_name(id),
                gke::cluster::why(&e)
            )
        })
}

/// A job's pod template for its GPUDirect flavour, as the GKE guides set pods up: the
/// multi-network annotations (RDMA, TCPX, TCPXO), the flavour's host mounts (gIB at
/// `/usr/local/gib`, TCPXO's aperture devices, the driver: what its NCCL profile names)
/// and, for TCPX/TCPXO, the RxDM daemon as a native sidecar with the socket directory
/// NCCL's plugin uses.
pub fn with_gpudirect(set: &mut serde_json::Value, profile: crate::nccl::GpuDirect) {
    with_gpudirect_on(set, profile, None).expect("the guides' networks fit their flavour")
}

/// Job `id`'s JobSet as `job run` creates it and `job run --dry-run` prints it: [`jobset`]
/// with the flavour's networks (the fleet file's `gke.networks`, else the guides'),
/// mounts and sidecar ([`with_gpudirect_on`]).
#[allow(clippy::too_many_arguments)]
pub fn job_jobset(
    job: &Job,
    id: &str,
    nodes: usize,
    gpus: u32,
    profile_lines: &[String],
    at: &Placement,
    profile: crate::nccl::GpuDirect,
    networks: Option<&[String]>,
) -> Result<serde_json::Value, String> {
    if (job.spec.topology.is_some() || at.topology.is_some()) && at.queue.is_none() {
        // Only Kueue reads the podset-*-topology annotations: without a LocalQueue
        // the pods would go to the scheduler as if no topology had been asked for.
        return Err(format!(
            "{}: `topology:` is Kueue's Topology Aware Scheduling and needs a Kueue queue: give the fleet's `gke.queue` (a LocalQueue whose ClusterQueue's flavor has a Topology), or drop `topology:`",
            job.file.display()
        ));
    }
    let mut set = jobset(job, id, nodes, gpus, profile_lines, at);
    with_gpudirect_on(&mut set, profile, networks).map_err(|e| format!("{}: {e}", job.file.display()))?;
    Ok(set)
}

/// [`with_gpudirect`] on the GPU-NIC `networks` a fleet file names (`gke.networks`).
pub fn with_gpudirect_on(
    set: &mut serde_json::Value,
    profile: crate::nccl::GpuDirect,
    networks: Option<&[String]>,
) -> Result<(), String> {
    let r = gke::nccl::recipe(profile);
    if profile == crate::nccl::GpuDirect::None {
        return Ok(());
    }
    let interfaces = gke::nccl::interfaces(profile, networks)?;
    let pod = &mut set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    let mut annotations = serde_json::Map::new();
    if let Some(i) = interfaces {
        annotations.insert("networking.gke.io/default-interface".into(), "eth0".into());
        annotations.insert("networking.gke.io/interfaces".into(), i.into());
    }
    if let Some((sidecar, (key, devices), volumes)) = gke::nccl::rxdm_parts(&r) {
        gke::nccl::one_rxdm_per_node(pod);
        annotations.insert(key, devices.into());
        pod["spec"]["initContainers"] = serde_json::json!([sidecar]);
        append(&mut pod["spec"]["volumes"], volumes);
        append(
            &mut pod["spec"]["containers"][0]["volumeMounts"],
            vec![serde_json::json!({"name": "rxdm-uds", "mountPath": "/run/tcpx"})],
        );
    }
    let (host_volumes, host_mounts): (Vec<_>, Vec<_>) = r
        .mounts
        .iter()
        .enumerate()
        .map(|(i, (host, at))| {
            let name = format!("gpudirect-{i}");
            (
                serde_json::json!({"name": name, "hostPath": {"path": host}}),
                serde_json::json!({"name": name, "mountPath": at}),
            )
        })
        .unzip();
    append(&mut pod["spec"]["volumes"], host_volumes);
    append(&mut pod["spec"]["containers"][0]["volumeMounts"], host_mounts);
    match pod["metadata"]["annotations"].as_object_mut() {
        Some(a) => a.extend(annotations),
        None => pod["metadata"]["annotations"] = serde_json::Value::Object(annotations),
    }
    Ok(())
}

/// `items` after the list at `at` (a list made where there was none).
fn append(at: &mut serde_json::Value, items: Vec<serde_json::Value>) {
    match at {
        serde_json::Value::Array(v) => v.extend(items),
        _ => *at = serde_json::Value::Array(items),
    }
}

/// A terminated container's exit code, or whether it still runs.
fn container_state(p: &Pod) -> Status {
    let cs = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == CONTAINER));
    match cs.and_then(|c| c.state.as_ref()) {
        Some(s) if s.terminated.is_some() => Status::exited(s.terminated.as_ref().map_or(0, |t| t.exit_code)),
        Some(s) if s.running.is_some() => Status::Running { pid: 0 },
        _ => match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => Status::exited(0),
            Some("Failed") => Status::exited(1),
            _ => Status::Starting,
        },
    }
}

/// Each rank's status: its pod's container (Starting while Kueue holds the job or the
/// pod is being scheduled; Missing when the JobSet is gone).
pub async fn status(clients: &Clients, id: &str, nodes: &[JobNode]) -> Vec<(usize, Result<Status, String>)> {
    let mut out = vec![];
    for n in nodes {
        let r = async {
            let k = n.target.kube().ok_or("not a GKE node")?;
            let api: Api<Pod> = Api::namespaced(clients.get(&k.cluster).await?, &k.namespace);
            match rank_pod(&api, id, n.rank).await? {
                Some(p) => Ok(container_state(&p)),
                // No pod: Kueue holds the job or its pods are being made, or it is gone.
                None if jobset_exists(clients, k, id).await? => Ok(Status::Starting),
                None => Ok(Status::Missing),
            }
        }
        .await;
        out.push((n.rank, r));
    }
    out
}

/// Stop the job: delete its JobSet (its pods get TERM, then KILL after their grace).
pub async fn stop(clients: &Clients, id: &str, nodes: &[JobNode]) -> Vec<(usize, Result<Status, String>)> {
    let before = status(clients, id, nodes).await;
    let Some(k) = nodes.first().and_then(|n| n.target.kube().cloned()) else {
        return vec![];
    };
    let res = delete_jobset(clients, &k, id).await;
    before
        .into_iter()
        .map(|(r, s)| {
            let s = match (&res, s) {
                (Err(e), _) => Err(e.clone()),
                (Ok(()), Ok(st @ Status::Exited { .. })) => Ok(st),
                // Stopped: 143, as TERM ends a process.
                (Ok(()), _) => Ok(Status::exited(143)),
            };
            (r, s)
        })
        .collect()
}

/// The last `lines` lines of each rank's pod log (all with `None`), Cloud Logging
/// prefixes stripped.
pub async fn tail(
    clients: &Clients,
    id: &str,
    nodes: &[JobNode],
    lines: Option<usize>,
) -> Vec<(usize, Result<String, String>)> {
    let mut out = vec![];
    for n in nodes {
        let r = async {
            let k = n.target.kube().ok_or("not a GKE node")?;
            let api: Api<Pod> = Api::namespaced(clients.get(&k.cluster).await?, &k.namespace);
            let pod = rank_pod(&api, id, n.rank)
                .await?
                .ok_or_else(|| format!("rank {} has no pod (yet, or any more)", n.rank))?;
            let lp = LogParams {
                container: Some(CONTAINER.into()),
                tail_lines: lines.map(|l| l as i64),
                ..LogParams::default()
            };
            let text = api
                .logs(&pod.metadata.name.unwrap_or_default(), &lp)
                .await
                .map_err(|e| gke::cluster::why(&e))?;
            Ok(text
                .lines()
                .map(|l| format!("{}\n", strip_cloud_logging(l)))
                .collect::<String>())
        }
        .await;
        out.push((n.rank, r));
    }
    out
}

/// A log line without Cloud Logging's prefix (`INFO 2025-09-09T16:10:48.6Z
/// [resource.labels.containerName: job] `), as `gcloud logging read` and log exports
/// print lines; other lines as they are.
pub fn strip_cloud_logging(line: &str) -> &str {
    let mut parts = line.splitn(3, ' ');
    let (Some(sev), Some(ts), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return line;
    };
    let severity = matches!(
        sev,
        "DEFAULT" | "DEBUG" | "INFO" | "NOTICE" | "WARNING" | "ERROR" | "CRITICAL" | "ALERT" | "EMERGENCY"
    );
    if !severity || gke::view::parse_time(ts).is_none() {
        return line;
    }
    match rest.strip_prefix("[resource.labels.") {
        Some(r) => r.split_once("] ").map_or(rest, |(_, text)| text),
        None => rest,
    }
}

/// Follow ranks `watched` (each from its line `from`, 1 = the first) through their
/// pods' logs until each container ends: lines without their API timestamps or Cloud
/// Logging prefixes, then the exit code. A stream that drops is opened again from the
/// last line's time; a job Kueue holds is waited for.
pub async fn follow(
    clients: Clients,
    id: String,
    watched: Vec<(JobNode, usize)>,
    tx: mpsc::Sender<FollowEvent>,
) {
    let mut tasks = vec![];
    for (n, from) in watched {
        let (clients, id, tx) = (clients.clone(), id.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(error) = follow_rank(&clients, &id, &n, from, &tx).await {
                let _ = tx.send(FollowEvent::Lost { rank: n.rank, error }).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn follow_rank(
    clients: &Clients,
    id: &str,
    n: &JobNode,
    from: usize,
    tx: &mpsc::Sender<FollowEvent>,
) -> Result<(), String> {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let k = n.target.kube().ok_or("not a GKE node")?;
    let rank = n.rank;
    let mut seen = 0usize;
    let mut since: Option<String> = None;
    let mut dropped = 0u32;
    loop {
        // The client afresh on each (re)connect: one made from an ADC token is made
        // again before its hour is up, so a follow of many hours keeps going (review M5).
        let api: Api<Pod> = Api::namespaced(clients.get(&k.cluster).await?, &k.namespace);
        let Some(pod) = rank_pod(&api, id, rank).await? else {
            if !jobset_exists(clients, k, id).await? {
                return Err(format!("JobSet {} is gone", jobset_name(id)));
            }
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            continue;
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        if matches!(container_state(&pod), Status::Starting) {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        }
        let lp = LogParams {
            container: Some(CONTAINER.into()),
            follow: true,
            timestamps: true,
            since_time: since
                .as_deref()
                .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok()),
            ..LogParams::default()
        };
        match api.log_stream(&name, &lp).await {
            Ok(stream) => {
                let mut lines = stream.lines();
                while let Some(line) = lines.try_next().await.unwrap_or(None) {
                    let (ts, text) = line.split_once(' ').unwrap_or(("", line.as_str()));
                    // Lines at the resume time were read before the drop.
                    if since.as_deref().is_some_and(|s| ts <= s) {
                        continue;
                    }
                    since = Some(ts.to_string());
                    seen += 1;
                    if seen < from {
                        continue;
                    }
                    let text = strip_cloud_logging(text).to_string();
                    if tx.send(FollowEvent::Line { rank, text }).await.is_err() {
                        return Ok(());
                    }
                }
            }
            Err(e) => {
                dropped += 1;
                if dropped > 30 {
                    return Err(format!("pod {name}: logs: {}", gke::cluster::why(&e)));
                }
            }
        }
        // The stream ended: the container did, or the connection dropped.
        let now = api.get(&name).await.map_err(|e| gke::cluster::why(&e))?;
        if let Status::Exited { code, started, ended } = container_state(&now) {
            let _ = tx
                .send(FollowEvent::Exit {
                    rank,
                    code: Some(code),
                    started,
                    ended,
                })
                .await;
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's pods get what their NCCL profile names from the host, as GKE's manifests
    /// mount it: gIB at /usr/local/gib (RDMA), the aperture devices (TCPXO). Job pods
    /// mounted none of it, so `NCCL_NET=gIB` found no plugin.
    #[test]
    fn job_pods_mount_what_their_nccl_profile_names() {
        use crate::nccl::GpuDirect;
        for (flavour, host, at) in [
            (GpuDirect::Rdma, "/home/kubernetes/bin/gib", "/usr/local/gib"),
            (GpuDirect::Tcpxo, "/dev/aperture_devices", "/dev/aperture_devices"),
        ] {
            let mut set = serde_json::json!({"spec": {"replicatedJobs": [{"template": {"spec": {"template": {
                "spec": {"containers": [{"name": "job"}], "volumes": []}
            }}}}]}});
            with_gpudirect(&mut set, flavour);
            let pod = &set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
            let vol = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["hostPath"]["path"] == host)
                .unwrap_or_else(|| panic!("{flavour:?}: no volume of {host}: {pod}"));
            let mounted = pod["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == vol["name"] && m["mountPath"] == at);
            assert!(mounted, "{flavour:?}: {host} not at {at}: {pod}");
        }
    }

    #[test]
    fn tcpxo_jobs_get_their_networks_and_the_rxdm_sidecar() {
        let mut set = serde_json::json!({"spec": {"replicatedJobs": [{"template": {"spec": {"template": {
            "metadata": {}, "spec": {"containers": [{"name": "job"}]}}}}}]}});
        with_gpudirect(&mut set, crate::nccl::GpuDirect::Tcpxo);
        let pod = &set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
        assert_eq!(pod["spec"]["initContainers"][0]["name"], "tcpxo-daemon");
        assert_eq!(
            pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
            "/run/tcpx"
        );
        assert!(pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
            .as_str()
            .unwrap()
            .contains("vpc1"));
        let mut plain = set.clone();
        plain["spec"]["replicatedJobs"][0]["template"]["spec"]["template"] =
            serde_json::json!({"metadata": {}, "spec": {}});
        with_gpudirect(&mut plain, crate::nccl::GpuDirect::None);
        assert_eq!(
            plain["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"],
            serde_json::json!({})
        );
    }

    /// The job's pods mount a memory volume at /dev/shm (as every GKE GPU manifest
    /// does), kept beside the RxDM sidecar's volumes for TCPX/TCPXO.
    #[test]
    fn job_pods_mount_memory_at_dev_shm() {
        let job = crate::jobs::spec::parse(
            std::path::Path::new("j.yaml"),
            "type: task\nname: t\nfleet: f\ncommands: [train]\n",
            &|_| None,
        )
        .unwrap();
        let node = KubeNode::for_tests("gke-a3-1");
        let at = Placement {
            node: &node,
            pools: &[],
            queue: None,
            flex_start: None,
            topology: None,
        };
        for flavour in [
            GpuDirect::None,
            GpuDirect::Rdma,
            GpuDirect::Tcpx,
            GpuDirect::Tcpxo,
        ] {
            let mut set = jobset(&job, "t-1", 2, 8, &[], &at);
            with_gpudirect(&mut set, flavour);
            let pod = &set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"];
            let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
            let shm = mounts
                .iter()
                .find(|m| m["mountPath"] == "/dev/shm")
                .unwrap_or_else(|| panic!("{flavour:?}: nothing at /dev/shm"));
            let vols = pod["volumes"].as_array().unwrap();
            let vol = vols.iter().find(|v| v["name"] == shm["name"]).unwrap();
            assert_eq!(vol["emptyDir"]["medium"], "Memory", "{flavour:?}");
            for m in mounts {
                assert!(
                    vols.iter().any(|v| v["name"] == m["name"]),
                    "{flavour:?}: {m} mounts no volume"
                );
            }
            if flavour == GpuDirect::Tcpxo {
                assert!(mounts.iter().any(|m| m["mountPath"] == "/run/tcpx"));
                assert!(vols.iter().any(|v| v["name"] == "rxdm-sys"));
            }
        }
    }

    #[test]
    fn cloud_logging_prefixes_are_stripped() {
        let l = "INFO 2025-09-09T16:10:48.6Z [resource.labels.containerName: job] Step: 1 | Time: 27.02s | TFLOPs/s/GPU: 513.3 | Tokens/s/GPU: 1213 | Loss: 1.3697";
        assert_eq!(
            strip_cloud_logging(l),
            "Step: 1 | Time: 27.02s | TFLOPs/s/GPU: 513.3 | Tokens/s/GPU: 1213 | Loss: 1.3697"
        );
        assert_eq!(
            strip_cloud_logging("INFO step 3 loss 2.1"),
            "INFO step 3 loss 2.1"
        );
        assert_eq!(strip_cloud_logging("plain line"), "plain line");
    }
}
