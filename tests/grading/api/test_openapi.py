"""The OpenAPI document is a contract: clients generate code from its operation ids, so moving a view between
modules must not rename its operation."""

from grading.api.views import api

OPERATION_IDS = {
    "grading_api_audit_get_audit_events",
    "grading_api_corrections_get_correction_figures",
    "grading_api_corrections_get_corrections",
    "grading_api_criteria_get_criteria_preview",
    "grading_api_criteria_get_criteria_publish_plan",
    "grading_api_criteria_get_criteria_trial_count",
    "grading_api_criteria_get_criteria_trials",
    "grading_api_criteria_get_criteria_version",
    "grading_api_criteria_get_criteria_versions",
    "grading_api_criteria_patch_criteria_version",
    "grading_api_criteria_post_criteria_publish",
    "grading_api_criteria_post_criteria_trial",
    "grading_api_criteria_post_criteria_version",
    "grading_api_erasures_get_erasure",
    "grading_api_erasures_post_erasure",
    "grading_api_get_conversation",
    "grading_api_get_criteria",
    "grading_api_get_criteria_trial",
    "grading_api_get_dashboard",
    "grading_api_get_dashboard_compare",
    "grading_api_get_dashboard_section",
    "grading_api_get_draft",
    "grading_api_get_health",
    "grading_api_get_spend",
    "grading_api_post_article",
    "grading_api_post_conversation",
    "grading_api_post_draft",
    "grading_api_post_feedback",
    "grading_api_post_labels",
    "grading_api_post_memory",
    "grading_api_post_messages",
    "grading_api_sets_delete_set",
    "grading_api_sets_get_run",
    "grading_api_sets_get_set",
    "grading_api_sets_get_sets",
    "grading_api_sets_post_run",
    "grading_api_sets_post_set",
    "grading_api_whoami",
    "grading_api_writer_rules",
    "grading_otlp_views_post_logs",
    "grading_otlp_views_post_traces",
    "reviewer_dashboards_api_get_reviews_export",
    "reviewer_queue_api_delete_conversation_assignment",
    "reviewer_queue_api_delete_draft_assignment",
    "reviewer_queue_api_get_conversation_assignment",
    "reviewer_queue_api_get_draft_assignment",
    "reviewer_queue_api_get_queue",
    "reviewer_queue_api_get_queue_service",
    "reviewer_queue_api_post_claim",
    "reviewer_queue_api_post_claim_next",
    "reviewer_queue_api_post_decision",
    "reviewer_queue_api_post_decline",
    "reviewer_queue_api_post_release",
    "reviewer_queue_api_post_conversation_send",
    "reviewer_queue_api_post_draft_send",
    "reviewer_queue_api_put_conversation_assignment",
    "reviewer_queue_api_put_draft_assignment",
    "reviewer_setup_api_get_setup_pools",
    "reviewer_setup_api_get_setup_rules",
    "reviewer_setup_api_get_setup_targets",
    "reviewer_setup_api_post_setup_target",
    "reviewer_setup_api_patch_setup_target",
    "reviewer_setup_api_delete_setup_target",
    "reviewer_setup_api_post_setup_target_move",
    "reviewer_setup_api_put_setup_pool",
    "reviewer_setup_api_patch_setup_pool",
    "reviewer_setup_api_delete_setup_pool",
    "reviewer_setup_api_post_setup_rule",
    "reviewer_setup_api_put_setup_rule",
    "reviewer_setup_api_delete_setup_rule",
    "reviewer_setup_api_post_setup_rule_move",
    "grading_api_spend_caps_put_spend_cap",
    "grading_api_spend_caps_delete_spend_cap",
}


def test_the_operation_ids_are_those_clients_were_generated_from():
    document = api.get_openapi_schema()
    found = {operation["operationId"] for path in document["paths"].values() for operation in path.values()}
    assert found == OPERATION_IDS


def test_a_reviews_schema_declares_its_confidences_and_certificate():
    schemas = api.get_openapi_schema()["components"]["schemas"]

    review = schemas["ReviewOut"]["properties"]
    assert {"confidences", "confidence_source", "certificate"} <= set(review)
    assert review["confidences"]["additionalProperties"]["type"] == "number"
    assert set(schemas["CertificateOut"]["properties"]) == {"id", "computed_at", "agreement", "confidence"}


def test_a_set_runs_json_is_documented_for_the_cli():
    schemas = api.get_openapi_schema()["components"]["schemas"]
    run = schemas["RunOut"]["properties"]
    assert {"state", "checks", "overall", "passed", "changed", "changed_count", "min_agreement"} <= set(run)
