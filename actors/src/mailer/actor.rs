//! A MailerActor builds, signs and sends one email per `Deliver`. Several run, each on
//! its own arbiter under a supervisor; each holds its own pool of SMTP connections.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::{
    Actor, ActorContext, AsyncContext, Context, Handler, Message, ResponseFuture, Supervised,
};

use super::messages::{Deliver, Delivery, Owner};
use super::mime;
use super::return_path::ReturnPath;
use super::smtp::SmtpPool;
use super::tls::SmtpSecurity;
use crate::faults::{Faults, Point};
use crate::model::EmailId;
use lettre::address::Envelope;

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

enum Transport {
    Smtp(Arc<SmtpPool>),
    File(PathBuf),
}

pub struct MailerActor {
    config: TransportConfig,
    transport: Option<Arc<Transport>>,
    signers: mime::Signers,
    metrics: Arc<crate::metrics::Metrics>,
    faults: Arc<Faults>,
    /// The envelope sender of every email, when `feedback.return_path_domain` is set.
    return_path: Option<Arc<ReturnPath>>,
}

impl MailerActor {
    pub fn new(config: TransportConfig, metrics: Arc<crate::metrics::Metrics>) -> Self {
        MailerActor {
            config,
            transport: None,
            signers: mime::Signers::default(),
            metrics,
            faults: Arc::default(),
            return_path: None,
        }
    }

    /// Sends every email with a return path of its own (`b-<token>@<domain>`), where
    /// the relay's later reports come back.
    pub fn with_return_path(mut self, return_path: Option<Arc<ReturnPath>>) -> Self {
        self.return_path = return_path;
        self
    }

    /// The engine's test faults (debug builds only; `Registry::faults`).
    pub fn with_faults(mut self, faults: Arc<Faults>) -> Self {
        self.faults = faults;
        self
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
            } => Transport::Smtp(Arc::new(
                SmtpPool::new(
                    host.clone(),
                    *port,
                    security.clone(),
                    credentials.clone(),
                    *pool_size,
                    *timeout,
                    self.metrics.clone(),
                )
                .with_faults(self.faults.clone()),
            )),
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
        // `started` follows with a new pool: a connection that a panic left in the
        // middle of a transaction is never used again.
        self.signers = mime::Signers::default();
        tracing::warn!("mailer restarting with fresh connections");
    }
}

/// Stops the mailer, for its supervisor to start it afresh (after a panic).
#[derive(Message)]
#[rtype(result = "()")]
struct Restart;

impl Handler<Restart> for MailerActor {
    type Result = ();

    fn handle(&mut self, _msg: Restart, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Deliver> for MailerActor {
    type Result = ResponseFuture<Delivery>;

    fn handle(&mut self, msg: Deliver, ctx: &mut Self::Context) -> Self::Result {
        let owner = msg.owner.clone();
        let id = msg.email.id;
        // A panic is contained here and in the future below: the email gets an outcome
        // that never sends it twice, and the mailer restarts with fresh connections.
        let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.faults.hit(Point::MailerSend);
            (self.transport.clone(), self.signers.get(&msg.dkim))
        }));
        let Ok((transport, signer)) = ready else {
            ctx.stop();
            return Box::pin(async move { after_panic(id, &owner) });
        };
        let me = ctx.address();
        let send = deliver(msg, transport, signer, self.return_path.clone());
        Box::pin(async move {
            match futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(send)).await {
                Ok(delivery) => delivery,
                Err(_) => {
                    me.do_send(Restart);
                    after_panic(id, &owner)
                }
            }
        })
    }
}

/// What an email whose delivery panicked comes to: tried again later when the relay
/// cannot have had it yet, else FAILED (the relay may have it; sending it again could
/// give the recipient two).
fn after_panic(id: EmailId, owner: &Owner) -> Delivery {
    if owner.began() {
        tracing::error!(email = %id, "a mailer panicked during the SMTP transaction; the email fails rather than risk a second copy");
        Delivery::Failed("the mailer failed during the SMTP transaction".into())
    } else {
        tracing::error!(email = %id, "a mailer panicked before the SMTP transaction; the email is tried again");
        Delivery::Transient("the mailer failed before the SMTP transaction".into())
    }
}

/// Builds, signs and sends one email.
async fn deliver(
    msg: Deliver,
    transport: Option<Arc<Transport>>,
    signer: Result<Arc<mime::Signer>, mime::MimeError>,
    return_path: Option<Arc<ReturnPath>>,
) -> Delivery {
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
            return Delivery::Failed(format!("the message could not be built or signed: {e}"));
        }
    };
    let envelope = match return_path.map(|rp| {
        // Aligned only when the sender's psrp. host points at this return path's domain.
        let aligned = (msg.dkim.aligned_return_path.as_deref() == Some(rp.domain()))
            .then(|| crate::domain::model::aligned_host(&msg.dkim.domain));
        rp.address_at(msg.email.id, aligned.as_deref()).parse()
    }) {
        None => envelope,
        Some(Ok(from)) => match Envelope::new(Some(from), envelope.to().to_vec()) {
            Ok(e) => e,
            Err(e) => return Delivery::Failed(format!("the return path: {e}")),
        },
        Some(Err(e)) => return Delivery::Failed(format!("the return path: {e}")),
    };
    match &*transport {
        Transport::Smtp(pool) => pool.send(&envelope, &bytes, &msg.owner).await,
        Transport::File(_) if !msg.owner.begin() => Delivery::NotOwned,
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
}
