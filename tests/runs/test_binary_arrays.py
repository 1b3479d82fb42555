"""Arrays built in Postgres's binary format arrive as the lists psycopg would have sent."""

import math

import psycopg
import pytest
from django.db import connection

from webapp.metrics import binary_arrays

pytestmark = pytest.mark.django_db

STEPS = [0, 1, 2**31 - 1, 7, 7]
VALUES = [0.5, -0.0, math.nan, math.inf, -math.inf, 1e-310, 1.7976931348623157e308]
KEYS = ["train/success", "é/ünïcode", "x" * 100, "", "train/success", "emoji \U0001f600"]


def round_trip(*params, casts):
    connection.ensure_connection()
    cursor = psycopg.Cursor(connection.connection)
    binary_arrays.register(cursor)
    cursor.execute("SELECT " + ", ".join(f"%b::{cast}" for cast in casts), params)
    return cursor.fetchone()


def same(a, b):
    return len(a) == len(b) and all(
        (x is None and y is None) or repr(x) == repr(y) or (x != x and y != y) for x, y in zip(a, b)
    )


def test_int_float_and_text_arrays_arrive_as_the_lists():
    got = round_trip(
        binary_arrays.fixed(STEPS, binary_arrays.INT4),
        binary_arrays.fixed(VALUES, binary_arrays.FLOAT8),
        binary_arrays.text(KEYS),
        casts=("int[]", "float8[]", "text[]"),
    )
    assert got[0] == STEPS and same(got[1], VALUES) and got[2] == KEYS


def test_values_with_a_null_go_as_a_list_and_empty_arrays_are_empty():
    with_null = [1.0, None, 2.0]
    assert binary_arrays.fixed(with_null, binary_arrays.FLOAT8) is with_null
    got = round_trip(
        binary_arrays.fixed(with_null, binary_arrays.FLOAT8),
        binary_arrays.fixed([], binary_arrays.INT4),
        binary_arrays.text([]),
        casts=("float8[]", "int[]", "text[]"),
    )
    assert got == (with_null, [], [])


def test_arrays_unnest_together_into_rows():
    connection.ensure_connection()
    cursor = psycopg.Cursor(connection.connection)
    binary_arrays.register(cursor)
    cursor.execute(
        "SELECT * FROM unnest(%b::int[], %b::text[], %b::float8[])",
        [
            binary_arrays.fixed([3, 4], binary_arrays.INT4),
            binary_arrays.text(["a", "b"]),
            binary_arrays.fixed([0.25, 0.5], binary_arrays.FLOAT8),
        ],
    )
    assert cursor.fetchall() == [(3, "a", 0.25), (4, "b", 0.5)]
