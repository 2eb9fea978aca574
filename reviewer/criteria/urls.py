from django.urls import path

from reviewer.criteria.views import certify, examples, sets, spend, versions

urlpatterns = [
    path("", versions.criteria, name="criteria"),
    path("new/", versions.criteria_new, name="criteria_new"),
    path("diff/", versions.criteria_diff_view, name="criteria_diff"),
    path("spend/", spend.criteria_spend, name="criteria_spend"),
    path("sets/", sets.criteria_sets, name="criteria_sets"),
    path("<int:pk>/", versions.criteria_version, name="criteria_version"),
    path("<int:pk>/preview/", versions.criteria_preview_view, name="criteria_preview"),
    path("<int:pk>/trial/", versions.criteria_trial, name="criteria_trial"),
    path("<int:pk>/publish/", versions.criteria_publish, name="criteria_publish"),
    path("<int:pk>/certify/", certify.criteria_certify_target, name="criteria_certify_target"),
    path("trials/<int:pk>/", versions.criteria_trial_detail, name="criteria_trial_detail"),
    path("trials/<int:pk>/items.csv", versions.criteria_trial_csv, name="criteria_trial_csv"),
    path("items/<str:kind>/<int:pk>/", versions.criteria_item, name="criteria_item"),
    path("examples/add/", examples.criteria_example_add_view, name="criteria_example_add"),
    path(
        "examples/from-expected-reply/",
        examples.criteria_example_from_expected_reply_view,
        name="criteria_example_from_expected_reply",
    ),
    path("examples/<int:pk>/explain/", examples.criteria_example_explain_view, name="criteria_example_explain"),
    path("examples/<int:pk>/remove/", examples.criteria_example_remove_view, name="criteria_example_remove"),
]
