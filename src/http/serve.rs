//! The HTTP/1.1 server under the router, plain or TLS: each connection on its own task (a slow
//! TLS handshake or client holds up no other), a cap on open connections (at it, the accept loop
//! waits for one to close: new ones wait in the kernel's accept queue), a deadline on the
//! handshake and on reading a request's headers, a hard cap on their size, and a graceful stop
//! (connections finish the request in hand, [`DRAIN`] at most). In `eru-operator run` it all runs
//! on a thread of its own ([`spawn`]) at a lower CPU weight than the reconciles': TLS, parsing and
//! the refusals of a crowd of callers (a flood of made-up tokens is answered by thousands of fast
//! 401s and 503s a second) queue on that one thread, never among the reconciles' tasks, and
//! take at most one core, less when the reconciles want theirs. After a refusal (a 401, or a 503
//! or 429 with `Retry-After`) a connection's next request is read only [`PAUSE`] later: a client that
//! ignores `Retry-After` and loops on its connection gets one answer a second, not thousands.

use std::{
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::watch,
    task::JoinSet,
};
use tokio_rustls::TlsAcceptor;

/// A TLS handshake or a request's headers not done by then close the connection.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Bytes hyper buffers of a request's head at most (past it: a 431 without a body): what the
/// router reads of it, the request target ([`super::limits::MAX_URI`]) and the headers
/// ([`super::limits::MAX_HEADERS`]), and the head's framing (the request line, `: ` and CRLF of
/// [`MAX_HEADER_COUNT`] headers). Anything the router would refuse with its own JSON 414 or 431
/// reaches it; nothing much larger is buffered.
pub const MAX_HEAD: usize = super::limits::MAX_URI + super::limits::MAX_HEADERS + 1024;
/// Headers of a request at most.
const MAX_HEADER_COUNT: usize = 100;
/// How long open connections may take to finish once a stop is asked.
const DRAIN: Duration = Duration::from_secs(10);
/// Open connections at most when `--http-max-connections` is not given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Open connections of the probe listener at most: the kubelet opens one per probe.
pub const PROBE_CONNECTIONS: usize = 32;

/// The nice value of the HTTP thread: about a tenth of a normal thread's CPU weight when both
/// want the same core (the probes are still answered within milliseconds, unlike a
/// `SCHED_IDLE` thread, which a busy node could starve for seconds).
const HTTP_NICE: libc::c_int = 10;

/// Serves `app` on `listener` (over TLS with `tls`, at most `max_connections` open) until
/// `shutdown`, on a thread of its own named `eru-http` with a runtime of its own, at nice
/// [`HTTP_NICE`]; the receiver resolves when it stopped.
pub fn spawn(
    listener: std::net::TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("eru-http")
        .build()?;
    let (stopped, done) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("eru-http".into())
        .spawn(move || {
            lower_priority();
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => serve_with(listener, app, tls, max_connections, shutdown).await,
                    Err(e) => tracing::error!(error = %e, "the HTTP API cannot listen"),
                }
            });
            let _ = stopped.send(());
        })?;
    Ok(done)
}

/// Nice [`HTTP_NICE`] for the calling thread (no privilege needed to lower).
fn lower_priority() {
    if let Err(e) = super::queries::thread_nice(HTTP_NICE) {
        tracing::warn!(error = %e, "the HTTP API's thread keeps the normal priority");
    }
}

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown`, with at most
/// [`DEFAULT_MAX_CONNECTIONS`] open connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    serve_with(listener, app, tls, DEFAULT_MAX_CONNECTIONS, shutdown).await
}

/// [`serve`] with at most `max_connections` open connections: at the cap the loop accepts
/// nothing until one closes (as Go's `netutil.LimitListener`).
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) {
    serve_on(listener, app, tls, max_connections, true, shutdown).await
}

/// The probe listener (`--probe-address`): plain HTTP, [`PROBE_CONNECTIONS`] open at most, one
/// request a connection (no keep-alive: an idle connection holds no place), the same deadline on
/// a request's headers.
pub async fn serve_probes(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) {
    serve_on(listener, app, None, PROBE_CONNECTIONS, false, shutdown).await
}

/// [`serve_with`], with `keep_alive` or one request per connection.
async fn serve_on(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    max_connections: usize,
    keep_alive: bool,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let max_connections = max_connections.max(1);
    let mut capped = false;
    tokio::pin!(shutdown);
    loop {
        if connections.len() >= max_connections && !capped {
            tracing::warn!(
                max_connections,
                "the HTTP API holds its most open connections; new ones wait"
            );
        }
        capped = connections.len() >= max_connections;
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept(), if connections.len() < max_connections => {
                let (tcp, _) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // out of file descriptors and the like: wait rather than spin
                        tracing::warn!(error = %e, "accepting an HTTP connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (app, tls, stopping) = (app.clone(), tls.clone(), stopping.clone());
                connections.spawn(async move {
                    match tls {
                        None => connection(tcp, app, stopping, keep_alive).await,
                        Some(tls) => match tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                            Ok(Ok(stream)) => connection(stream, app, stopping, keep_alive).await,
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        },
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    if tokio::time::timeout(DRAIN, async { while connections.join_next().await.is_some() {} })
        .await
        .is_err()
    {
        tracing::warn!("HTTP connections still open after {DRAIN:?}; closing them");
        connections.abort_all();
    }
}

/// How long a connection's next request waits to be read after a refusal (a 401, or a 503 with
/// `Retry-After`): its `Retry-After`, enforced. The refusal itself is sent at once.
const PAUSE: Duration = Duration::from_secs(super::limits::RETRY_AFTER_SECONDS as u64);

/// Whether `response` refuses its caller: a 401, or a 503 or 429 that says when to come back.
fn refusal(response: &axum::response::Response) -> bool {
    use axum::http::StatusCode;
    let status = response.status();
    status == StatusCode::UNAUTHORIZED
        || ((status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS)
            && response.headers().contains_key(axum::http::header::RETRY_AFTER))
}

/// A connection whose reads wait until the instant a refusal set (`pause`): a client that
/// ignores `Retry-After` and loops on one connection (a flood of made-up tokens answered by fast
/// 401s and 503s) sends one request a [`PAUSE`], not thousands a second.
struct Paused<I> {
    io: I,
    pause: Arc<Mutex<Option<tokio::time::Instant>>>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Paused<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let Some(until) = this.pause.lock().unwrap_or_else(|e| e.into_inner()).take() {
            this.sleep = Some(Box::pin(tokio::time::sleep_until(until)));
        }
        if let Some(sleep) = this.sleep.as_mut() {
            std::task::ready!(sleep.as_mut().poll(cx));
            this.sleep = None;
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Paused<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// One connection's requests (one without `keep_alive`), until it closes or a stop is asked;
/// after a refusal its next request is read [`PAUSE`] later.
async fn connection<I>(io: I, app: Router, mut stopping: watch::Receiver<bool>, keep_alive: bool)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let pause = Arc::new(Mutex::new(None));
    let io = Paused {
        io,
        pause: pause.clone(),
        sleep: None,
    };
    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let (mut app, pause) = (app.clone(), pause.clone());
        async move {
            let response = tower::Service::call(&mut app, request).await?;
            if refusal(&response) {
                *pause.lock().unwrap_or_else(|e| e.into_inner()) = Some(tokio::time::Instant::now() + PAUSE);
            }
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .keep_alive(keep_alive)
        .header_read_timeout(HANDSHAKE)
        .max_buf_size(MAX_HEAD)
        .max_headers(MAX_HEADER_COUNT);
    let served = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    tokio::select! {
        result = served.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        }
        () = async { let _ = stopping.wait_for(|stop| *stop).await; } => {
            served.as_mut().graceful_shutdown();
            let _ = served.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::{http::StatusCode, routing::get};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    /// Sends `GET path` on `client` and reads its whole answer (headers, then `content-length`
    /// bytes); returns the status line.
    async fn ask(client: &mut DuplexStream, path: &str) -> String {
        let request = format!("GET {path} HTTP/1.1\r\nHost: eru\r\n\r\n");
        client.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        loop {
            let mut chunk = [0u8; 1024];
            let n = client.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "the connection closed: {}",
                String::from_utf8_lossy(&answer)
            );
            answer.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&answer).to_string();
            let Some((head, body)) = text.split_once("\r\n\r\n") else {
                continue;
            };
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .map_or(0, |n| n.trim().parse().unwrap());
            if body.len() >= length {
                return head.lines().next().unwrap().to_string();
            }
        }
    }

    /// A refused request's connection reads its next request [`PAUSE`] later, an answered one's
    /// at once (the clock is tokio's, paused: it moves only when everything waits on it).
    #[tokio::test(start_paused = true)]
    async fn after_a_refusal_the_next_request_on_the_connection_waits_its_retry_after() {
        let app = Router::new()
            .route("/refused", get(|| async { StatusCode::UNAUTHORIZED }))
            .route(
                "/busy",
                get(|| async { (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]) }),
            )
            .route(
                "/spent",
                get(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "7")]) }),
            )
            .route("/failed", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
            .route("/ok", get(|| async { "ok" }));
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let (_stop, stopping) = watch::channel(false);
        tokio::spawn(connection(server, app, stopping, true));
        let mut waited = Vec::new();
        for (path, status) in [
            ("/ok", "200"),
            ("/refused", "401"),
            ("/ok", "200"),
            ("/busy", "503"),
            ("/ok", "200"),
            ("/failed", "503"),
            ("/ok", "200"),
            ("/spent", "429"),
            ("/ok", "200"),
        ] {
            let sent = tokio::time::Instant::now();
            let line = ask(&mut client, path).await;
            assert!(line.contains(status), "{path}: {line}");
            waited.push(sent.elapsed());
        }
        let zero = Duration::ZERO;
        // after the 401, the 503 and the 429 with Retry-After: paused; after an answer or a plain
        // 503: not
        assert_eq!(waited, [zero, zero, PAUSE, zero, PAUSE, zero, zero, zero, PAUSE]);
    }

    /// The probe listener answers one request per connection and closes it: an idle client
    /// holds none of its few places.
    #[tokio::test]
    async fn the_probe_listener_closes_each_connection_after_its_answer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = Router::new().route("/healthz", get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_probes(listener, app, async {
            let _ = stopped.await;
        }));
        let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
        (client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: eru\r\n\r\n")
            .await)
            .unwrap();
        let mut answer = String::new();
        // read to the end: the server closes the connection after one answer
        (client.read_to_string(&mut answer).await).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.to_ascii_lowercase().contains("connection: close"),
            "{answer}"
        );
        assert!(answer.ends_with("ok"), "{answer}");
        let _ = stop.send(());
        server.await.unwrap();
    }
}
