from django.urls import path

from reviewer.queue.views import corrections, expected_replies, queue, send

urlpatterns = [
    path("", queue.queue, name="queue"),
    path("claim-next/", queue.queue_claim_next, name="queue_claim_next"),
    path("preferences/", queue.queue_preferences, name="queue_preferences"),
    path("assign/", queue.queue_assign_many, name="queue_assign_many"),
    path("items/<int:pk>/", queue.review_detail, name="review_detail"),
    path("items/<int:pk>/claim/", queue.review_claim, name="review_claim"),
    path("items/<int:pk>/release/", queue.review_release, name="review_release"),
    path("items/<int:pk>/decline/", queue.review_decline, name="review_decline"),
    path("items/<int:pk>/heartbeat/", queue.review_heartbeat, name="review_heartbeat"),
    path("items/<int:pk>/decide/", queue.review_decide, name="review_decide"),
    path("items/<int:pk>/expected-reply/", expected_replies.review_expected_reply, name="review_expected_reply"),
    path("items/<int:pk>/assign/", queue.review_assign, name="review_assign"),
    path("items/<int:pk>/unassign/", queue.review_unassign, name="review_unassign"),
    path("items/<int:pk>/send/", send.review_send_page, name="review_send"),
    path("items/<int:pk>/correction/check/", corrections.review_correction_check, name="review_correction_check"),
    path("items/<int:pk>/correction/", corrections.review_correct, name="review_correct"),
    path("items/<int:pk>/corrections/", corrections.review_corrections, name="review_corrections"),
]
