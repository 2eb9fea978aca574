"""The client's models mirror the OpenAPI document's schemas: a field added, renamed, dropped or made nullable on
either side fails here, before a user's code meets it."""

import dataclasses
import types
import typing

import pytest
from tollgate_client.models import MODELS_WITH_SCHEMAS

from grading.api.views import api


@pytest.fixture(scope="module")
def schemas() -> dict:
    return api.get_openapi_schema()["components"]["schemas"]


@pytest.mark.parametrize("model", MODELS_WITH_SCHEMAS, ids=lambda model: model.__name__)
def test_it_has_every_field_of_the_schema_it_mirrors_and_no_other(model, schemas):
    schema = schemas[model.SCHEMA]
    assert {f.name for f in dataclasses.fields(model)} == set(schema["properties"])


@pytest.mark.parametrize("model", MODELS_WITH_SCHEMAS, ids=lambda model: model.__name__)
def test_it_allows_none_exactly_where_the_schema_does(model, schemas):
    schema = schemas[model.SCHEMA]
    hints = typing.get_type_hints(model)
    nullable = {name for name, prop in schema["properties"].items() if {"type": "null"} in prop.get("anyOf", [])}
    optional = {
        f.name
        for f in dataclasses.fields(model)
        if typing.get_origin(hints[f.name]) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(hints[f.name])
    }
    assert optional == nullable
