from django.urls import path

from reviewer.dashboards.views import compare, corrections, dashboard

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("reviews/", dashboard.dashboard_reviews, name="dashboard_reviews"),
    path("items/<int:pk>/", dashboard.dashboard_item, name="dashboard_item"),
    path("certified/", dashboard.dashboard_certified, name="dashboard_certified"),
    path("queue-health/", dashboard.dashboard_queue, name="dashboard_queue"),
    path("service/", dashboard.dashboard_service, name="dashboard_service"),
    path("gate/", dashboard.dashboard_gate, name="dashboard_gate"),
    path("spend/", dashboard.dashboard_spend, name="dashboard_spend"),
    path("statistics/", dashboard.dashboard_statistics, name="dashboard_statistics"),
    path("regrade/", dashboard.dashboard_regrade, name="dashboard_regrade"),
    path("export/", dashboard.dashboard_export, name="dashboard_export"),
    path("corrections/", corrections.corrections_figures, name="dashboard_corrections"),
    path("corrections/items/", corrections.corrections_items, name="dashboard_corrections_items"),
    path("corrections/export/", corrections.corrections_export, name="dashboard_corrections_export"),
    path("compare/", compare.dashboard_compare, name="dashboard_compare"),
]
