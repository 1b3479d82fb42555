"""Dates and times on every page in one form, 2026-12-05 08:46 (UTC, the server's TIME_ZONE): Django's
English default, "Dec. 5, 2026, 8:46 a.m.", stood beside the tables' "Y-m-d H:i" and the pages' scripts."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
