from django.urls import path

from reviewer.queue import correction_views, expected_reply_views, send_views, views

urlpatterns = [
    path("", views.queue, name="queue"),
    path("claim-next/", views.queue_claim_next, name="queue_claim_next"),
    path("preferences/", views.queue_preferences, name="queue_preferences"),
    path("assign/", views.queue_assign_many, name="queue_assign_many"),
    path("items/<int:pk>/", views.review_detail, name="review_detail"),
    path("items/<int:pk>/claim/", views.review_claim, name="review_claim"),
    path("items/<int:pk>/release/", views.review_release, name="review_release"),
    path("items/<int:pk>/decline/", views.review_decline, name="review_decline"),
    path("items/<int:pk>/heartbeat/", views.review_heartbeat, name="review_heartbeat"),
    path("items/<int:pk>/decide/", views.review_decide, name="review_decide"),
    path(
        "items/<int:pk>/expected-reply/",
        expected_reply_views.review_expected_reply,
        name="review_expected_reply",
    ),
    path("items/<int:pk>/assign/", views.review_assign, name="review_assign"),
    path("items/<int:pk>/unassign/", views.review_unassign, name="review_unassign"),
    path("items/<int:pk>/send/", send_views.review_send_page, name="review_send"),
    path("items/<int:pk>/correction/check/", correction_views.review_correction_check, name="review_correction_check"),
    path("items/<int:pk>/correction/", correction_views.review_correct, name="review_correct"),
    path("items/<int:pk>/corrections/", correction_views.review_corrections, name="review_corrections"),
]
