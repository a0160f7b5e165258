"""One report order of channels (:func:`nsysmoe.model.channel_order_key`): the vocabulary as in
CHANNEL_ORDER, then a user's own names sorted — the timeline's lanes, the channel bars and the
wait heat map sort by it, and the tables' polars key (measure.channels.channel_rank) agrees."""

from __future__ import annotations

import polars as pl

from nsysmoe.measure.channels import channel_rank
from nsysmoe.model import CHANNEL_ORDER, channel_order_key


def test_vocabulary_first_then_the_users_names_sorted() -> None:
    names = ["zeta", "other", "nccl.allgather", "alpha", "ep.dispatch", "tp.userbuffers"]
    want = ["ep.dispatch", "nccl.allgather", "tp.userbuffers", "other", "alpha", "zeta"]
    assert sorted(names, key=channel_order_key) == want
    assert sorted(CHANNEL_ORDER, key=channel_order_key) == list(CHANNEL_ORDER)
    df = pl.DataFrame({"channel": names})
    assert df.sort(channel_rank(pl.col("channel")), "channel")["channel"].to_list() == want
