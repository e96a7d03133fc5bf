//! The HTTP/1.1 server under the router, plain or TLS: each connection on its own task (a slow
//! TLS handshake or client holds up no other), a deadline on the handshake and on reading a
//! request's headers, a hard cap on their size, and a graceful stop (connections finish the
//! request in hand, [`DRAIN`] at most).

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::watch,
    task::JoinSet,
};
use tokio_rustls::TlsAcceptor;

/// A TLS handshake or a request's headers not done by then close the connection.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// Bytes hyper buffers of a request's head at most (past it: a 431 without a body, before the
/// router's own JSON 431 at [`super::limits::MAX_HEADERS`] can run).
const MAX_HEAD: usize = 64 * 1024;
/// Headers of a request at most.
const MAX_HEADER_COUNT: usize = 100;
/// How long open connections may take to finish once a stop is asked.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => {
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
                        None => connection(tcp, app, stopping).await,
                        Some(tls) => match tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                            Ok(Ok(stream)) => connection(stream, app, stopping).await,
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

/// One connection's requests, until it closes or a stop is asked.
async fn connection<I>(io: I, app: Router, mut stopping: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
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
