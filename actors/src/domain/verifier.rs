//! The DomainVerifier: every `domains.recheck_seconds` it checks the DNS records of
//! every domain of every project (PENDING ones to catch them being published, VERIFIED
//! ones to catch them being removed, FAILED ones to catch a fix), and hands each
//! outcome to the project's actor, which owns the write.
//!
//! DNS waits happen on the resolver's own runtime; this actor only holds futures, and
//! a round that is still running when the next tick comes is not started twice.

use std::sync::Arc;
use std::time::Duration;

use actix::ActorFutureExt;
use actix::{Actor, AsyncContext, Context, WrapFuture};
use futures_util::StreamExt;

use super::check;
use super::model::RecordPolicy;
use super::queries::{all_domains, get_domain};
use crate::dns::Resolver;
use crate::domain::messages::ApplyDomainCheck;
use crate::error::{Error, Resource};
use crate::model::{DomainId, ProjectId};
use crate::project::Registry;

/// Domains checked at the same time in one round.
const CONCURRENT_CHECKS: usize = 8;

pub struct DomainVerifier {
    registry: Registry,
    resolver: Arc<Resolver>,
    policy: Arc<RecordPolicy>,
    interval: Duration,
    running: bool,
}

impl DomainVerifier {
    pub fn new(
        registry: Registry,
        resolver: Arc<Resolver>,
        policy: RecordPolicy,
        interval: Duration,
    ) -> Self {
        DomainVerifier {
            registry,
            resolver,
            policy: Arc::new(policy),
            interval: interval.max(Duration::from_secs(1)),
            running: false,
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.running {
            return;
        }
        self.running = true;
        let round = recheck_all(
            self.registry.clone(),
            self.resolver.clone(),
            self.policy.clone(),
        );
        ctx.spawn(round.into_actor(self).map(|checked, act, _| {
            tracing::debug!(checked, "domain re-check round finished");
            act.running = false;
        }));
    }
}

impl Actor for DomainVerifier {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.interval, |act, ctx| act.tick(ctx));
    }
}

/// One round over every domain; returns how many were checked.
pub async fn recheck_all(
    registry: Registry,
    resolver: Arc<Resolver>,
    policy: Arc<RecordPolicy>,
) -> usize {
    let store = registry.store().clone();
    let ids = match tokio::task::spawn_blocking(move || all_domains(&*store)).await {
        // Another node re-checks the domains of its own projects.
        Ok(Ok(ids)) => ids
            .into_iter()
            .filter(|(p, _)| registry.ownership().owns(*p))
            .collect::<Vec<_>>(),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "listing domains for the re-check");
            return 0;
        }
        Err(e) => {
            tracing::error!(error = %e, "listing domains for the re-check");
            return 0;
        }
    };
    futures_util::stream::iter(ids)
        .map(|(p, id)| recheck_one(&registry, &resolver, &policy, p, id))
        .buffer_unordered(CONCURRENT_CHECKS)
        .filter(|checked| std::future::ready(*checked))
        .count()
        .await
}

async fn recheck_one(
    registry: &Registry,
    resolver: &Resolver,
    policy: &RecordPolicy,
    p: ProjectId,
    id: DomainId,
) -> bool {
    match check_now(registry, resolver, policy, p, id).await {
        Ok(_) => true,
        // Deleted while we were asking DNS.
        Err(Error::NotFound(Resource::Domain)) => false,
        Err(e) => {
            tracing::warn!(project = %p, domain = %id, error = %e, "re-checking a domain");
            false
        }
    }
}

/// Checks a project's domain in DNS now (bypassing the cache) and records what was
/// found through the project's actor: `POST /domains/{id}/verify` and the background
/// re-check alike.
pub async fn check_now(
    registry: &Registry,
    resolver: &Resolver,
    policy: &RecordPolicy,
    p: ProjectId,
    id: DomainId,
) -> crate::error::Result<super::Domain> {
    let domain =
        get_domain(&**registry.store(), p, id)?.ok_or(Error::NotFound(Resource::Domain))?;
    let check = check::run(resolver, &domain, policy).await;
    let return_path = policy.return_path_domain.clone();
    registry
        .send(
            p,
            ApplyDomainCheck {
                id,
                check,
                return_path,
            },
        )
        .await
}
