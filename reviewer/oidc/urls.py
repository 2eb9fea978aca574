from django.urls import path

from reviewer.oidc import views

urlpatterns = [
    path("start/", views.oidc_start, name="oidc_start"),
    path("callback/", views.oidc_callback, name="oidc_callback"),
]
