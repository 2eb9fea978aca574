from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from grading.api import api
from reviewer import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("queue/", views.queue, name="queue"),
    path("queue/claim-next/", views.queue_claim_next, name="queue_claim_next"),
    path("queue/items/<int:pk>/", views.review_detail, name="review_detail"),
    path("queue/items/<int:pk>/claim/", views.review_claim, name="review_claim"),
    path("queue/items/<int:pk>/release/", views.review_release, name="review_release"),
    path("queue/items/<int:pk>/heartbeat/", views.review_heartbeat, name="review_heartbeat"),
    path("queue/items/<int:pk>/decide/", views.review_decide, name="review_decide"),
    path("criteria/", views.criteria, name="criteria"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
]
