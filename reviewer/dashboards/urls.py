from django.urls import path

from reviewer.dashboards import compare, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("reviews/", views.dashboard_reviews, name="dashboard_reviews"),
    path("certified/", views.dashboard_certified, name="dashboard_certified"),
    path("regrade/", views.dashboard_regrade, name="dashboard_regrade"),
    path("export/", views.dashboard_export, name="dashboard_export"),
    path("compare/", compare.dashboard_compare, name="dashboard_compare"),
]
