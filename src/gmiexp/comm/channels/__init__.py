"""Channel-based experience sharing (paper section 4.2).

Dispenser -> Compressor -> Migrator -> Batcher over preallocated shared-memory slot rings.
"""

from gmiexp.comm.channels.batcher import Batcher
from gmiexp.comm.channels.channelset import (
    ChannelSet,
    MultiChannelSet,
    UniChannelSet,
    make_channel_set,
)
from gmiexp.comm.channels.compressor import Compressor
from gmiexp.comm.channels.dispenser import Dispenser
from gmiexp.comm.channels.fields import DEFAULT_FIELDS, FieldSpec
from gmiexp.comm.channels.migrator import Migrator, Route
from gmiexp.comm.channels.ring import ChannelClosed, Item, RingSpec, SlotRing
from gmiexp.comm.channels.staging import PinnedStaging

__all__ = [
    "DEFAULT_FIELDS",
    "Batcher",
    "ChannelClosed",
    "ChannelSet",
    "Compressor",
    "Dispenser",
    "FieldSpec",
    "Item",
    "Migrator",
    "MultiChannelSet",
    "PinnedStaging",
    "RingSpec",
    "Route",
    "SlotRing",
    "UniChannelSet",
    "make_channel_set",
]
