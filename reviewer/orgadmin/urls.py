from django.urls import path

from reviewer.orgadmin import views

urlpatterns = [
    path("", views.orgadmin_members, name="orgadmin_members"),
    path("members/<int:pk>/scope/", views.orgadmin_member_scope, name="orgadmin_member_scope"),
    path("members/<int:pk>/revoke/", views.orgadmin_member_revoke, name="orgadmin_member_revoke"),
    path("members/<int:pk>/password-link/", views.orgadmin_member_password_link, name="orgadmin_member_password_link"),
    path("invitations/<int:pk>/send/", views.orgadmin_invitation_send, name="orgadmin_invitation_send"),
    path("invitations/<int:pk>/cancel/", views.orgadmin_invitation_cancel, name="orgadmin_invitation_cancel"),
    path("keys/", views.orgadmin_keys, name="orgadmin_keys"),
    path("keys/<int:pk>/revoke/", views.orgadmin_key_revoke, name="orgadmin_key_revoke"),
    path("tokens/", views.orgadmin_tokens, name="orgadmin_tokens"),
    path("tokens/<int:pk>/revoke/", views.orgadmin_token_revoke, name="orgadmin_token_revoke"),
    path("webhook/", views.orgadmin_webhook, name="orgadmin_webhook"),
    path("retention/", views.orgadmin_retention, name="orgadmin_retention"),
    path("dimensions/", views.orgadmin_dimensions, name="orgadmin_dimensions"),
    path("set-password/<uidb64>/<token>/", views.PasswordSetView.as_view(), name="orgadmin_password_set"),
    path("invitation/<token>/", views.invitation_open, name="invitation_open"),
    path("invitation/", views.invitation_accept, name="invitation_accept"),
]
