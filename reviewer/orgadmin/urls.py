from django.urls import path

from reviewer.orgadmin import views

urlpatterns = [
    path("", views.orgadmin_members, name="orgadmin_members"),
    path("members/<int:pk>/scope/", views.orgadmin_member_scope, name="orgadmin_member_scope"),
    path("members/<int:pk>/revoke/", views.orgadmin_member_revoke, name="orgadmin_member_revoke"),
    path("members/<int:pk>/password-link/", views.orgadmin_member_password_link, name="orgadmin_member_password_link"),
    path("keys/", views.orgadmin_keys, name="orgadmin_keys"),
    path("keys/<int:pk>/revoke/", views.orgadmin_key_revoke, name="orgadmin_key_revoke"),
    path("webhook/", views.orgadmin_webhook, name="orgadmin_webhook"),
    path("retention/", views.orgadmin_retention, name="orgadmin_retention"),
    path("set-password/<uidb64>/<token>/", views.PasswordSetView.as_view(), name="orgadmin_password_set"),
]
