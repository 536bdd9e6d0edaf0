//! The OpenAPI 3 description, generated from the handlers' annotations.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    admin, campaigns, contacts, domains, events, ops, segments, send, templates, track, verify,
    workflows,
};

#[derive(OpenApi)]
#[openapi(
    info(title = "Mailroom API", description = "Email delivery and audience API, compatible with Plunk's"),
    paths(
        ops::health, ops::metrics, ops::openapi,
        contacts::list, contacts::upsert, contacts::get, contacts::patch, contacts::delete,
        templates::list, templates::create, templates::get, templates::update, templates::delete,
        send::send, send::get_email,
        domains::list, domains::create, domains::get, domains::delete, domains::verify,
        verify::verify,
        admin::create_project, admin::list_projects,
        track::track, events::list, events::names, events::get,
        segments::list, segments::create, segments::get, segments::update, segments::delete,
        segments::contacts, segments::add_members, segments::remove_members,
        campaigns::list, campaigns::create, campaigns::get, campaigns::update, campaigns::delete,
        campaigns::send, campaigns::cancel, campaigns::test, campaigns::stats,
        workflows::list, workflows::create, workflows::get, workflows::update, workflows::delete,
        workflows::executions, workflows::execution,
    ),
    components(schemas(
        contacts::ContactView, contacts::ContactList, contacts::UpsertMeta,
        contacts::UpsertContactRequest, contacts::PatchContactRequest, ops::Health,
        super::ErrorBody, templates::TemplateView, templates::TemplateList, templates::TemplateRequest,
        send::SendRequest,
        domains::DomainView, domains::RecordView, domains::DomainList, domains::CreateDomainRequest,
        verify::VerificationView, verify::VerifyEnvelope, verify::VerifyRequest,
        track::TrackRequest, track::TrackResponse, track::TrackData,
        events::EventView, events::EventList, events::EventName, events::EventNames,
        segments::SegmentView, segments::SegmentList, segments::CreateSegmentRequest,
        segments::UpdateSegmentRequest, segments::MembersRequest, segments::MembersAdded,
        segments::MembersRemoved,
        campaigns::CampaignView, campaigns::CampaignList, campaigns::StatsView, campaigns::TestSent,
        campaigns::CampaignRequest, campaigns::SendCampaignRequest, campaigns::TestCampaignRequest,
        workflows::WorkflowView, workflows::WorkflowList, workflows::ExecutionView,
        workflows::ExecutionList, workflows::HistoryView, workflows::WorkflowRequest,
    )),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
