from django.urls import path

from reviewer.setup import views

urlpatterns = [
    path("escalation/", views.setup_escalation, name="setup_escalation"),
    path("escalation/remove/", views.setup_escalation_remove, name="setup_escalation_remove"),
    path("rules/", views.setup_rules, name="setup_rules"),
    path("rules/move/", views.setup_row_move, {"listed": "rules"}, name="setup_rule_move"),
    path("rules/remove/", views.setup_row_remove, {"listed": "rules"}, name="setup_rule_remove"),
    path("pools/", views.setup_pools, name="setup_pools"),
    path("pools/rename/", views.setup_pool_rename, name="setup_pool_rename"),
    path("pools/remove/", views.setup_pool_remove, name="setup_pool_remove"),
    path("targets/", views.setup_targets, name="setup_targets"),
    path("targets/change/", views.setup_target_change, name="setup_target_change"),
    path("targets/move/", views.setup_row_move, {"listed": "targets"}, name="setup_target_move"),
    path("targets/remove/", views.setup_row_remove, {"listed": "targets"}, name="setup_target_remove"),
]
