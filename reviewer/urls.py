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
    path("criteria/", views.criteria, name="criteria"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
]
