"""What the local stock footage servers (fakes/pexels.py, fakes/pixabay.py) share: the footage
they offer for a query, the MP4 files they serve, their rate window, keys and faults.

The footage. A query's subject is `imagery.depicted_word(query)`; a query with none finds
nothing. Every answer offers a fixed mix of videos (each module's TEMPLATE, in the API's
order), on purpose not all usable, so that a client's filters and relevance gate are exercised:
  on_topic         the subject, portrait, long enough, in sizes from 360x640 up;
  landscape        the subject, 16:9 (a 9:16 centre crop still covers 360x640 from 1280x720);
  off_topic        ANOTHER word (OFF_TOPIC_WORDS), as good as on_topic otherwise; it comes
                   first for about half the queries (by the query's hash; `off_topic_first`
                   forces it), so a client that trusts the first result shows the wrong thing;
  too_short        the subject, 1 second long;
  low_res          the subject, portrait, 90x160 at most;
  small_landscape  the subject, 256x144 at most.
A video's id, author and words depend on the source, its role and its word only, so the same
footage comes back for another query with the same subject (clients see duplicates).

The files. Each rendition's link points back at the server (/video-files/...), and is a real
H.264 MP4 of its size, frame rate and length, showing its word as fakes/imagery draws it: a
tiny clip of the word is made once per word (imagery.footage_mp4) and scaled to each size
asked, each result cached in the process, so a test pays for a word once.

Rate window: `rate_limit` API requests per `rate_window` seconds (the file downloads are not
counted, as on the real CDNs); past it, 429. Every API answer carries X-Ratelimit-Limit,
-Remaining and -Reset (the reset's form is the source's: see each module). `clock` (time.time
by default) can be replaced to move time on without sleeping.

Faults, queued (`server.faults.push(name, **options)`, or POST /_fake/faults {"fault": name,
...}), each used once, on the kind of request it names:
  rate_limited  (search) 429 with Remaining 0 and a reset `reset` seconds away (default 60);
                `headers=False` sends the 429 bare (as Pexels' docs say it may);
  server_error  (any; option `on`: search or file) answers `status` (default 500);
  drop          (any; `on`) closes the connection without an answer (`reset=True`: an RST);
  bad_key       (search) refuses the key as the source does, this once;
  wrong_type    (file) answers 200 with an HTML page instead of the video;
  oversize      (file) answers `bytes` bytes (default 8 MiB) as video/mp4; `chunked=True`
                sends them without a Content-Length;
  truncate      (file) announces the whole file and closes after half of it;
  slow          (any; `on`) waits `seconds` before answering (counted, status 0, meanwhile).
Keys: `server.keys` None accepts any non-empty key; a set accepts only those. The key is
never stored: the requests seen (`server.requests()`, GET /_fake/requests) keep the path
without the query, the search terms and the status answered; `server.counters()` (GET
/_fake/counters) sums them.

The package is split by concern: `footage` (what a query finds), `files` (the MP4s and their
cache), `server` (StockServer: state, faults, keys, the rate window, what a test reads back),
`handler` (StockHandler: the routes a source's subclass completes) and `cli` (`stock_main`).
"""

from __future__ import annotations

from fakes.stock_common.cli import stock_main
from fakes.stock_common.files import file_size_estimate, footage_file
from fakes.stock_common.footage import (
    AUTHORS,
    LADDERS,
    LANDSCAPE_LADDER,
    OFF_TOPIC_WORDS,
    PORTRAIT_LADDER,
    ROLES,
    Footage,
    Slot,
    catalogue,
    leads_off_topic,
    off_topic_word,
)
from fakes.stock_common.handler import MiB, StockHandler
from fakes.stock_common.server import FAULTS, StockServer, StockState, environ_for

__all__ = [
    "AUTHORS",
    "FAULTS",
    "Footage",
    "LADDERS",
    "LANDSCAPE_LADDER",
    "MiB",
    "OFF_TOPIC_WORDS",
    "PORTRAIT_LADDER",
    "ROLES",
    "Slot",
    "StockHandler",
    "StockServer",
    "StockState",
    "catalogue",
    "environ_for",
    "file_size_estimate",
    "footage_file",
    "leads_off_topic",
    "off_topic_word",
    "stock_main",
]
