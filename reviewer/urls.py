from django.contrib import admin
from django.urls import include, path

from grading.api.views import api
from reviewer import views
from reviewer.mcp.views import mcp_endpoint

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("reviewer.oidc.urls")),
    path("queue/", include("reviewer.queue.urls")),
    path("criteria/", include("reviewer.criteria.urls")),
    path("dashboard/", include("reviewer.dashboards.urls")),
    path("audit/", include("reviewer.audit.urls")),
    path("org/", include("reviewer.orgadmin.urls")),
    path("erasure/", include("reviewer.erasure.urls")),
    path("setup/", include("reviewer.setup.urls")),
    path("monitors/", include("reviewer.monitors.urls")),
    path("account/", include("reviewer.tokens.urls")),
    path("api/v1/", api.urls),
    path("mcp", mcp_endpoint, name="mcp"),
    path("admin/", admin.site.urls),
]
