//! A bare SMTP client for the reference figures: `connections` lettre connections over
//! sockets we open ourselves, with TCP_NODELAY on or off, sending one small message after
//! another into the bench's SMTP server for a fixed time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lettre::address::Envelope;
use lettre::transport::smtp::client::AsyncSmtpConnection;
use lettre::transport::smtp::extension::ClientId;

const MESSAGE: &[u8] =
    b"From: bench@acme.test\r\nTo: sink@example.com\r\nSubject: bench\r\n\r\nhello\r\n";

/// Messages per second that `connections` clients push for `seconds`.
pub async fn rate(addr: SocketAddr, connections: usize, nodelay: bool, seconds: f64) -> f64 {
    let sent = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let sent = sent.clone();
            tokio::spawn(async move {
                let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
                    return;
                };
                let _ = stream.set_nodelay(nodelay);
                let hello = ClientId::Domain("bench.localhost".into());
                let Ok(mut conn) =
                    AsyncSmtpConnection::connect_with_transport(Box::new(stream), &hello).await
                else {
                    return;
                };
                let envelope = Envelope::new(
                    Some("bench@acme.test".parse().expect("address")),
                    vec!["sink@example.com".parse().expect("address")],
                )
                .expect("envelope");
                while Instant::now() < deadline {
                    if conn.send(&envelope, MESSAGE).await.is_err() {
                        return;
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                }
                let _ = conn.quit().await;
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    sent.load(Ordering::Relaxed) as f64 / seconds
}
