//! The GCP backend behind the [`Backend`] trait: the settings from the config file, the
//! catalog for prices, and the state store as the [`Recorder`]. Planning needs no
//! credentials; apply, delete, gc and check connect (ADC or `gcp.creds`, the project from
//! `gcp.project_id` or the usual places, `FLIGHTDECK_GCP_COMPUTE_URL`).

use super::auth::Auth;
use super::http::{ClientOptions, Endpoints, GcpClient};
use super::ops::{Compute, WaitOptions};
use super::plan;
use super::provision::{Gcp, Recorder};
use super::settings::{expand_home, GcpSettings};
use crate::catalog::Catalog;
use crate::cloud::{Backend, Plan, Progress};
use crate::fleet::{BackendKind, Fleet, NodeTarget};
use crate::ssh::client::BoxFuture;
use crate::store::{self, FleetRecord, ResourceRecord, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub struct GcpBackend {
    pub settings: GcpSettings,
    pub catalog: Arc<Catalog>,
    pub state_dir: PathBuf,
    pub home: Option<PathBuf>,
    /// SSH for nodes behind `gcp.proxy_jump`.
    pub ssh: Option<crate::reach::Reach>,
    /// Set to cancel an apply.
    pub cancel: crate::cloud::Cancel,
}

/// The state store as a [`Recorder`] for one fleet: every call is one locked transaction.
pub struct StoreRecorder {
    pub store: Store,
    pub fleet: String,
    pub file: Option<PathBuf>,
}

impl StoreRecorder {
    pub fn new(state_dir: &Path, fleet: &str, file: Option<PathBuf>) -> StoreRecorder {
        StoreRecorder {
            store: Store::new(state_dir),
            fleet: fleet.to_string(),
            file,
        }
    }
}

impl Recorder for StoreRecorder {
    fn put(&self, r: &ResourceRecord) -> Result<(), String> {
        self.store
            .update(|s| {
                let pos = s.fleets.iter().position(|f| f.name == self.fleet);
                let f = match pos {
                    Some(i) => &mut s.fleets[i],
                    None => {
                        s.fleets.push(FleetRecord {
                            name: self.fleet.clone(),
                            backend: crate::fleet::BackendKind::Gcp,
                            file: self.file.clone(),
                            nodes: vec![],
                            resources: vec![],
                            created_at: store::now_unix(),
                            applied: None,
                        });
                        s.fleets.last_mut().expect("just pushed")
                    }
                };
                match f.resources.iter_mut().find(|x| x.same(r)) {
                    Some(x) => *x = r.clone(),
                    None => f.resources.push(r.clone()),
                }
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn remove(&self, r: &ResourceRecord) -> Result<(), String> {
        self.store
            .update(|s| {
                if let Some(f) = s.fleets.iter_mut().find(|f| f.name == self.fleet) {
                    f.resources.retain(|x| !x.same(r));
                    if r.kind == "instance" {
                        f.nodes.retain(|n| n.name != r.name);
                    }
                }
            })
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn list(&self) -> Result<Vec<ResourceRecord>, String> {
        let (s, _) = self.store.load().map_err(|e| e.to_string())?;
        Ok(s.fleets
            .into_iter()
            .find(|f| f.name == self.fleet)
            .map(|f| f.resources)
            .unwrap_or_default())
    }
}

impl GcpBackend {
    /// The project id without calling anything: `gcp.project_id`, then the environment,
    /// gcloud's configuration and the credentials file.
    pub fn local_project(&self) -> Option<String> {
        if let Some(p) = &self.settings.project_id {
            return Some(p.clone());
        }
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let creds = super::auth::AdcLocation::from_env()
            .file()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        super::project::local_project(var, read, creds.as_ref()).map(|p| p.id)
    }

    pub fn owner(&self) -> String {
        self.settings
            .owner(std::env::var("USER").ok().filter(|u| !u.is_empty()))
    }

    /// `user:<public key>` for the `ssh-keys` metadata, and the private key to log in with.
    pub fn ssh_key(&self) -> Result<(String, Option<String>), String> {
        let home = self.home.as_deref();
        let candidates: Vec<PathBuf> = match &self.settings.ssh_public_key {
            Some(p) => vec![expand_home(p, home)],
            None => ["id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"]
                .iter()
                .filter_map(|f| home.map(|h| h.join(".ssh").join(f)))
                .collect(),
        };
        for p in &candidates {
            if let Ok(text) = std::fs::read_to_string(p) {
                let key = text
                    .lines()
                    .find(|l| l.starts_with("ssh-") || l.starts_with("ecdsa-"))
                    .map(str::trim);
                let Some(key) = key else {
                    return Err(format!("{}: not an OpenSSH public key", p.display()));
                };
                let private = self
                    .settings
                    .identity_file
                    .as_ref()
                    .map(|f| expand_home(f, home))
                    .or_else(|| p.to_str().and_then(|s| s.strip_suffix(".pub")).map(PathBuf::from));
                return Ok((
                    format!("{}:{key}", self.settings.ssh_user()),
                    private.map(|p| p.display().to_string()),
                ));
            }
        }
        Err(format!(
            "no SSH public key for the new VMs ({} not found): set gcp.ssh_public_key in the config, or create one with `ssh-keygen -t ed25519`",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))
    }

    /// Connect: credentials, project, endpoints, SSH key.
    /// The SSH key, the clients and one token: what an apply needs before anything is
    /// recorded or requested (without credentials every resource's request would fail
    /// with the same long error, and the state would keep a fleet of resources that were
    /// never made). [`Backend::ready`] asks it before the operator confirms.
    async fn connect_with_token(&self) -> Result<Gcp, String> {
        self.ssh_key()?;
        let gcp = self.connect().await?;
        gcp.compute
            .client
            .auth()
            .headers()
            .await
            .map_err(|e| credentials_error(&e.to_string()))?;
        Ok(gcp)
    }

    pub async fn connect(&self) -> Result<Gcp, String> {
        let source = self
            .settings
            .credential_source(self.home.as_deref())
            .map_err(|e| e.to_string())?;
        let auth = Auth::new(source).map_err(|e| e.to_string())?;
        let project = super::project::discover(self.settings.project_id.as_deref(), &auth)
            .await
            .map_err(|e| format!("{e} (or set gcp.project_id in the config)"))?;
        let endpoints = Endpoints::from_env().map_err(|e| e.to_string())?;
        let client = GcpClient::new(auth, endpoints, ClientOptions::default()).map_err(|e| e.to_string())?;
        let mut compute = Compute::new(client, project.id);
        compute.wait = WaitOptions {
            poll: self
                .settings
                .operation_poll_secs
                .map_or(WaitOptions::default().poll, Duration::from_secs_f64),
            timeout: WaitOptions::default().timeout,
        };
        // Only apply needs the key (it checks first); delete, gc and status do not.
        let (ssh_keys, identity_file) = self.ssh_key().unwrap_or_default();
        Ok(Gcp {
            compute,
            settings: self.settings.clone(),
            catalog: self.catalog.clone(),
            owner: self.owner(),
            ssh_keys,
            identity_file,
            ready_wait: Duration::from_secs(self.settings.ssh_wait_secs.unwrap_or(600)),
            ssh_port: 22,
            ssh: self.ssh.clone(),
            cancel: self.cancel.clone(),
        })
    }

    /// The plan, with no API call. Without a project it plans all the same, with
    /// [`PLACEHOLDER_PROJECT`] in the resources' paths, and says so: only apply needs one.
    pub fn plan_fleet(&self, fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<Plan, String> {
        let found = self.local_project();
        let project = found.clone().unwrap_or_else(|| PLACEHOLDER_PROJECT.to_string());
        let cands = plan::candidates(fleet, &self.settings, &self.catalog)?;
        let regions = plan::regions(&cands);
        let subnets = BTreeMap::new();
        let owner = self.owner();
        let keys = self.ssh_key().map(|k| k.0).unwrap_or_default();
        let ctx = plan::Context {
            fleet,
            settings: &self.settings,
            project: &project,
            owner: &owner,
            ssh_keys: &keys,
            regions: &regions,
            subnets: &subnets,
            reservation_placement: None,
        };
        let mut plan = plan::plan(&ctx, &cands, recorded)?;
        if let (Some(r), Some(crate::fleet::spec::Placement::Cluster)) =
            (&fleet.spec.reservation, fleet.spec.placement)
        {
            plan.notes.push(format!(
                "reservation {r}: apply looks up its placement policy, and when it has one the VMs take it and no `{}-placement` is made",
                fleet.name
            ));
        }
        if found.is_none() {
            plan.notes.insert(
                0,
                format!(
                    "no GCP project found: this plan writes `{PLACEHOLDER_PROJECT}` where the project goes; apply needs one (gcp.project_id in the config, GOOGLE_CLOUD_PROJECT, or `gcloud config set project`)"
                ),
            );
        }
        Ok(plan)
    }
}

/// The one error of an apply without usable credentials: what the auth library said, and
/// how to get Application Default Credentials when it does not say so already.
fn credentials_error(why: &str) -> String {
    let mut e = format!("no Google Cloud access token, nothing was changed: {why}");
    if !e.contains("application-default login") {
        e.push_str(
            "; Application Default Credentials come from `gcloud auth application-default login` (or GOOGLE_APPLICATION_CREDENTIALS naming a service-account key file)",
        );
    }
    e
}

/// What a plan made without a GCP project writes where the project goes.
pub const PLACEHOLDER_PROJECT: &str = "PROJECT";

impl Backend for GcpBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Gcp
    }

    fn plan(&self, fleet: &Fleet, recorded: Option<&FleetRecord>) -> Result<Plan, String> {
        self.plan_fleet(fleet, recorded)
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { self.connect_with_token().await.map(drop) })
    }

    fn apply<'a>(
        &'a self,
        fleet: &'a Fleet,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<Vec<NodeTarget>, String>> {
        Box::pin(async move {
            let gcp = self.connect_with_token().await?;
            progress(format!(
                "project {}, owner {}, {} as {}",
                gcp.compute.project,
                gcp.owner,
                gcp.compute.client.endpoints().compute,
                gcp.compute.client.auth().describe()
            ));
            let file = std::fs::canonicalize(&fleet.file).ok();
            let rec = StoreRecorder::new(&self.state_dir, &fleet.name, file);
            gcp.apply(fleet, &rec, progress).await
        })
    }

    fn delete<'a>(
        &'a self,
        record: &'a FleetRecord,
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let gcp = self.connect().await?;
            let rec = StoreRecorder::new(&self.state_dir, &record.name, record.file.clone());
            gcp.delete(&record.name, &rec, progress).await
        })
    }
}
