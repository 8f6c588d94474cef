"""pytest set-up for the testbenches."""

import re

# The slowest Verilator builds (512-bit datapaths, whole pipelines) go first, so that the two
# workers are not left with one long build each at the end of the run.
_HEAVY = re.compile(r"512|nic|tx_pipeline|rx_front")


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: not _HEAVY.search(item.nodeid))
