"""The pure parts of localcloud.sites.federation: reading `scontrol show federation`."""

from __future__ import annotations

from localcloud.sites.federation import synced_siblings

SYNCED = """Federation: fedx
Self:       fed-a:127.0.0.1:50205 ID:1 FedState:ACTIVE Features:onprem
Sibling:    fed-b:127.0.0.1:45547 ID:2 FedState:ACTIVE Features:aws PersistConnSend/Recv:Yes/Yes Synced:Yes
"""
STUCK = """Federation: fedx
Self:       fed-a:127.0.0.1:59275 ID:1 FedState:ACTIVE Features:onprem
Sibling:    fed-b::0 ID:2 FedState:ACTIVE Features:aws PersistConnSend/Recv:No/Yes Synced:No
"""


def test_sibling_connected_both_ways_and_synced_counts() -> None:
    assert synced_siblings(SYNCED) == {"fed-b"}


def test_sibling_without_address_is_not_synced() -> None:
    assert synced_siblings(STUCK) == set()


def test_no_federation_means_no_siblings() -> None:
    assert synced_siblings("No federation\n") == set()
