from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"

    def ready(self) -> None:
        # The people side's part of the one API (assignment, the queue's service figures, the set-up lists): added
        # here, once Django is set up, so the API and its OpenAPI document hold it however the process started;
        # grading's views never import the people side.
        from grading.api.views import api
        from reviewer.queue.api import router
        from reviewer.setup.api import router as setup_router

        api.add_router("/", router)
        api.add_router("/", setup_router)

        # OIDC_GROUP_ROLES names roles, which settings cannot check: the models are not loaded yet there.
        from reviewer.oidc.people import group_rules_check

        group_rules_check()
