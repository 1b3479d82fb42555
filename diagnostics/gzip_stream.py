"""gzip data inflated as it is read and never past a limit (a few kilobytes can inflate into gigabytes):
request bodies sent with `Content-Encoding: gzip` (the web app) and gzip-compressed metrics files
(diagnostics.series). Pure Python, so that both may use it."""

import zlib
from collections.abc import Iterable, Iterator

GZIP_WBITS = 16 + zlib.MAX_WBITS
MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip stream


class Oversized(ValueError):
    """The inflated data is larger than the limit."""


class Truncated(ValueError):
    """The data ends inside a gzip member."""


def inflate(chunks: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """The data of the gzip stream given in `chunks`, every member of it (as gunzip reads files joined one
    after another). Oversized past `limit` bytes; Truncated for data that ends inside a member; ValueError
    for data that is not gzip or has anything but another member after a member."""
    member = zlib.decompressobj(wbits=GZIP_WBITS)
    produced = 0
    for chunk in chunks:
        data = chunk
        while data:
            if member.eof:  # what follows a member's end is the next member
                member = zlib.decompressobj(wbits=GZIP_WBITS)
            try:
                out = member.decompress(data, limit + 1 - produced)  # never 0 (no limit): produced <= limit
            except zlib.error as error:
                raise ValueError(f"not valid gzip ({error})") from None
            produced += len(out)
            if produced > limit:
                raise Oversized(f"more than {limit} bytes once gunzipped; the limit is {limit}")
            if out:
                yield out
            data = member.unused_data if member.eof else member.unconsumed_tail
    if not member.eof:
        raise Truncated("the gzip stream ends early (a truncated body?)")
