//! A MailerActor builds, signs and sends one email per `Deliver`. Several run, each on
//! its own arbiter under a supervisor; each holds its own pool of SMTP connections.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Context, Handler, ResponseFuture, Supervised};

use super::messages::{Deliver, Delivery};
use super::mime;
use super::smtp::SmtpPool;
use super::tls::SmtpSecurity;

#[derive(Debug, Clone)]
pub enum TransportConfig {
    Smtp {
        host: String,
        port: u16,
        security: SmtpSecurity,
        credentials: Option<(String, String)>,
        pool_size: usize,
        timeout: Duration,
    },
    /// Writes `<email id>.eml` files into the directory.
    File { dir: PathBuf },
}

#[derive(Debug, Clone)]
pub struct MailerConfig {
    pub workers: usize,
    pub transport: TransportConfig,
}

enum Transport {
    Smtp(Arc<SmtpPool>),
    File(PathBuf),
}

pub struct MailerActor {
    config: TransportConfig,
    transport: Option<Arc<Transport>>,
    signers: mime::Signers,
    metrics: Arc<crate::metrics::Metrics>,
}

impl MailerActor {
    pub fn new(config: TransportConfig, metrics: Arc<crate::metrics::Metrics>) -> Self {
        MailerActor {
            config,
            transport: None,
            signers: mime::Signers::default(),
            metrics,
        }
    }

    fn connect(&mut self) {
        self.transport = Some(Arc::new(match &self.config {
            TransportConfig::Smtp {
                host,
                port,
                security,
                credentials,
                pool_size,
                timeout,
            } => Transport::Smtp(Arc::new(SmtpPool::new(
                host.clone(),
                *port,
                security.clone(),
                credentials.clone(),
                *pool_size,
                *timeout,
                self.metrics.clone(),
            ))),
            TransportConfig::File { dir } => Transport::File(dir.clone()),
        }));
    }
}

impl Actor for MailerActor {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Self::Context) {
        self.connect();
    }
}

impl Supervised for MailerActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!("mailer restarting with fresh connections");
    }
}

impl Handler<Deliver> for MailerActor {
    type Result = ResponseFuture<Delivery>;

    fn handle(&mut self, msg: Deliver, _ctx: &mut Self::Context) -> Self::Result {
        let transport = self.transport.clone();
        let signer = self.signers.get(&msg.dkim);
        Box::pin(async move {
            let Some(transport) = transport else {
                return Delivery::Transient("mailer not started".into());
            };
            // A stored key that does not parse is ours to fix, never the recipient's
            // fault: the email fails (never unsigned) and the contact is not touched.
            let signer = match signer {
                Ok(s) => s,
                Err(e) => {
                    let e = crate::error::chain(&e);
                    tracing::error!(email = %msg.email.id, error = %e, "the sender's DKIM key cannot be used");
                    return Delivery::Failed(format!("the DKIM key cannot be used: {e}"));
                }
            };
            let (envelope, bytes) = match mime::prepare(&msg.email, &signer) {
                Ok(prepared) => prepared,
                // Our own fault: the email fails, the contact is not touched.
                Err(e) => {
                    let e = crate::error::chain(&e);
                    tracing::error!(email = %msg.email.id, error = %e, "the message could not be built");
                    return Delivery::Failed(format!(
                        "the message could not be built or signed: {e}"
                    ));
                }
            };
            match &*transport {
                Transport::Smtp(pool) => pool.send(&envelope, &bytes, &msg.owner).await,
                Transport::File(_) if !msg.owner.owns() => Delivery::NotOwned,
                Transport::File(dir) => {
                    let path = dir.join(format!("{}.eml", msg.email.id));
                    let write = async {
                        tokio::fs::create_dir_all(dir).await?;
                        tokio::fs::write(&path, &bytes).await
                    };
                    match write.await {
                        Ok(()) => Delivery::Sent,
                        Err(e) => Delivery::Transient(format!("writing {}: {e}", path.display())),
                    }
                }
            }
        })
    }
}
