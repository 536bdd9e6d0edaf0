//! `GET /stats`: what a project's sending looks like from outside (API.md 27).

use crate::error::Result;
use crate::model::ProjectId;
use crate::project::counters::ProjectCounts;
use crate::project::registry::Registry;

#[derive(Debug, Clone, Copy)]
pub struct ProjectStats {
    pub contacts: u64,
    pub subscribed: u64,
    /// Over the project's last 1,000 to 2,000 emails the relay answered.
    pub bounce_rate: f64,
    pub complaint_rate: f64,
    /// Addresses on the suppression list.
    pub suppressed: u64,
}

pub fn project(registry: &Registry, p: ProjectId) -> Result<ProjectStats> {
    let store = registry.store();
    let counts = ProjectCounts::load(&**store, p)?;
    let window = crate::reputation::load(&**store, p)?;
    Ok(ProjectStats {
        contacts: counts.contacts,
        subscribed: counts.subscribed,
        bounce_rate: window.bounce_rate(),
        complaint_rate: window.complaint_rate(),
        suppressed: crate::suppression::actions::total(registry, p)?,
    })
}

/// How many projects' rolling rates pass each threshold (bounce, complaint), over the
/// projects that sent at all.
pub fn over_rates(registry: &Registry, bounce: f64, complaint: f64) -> Result<(u64, u64)> {
    let store = registry.store();
    let (mut b, mut c) = (0, 0);
    for project in crate::directory::Projects::new(store.clone()).list()? {
        let w = crate::reputation::load(&**store, project.id)?;
        b += u64::from(w.bounce_rate() > bounce);
        c += u64::from(w.complaint_rate() > complaint);
    }
    Ok((b, c))
}
