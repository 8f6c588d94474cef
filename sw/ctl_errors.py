"""The errors of the controller API (:mod:`mrcnic.ctl`), one hierarchy, each class carrying the
errno ``mrc_ctl.h`` returns for its kind of failure.

=================  ========  ===================================================================
class              errno     raised for
=================  ========  ===================================================================
MrcError           (base)    every failure of the controller API; ``.errno``, the message
InvalidArgument    EINVAL    an argument the header calls invalid, a change the profile's state
                             does not allow, a value the driver refused before writing anything
TooBig             E2BIG     more than a limit allows, or an output array too small for the
                             answer (then ``.needed`` is the length it takes)
Busy               EBUSY     a profile an ONLINE profile or a QP of the NIC still uses
NotPermitted       EPERM     something the header allows that this NIC cannot do (the message
                             says why)
NotFound           ENOENT    an EV a batch names that the profile does not hold
NotSupported       ENOTSUP   an endpoint operation the NIC has no means to send
IoError            EIO       the NIC refused an access, did not take a command, or did not
                             answer
=================  ========  ===================================================================

The EV expansion rule's own errors (:mod:`mrcnic.ev_expand`: ``EvInvalid``, ``EvTooBig``) are
subclasses of InvalidArgument and TooBig, so one ``except MrcError`` catches every failure and
``.errno`` names it. In a batch of EV operations the failing entry's position is ``.entry`` and
the results of the entries before it, which took effect, are ``.done``.

:func:`nic_failure` says which class a failure of the driver or of the management protocol is.
The driver checks every value before its first write (mrcnic.driver), so a
:class:`~mrcnic.regclient.RegisterError` raised before a program wrote anything is a value it
refused (EINVAL); one raised after is the NIC refusing an access or not taking a command, and
the NIC's state after it is not known (EIO), as is any failure of the management protocol
(:class:`~mrcnic.mgmt.MgmtError`: a refused access, no answer). :func:`run_on_nic` runs a
program so, for the controller API and the application API (:mod:`mrcnic.app`) alike.
"""

from __future__ import annotations

import errno as _errno

from .mgmt import MgmtError
from .regclient import Program, RegisterError

__all__ = ["MrcError", "InvalidArgument", "TooBig", "Busy", "NotPermitted", "NotFound",
           "NotSupported", "IoError", "nic_failure", "run_on_nic"]


class MrcError(Exception):
    """A failure of the controller API; :attr:`errno` is what ``mrc_ctl.h`` returns for it."""
    errno = _errno.EIO
    #: in a batch of EV operations: the failing entry's position, and the entries done before it
    entry: int | None = None
    done: tuple = ()

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    @property
    def errno_name(self) -> str:
        return _errno.errorcode[self.errno]


class InvalidArgument(MrcError, ValueError):
    errno = _errno.EINVAL


class TooBig(MrcError, ValueError):
    errno = _errno.E2BIG

    def __init__(self, message: str, needed: int | None = None):
        super().__init__(message)
        #: the array length the answer takes, when an output array was too short
        self.needed = needed


class Busy(MrcError):
    errno = _errno.EBUSY


class NotPermitted(MrcError):
    errno = _errno.EPERM


class NotFound(MrcError, LookupError):
    errno = _errno.ENOENT


class NotSupported(MrcError):
    errno = _errno.ENOTSUP


class IoError(MrcError):
    errno = _errno.EIO


def nic_failure(exc: Exception, written: bool) -> MrcError:
    """The controller error for a failure ``exc`` of a driver program that had (``written``) or
    had not yet written to the NIC."""
    if isinstance(exc, RegisterError) and not written:
        return InvalidArgument(str(exc))
    if isinstance(exc, (RegisterError, MgmtError, OSError)):
        return IoError(f"the NIC failed: {exc}")
    raise TypeError(f"{exc!r} is not a failure of the NIC or of the driver") from exc


def _watched(program: Program, wrote: list) -> Program:
    """``program``, noting in ``wrote`` when it first writes (what :func:`nic_failure` asks)."""
    try:
        op = next(program)
        while True:
            if op[0] == "w" and not wrote:
                wrote.append(op)
            op = program.send((yield op))
    except StopIteration as done:
        return done.value


def run_on_nic(regs, program: Program):
    """Runs a driver program on ``regs`` (a register client); a failure of the driver or of
    the management protocol is raised as :func:`nic_failure` says."""
    wrote: list = []
    try:
        return regs.run(_watched(program, wrote))
    except (RegisterError, MgmtError, OSError) as e:
        raise nic_failure(e, bool(wrote)) from e
