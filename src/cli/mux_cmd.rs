//! `flightdeck mux start|status|stop|serve`: the background connection holder.

use super::{Cli, MuxCommand};
use crate::config::Config;
use crate::paths::Paths;
use crate::ssh::mux;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The holder's socket in this user's state dir.
pub fn socket(paths: &Paths) -> PathBuf {
    mux::socket_path(&paths.state_dir)
}

/// Whether a holder of this user answers at `path` (another user's is no holder of ours).
fn answers(path: &std::path::Path) -> bool {
    use std::os::unix::net::UnixStream;
    UnixStream::connect(path).is_ok_and(|s| {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        peer_uid(&s) == Some(me)
    })
}

/// The uid of the process at the other end of `s`, from the kernel (`SO_PEERCRED`).
fn peer_uid(s: &std::os::unix::net::UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we own.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// Start `flightdeck mux serve` in the background unless a holder answers already, and
/// wait (at most 3 s) until it answers. Said up front: a socket path too long for a unix
/// socket, a state directory that is not safely the user's own.
pub fn ensure_running(paths: &Paths) -> Result<bool, String> {
    use std::os::unix::process::CommandExt;
    let sock = socket(paths);
    if let Some(why) = mux::socket_path_problem(&sock) {
        return Err(why);
    }
    crate::paths::private_dir(&paths.state_dir)
        .map_err(|e| format!("the connection holder's state directory: {e}"))?;
    if answers(&sock) {
        return Ok(false);
    }
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["mux", "serve"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Its own session: no terminal, and the shell's hang-up on logout does not reach it.
    // SAFETY: setsid is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| format!("start flightdeck mux: {e}"))?;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_millis(50));
        if answers(&sock) {
            tracing::info!(pid = child.id(), "connection holder started");
            return Ok(true);
        }
    }
    Err(format!(
        "flightdeck mux (pid {}) did not answer at {} within 3 s (see the log)",
        child.id(),
        sock.display()
    ))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// `3m 20s`, `1h 02m`, `45s`.
pub fn span(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// The status as an operator reads it.
pub fn status_text(st: &mux::Status, socket: &std::path::Path) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "connection holder: {} (pid {}) at {}, up {}",
        st.holder,
        st.pid,
        socket.display(),
        span(st.up_s)
    );
    match st.persist_s {
        Some(0) | None if st.holder == "cockpit" => {
            let _ = writeln!(s, "exits with the cockpit");
        }
        Some(0) | None => {
            let _ = writeln!(s, "stays until `flightdeck mux stop`");
        }
        Some(p) => {
            let _ = writeln!(
                s,
                "exits after {} without a command (idle {})",
                span(p),
                span(st.idle_s)
            );
        }
    }
    let _ = writeln!(s, "channels: {} open, {} served", st.active, st.served);
    let _ = writeln!(s, "connections: {}", st.connections.len());
    for c in &st.connections {
        let route = match c.route.strip_suffix('>') {
            Some(jump) => format!("{jump} (jump host)"),
            None => c.route.clone(),
        };
        let _ = writeln!(s, "  {route:<48} {}", span(c.age_s));
    }
    s
}

pub fn run(cmd: &MuxCommand, _cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let sock = socket(paths);
    let client = mux::Client::new(sock.clone());
    match cmd {
        MuxCommand::Start => match ensure_running(paths) {
            Ok(true) => {
                println!("connection holder started at {}", sock.display());
                Ok(ExitCode::SUCCESS)
            }
            Ok(false) => {
                println!("a connection holder already runs at {}", sock.display());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => anyhow::bail!(e),
        },
        MuxCommand::Status { json } => {
            let st = runtime()?.block_on(client.status()).map_err(anyhow::Error::msg)?;
            match (st, json) {
                (Some(st), true) => println!("{}", serde_json::to_string_pretty(&st)?),
                // Routes and errors in the reply are the holder's words: shown, never obeyed.
                (Some(st), false) => print!("{}", crate::term::visible::text(&status_text(&st, &sock))),
                (None, true) => println!("null"),
                (None, false) => println!(
                    "no connection holder runs (commands connect themselves); `flightdeck mux start` starts one"
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        MuxCommand::Stop { force } => stop(&client, &sock, *force),
        MuxCommand::Serve { persist } => {
            let persist = persist.map(|p| p.0).unwrap_or_else(|| {
                Config::load(paths)
                    .map(|c| c.mux_persist())
                    .unwrap_or(crate::config::MUX_PERSIST)
            });
            serve(paths, (!persist.is_zero()).then_some(persist))
        }
    }
}

/// `mux stop`: the holder stops accepting commands at once (new ones connect themselves)
/// and exits once its open channels end, as `ssh -O stop`; with `force` it exits now and
/// their commands lose their connection, as `ssh -O exit`.
pub fn stop(client: &mux::Client, sock: &std::path::Path, force: bool) -> anyhow::Result<ExitCode> {
    match runtime()?
        .block_on(client.stop(force))
        .map_err(anyhow::Error::msg)?
    {
        Some(st) => {
            // It answered, then closes its socket.
            for _ in 0..100 {
                if !answers(sock) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            match st.active {
                0 => println!("connection holder stopped"),
                n if force => println!("connection holder stopped; {n} open channel(s) cut"),
                n => println!(
                    "connection holder stopped accepting commands; it exits when its {n} open channel(s) end (their commands run on; `flightdeck mux stop --force` cuts them)"
                ),
            }
        }
        None => println!("no connection holder runs"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Hold connections and serve the socket until stopped, idle for `persist`, or signalled.
fn serve(paths: &Paths, persist: Option<Duration>) -> anyhow::Result<ExitCode> {
    let sock = socket(paths);
    let rt = runtime()?;
    rt.block_on(async {
        let bound = match mux::bind(&sock) {
            Ok(Some(b)) => b,
            Ok(None) => {
                eprintln!("a connection holder already runs at {}", sock.display());
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => {
                tracing::error!(socket = %sock.display(), "connection holder not started: {e}");
                anyhow::bail!("connection holder not started: {e}");
            }
        };
        tracing::info!(socket = %sock.display(), ?persist, "connection holder serving");
        let resolver = crate::ssh::pool::Resolver::from_env();
        let opts = crate::ssh::client::SshOptions {
            // Unused: each request brings its client's known_hosts files and policy.
            known_hosts: resolver.known_hosts("*"),
            // Each request brings its own policy (never laxer than its client's).
            policy: crate::ssh::known_hosts::HostKeyPolicy::Refuse,
            prompter: std::sync::Arc::new(crate::ssh::client::NoPrompt),
            use_agent: true,
            agent_socket: None,
            keys: Default::default(),
        };
        let holder = mux::Holder::new(
            crate::ssh::pool::Pool::holding(opts),
            mux::HolderKind::Mux,
            persist,
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = holder.serve(bound) => {}
            _ = term.recv() => tracing::info!("connection holder: TERM"),
            _ = tokio::signal::ctrl_c() => tracing::info!("connection holder: interrupted"),
        }
        tracing::info!("connection holder exiting");
        Ok(ExitCode::SUCCESS)
    })
}
