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

/// Transactions a ceiling client writes at once before reading their replies.
pub const PIPELINED: usize = 32;

/// The bench SMTP server's own ceiling: clients that pipeline whole transactions
/// (RFC 2920; the server offers PIPELINING) cost a write per 32 emails, so the server,
/// not the client, is what runs out of CPU.
pub async fn ceiling(addr: SocketAddr, connections: usize, seconds: f64) -> f64 {
    let sent = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut batch = Vec::new();
    for _ in 0..PIPELINED {
        batch.extend_from_slice(
            b"MAIL FROM:<bench@acme.test>\r\nRCPT TO:<sink@example.com>\r\nDATA\r\n",
        );
        batch.extend_from_slice(MESSAGE);
        batch.extend_from_slice(b".\r\n");
    }
    let batch: Arc<[u8]> = batch.into();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (sent, batch) = (sent.clone(), batch.clone());
            tokio::spawn(async move {
                let _ = pipeline(addr, &batch, deadline, &sent).await;
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    sent.load(Ordering::Relaxed) as f64 / seconds
}

async fn pipeline(
    addr: SocketAddr,
    batch: &[u8],
    deadline: Instant,
    sent: &AtomicU64,
) -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut conn = BufReader::new(stream);
    let mut line = String::new();
    conn.read_line(&mut line).await?;
    conn.write_all(b"EHLO bench.localhost\r\n").await?;
    loop {
        line.clear();
        if conn.read_line(&mut line).await? == 0 || !line.starts_with("250-") {
            break;
        }
    }
    while Instant::now() < deadline {
        conn.write_all(batch).await?;
        // Four replies per transaction: MAIL, RCPT, DATA's 354 and the final 250.
        for i in 0..PIPELINED * 4 {
            line.clear();
            if conn.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            if i % 4 == 3 && line.starts_with("250") {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    conn.write_all(b"QUIT\r\n").await
}
