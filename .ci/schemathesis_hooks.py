"""A check of our own for .ci/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

schemathesis.toml lets a 422 answer schema-valid data on the operations whose rules JSON
Schema cannot state. This check holds each such 422 to those rules: every field error it
lists must be one a rule below produces (its operation, its field, its code). Any other,
say `invalid_type` on a field the schema calls optional with no rule behind it, means the
document and the server disagree, and fails the run.
"""

import re

import schemathesis

# (operations, fields, codes), one line per rule schemathesis.toml names.
RULES = [
    # Subject and body are templates that must compile.
    (r".*", r".*", {"template_syntax"}),
    # The sender's domain must be a verified domain of the project (stored state).
    (r"^/(v1/send|campaigns.*)$", r"^from$", {"unverified_domain"}),
    # Fields that depend on each other: subject and body unless a template is named, a
    # from address unless the template has one ...
    (r"^/v1/send$", r"^(subject|body|from)$", {"invalid_type"}),
    # ... an audience (audienceType or type), a SEGMENT campaign's segmentId, a FILTER
    # campaign's filter, a send only from DRAFT ...
    (r"^/campaigns", r"^(audienceType|type|segmentId|audienceFilter|status)$", {"invalid_type", "custom"}),
    # ... a DYNAMIC segment's filters, none for a STATIC one.
    (r"^/segments", r"^(filters|type)$", {"invalid_type", "custom"}),
    # A workflow's steps form a graph; a step's config is the one its type takes (a
    # CONDITION's field and operator, a webhook step's http(s) URL, ...).
    (r"^/workflows", r"^steps(\..+)?$", {"custom", "invalid_string", "invalid_type", "invalid_enum_value"}),
    # A webhook's URL is http(s) and not a private address; its events exist.
    (r"^/webhooks", r"^(url|events(\[\d+\]|\.\d+)?)$", {"invalid_string", "custom"}),
    # An uploaded CSV has a header row that names an email column, and each column's
    # declared type is one there is (the document describes the body as text/csv: no
    # schema states its content).
    (r"^/(suppressions|contacts)/import$", r"^(file|header)$", {"too_small", "custom", "invalid_enum_value"}),
]


def _listed(path, error):
    field, code = error.get("field") or "", error.get("code")
    return any(
        re.search(ops, path) and re.search(fields, field) and code in codes
        for ops, fields, codes in RULES
    )


@schemathesis.check
def unprocessable_only_for_listed_rules(ctx, response, case):
    meta = case.meta
    if response.status_code != 422 or meta is None or not meta.generation.mode.is_positive:
        return None
    try:
        errors = response.json()["error"].get("errors") or []
    except Exception as exc:  # noqa: BLE001 - any unreadable body is the failure
        raise AssertionError(f"a 422 without the standard error body: {exc}") from exc
    if not errors:
        raise AssertionError("a 422 for schema-valid data names no field and no rule")
    unlisted = [e for e in errors if not _listed(case.operation.path, e)]
    if unlisted:
        raise AssertionError(
            f"a 422 for schema-valid data that no rule of schemathesis_hooks.py lists "
            f"(a rule the schema could state, or a new one to list): {unlisted}"
        )
    return None
