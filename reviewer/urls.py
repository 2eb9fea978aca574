from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from grading.api.views import api
from reviewer import views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("queue/", include("reviewer.queue.urls")),
    path("criteria/", include("reviewer.criteria.urls")),
    path("dashboard/", include("reviewer.dashboards.urls")),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
]
