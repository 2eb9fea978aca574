from django.urls import path

from reviewer.dashboards import compare, corrections, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("reviews/", views.dashboard_reviews, name="dashboard_reviews"),
    path("certified/", views.dashboard_certified, name="dashboard_certified"),
    path("regrade/", views.dashboard_regrade, name="dashboard_regrade"),
    path("export/", views.dashboard_export, name="dashboard_export"),
    path("corrections/", corrections.corrections_figures, name="dashboard_corrections"),
    path("corrections/items/", corrections.corrections_items, name="dashboard_corrections_items"),
    path("corrections/export/", corrections.corrections_export, name="dashboard_corrections_export"),
    path("compare/", compare.dashboard_compare, name="dashboard_compare"),
]
