from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"

    def ready(self) -> None:
        # The people side's part of the one API (assignment, the queue, the set-up lists, the dashboard's
        # export): added here, once Django is set up, so the API and its OpenAPI document hold it however the
        # process started; grading's views never import the people side.
        from grading.api.keys import token_authenticator_add
        from grading.api.views import api
        from grading.management.options import ChangeRefused
        from reviewer.dashboards.api import router as dashboard_router
        from reviewer.queue.api import router
        from reviewer.setup.api import change_refused
        from reviewer.setup.api import router as setup_router
        from reviewer.tokens.callers import person_authenticate

        api.add_router("/", router)
        api.add_router("/", setup_router)
        api.add_exception_handler(ChangeRefused, change_refused)
        api.add_router("/", dashboard_router)
        # A person's token is taken wherever an org key is (reviewer/tokens/), as the same kind of caller.
        token_authenticator_add(person_authenticate)

        # OIDC_GROUP_ROLES names roles, which settings cannot check: the models are not loaded yet there.
        from reviewer.oidc.people import group_rules_check

        group_rules_check()
