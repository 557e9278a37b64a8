//! The launcher's web dashboard: a live page of the job (its graph, tasks, back-pressure,
//! workers, collectives, checkpoints and output), the JSON it is drawn from, and
//! `/metrics` for Prometheus — all on one address, served by axum on a thread of its own
//! from what the job master and the output forwarders record
//! ([`crate::observatory`]). The page is embedded: nothing is fetched from elsewhere.
//!
//! | path | what |
//! |---|---|
//! | `/` | the page, updating every second |
//! | `/api/v1/job` | name, state, attempt, elapsed, graph, checkpoints |
//! | `/api/v1/tasks` | every task instance's records in and out and rates; edges' back-pressure |
//! | `/api/v1/workers` | rank, host, pid, CPU %, resident memory, heartbeat age, state |
//! | `/api/v1/collectives` | calls, bytes, p50 / p99 latency by operation and algorithm |
//! | `/api/v1/logs` | the tail of the workers' output |
//! | `/metrics` | OpenMetrics when asked for, else the Prometheus text format 0.0.4 |

mod prometheus;

use std::net::SocketAddr;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::observatory::{global, State};
use crate::{Error, Result};

/// The page, with its styles and script inline.
const PAGE: &str = include_str!("index.html");

/// Where `heddle run --dashboard` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DashboardAddr {
    /// No dashboard.
    Off,
    /// Serve on this address (port 0: any free port).
    On(SocketAddr),
}

impl Default for DashboardAddr {
    fn default() -> DashboardAddr {
        DashboardAddr::On(SocketAddr::from(([127, 0, 0, 1], 0)))
    }
}

impl std::str::FromStr for DashboardAddr {
    type Err = Error;

    fn from_str(s: &str) -> Result<DashboardAddr> {
        if s == "off" {
            return Ok(DashboardAddr::Off);
        }
        s.parse().map(DashboardAddr::On).map_err(|_| {
            Error::Env(format!(
                "--dashboard {s:?} is not an address: give HOST:PORT (127.0.0.1:8080; port 0 \
                 picks a free one) or off"
            ))
        })
    }
}

/// Starts the dashboard at `addr` (none when off) for job `name` of `workers` workers,
/// and says where it is on stderr.
///
/// # Errors
/// [`Error::Io`] naming the address if it cannot be bound.
pub(crate) fn open(addr: DashboardAddr, name: &str, workers: usize) -> Result<Option<Dashboard>> {
    global().begin_job(name, workers);
    let DashboardAddr::On(addr) = addr else { return Ok(None) };
    // Off loopback, every request must carry a token: `HEDDLE_DASHBOARD_TOKEN`, or one
    // made now and printed in the address (as Jupyter does).
    let token = (!addr.ip().is_loopback()).then(|| {
        std::env::var(TOKEN_VAR)
            .ok()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| hex::encode(rand::random::<[u8; 16]>()))
    });
    let d = Dashboard::start(addr, token.clone())?;
    match token {
        Some(t) => eprintln!("heddle: dashboard at http://{}/?token={t}", d.addr()),
        None => eprintln!("heddle: dashboard at http://{}/", d.addr()),
    }
    Ok(Some(d))
}

/// The token a dashboard off loopback asks for (default: a new one, printed).
pub(crate) const TOKEN_VAR: &str = "HEDDLE_DASHBOARD_TOKEN";

/// The cookie a page opened with `?token=` keeps it in.
const COOKIE: &str = "heddle_dashboard";

/// Whether `req` carries `token`: as `?token=`, a bearer token or the page's cookie.
fn carries(req: &axum::extract::Request, token: &str) -> bool {
    let same = |t: &str| {
        t.len() == token.len() && t.bytes().zip(token.bytes()).fold(0, |d, (a, b)| d | (a ^ b)) == 0
    };
    let query = req.uri().query().unwrap_or_default();
    let in_query = query.split('&').filter_map(|kv| kv.strip_prefix("token=")).any(same);
    let header = |name| req.headers().get_all(name).iter().filter_map(|v| v.to_str().ok());
    let bearer = header(header::AUTHORIZATION).filter_map(|v| v.strip_prefix("Bearer ")).any(same);
    let cookie = header(header::COOKIE)
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .any(same);
    in_query || bearer || cookie
}

/// A running dashboard; stops when dropped.
#[derive(Debug)]
pub(crate) struct Dashboard {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    /// Binds `addr` and serves on a thread of its own.
    ///
    /// # Errors
    /// [`Error::Io`] naming the address if it cannot be bound (taken, not local).
    pub(crate) fn start(addr: SocketAddr, token: Option<String>) -> Result<Dashboard> {
        let listener = std::net::TcpListener::bind(addr).map_err(|e| {
            Error::io(
                format!(
                    "binding the dashboard to {addr} (--dashboard): another address, port 0 \
                     for any free one, or --dashboard off"
                ),
                e,
            )
        })?;
        listener.set_nonblocking(true).map_err(|e| Error::io("setting up the dashboard", e))?;
        let addr =
            listener.local_addr().map_err(|e| Error::io("reading the dashboard address", e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| Error::io("starting the dashboard's runtime", e))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("heddle-dashboard".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::warn!("the dashboard cannot serve: {e}");
                            return;
                        }
                    };
                    let served = axum::serve(listener, router(token))
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                    if let Err(e) = served {
                        tracing::warn!("the dashboard stopped: {e}");
                    }
                })
            })
            .map_err(|e| Error::io("starting the dashboard thread", e))?;
        Ok(Dashboard { addr, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it serves on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn json(view: fn(&State) -> serde_json::Value) -> Response {
    let value = view(&global().lock());
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

/// `/metrics` in OpenMetrics for a scraper that asks for it (as Prometheus does), else in
/// the Prometheus text format 0.0.4.
fn metrics(headers: &axum::http::HeaderMap) -> Response {
    let text = prometheus::render(&global().lock());
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or_default();
    if accept.contains("application/openmetrics-text") {
        let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        ([(header::CONTENT_TYPE, kind)], text).into_response()
    } else {
        let kind = "text/plain; version=0.0.4; charset=utf-8";
        ([(header::CONTENT_TYPE, kind)], prometheus::classic(&text)).into_response()
    }
}

/// Refuses a request without the token (when there is one); a page opened with
/// `?token=` keeps it in a cookie for its own requests.
async fn guard(
    token: Option<std::sync::Arc<str>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(token) = token else { return next.run(req).await };
    if !carries(&req, &token) {
        let why = "this dashboard needs its token: open the address heddle printed \
                   (…/?token=…), or send Authorization: Bearer TOKEN\n";
        return (StatusCode::UNAUTHORIZED, why).into_response();
    }
    let mut res = next.run(req).await;
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    if let Ok(v) = axum::http::HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

fn router(token: Option<String>) -> Router {
    let token: Option<std::sync::Arc<str>> = token.map(Into::into);
    Router::new()
        .route("/", get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }))
        .route("/api/v1/job", get(|| async { json(State::job) }))
        .route("/api/v1/tasks", get(|| async { json(State::tasks) }))
        .route("/api/v1/workers", get(|| async { json(State::workers) }))
        .route("/api/v1/collectives", get(|| async { json(State::collectives) }))
        .route("/api/v1/logs", get(|| async { json(State::logs) }))
        .route("/metrics", get(|headers: axum::http::HeaderMap| async move { metrics(&headers) }))
        .fallback(|uri: axum::http::Uri| async move {
            (
                StatusCode::NOT_FOUND,
                format!(
                    "no page {uri} on the Heddle dashboard: try /, /api/v1/job, /api/v1/tasks, \
                     /api/v1/workers, /api/v1/collectives, /api/v1/logs or /metrics\n"
                ),
            )
        })
        .layer(axum::middleware::from_fn(move |req, next| guard(token.clone(), req, next)))
}
