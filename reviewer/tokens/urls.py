from django.urls import path

from reviewer.tokens import views

urlpatterns = [
    path("tokens/", views.account_tokens, name="account_tokens"),
    path("tokens/<int:pk>/revoke/", views.account_token_revoke, name="account_token_revoke"),
]
