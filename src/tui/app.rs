//! The event loop. Input arrives from a reader thread, service results from tokio tasks,
//! all through one channel; `update` is the only mutation point; a frame is drawn only
//! when the state is dirty: at once after a key, otherwise at most one per [`FRAME`].
//! Idle, the loop sleeps on the channel and uses no CPU.

use super::services::{ServiceEvent, Services};
use super::state::{Command, Msg, State};
use super::terminal::{self, RestoreGuard};
use super::theme::Theme;
use super::update::update;
use super::views;
use crate::paths::Paths;
use crossterm::event::Event as TermEvent;
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two frames (~30 per second).
pub const FRAME: Duration = Duration::from_millis(33);

/// How often a screen that counts time is redrawn with nothing else happening.
pub const TICK: Duration = Duration::from_secs(1);

/// What reaches the event loop.
pub enum Event {
    Msg(Msg),
    Theme(Result<Theme, String>),
    /// The input reader stopped (the terminal went away).
    InputClosed(String),
    Service(ServiceEvent),
}

pub struct AppOptions {
    pub state: State,
    pub theme: Theme,
    pub paths: Paths,
    pub monochrome: bool,
    /// Accept unknown SSH host keys without asking (`--accept-new-host-keys`).
    pub accept_new_host_keys: bool,
}

/// What the event loop tells a probe (the load benchmark measures key-to-screen with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A key went through `update`.
    KeyApplied,
    /// A frame was drawn and flushed to the terminal.
    FrameDrawn,
}

/// Run the cockpit until the user quits.
pub async fn run(opts: AppOptions) -> anyhow::Result<()> {
    let mut tui = terminal::enter()?;
    let _guard = RestoreGuard;
    let (tx, rx) = mpsc::channel::<Event>(1024);
    spawn_input_reader(tx.clone());
    event_loop(&mut tui, opts, tx, rx, &mut |_| {}).await
}

/// The loop itself, on any crossterm terminal: input and service events arrive on `rx`
/// (`tx` is handed to the services and theme loads), `update` applies them, and a frame is
/// drawn when the state is dirty, at most one per [`FRAME`]. Returns when the user quits.
pub async fn event_loop<W: Write>(
    tui: &mut Terminal<CrosstermBackend<W>>,
    opts: AppOptions,
    tx: mpsc::Sender<Event>,
    mut rx: mpsc::Receiver<Event>,
    probe: &mut dyn FnMut(Mark),
) -> anyhow::Result<()> {
    let AppOptions {
        mut state,
        mut theme,
        paths,
        monochrome,
        accept_new_host_keys,
    } = opts;
    let size = tui.size()?;
    state.size = (size.width, size.height);
    state.job_control = terminal::job_control();
    let (stx, mut srx) = mpsc::channel::<ServiceEvent>(1024);
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(e) = srx.recv().await {
                if tx.send(Event::Service(e)).await.is_err() {
                    return;
                }
            }
        });
    }
    let mut services = Services::new(stx, paths.clone(), accept_new_host_keys);
    services.run(Command::LoadFleets);
    let panic_after_first_frame = std::env::var_os("FLIGHTDECK_TEST_PANIC").is_some();
    let mut last_draw: Option<Instant> = None;
    // A key waits for no frame pacing: what the operator typed is drawn at once; output
    // and telemetry are drawn at most once per FRAME.
    let mut key_since_draw = false;
    tracing::info!(width = size.width, height = size.height, theme = %theme.name, "cockpit started");

    loop {
        let event = if state.dirty {
            let due = match last_draw {
                Some(t) if !key_since_draw => t + FRAME,
                _ => Instant::now(),
            };
            if Instant::now() >= due {
                draw(tui, &state, &theme)?;
                state.dirty = false;
                key_since_draw = false;
                last_draw = Some(Instant::now());
                probe(Mark::FrameDrawn);
                if panic_after_first_frame {
                    panic!("FLIGHTDECK_TEST_PANIC is set: panicking after the first frame");
                }
                continue;
            }
            tokio::select! {
                e = rx.recv() => e,
                _ = tokio::time::sleep_until(due) => continue,
            }
        } else if state.ticking() {
            // Something on screen counts time (a fleet operation's elapsed time): a frame
            // each second while it runs; otherwise the loop sleeps until an event.
            tokio::select! {
                e = rx.recv() => e,
                _ = tokio::time::sleep(TICK) => {
                    state.dirty = true;
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(first) = event else { break };
        // Take everything already queued before drawing again.
        let mut batch = vec![first];
        while let Ok(e) = rx.try_recv() {
            batch.push(e);
        }
        for e in batch {
            let msg = match e {
                Event::Msg(m) => m,
                Event::Theme(Ok(t)) => {
                    let name = t.name.clone();
                    theme = t;
                    Msg::ThemeLoaded(Ok(name))
                }
                Event::Theme(Err(e)) => Msg::ThemeLoaded(Err(e)),
                Event::InputClosed(why) => anyhow::bail!("terminal input closed: {why}"),
                Event::Service(ServiceEvent::Msg(m)) => m,
                Event::Service(ServiceEvent::OpenPanes(record)) => match services.open_panes(&record) {
                    Ok(tiles) => Msg::Panes(crate::tui::panes::Msg::Opened {
                        fleet: record.name.clone(),
                        tiles,
                    }),
                    Err(e) => Msg::Panes(crate::tui::panes::Msg::Failed(e)),
                },
            };
            let key = matches!(msg, Msg::Key(_));
            let commands = update(&mut state, msg);
            if key {
                key_since_draw = true;
                probe(Mark::KeyApplied);
            }
            for command in commands {
                match command {
                    Command::Quit => {
                        tracing::info!("quit");
                        services.shutdown().await;
                        return Ok(());
                    }
                    Command::Suspend => {
                        tracing::info!("suspend");
                        terminal::suspend(tui)?;
                        update(&mut state, Msg::Resumed);
                    }
                    Command::Yank(text) => {
                        let out = tui.backend_mut();
                        let _ = out.write_all(crate::term::osc52(&text).as_bytes());
                        let _ = Write::flush(out);
                    }
                    Command::LoadTheme(name) => {
                        let (tx, paths) = (tx.clone(), paths.clone());
                        tokio::task::spawn_blocking(move || {
                            let result = Theme::load(&name, &paths, monochrome).map_err(|e| e.to_string());
                            let _ = tx.blocking_send(Event::Theme(result));
                        });
                    }
                    other => services.run(other),
                }
            }
        }
    }
    Ok(())
}

fn draw<W: Write>(
    tui: &mut Terminal<CrosstermBackend<W>>,
    state: &State,
    theme: &Theme,
) -> anyhow::Result<()> {
    crossterm::queue!(tui.backend_mut(), BeginSynchronizedUpdate)?;
    tui.draw(|frame| views::draw(state, theme, frame))?;
    crossterm::execute!(tui.backend_mut(), EndSynchronizedUpdate)?;
    Ok(())
}

/// Blocking terminal reads on their own thread, forwarded as messages.
fn spawn_input_reader(tx: mpsc::Sender<Event>) {
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || loop {
            let event = match crossterm::event::read() {
                Ok(TermEvent::Key(k)) => Event::Msg(Msg::Key(k)),
                Ok(TermEvent::Resize(w, h)) => Event::Msg(Msg::Resize(w, h)),
                Ok(TermEvent::Paste(s)) => Event::Msg(Msg::Paste(s)),
                Ok(TermEvent::Mouse(m)) => Event::Msg(Msg::Mouse(m)),
                Ok(_) => continue,
                Err(e) => {
                    let _ = tx.blocking_send(Event::InputClosed(e.to_string()));
                    return;
                }
            };
            if tx.blocking_send(event).is_err() {
                return;
            }
        })
        .expect("spawn the input thread");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::Keymap;
    use crate::tui::state::View;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Run the loop on a sink terminal for `secs`, then quit; the frames it drew.
    async fn frames_in(state: State, secs: f64) -> usize {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::resolve(|k| (k == "FLIGHTDECK_HOME").then(|| dir.path().to_path_buf())).unwrap();
        let mut tui = Terminal::with_options(
            CrosstermBackend::new(std::io::sink()),
            ratatui::TerminalOptions {
                viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, 80, 24)),
            },
        )
        .unwrap();
        let (tx, rx) = mpsc::channel(64);
        let quit = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            let k = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
            let _ = quit.send(Event::Msg(Msg::Key(k))).await;
        });
        let frames = Arc::new(AtomicUsize::new(0));
        let counted = frames.clone();
        let opts = AppOptions {
            state,
            theme: Theme::default_theme(),
            paths,
            monochrome: false,
            accept_new_host_keys: false,
        };
        event_loop(&mut tui, opts, tx, rx, &mut |m| {
            if m == Mark::FrameDrawn {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .await
        .unwrap();
        frames.load(Ordering::Relaxed)
    }

    /// While a fleet operation runs in the Fleets view its elapsed time moves: a frame a
    /// second; otherwise an idle loop draws its first frame and nothing more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_running_operation_is_redrawn_each_second_and_idle_is_not() {
        let mut state = State::new(Keymap::defaults(), vec![], "dark".into());
        state.view = View::Fleets;
        let idle = frames_in(state.clone(), 2.5).await;
        state.fleet_ops.running = Some("apply fleets/mega.yaml".into());
        let ticking = frames_in(state, 3.5).await;
        assert!(idle <= 2, "idle: {idle} frames");
        assert!(ticking >= 3, "running: {ticking} frames in 3.5 s");
    }
}
