"""An EV's plane and spine fields, as the gateware reads them: slices placed by the one
:class:`mrcnic.evmap.EvLayout` that the driver, the tests and the docs also read."""

from amaranth import Cat

__all__ = ["ev_plane", "ev_spine", "ev_path"]


def ev_plane(layout, ev):
    """The plane field of ``ev``, raw (unchecked against ``layout.planes``)."""
    return ev[layout.plane_shift:layout.plane_shift + layout.plane_bits]


def ev_spine(layout, ev):
    """The spine field of ``ev``, raw."""
    return ev[layout.spine_shift:layout.spine_shift + layout.spine_bits]


def ev_path(layout, ev):
    """The path ``ev`` names, as :meth:`EvLayout.path` numbers it: plane field above spine."""
    return Cat(ev_spine(layout, ev), ev_plane(layout, ev))
