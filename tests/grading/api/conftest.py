import pytest
from schemathesis.pytest.plugin import SchemathesisFunction


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each API operation's fuzz test the id its name carries. Schemathesis 4.32 on pytest 9 builds every
    operation's test with the bare function's node id, so all 14 shared one: reports could not tell them apart,
    and pytest-xdist, which hands out tests by id, ran one of the 14."""
    for item in items:
        if isinstance(item, SchemathesisFunction) and item.id.params is None and item.name != item.originalname:
            operation = item.name.removeprefix(f"{item.originalname}[").removesuffix("]")
            item._id = item.parent.id.child(item.originalname).with_params(operation)
